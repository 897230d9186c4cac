// Issue 46, item 3: Solve's labels and counts add up. Every card carries one
// state, the status counts what is on screen while the search runs and when it
// is done, the votes count the finalists they are taken over, and the hint
// about which model Solve needs is true (the fast value-head model generates).
import { expect, test } from '@playwright/test';
import { FAST_MODEL } from '../src/config';
import { openAndLoad } from './helpers';
import { cards, done, haveFast, startSolve } from './solve-helpers';

test("item 3: Solve's counts and labels agree (fast model)", async ({ page }) => {
  test.skip(!haveFast(), 'SKIPPED: the fast model files are not on this machine');
  test.setTimeout(600_000);
  await openAndLoad(page, FAST_MODEL.id);
  // The hint names what Solve needs truthfully: the fast value-head model generates.
  const hint = page.locator('#solve-panel > p.hint').first();
  await expect(hint).not.toContainText('the SmolLM2 confidence entry');
  await expect(hint).toContainText('fast');
  await startSolve(page, false);
  // While it runs: the status counts the cards on screen, each card has one state.
  const status = page.locator('#solve-status');
  let checks = 0;
  while ((await page.locator('body').getAttribute('data-solve')) === 'running' && checks < 40) {
    const snapshot = await page.evaluate(() => ({
      status: document.getElementById('solve-status')?.textContent ?? '',
      cards: document.querySelectorAll('#solve-candidates li.solve-card').length,
      states: [...document.querySelectorAll('#solve-candidates li.solve-card')].map((li) => li.querySelectorAll('.solve-state').length),
      running: document.body.dataset.solve === 'running',
    }));
    if (!snapshot.running) break;
    const m = /(\d+) candidates? on screen: (\d+) writing, (\d+) pruned, (\d+) finished/.exec(snapshot.status);
    if (snapshot.cards > 0) {
      expect(m, `status "${snapshot.status}" with ${snapshot.cards} cards`).not.toBeNull();
      const [shown, writing, pruned, finished] = m!.slice(1).map(Number);
      expect(shown).toBe(snapshot.cards);
      expect(writing + pruned + finished).toBe(shown);
      expect(snapshot.states.every((k) => k === 1)).toBe(true);
      checks++;
    }
    await page.waitForTimeout(1500);
  }
  await done(page);
  const all = await cards(page);
  // One state per card: never both "finished" and "pruned".
  const states = await page.locator('#solve-candidates li.solve-card').evaluateAll((items) => items.map((li) => [...li.querySelectorAll('.solve-state')].map((s) => s.textContent ?? '')));
  for (const [i, s] of states.entries()) {
    expect(s, `candidate ${i + 1}`).toHaveLength(1);
    expect(/finished|complete/.test(s[0]) && /pruned/.test(s[0]), `candidate ${i + 1}: ${s[0]}`).toBe(false);
  }
  for (const c of all) expect(c.tags.filter((t) => t === 'pruned' || t === 'finished').length, `candidate ${c.index + 1}: ${c.tags.join(' | ')}`).toBeLessThanOrEqual(1);
  // The done line counts what is on screen.
  const text = (await status.textContent()) ?? '';
  const m = /(\d+) candidates written: (\d+) finalists \((\d+) complete\), (\d+) pruned/.exec(text);
  expect(m, text).not.toBeNull();
  const [written, finalists, complete, pruned] = m!.slice(1).map(Number);
  expect(written).toBe(all.length);
  expect(finalists).toBe(all.filter((c) => c.finalist).length);
  expect(complete).toBe(all.filter((c) => c.complete === 'true').length);
  expect(pruned).toBe(all.filter((c) => c.pruned).length);
  expect(finalists + pruned).toBeLessThanOrEqual(written);
  // The majority counts over the complete finalists the page names.
  const majority = (await page.locator('#solve-votes [data-vote="majority"]').textContent()) ?? '';
  const mv = /(\d+) of (\d+) complete finalists/.exec(majority);
  if (complete > 0) {
    expect(mv, majority).not.toBeNull();
    expect(Number(mv![2])).toBe(complete);
    expect(Number(mv![1])).toBeLessThanOrEqual(complete);
  }
  console.log(`item 3: ${text} | ${majority} | ${checks} running checks`);
});
