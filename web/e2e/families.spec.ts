// Every tiny PRM fixture through the whole app: model entry (with its family),
// a trace file, the Score button, the step cards, on the default backend
// (auto: the CPU engine here, SwiftShader being a software adapter) and on
// WebGPU forced from the URL. The scores shown must be the independent
// float64 reference's (tests/fixtures/prm/*/reference.json) within 1e-4
// (relative for the confidence family, whose scores are tiny).
import { expect, test } from '@playwright/test';
import { readFileSync } from 'node:fs';
import { cardScores, openAndLoad, score } from './helpers';

const FIXTURES = ['qwen2-prm-tiny', 'skywork-prm-tiny', 'math-shepherd-tiny', 'rlhflow-tiny', 'confidence-tiny'];

for (const [backend, query] of [['cpu', ''], ['webgpu', '&backend=webgpu']]) {
  for (const name of FIXTURES) {
    test(`${name}: the app shows the reference scores (${backend})`, async ({ page }) => {
      const ref = JSON.parse(readFileSync(new URL(`../../tests/fixtures/prm/${name}/reference.json`, import.meta.url), 'utf8'));
      await openAndLoad(page, name, query);
      await expect(page.locator('#backend-badge')).toHaveAttribute('data-backend', backend);
      await expect(page.locator('#model-info')).toContainText(ref.family);
      await page.getByRole('tab', { name: 'Load JSON / JSONL' }).click();
      const rows = ref.cases.map((c: { problem: string; steps: string[] }) => JSON.stringify({ problem: c.problem, steps: c.steps })).join('\n');
      await page.getByLabel(/Trace file/).setInputFiles({ name: `${name}.jsonl`, mimeType: 'application/x-ndjson', buffer: Buffer.from(rows) });
      for (const [k, c] of (ref.cases as Array<{ steps: string[]; step_scores: number[] }>).entries()) {
        await page.getByLabel('Trace', { exact: true }).selectOption(String(k));
        await page.getByRole('button', { name: 'Use this trace' }).click();
        await score(page);
        await expect(page.locator('#steps li.step-card')).toHaveCount(c.steps.length);
        const got = await cardScores(page);
        c.step_scores.forEach((want, i) => {
          const tol = ref.family === 'confidence' ? 1e-4 * Math.abs(want) : 1e-4;
          expect(Math.abs(got[i] - want), `case ${k} step ${i}: ${got[i]} vs ${want}`).toBeLessThanOrEqual(tol);
        });
        await expect(page.locator('#steps .step-text')).toHaveText(c.steps);
      }
    });
  }
}
