// axe-core's WCAG 2.x A/AA rules on the main views (model loaded, a trace
// scored, best-of-N ranked), at desktop and phone width. Fails on any
// violation of impact "serious" or "critical".
import { expect, test, type Page } from '@playwright/test';
import { createRequire } from 'node:module';
import { openAndLoad, score } from './helpers';

const axePath = createRequire(import.meta.url).resolve('axe-core/axe.min.js');
// The page's CSP forbids injected scripts; axe is a test tool, not page content.
test.use({ bypassCSP: true });

interface Violation { id: string; impact: string | null; help: string; nodes: Array<{ target: string[] }> }

async function audit(page: Page): Promise<string[]> {
  await page.addScriptTag({ path: axePath });
  const violations: Violation[] = await page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run: (ctx: Document, opts: object) => Promise<{ violations: Violation[] }> } }).axe;
    const r = await axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } });
    return r.violations;
  });
  return violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id} (${v.impact}): ${v.help} at ${v.nodes.map((n) => n.target.join(' ')).slice(0, 3).join(', ')}`);
}

for (const width of [1280, 375]) {
  test(`no serious accessibility violations at ${width}px`, async ({ page }) => {
    await page.setViewportSize({ width, height: 900 });
    await openAndLoad(page);
    await score(page);
    await page.getByRole('button', { name: 'Use example set' }).click();
    await page.getByRole('button', { name: 'Score and rank candidates' }).click();
    await expect(page.locator('#bon-ranking li.bon-card')).toHaveCount(5);
    expect(await audit(page)).toEqual([]);
    await page.getByRole('tab', { name: 'Examples' }).click();
    expect(await audit(page)).toEqual([]);
  });
}
