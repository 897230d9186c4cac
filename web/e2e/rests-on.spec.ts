// Issue 46, item 5: after a first error, the later steps' colours say that they
// rest on it ("54 + 15 = 69" at 0.942 and \boxed{69} were drawn "likely right").
// A shared link carries the steps and the scores (the fast model's, from the
// issue), so no model is needed.
import { expect, test } from '@playwright/test';
import { EXAMPLES } from '../src/gallery';
import { cardBorder, open, scoredLink, SLIP } from './helpers';

const SLIP_STEPS = SLIP.response.split('\n\n');
/** The fast model's scores for the library trace in the issue (0.546 for "7 × 8 = 54", 0.942 for "54 + 15 = 69"). */
const FAST_SCORES = [0.62, 0.546, 0.942, 0.95];

test('item 5: after a first error, later steps are drawn as resting on it', async ({ page }) => {
  await open(page, scoredLink(SLIP.problem, SLIP_STEPS, FAST_SCORES, 0.31));
  const cards = page.locator('#steps li.step-card');
  await expect(cards).toHaveCount(4);
  await expect(page.locator('#first-error')).toHaveAttribute('data-index', '1');
  for (const i of [0, 1]) await expect(cards.nth(i)).not.toHaveAttribute('data-rests-on', /\d/);
  for (const i of [2, 3]) {
    // "54 + 15 = 69" scores 0.942 and "\boxed{69}" 0.95: high, but both carry step 2's error.
    await expect(cards.nth(i)).toHaveAttribute('data-rests-on', '1');
    await expect(cards.nth(i).locator('.rests-on')).toHaveText('Rests on the error in step 2');
    const b = await cardBorder(page, i);
    // Not the scale's blue ("likely right"): the error's red, dashed.
    expect(b.style).toBe('dashed');
    expect(b.color[0]).toBeGreaterThan(b.color[2]);
  }
  // The same with a first error found by the score alone (no false arithmetic).
  const ex = EXAMPLES.find((e) => e.id === 'cookies-operation')!;
  const steps = ex.response.split('\n\n');
  await open(page, scoredLink(ex.problem, steps, [0.9, 0.2, 0.9], 0.5));
  await expect(page.locator('#first-error')).toHaveAttribute('data-index', '1');
  await expect(cards.nth(2)).toHaveAttribute('data-rests-on', '1');
  await expect(cards.nth(0)).not.toHaveAttribute('data-rests-on', /\d/);
});

