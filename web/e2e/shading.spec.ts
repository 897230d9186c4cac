// Issue 46, item 4: token shading shades what the verifier reads, on a scale
// where a token the model expected (p ≥ 0.5) is white, and a likely number is
// never called least likely or unlikely. The default PRM's head (issue 40)
// reads every token's log-probability (info().tokensRead 'all'), so every
// token is read and the note says so (a head reporting 'arithmetic' gets only
// numbers and signs shaded; no model of the demo's list has one now). It reads
// the default model's own token log-probs, so it needs that model (skipped
// when its files are absent).
import { expect, test } from '@playwright/test';
import { DEFAULT_MODEL } from '../src/config';
import { EXAMPLES } from '../src/gallery';
import { modelFileFor, openAndLoad, paste } from './helpers';

// The gallery's correct "Apples" trace and the "Ages" trace whose least likely number is likely (15, p ≈ 0.94).
test('item 4: token shading marks what the verifier reads (every token for the default head); a likely number is never called unlikely (default model)', async ({ page }) => {
  const files = [DEFAULT_MODEL.model, String(DEFAULT_MODEL.options?.head)];
  test.skip(files.some((f) => modelFileFor(f) === null), 'SKIPPED: the default model files are not on this machine');
  test.setTimeout(600_000);
  await openAndLoad(page, DEFAULT_MODEL.id);
  for (const id of ['apples-correct', 'ages-logic']) {
    const ex = EXAMPLES.find((e) => e.id === id)!;
    await paste(page, ex.problem, ex.response);
    // The last trace's "Scored …" must not count for this one.
    await page.locator('#score-status').evaluate((n) => { n.textContent = ''; });
    await page.getByRole('button', { name: 'Score trace' }).click();
    await expect(page.locator('#score-status')).toContainText(/Scored \d+ steps/, { timeout: 540_000 });
    const toks = await page.locator('#steps .tok').evaluateAll((ts) => ts.map((t) => ({ text: t.textContent ?? '', bg: getComputedStyle(t).backgroundColor, title: (t as HTMLElement).title, read: t.classList.contains('read') })));
    expect(toks.length).toBeGreaterThan(10);
    await expect(page.locator('#confidence-note')).toContainText('reads every token');
    for (const t of toks) {
      const alpha = /rgba\([^)]*,\s*([\d.]+)\)/.exec(t.bg);
      const shaded = t.bg !== 'rgba(0, 0, 0, 0)' && !(alpha && Number(alpha[1]) === 0);
      const lp = Number(/log-prob (-?[\d.]+)/.exec(t.title)?.[1]);
      // Every token is one the default head reads, words too ("The", "Maria").
      expect(t.read, `"${t.text}" (${t.title}) in ${id} is not marked read`).toBe(true);
      // A token the model expected (p ≥ 0.5) is white: unremarkable; one it found unlikely (p < 0.2) is shaded.
      if (lp >= Math.log(0.5)) expect(shaded, `"${t.text}" (${t.title}) in ${id}`).toBe(false);
      if (lp < Math.log(0.2)) expect(shaded, `"${t.text}" (${t.title}) in ${id} is not shaded`).toBe(true);
    }
    // No likely number is called "least likely" / unlikely.
    for (const note of await page.locator('#steps .least-likely-note').allTextContents()) {
      const p = Number(/p ≈ ([\d.e-]+)/.exec(note)?.[1]);
      if (/least likely|unlikely/i.test(note) && !/expected/.test(note)) expect(p, note).toBeLessThan(0.5);
    }
    for (const m of await page.locator('#steps [data-least-likely]').evaluateAll((ms) => ms.map((x) => (x as HTMLElement).dataset.p ?? ''))) {
      expect(Number(m)).toBeLessThan(0.5);
    }
    console.log(`item 4 ${id}: notes ${JSON.stringify(await page.locator('#steps .least-likely-note').allTextContents())}`);
  }
});
