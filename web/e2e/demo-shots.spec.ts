// The pictures of issue 46 (docs/demo/): every gallery example scored with the
// fast and the default model, and Solve with both, at 1400 px wide. Not part of
// the normal suite (they take minutes with the 1.5B default): run with
//   STEPSCORE_DEMO_SHOTS=1 npx playwright test e2e/demo-shots.spec.ts
// Each model is skipped, saying so, when its files are not on this machine.
import { expect, test, type Page } from '@playwright/test';
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEFAULT_MODEL, FAST_MODEL, type ModelEntry } from '../src/config';
import { EXAMPLES } from '../src/gallery';
import { modelFileFor, openAndLoad, paste } from './helpers';

const OUT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'docs', 'demo');
const MODELS: Array<[string, ModelEntry]> = [['fast', FAST_MODEL], ['default', DEFAULT_MODEL]];

test.use({ viewport: { width: 1400, height: 1000 } });

function missing(entry: ModelEntry): string[] {
  return [entry.model, ...(typeof entry.options?.head === 'string' ? [entry.options.head] : [])].filter((f) => modelFileFor(f) === null);
}

async function shotOf(page: Page, selector: string, name: string): Promise<void> {
  mkdirSync(OUT, { recursive: true });
  await page.locator(selector).screenshot({ path: join(OUT, `${name}.png`) });
}

for (const [tag, entry] of MODELS) {
  test(`gallery examples scored with the ${tag} model`, async ({ page }) => {
    test.skip(!process.env.STEPSCORE_DEMO_SHOTS, 'set STEPSCORE_DEMO_SHOTS=1 to take the docs/demo pictures');
    test.skip(missing(entry).length > 0, `SKIPPED: ${missing(entry).join(', ')} not on this machine`);
    test.setTimeout(900_000);
    await openAndLoad(page, entry.id);
    await shotOf(page, 'header.top', `${tag}-banner`);
    for (const ex of EXAMPLES) {
      await paste(page, ex.problem, ex.response);
      // The last trace's "Scored …" must not count for this one.
      await page.locator('#score-status').evaluate((n) => { n.textContent = ''; });
      await page.getByRole('button', { name: 'Score trace' }).click();
      await expect(page.locator('#score-status')).toContainText(/Scored \d+ steps/, { timeout: 600_000 });
      await shotOf(page, '#results', `${tag}-${ex.id}`);
      console.log(`${tag} ${ex.id}: ${await page.locator('#first-error').textContent()}`);
    }
  });

  test(`Solve with the ${tag} model`, async ({ page }) => {
    test.skip(!process.env.STEPSCORE_DEMO_SHOTS, 'set STEPSCORE_DEMO_SHOTS=1 to take the docs/demo pictures');
    test.skip(missing(entry).length > 0, `SKIPPED: ${missing(entry).join(', ')} not on this machine`);
    test.setTimeout(900_000);
    await openAndLoad(page, entry.id);
    // The panel's own settings: beam search, N 4, M 2, 3 steps, 96 tokens per candidate.
    await page.getByLabel('Problem to solve').fill('What is 7 * 8 + 5?');
    await page.getByRole('button', { name: 'Solve', exact: true }).click();
    // A picture while it runs (the status counts the cards on screen), then the result.
    await expect(page.locator('#solve-status')).toContainText('on screen', { timeout: 600_000 });
    await page.waitForTimeout(entry === DEFAULT_MODEL ? 20_000 : 4_000);
    if ((await page.locator('body').getAttribute('data-solve')) === 'running') await shotOf(page, '#solve-panel', `${tag}-solve-running`);
    await expect(page.locator('body')).toHaveAttribute('data-solve', 'done', { timeout: 840_000 });
    await shotOf(page, '#solve-panel', `${tag}-solve-done`);
    console.log(`${tag} solve: ${await page.locator('#solve-status').textContent()} | ${await page.locator('#solve-votes').textContent()}`);
  });
}
