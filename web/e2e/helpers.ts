import { expect, type Page } from '@playwright/test';
import { existsSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const SCREENSHOTS = join(dirname(fileURLToPath(import.meta.url)), '..', 'test-results', 'screenshots');

export async function shot(page: Page, name: string, fullPage = true): Promise<void> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage });
}

/** Opens the app and waits until its controls are wired (the wasm engine instantiates first). */
export async function open(page: Page, path = './'): Promise<void> {
  await page.goto(path);
  await expect(page.locator('body')).toHaveAttribute('data-app-ready', 'true');
}

/** Opens the app with a model entry selected and loads it. */
export async function openAndLoad(page: Page, model = 'qwen2-prm-tiny', query = ''): Promise<void> {
  await open(page, `./?model=${model}${query}`);
  await page.getByRole('button', { name: 'Load model' }).click();
  await expect(page.locator('body')).toHaveAttribute('data-model-ready', 'true', { timeout: 120_000 });
}

/** Types a trace into the paste form. */
export async function paste(page: Page, problem: string, response: string): Promise<void> {
  await page.getByRole('tab', { name: 'Paste' }).click();
  await page.getByLabel('Problem', { exact: true }).fill(problem);
  await page.getByLabel('Response (chain of thought)').fill(response);
}

/** The scores the step cards show, in order (full precision from data-score). */
export async function cardScores(page: Page): Promise<number[]> {
  const raw = await page.locator('#steps li.step-card').evaluateAll((cards) => cards.map((c) => (c as HTMLElement).dataset.score ?? ''));
  return raw.map(Number);
}

export async function score(page: Page): Promise<void> {
  await page.getByRole('button', { name: 'Score trace' }).click();
  await expect(page.locator('#score-status')).toContainText(/Scored \d+ steps/, { timeout: 120_000 });
}

/** A trace whose step 2 is wrong (7 × 8 is 56, not 54). */
export const SLIP = {
  problem: 'A library has 7 shelves with 8 books on each shelf. It buys 15 more books. How many books does it have now?',
  response: [
    'The library has 7 shelves with 8 books on each.',
    'So it starts with 7 × 8 = 54 books.',
    'After buying 15 more books it has 54 + 15 = 69 books.',
    'The answer is \\boxed{69}.',
  ].join('\n\n'),
  wrongStep: 1,
};

/** stepscore's cache dir, as server/models.ts finds it. */
export function cacheDir(): string {
  if (process.env.STEPSCORE_CACHE) return process.env.STEPSCORE_CACHE;
  return process.env.XDG_CACHE_HOME ? join(process.env.XDG_CACHE_HOME, 'stepscore') : join(process.env.HOME ?? '', '.cache', 'stepscore');
}

/**
 * The model file an entry's URL names ('models/<file>' from the cache, web/models or the
 * repository's models/; 'fixtures/prm/<dir>/' from tests/fixtures/prm), or null when none
 * of the places server/models.ts looks holds it.
 */
export function modelFileFor(url: string): string | null {
  const web = join(dirname(fileURLToPath(import.meta.url)), '..');
  if (url.startsWith('fixtures/prm/')) {
    const p = join(web, '..', 'tests', url);
    return existsSync(p) ? p : null;
  }
  const file = url.replace(/^models\//, '');
  const roots = [process.env.STEPSCORE_MODELS_DIR, join(web, 'models'), join(web, '..', 'models'), cacheDir()].filter((r): r is string => !!r);
  for (const r of roots) if (existsSync(join(r, file))) return join(r, file);
  return null;
}

/** The app's share link for a scored trace (the #s= state of src/share.ts): a view with exactly these scores, no model. */
export function scoredLink(problem: string, steps: string[], scores: number[], threshold: number): string {
  const state = { v: 1, problem, response: steps.join('\n\n'), segmenter: 'auto', aggregation: 'min', threshold, steps, scores };
  return `./#s=${Buffer.from(JSON.stringify(state), 'utf8').toString('base64url')}`;
}

/** Red, green, blue of a CSS colour. */
export function rgb(css: string): number[] {
  const m = /rgba?\(([^)]+)\)/.exec(css);
  return m ? m[1].split(',').slice(0, 3).map((x) => Number(x.trim())) : [];
}

/** The left border (the card's colour on the score scale) of step card `i`. */
export async function cardBorder(page: Page, i: number): Promise<{ color: number[]; style: string }> {
  const b = await page.locator('#steps li.step-card').nth(i).evaluate((c) => {
    const s = getComputedStyle(c);
    return { color: s.borderLeftColor, style: s.borderLeftStyle };
  });
  return { color: rgb(b.color), style: b.style };
}
