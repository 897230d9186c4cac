// Issue 46, item 1: a step that exact arithmetic proves false is wrong whatever
// the model scored, and the page says so in one place, the same way, for every
// model the demo offers (the real entries whose files are on this machine and
// the tiny fixtures). "7 × 8 = 54" in the library trace is the example: the
// fast model scores it above its threshold, the contradiction.
import { expect, test } from '@playwright/test';
import { MODELS } from '../src/config';
import { modelFileFor, openAndLoad, paste, SLIP } from './helpers';

const WRONG = 'rgb(178, 24, 43)';

for (const entry of MODELS) {
  test(`item 1: a step proven false by exact arithmetic is flagged wrong for every model (${entry.id})`, async ({ page }) => {
    const files = [entry.model, ...(typeof entry.options?.head === 'string' ? [entry.options.head] : [])];
    const missing = files.filter((f) => modelFileFor(f) === null);
    test.skip(missing.length > 0, `SKIPPED: ${missing.join(', ')} not on this machine`);
    test.setTimeout(600_000);
    await openAndLoad(page, entry.id);
    await paste(page, SLIP.problem, SLIP.response);
    await page.getByRole('button', { name: 'Score trace' }).click();
    await expect(page.locator('#score-status')).toContainText(/Scored \d+ steps/, { timeout: 540_000 });
    const cards = page.locator('#steps li.step-card');
    await expect(cards).toHaveCount(4);
    const card = cards.nth(SLIP.wrongStep);
    // The card: flagged wrong by exact arithmetic, in the wrong colour, whatever its score.
    await expect(card).toHaveAttribute('data-verdict', 'wrong');
    await expect(card.locator('.verdict')).toHaveText('Wrong: exact arithmetic');
    await expect(card).toHaveCSS('border-left-color', WRONG);
    await expect(card.locator('[data-arithmetic]')).toHaveText('Exact arithmetic: "7 × 8 = 54" is false: 7 × 8 is 56');
    // The headline agrees: the first error is this step or an earlier one, never "no step".
    const headline = page.locator('#first-error');
    await expect(headline).not.toContainText('No step');
    const first = Number(await headline.getAttribute('data-index'));
    expect(first).toBeGreaterThanOrEqual(0);
    expect(first).toBeLessThanOrEqual(SLIP.wrongStep);
    await expect(cards.nth(first).locator('[data-first-error]')).toBeVisible();
    if (first === SLIP.wrongStep) await expect(headline).toContainText('step 2: "7 × 8 = 54" is false');
    // Moving the threshold under every score does not unflag it.
    await page.getByLabel('Error threshold').fill('0');
    await expect(card).toHaveAttribute('data-verdict', 'wrong');
    await expect(headline).toHaveAttribute('data-index', String(SLIP.wrongStep));
    await expect(headline).toContainText('step 2: "7 × 8 = 54" is false');
    await expect(page.locator('[data-first-error]')).toHaveCount(1);
    console.log(`${entry.id}: step scores ${(await cards.evaluateAll((cs) => cs.map((c) => (c as HTMLElement).dataset.score))).join(', ')}`);
  });
}
