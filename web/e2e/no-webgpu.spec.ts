// Runs in a Chromium launched without --enable-unsafe-webgpu (see playwright.config.ts).
import { expect, test } from '@playwright/test';
import { openAndLoad, paste, score, SLIP } from './helpers';

test('without the WebGPU flag the browser grants no adapter; the app runs on the CPU and says why', async ({ page }) => {
  await openAndLoad(page, 'math-shepherd-tiny');
  const badge = page.locator('#backend-badge');
  await expect(badge).toHaveAttribute('data-backend', 'cpu');
  await expect(badge).toContainText('processor (CPU)');
  await expect(page.locator('#model-info')).toContainText(/WebGPU in this browser\s*(navigator.gpu is present but no adapter was granted|not available)/);
  await paste(page, SLIP.problem, SLIP.response);
  await score(page);
  await expect(page.locator('#steps li.step-card')).toHaveCount(4);
});
