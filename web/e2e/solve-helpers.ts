// Shared by the Solve specs of issue 46 (solve-choice, solve-counts): the fast
// model (SmolLM2 + its value head, which generates as well as verifies) with
// the panel's own settings (beam search, N 4, M 2, 3 steps, 96 tokens per
// candidate; sampling seed 0, so the run is the issue's).
import { expect, type Page } from '@playwright/test';
import { FAST_MODEL } from '../src/config';
import { modelFileFor, openAndLoad } from './helpers';

export const haveFast = () => modelFileFor(FAST_MODEL.model) !== null && modelFileFor(String(FAST_MODEL.options?.head)) !== null;

export async function startSolve(page: Page, load = true): Promise<void> {
  if (load) await openAndLoad(page, FAST_MODEL.id);
  await page.getByLabel('Problem to solve').fill('What is 7 * 8 + 5?');
  await page.getByLabel('Search', { exact: true }).selectOption('beam');
  await page.getByLabel('Candidates (N)').fill('4');
  await page.getByLabel('Beam width (M)').fill('2');
  await page.getByLabel('Max steps').fill('3');
  await page.getByLabel('Tokens per candidate').fill('96');
  await page.getByRole('button', { name: 'Solve', exact: true }).click();
}

export async function done(page: Page): Promise<void> {
  await expect(page.locator('body')).toHaveAttribute('data-solve', 'done', { timeout: 540_000 });
}

export interface Card {
  index: number;
  stop: string | null;
  finalist: boolean;
  complete: string | null;
  pruned: boolean;
  chosen: boolean;
  tags: string[];
  text: string;
}

export async function cards(page: Page): Promise<Card[]> {
  return page.locator('#solve-candidates li.solve-card').evaluateAll((items) => items.map((li) => {
    const e = li as HTMLElement;
    return {
      index: Number(e.dataset.candidate),
      stop: e.dataset.stopReason ?? null,
      finalist: e.dataset.finalist === 'true',
      complete: e.dataset.complete ?? null,
      pruned: e.classList.contains('pruned'),
      chosen: e.classList.contains('chosen'),
      tags: [...e.querySelectorAll('.solve-tag')].map((t) => t.textContent ?? ''),
      text: e.querySelector('.solve-text')?.textContent ?? '',
    };
  }));
}

