// Where a step went wrong: with a head that reads the LM's token statistics
// (here the tiny confidence fixture), each step's tokens are shaded by
// log-prob and the flagged step marks its least likely number. Trace text,
// markup-looking or not, stays text. Scoring runs in the package's worker.
import { expect, test } from '@playwright/test';
import { openAndLoad, paste, score, shot } from './helpers';

// Step 1's only number is "240", after non-ASCII text; step 2 looks like markup.
const STEPS = ['We add <b>16</b> × 15 and get 240 — é.', 'Then <img src=x onerror="document.body.dataset.pwned=1"> so 😀.', 'The answer is \\boxed{240}.'];

test('a flagged step marks its least likely number; tokens are shaded; "<b>" stays text; the engine runs in a worker', async ({ page }) => {
  await openAndLoad(page, 'confidence-tiny');
  await expect(page.locator('#model-info')).toContainText('a Web Worker');
  await paste(page, 'What is 16 × 15?', STEPS.join('\n\n'));
  await expect(page.locator('#preview li')).toHaveCount(3);
  await score(page);
  // Every score is below 1: the first step is the flagged one.
  await page.getByLabel('Error threshold').fill('1');
  const cards = page.locator('#steps li.step-card');
  await expect(cards).toHaveCount(3);
  await expect(cards.nth(0).locator('[data-first-error]')).toBeVisible();

  const marked = cards.nth(0).locator('[data-least-likely]');
  await expect(marked).toHaveCount(1);
  // One of the step's whole numbers (the model is random, so which one is its choice;
  // the next test pins the span); the note names the same text.
  const shown = await marked.textContent();
  expect(['16', '15', '240']).toContain(shown);
  await expect(cards.nth(0).locator('.least-likely-note')).toContainText(`“${shown}”`);
  await expect(page.locator('#steps [data-least-likely]')).toHaveCount(1);

  // Shaded token by token, and the text is exactly the step's text.
  expect(await cards.nth(0).locator('.step-text .tok').count()).toBeGreaterThan(5);
  await expect(cards.nth(0).locator('.tok').first()).toHaveAttribute('title', /token log-prob -?\d/);
  await expect(page.locator('#steps .step-text')).toHaveText(STEPS);
  // Markup in a trace is never parsed: no <b>/<img> element, no handler ran.
  await expect(page.locator('#steps b, #steps img')).toHaveCount(0);
  await expect(page.locator('body')).not.toHaveAttribute('data-pwned', '1');
  await shot(page, '12-least-likely-token');

  // Live mode (an incremental session in the worker) shows the same mark.
  await page.getByRole('button', { name: /Live/ }).click();
  await expect(page.locator('#score-status')).toContainText('Live scoring done', { timeout: 120_000 });
  await expect(cards.nth(0).locator('[data-least-likely]')).toHaveText(shown ?? '');
  await expect(page.locator('#steps .step-text')).toHaveText(STEPS);
});

test('a step whose only number follows non-ASCII text marks exactly that number', async ({ page }) => {
  await openAndLoad(page, 'confidence-tiny');
  await paste(page, 'What is 6 × 9?', ['é × ø = 54 😀', 'So it is 54.'].join('\n\n'));
  await score(page);
  await page.getByLabel('Error threshold').fill('1');
  await expect(page.locator('#steps li.step-card').nth(0).locator('[data-least-likely]')).toHaveText('54');
});
