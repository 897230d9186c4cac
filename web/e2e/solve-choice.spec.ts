// Issue 46, item 2: Solve with the fast model, the panel's own settings (the
// issue's run). A candidate cut off by the token limit, or with no final answer,
// is marked so on its card and never chosen or voted on (web/README.md, Solve).
import { expect, test } from '@playwright/test';
import { cards, done, haveFast, startSolve } from './solve-helpers';

test('item 2: Solve marks candidates cut off or without a final answer and never chooses them (fast model)', async ({ page }) => {
  test.skip(!haveFast(), 'SKIPPED: the fast model files are not on this machine');
  test.setTimeout(600_000);
  await startSolve(page);
  await done(page);
  const all = await cards(page);
  const finalists = all.filter((c) => c.finalist);
  console.log(`item 2: cards ${all.map((c) => `${c.index + 1}:${c.stop ?? '-'}${c.finalist ? '/finalist' : ''}${c.chosen ? '/CHOSEN' : ''} [${c.tags.join(' | ')}]`).join('; ')}`);
  expect(finalists.length).toBeGreaterThan(0);
  for (const c of all) {
    // A candidate the token limit stopped says so in words on its card.
    if (c.stop === 'max-tokens') expect(c.tags.join(' '), `candidate ${c.index + 1}`).toContain('cut off at the token limit');
  }
  for (const c of finalists) {
    const cutOff = ['max-tokens', 'context', 'budget', 'cancelled'].includes(c.stop ?? '');
    const answered = /\\boxed\{|####|final answer|the answer is|answer:/i.test(c.text);
    expect(c.complete, `finalist ${c.index + 1}`).toBe(String(!cutOff && answered));
    // One reason per card: a cut-off card already says so (its stop reason);
    // a finished one without an answer says "no final answer".
    if (cutOff) expect(c.tags.join(' '), `finalist ${c.index + 1}`).toMatch(/cut off|cancelled/);
    else if (!answered) expect(c.tags.join(' '), `finalist ${c.index + 1}`).toContain('no final answer');
    // Never chosen unless complete.
    if (c.chosen) expect(c.complete).toBe('true');
  }
  const complete = finalists.filter((c) => c.complete === 'true');
  await expect(page.locator('#solve-candidates li.chosen')).toHaveCount(complete.length > 0 ? 1 : 0);
  const left = finalists.length - complete.length;
  if (left > 0) await expect(page.locator('#solve-votes [data-left-out]')).toHaveAttribute('data-left-out', String(left));
  if (complete.length === 0) await expect(page.locator('#solve-votes [data-vote="best"]')).toContainText('nothing chosen');
  console.log(`item 2: ${all.length} candidates, finalists ${finalists.map((c) => `${c.index + 1}:${c.stop}/${c.complete}`).join(' ')}; chosen ${all.filter((c) => c.chosen).map((c) => c.index + 1).join(',') || 'none'}`);
});

