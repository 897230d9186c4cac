// Smoke test with the real default model (SmolLM2-135M-Instruct Q4_1 GGUF,
// confidence family), served from stepscore's cache dir. Skipped when the
// file is not there (`cargo run -p stepscore-cli -- fetch stepscore-prm-smollm2` puts it there).
import { expect, test } from '@playwright/test';
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { cardScores, openAndLoad, paste, score, shot, SLIP } from './helpers';

const cache = process.env.XDG_CACHE_HOME ? join(process.env.XDG_CACHE_HOME, 'stepscore') : join(homedir(), '.cache', 'stepscore');
const gguf = join(process.env.STEPSCORE_MODELS_DIR ?? cache, 'SmolLM2-135M-Instruct.Q4_1.gguf');

test('default model: SmolLM2 GGUF from the app server, confidence scores with per-step shading', async ({ page }) => {
  test.skip(!existsSync(gguf), `SKIPPED: ${gguf} is missing (run: cargo run -p stepscore-cli -- fetch stepscore-prm-smollm2)`);
  test.setTimeout(240_000);
  await openAndLoad(page, 'smollm2-confidence');
  await expect(page.locator('#model-info')).toContainText('confidence');
  await expect(page.locator('#model-info')).toContainText('not a trained verifier');
  await expect(page.locator('#model-info')).toContainText('SmolLM2-135M-Instruct.Q4_1.gguf (98.4 MB)');
  // The entry's own starting threshold (confidence scores sit far below 0.5).
  await expect(page.locator('#threshold')).toHaveValue('0.1');
  await paste(page, SLIP.problem, SLIP.response);
  await score(page);
  const scores = await cardScores(page);
  expect(scores).toHaveLength(4);
  expect(scores.every((s) => s > 0 && s < 1)).toBe(true);
  await expect(page.locator('#confidence-note')).toBeVisible();
  await expect(page.locator('#steps .conf').first()).toContainText('mean log-prob');
  // Tokens are shaded, and the flagged wrong step (7 × 8 = 54) marks its wrong number.
  await expect(page.locator(`#steps li.step-card[data-step="${SLIP.wrongStep}"] [data-first-error]`)).toBeVisible();
  await expect(page.locator('#steps [data-least-likely]')).toHaveText('54');
  // Exact arithmetic says why, on that step only (the model is not asked).
  await expect(page.locator('#steps [data-arithmetic]')).toHaveCount(1);
  await expect(page.locator(`#steps li.step-card[data-step="${SLIP.wrongStep}"] [data-arithmetic]`)).toHaveText('Exact arithmetic: "7 × 8 = 54" is false: 7 × 8 is 56');
  expect(await page.locator('#steps .tok').count()).toBeGreaterThan(20);
  console.log(`SmolLM2 confidence scores for the slip trace: ${scores.map((s) => s.toFixed(3)).join(', ')}`);
  await shot(page, '07-smollm2-default-model');
  // Live mode on the real model: the session's incremental scores equal full scoring.
  await page.getByRole('button', { name: /Live/ }).click();
  await expect(page.locator('#score-status')).toContainText('Live scoring done', { timeout: 120_000 });
  const live = await cardScores(page);
  live.forEach((v, i) => expect(Math.abs(v - scores[i]), `step ${i}: live ${v} vs full ${scores[i]}`).toBeLessThan(1e-3));
});

test('fast PRM: SmolLM2 GGUF + the trained real-errors head from models/', async ({ page }) => {
  test.skip(!existsSync(gguf), `SKIPPED: ${gguf} is missing (run: cargo run -p stepscore-cli -- fetch stepscore-prm-smollm2)`);
  test.setTimeout(240_000);
  await openAndLoad(page, 'smollm2-prm');
  await expect(page.locator('#model-info')).toContainText('value-head');
  await expect(page.locator('#model-info')).toContainText('weak verifier');
  // The head file's shipped threshold (0.607107, F1-optimal on the validation split) on the slider's 0.01 steps.
  await expect(page.locator('#threshold')).toHaveValue('0.61');
  await paste(page, SLIP.problem, SLIP.response);
  await score(page);
  const scores = await cardScores(page);
  expect(scores).toHaveLength(4);
  expect(scores.every((s) => s > 0 && s < 1)).toBe(true);
  console.log(`fast PRM scores for the slip trace: ${scores.map((s) => s.toFixed(3)).join(', ')}`);
  await shot(page, '11-fast-prm');
});
