// Issue 46, item 6 (the smaller points): a step scored near the threshold is
// coloured, not white; the running-aggregate line stands clear of the x-axis;
// sections are numbered in the order shown; the backend banner speaks to
// people; web/README.md's default model is the one the app loads. The colour
// and chart checks use a shared link (exact scores, no model).
import { expect, test } from '@playwright/test';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEFAULT_MODEL } from '../src/config';
import { EXAMPLES } from '../src/gallery';
import { cardBorder, open, openAndLoad, paste, score, scoredLink, SLIP } from './helpers';

const SLIP_STEPS = SLIP.response.split('\n\n');

test('item 6: a step scored near the threshold is coloured, not white', async ({ page }) => {
  const ex = EXAMPLES.find((e) => e.id === 'apples-correct')!;
  const steps = ex.response.split('\n\n');
  await open(page, scoredLink(ex.problem, steps, [0.312, 0.308, 0.9, 0.05], 0.31));
  const above = await cardBorder(page, 0);
  const below = await cardBorder(page, 1);
  const spread = (c: number[]) => Math.max(...c) - Math.min(...c);
  // White (247, 247, 247) reads as "not scored": both sides carry their hue.
  expect(spread(above.color), `just above: rgb(${above.color})`).toBeGreaterThan(60);
  expect(spread(below.color), `just below: rgb(${below.color})`).toBeGreaterThan(60);
  expect(above.color[2]).toBeGreaterThan(above.color[0]); // blue side
  expect(below.color[0]).toBeGreaterThan(below.color[2]); // red side
});

test('item 6: the running-aggregate line stands clear of the x-axis', async ({ page }) => {
  // The min of these scores is 0.004: the line sat on the axis.
  await open(page, scoredLink(SLIP.problem, SLIP_STEPS, [0.6, 0.004, 0.3, 0.2], 0.5));
  const canvas = page.locator('#chart');
  await expect(canvas).toHaveAttribute('data-running-gap', /\d/);
  expect(Number(await canvas.getAttribute('data-running-gap'))).toBeGreaterThanOrEqual(6);
  expect(Number(await canvas.getAttribute('data-running-width'))).toBeGreaterThanOrEqual(2.5);
});

test('item 6: sections are numbered 1, 2, 3… in the order shown', async ({ page }) => {
  const numbers = async () => (await page.locator('main > section:not([hidden]) > h2').allTextContents()).map((t) => Number(/^(\d+)\./.exec(t)?.[1]));
  await open(page);
  await expect(page.locator('#results')).toBeHidden();
  expect(await numbers()).toEqual([1, 2, 3, 4]);
  await openAndLoad(page);
  await paste(page, SLIP.problem, SLIP.response);
  await score(page);
  expect(await numbers()).toEqual([1, 2, 3, 4, 5]);
  await expect(page.locator('#results-h')).toHaveText('3. Step rewards');
  await expect(page.locator('#solve-h')).toHaveText('5. Solve');
});

test('item 6: the backend banner speaks to people, not developers', async ({ page }) => {
  await openAndLoad(page);
  const badge = page.locator('#backend-badge');
  await expect(badge).toHaveAttribute('data-backend', 'cpu');
  await expect(badge).not.toContainText("backend '");
  await expect(badge).not.toContainText('rasterizer');
  await expect(badge).toContainText('Running on this device’s processor (CPU)');
  await expect(badge).toContainText('Backend menu');
});

test("item 6: web/README.md's default model is the one the app loads", () => {
  const readme = readFileSync(join(dirname(fileURLToPath(import.meta.url)), '..', 'README.md'), 'utf8');
  const para = /The default model \(([^)]*)\)/.exec(readme.replace(/\s+/g, ' '));
  expect(para, 'README names the default model').not.toBeNull();
  const file = DEFAULT_MODEL.model.replace(/^models\//, '');
  expect(readme.replace(/\s+/g, ' ')).toContain(file);
  expect(para![1]).toContain('Qwen2.5-Coder-1.5B-Instruct');
  expect(para![1]).not.toContain('SmolLM2');
  expect(readme).toContain(String(DEFAULT_MODEL.options?.head).replace(/^models\//, ''));
});

