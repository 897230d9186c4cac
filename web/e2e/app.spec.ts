import { expect, test } from '@playwright/test';
import { readFileSync } from 'node:fs';
import { cardScores, open, openAndLoad, paste, score, shot, SLIP } from './helpers';

test('loads a model with progress and shows the backend and why', async ({ page }) => {
  await open(page, './?model=qwen2-prm-tiny');
  await expect(page.locator('#backend-badge')).toHaveText('No model loaded');
  const progress = page.locator('#load-progress');
  await page.getByRole('button', { name: 'Load model' }).click();
  await expect(page.locator('body')).toHaveAttribute('data-model-ready', 'true');
  await expect(progress).toHaveJSProperty('value', 1);
  await expect(page.locator('#load-status')).toContainText('Loaded tiny score-head PRM');
  // This browser's only WebGPU adapter is SwiftShader (software): 'auto' runs on the CPU and says why.
  const badge = page.locator('#backend-badge');
  await expect(badge).toHaveAttribute('data-backend', 'cpu');
  // In plain words (issue 46); the info table keeps the SDK's technical reason.
  await expect(badge).toContainText('processor (CPU)');
  await expect(badge).toContainText('WebGPU is a software emulation');
  const info = page.locator('#model-info');
  await expect(info).toContainText('is a software rasterizer');
  await expect(info).toContainText('score-head');
  // This browser does have WebGPU (SwiftShader, --enable-unsafe-webgpu): the app says so.
  await expect(info).toContainText(/WebGPU in this browser\s*available \(adapter: .*swiftshader/i);
  await shot(page, '01-model-loaded', false);
});

test('a trace with a known wrong step: score, first-error marker, threshold, aggregation, chart', async ({ page }) => {
  await openAndLoad(page);
  await paste(page, SLIP.problem, SLIP.response);
  await expect(page.locator('#preview li')).toHaveCount(4);
  await expect(page.locator('#preview-summary')).toContainText('4 steps');
  // The exact token count before any scoring; a time once this device's speed is measured.
  await expect(page.locator('#estimate')).toContainText(/^\d+ tokens; the first scoring measures/);
  await score(page);
  await expect(page.locator('#estimate')).toContainText(/^\d+ tokens: (about [\d.]+|under 0\.1) s on this device \(\d+ tokens\/s/);
  const cards = page.locator('#steps li.step-card');
  await expect(cards).toHaveCount(4);
  const scores = await cardScores(page);
  expect(scores.every((s) => s > 0 && s < 1)).toBe(true);

  // Put the threshold just above the known wrong step's score: the marker must land on the
  // first step scoring below it (the wrong step itself, or an earlier one the model doubts).
  const t = Math.min(0.99, Math.ceil((scores[SLIP.wrongStep] + 0.005) * 100) / 100);
  await page.getByLabel('Error threshold').fill(String(t));
  const expected = scores.findIndex((s) => s < t);
  expect(expected).toBeGreaterThanOrEqual(0);
  expect(expected).toBeLessThanOrEqual(SLIP.wrongStep);
  await expect(page.locator('[data-first-error]')).toHaveCount(1);
  await expect(cards.nth(expected).locator('[data-first-error]')).toBeVisible();
  await expect(page.locator('#first-error')).toHaveAttribute('data-index', String(expected));
  await expect(page.locator('#first-error')).toContainText(`step ${expected + 1}`);
  await shot(page, '02-trace-scored');

  // Threshold under every score: no step is below it, but "7 × 8 = 54" is false in exact
  // arithmetic, so step 2 stays the first error (issue 46). Keyboard moves the slider too.
  await page.getByLabel('Error threshold').fill('0');
  await expect(page.locator('[data-first-error]')).toHaveCount(1);
  await expect(cards.nth(SLIP.wrongStep).locator('[data-first-error]')).toBeVisible();
  await expect(page.locator('#first-error')).toContainText('step 2: "7 × 8 = 54" is false');
  await page.getByLabel('Error threshold').focus();
  await page.keyboard.press('ArrowRight');
  await expect(page.locator('#threshold-value')).toHaveText('0.01');

  // Aggregation selector: the aggregate equals the computed value for each choice.
  const agg = page.locator('#aggregate');
  const choices: Array<[string, number]> = [
    ['min', Math.min(...scores)],
    ['prod', scores.reduce((a, b) => a * b, 1)],
    ['last', scores[scores.length - 1]],
    ['mean', scores.reduce((a, b) => a + b, 0) / scores.length],
  ];
  for (const [how, want] of choices) {
    await page.getByLabel('Aggregation').selectOption(how);
    await expect(agg).toHaveText(want.toFixed(3));
  }

  // The chart: a drawn canvas and its table twin (one row per step).
  const canvas = page.locator('#chart');
  const box = await canvas.boundingBox();
  expect(box && box.width > 200 && box.height > 150).toBeTruthy();
  const inked = await canvas.evaluate((c: HTMLCanvasElement) => {
    const d = c.getContext('2d')!.getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
    return n;
  });
  expect(inked).toBeGreaterThan(1000);
  await expect(page.locator('#chart-table tbody tr')).toHaveCount(4);
});

test('export downloads valid JSON and JSONL with the shown scores', async ({ page }) => {
  await openAndLoad(page);
  await paste(page, SLIP.problem, SLIP.response);
  await score(page);
  const scores = await cardScores(page);

  const [json] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Export JSON', exact: true }).click()]);
  expect(json.suggestedFilename()).toBe('stepscore-scores.json');
  const body = JSON.parse(readFileSync((await json.path())!, 'utf8'));
  expect(body.format).toBe('stepscore-demo-export');
  expect(body.model.family).toBe('score-head');
  expect(body.traces[0].problem).toBe(SLIP.problem);
  expect(body.traces[0].steps.map((s: { score: number }) => s.score)).toEqual(scores);
  expect(body.traces[0].metadata.aggregate).toBeCloseTo(Math.min(...scores), 12);

  const [jsonl] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Export JSONL' }).click()]);
  const lines = readFileSync((await jsonl.path())!, 'utf8').trim().split('\n');
  expect(lines).toHaveLength(1);
  const row = JSON.parse(lines[0]);
  expect(row.steps).toHaveLength(4);
  expect(row.steps[1].text).toBe('So it starts with 7 × 8 = 54 books.');
});

test('live mode scores steps one by one through a session, equal to full scoring', async ({ page }) => {
  await openAndLoad(page);
  await paste(page, SLIP.problem, SLIP.response);
  await score(page);
  const full = await cardScores(page);
  await page.getByRole('button', { name: /Live/ }).click();
  // Pending cards first, then every step scored.
  await expect(page.locator('#results')).toHaveAttribute('data-rendered', '4', { timeout: 60_000 });
  await expect(page.locator('#score-status')).toContainText('Live scoring done');
  const live = await cardScores(page);
  await shot(page, '10-live-mode');
  live.forEach((s, i) => expect(Math.abs(s - full[i])).toBeLessThan(1e-4));
});

test('best-of-N: candidates ranked, answers extracted, majority vs PRM-weighted vote, winner marked', async ({ page }) => {
  await openAndLoad(page);
  await page.getByRole('button', { name: 'Use example set' }).click();
  await expect(page.locator('#bon-inputs textarea')).toHaveCount(5);
  await page.getByRole('button', { name: 'Score and rank candidates' }).click();
  const cards = page.locator('#bon-ranking li.bon-card');
  await expect(cards).toHaveCount(5, { timeout: 60_000 });
  await expect(page.locator('#bon-ranking .winner')).toHaveCount(1);
  await expect(cards.first()).toHaveClass(/winner/);
  // Ranked by the aggregate, highest first.
  const shown = await cards.evaluateAll((els) => els.map((e) => Number(e.querySelector('strong')?.textContent)));
  for (let i = 1; i < shown.length; i++) expect(shown[i - 1]).toBeGreaterThanOrEqual(shown[i]);
  // Three candidates agree on 35: the majority vote says so whatever the model thinks.
  await expect(page.locator('[data-vote="Majority vote"]')).toContainText('35 — 3 of 5 candidates');
  await expect(page.locator('[data-vote="PRM-weighted vote"]')).toContainText(/(35|40) — weight/);
  await expect(cards.first()).toContainText(/answer: (35|40)/);
  await shot(page, '03-best-of-n');
  await expect(page.locator('[data-votes-agree]')).toBeVisible();
  // Changing the aggregation re-ranks without rescoring.
  await page.getByLabel('Rank by').selectOption('last');
  await expect(cards.first()).toContainText('last:');
  await expect(page.getByLabel('Aggregation')).toHaveValue('last');
  // The ranking travels in the share link, and shows without a model.
  const winner = await page.locator('#bon-ranking .winner').getAttribute('data-candidate');
  const [dl] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Export ranking JSON' }).click()]);
  const exported = JSON.parse(readFileSync((await dl.path())!, 'utf8'));
  expect(exported.bestOfN.aggregation).toBe('last');
  expect(String(exported.bestOfN.best)).toBe(winner);
  expect(exported.bestOfN.majority.display).toBe('35');
  expect(exported.traces.filter((t: { id: string }) => t.id.startsWith('candidate-'))).toHaveLength(5);
  await page.getByRole('button', { name: 'Copy share link to this ranking' }).click();
  await expect(page.locator('#bon-share-status')).toContainText(/link/i);
  const other = await page.context().newPage();
  await open(other, page.url());
  await expect(other.locator('#bon-ranking li.bon-card')).toHaveCount(5);
  await expect(other.locator('#bon-ranking .winner')).toHaveAttribute('data-candidate', winner!);
  await expect(other.getByLabel('Rank by')).toHaveValue('last');
});

test('trace files in every format the SDK reads, with bad rows reported by line', async ({ page }) => {
  await open(page);
  await page.getByRole('tab', { name: 'Load JSON / JSONL' }).click();
  const rows = [
    { id: 'native', problem: 'P1', steps: [{ text: 'a', label: true }, { text: 'b', label: false }] },
    { problem: 'P2', steps: ['x', 'y', 'z'], label: 1 },
    { prompt: 'P3', completions: ['c1', 'c2'], labels: [true, false] },
    { question: 'P4', response: 'first\n\nsecond' },
    { messages: [{ role: 'user', content: 'P5' }, { role: 'assistant', content: 'Let me look.', tool_calls: [{ id: 'c1', function: { name: 'search', arguments: '{"q":"x"}' } }] }, { role: 'tool', tool_call_id: 'c1', content: 'found' }, { role: 'assistant', content: 'Done.' }] },
    { problem: 'bad', steps: 'not a list' },
  ];
  const jsonl = rows.map((r) => JSON.stringify(r)).join('\n') + '\nnot json\n';
  await page.getByLabel(/Trace file/).setInputFiles({ name: 'mixed.jsonl', mimeType: 'application/x-ndjson', buffer: Buffer.from(jsonl) });
  await expect(page.locator('#file-status')).toContainText('mixed.jsonl: 5 traces read, 2 rows with errors');
  // The core reader's messages, as `stepscore read` prints them.
  await expect(page.locator('#file-errors')).toContainText('mixed.jsonl line 6, field `steps`: expected an array, found a string');
  await expect(page.locator('#file-errors')).toContainText('mixed.jsonl line 7: invalid JSON');
  const options = page.locator('#file-trace-select option');
  await expect(options).toHaveText([/\[native\] native: P1 \(2 steps\)/, /\[processbench\] P2 \(3 steps\)/, /\[trl\] P3 \(2 steps\)/, /\[raw\] P4 \(2 steps\)/, /\[chat\] P5 \(4 steps\)/]);
  await page.getByLabel('Trace', { exact: true }).selectOption('4');
  await page.getByRole('button', { name: 'Use this trace' }).click();
  await page.getByRole('tab', { name: 'Paste' }).click();
  await expect(page.locator('#preview li')).toHaveText(['[assistant] Let me look.', '[tool_call search] search({"q":"x"})', '[tool_result search] found', '[assistant] Done.']);

  // A JSON array of rows that carry scores shows the result at once, ground truth included.
  await page.getByRole('tab', { name: 'Load JSON / JSONL' }).click();
  const scored = [{ problem: 'Q', steps: ['s1', 's2', 's3'], label: 1, scores: [0.9, 0.2, 0.7] }];
  await page.getByLabel(/Trace file/).setInputFiles({ name: 'scored.json', mimeType: 'application/json', buffer: Buffer.from(JSON.stringify(scored)) });
  await expect(page.locator('#steps li.step-card')).toHaveCount(3);
  await expect(page.locator('#steps li.step-card').nth(1).locator('[data-first-error]')).toBeVisible();
  await expect(page.locator('#steps li.step-card').nth(1)).toContainText('ground truth: labelled wrong');
  await shot(page, '09-trace-file');
});

test('trace text renders inert: <script>, <img onerror>, through paste, files and the share link', async ({ page }) => {
  const dialogs: string[] = [];
  page.on('dialog', (d) => {
    dialogs.push(d.message());
    void d.dismiss();
  });
  await openAndLoad(page);
  const payloads = [
    '<script>window.__pwned = "script"; alert("script")</script>',
    '<img src=x onerror="window.__pwned = \'img\'; alert(\'img\')">',
    '<svg onload="window.__pwned=\'svg\'"></svg><a href="javascript:alert(1)">x</a>',
  ];
  const problem = `Inert? ${payloads[1]}`;
  await paste(page, problem, payloads.join('\n\n'));
  await expect(page.locator('#preview li')).toHaveCount(3);
  await score(page);
  const texts = page.locator('#steps .step-text');
  await expect(texts).toHaveText(payloads);
  // Nothing was parsed as markup anywhere in the page's dynamic parts.
  for (const sel of ['#steps', '#preview', '#bon-ranking', '#gallery']) {
    expect(await page.locator(`${sel} img, ${sel} script, ${sel} svg, ${sel} a`).count()).toBe(0);
  }
  // The best-of-N cards and the file reader too.
  await page.locator('#bon-inputs textarea').nth(0).fill(payloads[0] + '\n\nThe answer is \\boxed{1}.');
  await page.locator('#bon-inputs textarea').nth(1).fill(payloads[1] + '\n\nThe answer is \\boxed{2}.');
  await page.getByRole('button', { name: 'Score and rank candidates' }).click();
  await expect(page.locator('#bon-ranking li.bon-card')).toHaveCount(2);
  await expect(page.locator('#bon-ranking')).toContainText(payloads[1]);
  await page.getByRole('tab', { name: 'Load JSON / JSONL' }).click();
  await page.getByLabel(/Trace file/).setInputFiles({
    name: `${payloads[1]}.jsonl`,
    mimeType: 'application/x-ndjson',
    buffer: Buffer.from(JSON.stringify({ id: payloads[1], problem: payloads[0], steps: [payloads[1]], scores: [0.1] }) + '\n{"problem": 1, "steps": ["<img src=x onerror=alert(3)>"]}\n'),
  });
  await expect(page.locator('#file-trace-select option')).toContainText([payloads[1]]);
  await expect(page.locator('#steps .step-text')).toHaveText([payloads[1]]);
  // The share link carries the payload to another page: still text.
  await page.getByRole('button', { name: 'Copy share link', exact: true }).click();
  await expect(page.locator('#share-status')).toContainText(/link/i);
  const url = page.url();
  expect(url).toContain('#s=');
  const other = await page.context().newPage();
  other.on('dialog', (d) => {
    dialogs.push(d.message());
    void d.dismiss();
  });
  await open(other, url);
  await expect(other.locator('#steps .step-text')).toHaveText([payloads[1]]);
  // The link brought the scores along: shown before any model is loaded.
  await expect(other.locator('#steps')).toContainText('Scores from the shared link');
  await expect(other.locator('#steps li.step-card').first()).toHaveAttribute('data-score', '0.1');
  await page.waitForTimeout(300);
  for (const p of [page, other]) {
    expect(await p.evaluate(() => (window as unknown as { __pwned?: string }).__pwned)).toBeUndefined();
    expect(await p.locator('img, script:not([src]):not([type="module"])').count()).toBe(0);
  }
  expect(dialogs).toEqual([]);
  await shot(page, '04-inert-payloads');
});

test('with navigator.gpu stubbed away, auto falls back to the CPU and says so; webgpu-only refuses', async ({ page }) => {
  const stub = "Object.defineProperty(WorkerNavigator.prototype, 'gpu', { get: () => undefined, configurable: true });\n";
  await page.addInitScript(() => {
    Object.defineProperty(Navigator.prototype, 'gpu', { get: () => undefined, configurable: true });
  });
  // The engine probes WebGPU in the package's worker, where init scripts do not run:
  // the worker's script gets the same stub in front.
  await page.route('**/assets/worker-*.js', async (route) => {
    const response = await route.fetch();
    await route.fulfill({ response, body: stub + (await response.text()) });
  });
  await openAndLoad(page);
  const badge = page.locator('#backend-badge');
  await expect(badge).toHaveAttribute('data-backend', 'cpu');
  await expect(badge).toContainText('this browser does not offer WebGPU');
  await expect(page.locator('#model-info')).toContainText('not available (navigator.gpu is missing)');
  await page.getByLabel('Backend').selectOption('webgpu');
  await page.getByRole('button', { name: 'Load model' }).click();
  await expect(page.locator('#load-status')).toContainText('WEBGPU_UNAVAILABLE');
  // The CPU scorer loaded before stays usable.
  await paste(page, SLIP.problem, SLIP.response);
  await score(page);
  await shot(page, '05-cpu-fallback', false);
});

test('a model from the user\'s files (Hugging Face checkpoint), chosen or dropped', async ({ page }) => {
  await open(page);
  const dir = new URL('../../tests/fixtures/prm/skywork-prm-tiny/', import.meta.url).pathname;
  await page.getByLabel('Or use your own model files').setInputFiles(['config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json'].map((f) => dir + f));
  await expect(page.locator('body')).toHaveAttribute('data-model-ready', 'true');
  await expect(page.locator('#model-info')).toContainText('value-head');
  // The same files dragged onto the drop zone.
  await open(page);
  const dataTransfer = await page.evaluateHandle(async (names) => {
    const dt = new DataTransfer();
    for (const n of names) {
      const r = await fetch(`fixtures/prm/math-shepherd-tiny/${n}`);
      dt.items.add(new File([await r.blob()], n));
    }
    return dt;
  }, ['config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json']);
  await page.dispatchEvent('#drop-zone', 'drop', { dataTransfer });
  await expect(page.locator('body')).toHaveAttribute('data-model-ready', 'true');
  await expect(page.locator('#model-info')).toContainText('math-shepherd');
  // One non-GGUF file alone is refused with a reason.
  await page.getByLabel('Or use your own model files').setInputFiles(dir + 'config.json');
  await expect(page.locator('#load-status')).toContainText('a single file must be a .gguf model');
});

test('a missing model file is reported, not hung on', async ({ page }) => {
  await open(page);
  await page.getByLabel('Model', { exact: true }).selectOption('smollm2-confidence');
  await page.route('**/models/**', (route) => route.fulfill({ status: 404, body: 'not found' }));
  await page.getByRole('button', { name: 'Load model' }).click();
  await expect(page.locator('#load-status')).toContainText('FETCH_FAILED');
  await expect(page.locator('#load-status')).toHaveClass(/error/);
});

test('loading can be cancelled; a broken share link is ignored', async ({ page }) => {
  // Hold the weights back so the load is still downloading when Cancel is pressed.
  let release: () => void = () => {};
  const held = new Promise<void>((r) => (release = r));
  await page.route('**/fixtures/prm/qwen2-prm-tiny/model.safetensors', async (route) => {
    await held;
    await route.continue().catch(() => {});
  });
  await open(page, './?model=qwen2-prm-tiny#s=not-a-valid-state');
  // The broken hash left the default example in place.
  await expect(page.getByLabel('Problem', { exact: true })).toHaveValue(/Maria buys/);
  await page.getByRole('button', { name: 'Load model' }).click();
  await expect(page.getByRole('button', { name: 'Cancel' })).toBeEnabled();
  await page.getByRole('button', { name: 'Cancel' }).click();
  await expect(page.locator('#load-status')).toContainText('ABORTED');
  release();
  await expect(page.getByRole('button', { name: 'Score trace' })).toBeDisabled();
  await expect(page.getByRole('button', { name: 'Load model' })).toBeEnabled();
});

test('keyboard and screen-reader basics; readable at 375 px', async ({ page }) => {
  await page.setViewportSize({ width: 375, height: 800 });
  await openAndLoad(page);
  // Tabs follow the ARIA pattern: arrow keys move between them.
  await page.getByRole('tab', { name: 'Paste' }).focus();
  await page.keyboard.press('ArrowRight');
  await expect(page.getByRole('tab', { name: 'Load JSON / JSONL' })).toHaveAttribute('aria-selected', 'true');
  await page.keyboard.press('ArrowRight');
  await expect(page.getByRole('tab', { name: 'Examples' })).toBeFocused();
  await expect(page.locator('#pane-gallery')).toBeVisible();
  await expect(page.locator('#gallery li')).toHaveCount(5);
  await shot(page, '08-gallery-phone', false);
  // An example chosen and scored with the keyboard only.
  await page.getByRole('button', { name: /Use this trace: Sharing cookies/ }).focus();
  await page.keyboard.press('Enter');
  await expect(page.getByLabel('Problem', { exact: true })).toHaveValue(/Tom bakes/);
  await page.getByRole('button', { name: 'Score trace' }).focus();
  await page.keyboard.press('Enter');
  await expect(page.locator('#steps li.step-card')).toHaveCount(3);
  // Every form control has an accessible name.
  const unnamed = await page.evaluate(() =>
    [...document.querySelectorAll('input, select, textarea, button')]
      .filter((e) => !(e as HTMLElement).hidden && (e as HTMLElement).offsetParent !== null)
      .filter((e) => {
        const el = e as HTMLInputElement;
        return !(el.labels?.length || el.getAttribute('aria-label') || el.getAttribute('aria-labelledby') || (el.tagName === 'BUTTON' && el.textContent?.trim()));
      })
      .map((e) => e.outerHTML.slice(0, 80)),
  );
  expect(unnamed).toEqual([]);
  // Nothing wider than the phone.
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  expect(overflow).toBeLessThanOrEqual(0);
  await shot(page, '06-phone-375');
});
