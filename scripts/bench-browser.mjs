#!/usr/bin/env node
// Tokens/s in headless Debian Chromium on SmolLM2-135M-Instruct (GGUF Q4_1):
// stepscore's CPU-wasm engine against wllama (llama.cpp compiled to wasm, npm
// @wllama/wllama) on the same file and the same 512-token text, one thread
// each (the page is served without COOP/COEP, so neither can use wasm
// threads; wllama is also told n_threads 1).
//
// What each side computes over the 512 tokens:
//   stepscore value-head   the backbone + a value head at each step marker
//                          (the trained default PRM's work; no vocabulary
//                          projection) - the like-for-like row against
//   wllama prompt          llama.cpp's prompt processing: the backbone + the
//                          logits of the last token;
//   stepscore confidence   the backbone + full-vocabulary logits at every
//                          step token (49152 x 576 more per token).
// Each is warmed up once and timed `--runs` times (median reported).
//
// Usage: node scripts/bench-browser.mjs [--runs N] [--json out.json]
// Needs: pkg/dist (scripts/build-wasm.sh), pkg/node_modules (npm ci in pkg/),
// /usr/bin/chromium, and the model in stepscore's cache (`stepscore fetch`).

import { existsSync, statSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { openPage, smollm2Path, startServer } from '../pkg/test/browser/harness.mjs';

const { values: args } = parseArgs({ options: { runs: { type: 'string', default: '3' }, json: { type: 'string' } } });
const RUNS = Math.max(1, Number(args.runs));
const GGUF = smollm2Path();
if (!existsSync(GGUF)) {
  console.error(`bench-browser: ${GGUF} is missing (run \`stepscore fetch\`)`);
  process.exit(2);
}

// A deterministic arithmetic trace; STEPS steps make 512 tokens under
// SmolLM2's tokenizer with the value-head template (checked below).
function trace(nSteps) {
  const steps = [];
  for (let i = 0; i < nSteps; i++) {
    const a = 17 + i * 7;
    const b = 3 + (i % 5);
    steps.push(`Step ${i + 1}: we multiply ${a} by ${b} and get ${a * b}, then add ${i} to reach ${a * b + i}.`);
  }
  return { problem: 'A shop sells boxes of pencils. Work out the totals for each order below, one order per step.', steps };
}

const server = await startServer();
const chrome = await openPage(server);
const { page } = chrome;
const log = (m) => console.error(`# ${m}`);

try {
  const info = await page.evaluate(
    async ({ gguf }) => {
      const bytes = new Uint8Array(await (await fetch(gguf)).arrayBuffer());
      window.ggufBytes = bytes;
      // A zero value head: the scores are all sigmoid(0), the work is the backbone's.
      const n = 576;
      const header = JSON.stringify({
        'v_head.summary.bias': { dtype: 'F32', shape: [1], data_offsets: [0, 4] },
        'v_head.summary.weight': { dtype: 'F32', shape: [1, n], data_offsets: [4, 4 + 4 * n] },
      });
      const padded = header + ' '.repeat((8 - (header.length % 8)) % 8);
      const head = new Uint8Array(8 + padded.length + 4 + 4 * n);
      new DataView(head.buffer).setBigUint64(0, BigInt(padded.length), true);
      head.set(new TextEncoder().encode(padded), 8);
      const s = window.stepscore;
      window.valueHead = await s.StepScorer.load({ model: bytes, head, backend: 'cpu' });
      window.confidence = await s.StepScorer.load({ model: bytes, backend: 'cpu' });
      return { userAgent: navigator.userAgent, hardwareConcurrency: navigator.hardwareConcurrency, crossOriginIsolated };
    },
    { gguf: `${server.url}/smollm2.gguf` },
  );
  log(`Chromium: ${info.userAgent}; crossOriginIsolated=${info.crossOriginIsolated}`);

  // Find the step count whose value-head prompt is closest to 512 tokens from below.
  const count = (n) => page.evaluate((t) => window.valueHead.score(t).then((r) => r.tokens), trace(n));
  let steps = 16;
  let tokens = await count(steps);
  while (tokens < 512) tokens = await count(++steps);
  while (tokens > 512) tokens = await count(--steps);
  const t = trace(steps);
  log(`trace: ${steps} steps, ${tokens} tokens (value-head template)`);

  const time = (which, tr) =>
    page.evaluate(
      async ({ which, tr }) => {
        const t0 = performance.now();
        const r = await window[which].score(tr);
        return { ms: performance.now() - t0, tokens: r.tokens };
      },
      { which, tr },
    );
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const results = {};
  for (const which of ['valueHead', 'confidence']) {
    await time(which, t); // warm-up (V8 tiers the hot wasm functions up)
    const runs = [];
    for (let i = 0; i < RUNS; i++) runs.push(await time(which, t));
    const ms = median(runs.map((r) => r.ms));
    results[`stepscore ${which === 'valueHead' ? 'value-head' : 'confidence'}`] = { tokens: runs[0].tokens, ms, tokPerS: (runs[0].tokens * 1000) / ms, runsMs: runs.map((r) => +r.ms.toFixed(1)) };
    log(`stepscore ${which}: ${runs[0].tokens} tokens, median ${ms.toFixed(0)} ms`);
  }
  await page.evaluate(() => {
    window.valueHead.dispose();
    window.confidence.dispose();
  });

  // wllama on the same bytes and the same text (the confidence template's text:
  // problem, then the steps, each after the separator stepscore uses).
  const w = await page.evaluate(
    async ({ tr, runs }) => {
      const { Wllama } = await import('/wllama/index.js');
      const wllama = new Wllama({ default: '/wllama/wasm/wllama.wasm' }, { suppressNativeLog: true, logger: { debug() {}, log() {}, warn() {}, error: console.error } });
      await wllama.loadModel([new Blob([window.ggufBytes])], { n_ctx: 1024, n_batch: 512, n_ubatch: 512, n_threads: 1 });
      const prompt = [tr.problem, ...tr.steps].join('\n\n');
      const one = async () => {
        const t0 = performance.now();
        const r = await wllama.createCompletion({ prompt, max_tokens: 1, temperature: 0, cache_prompt: false });
        return { wallMs: performance.now() - t0, promptN: r.timings?.prompt_n ?? r.usage?.prompt_tokens, promptMs: r.timings?.prompt_ms ?? null };
      };
      await one();
      const out = [];
      for (let i = 0; i < runs; i++) out.push(await one());
      const ctx = wllama.getLoadedContextInfo();
      await wllama.exit();
      return { runs: out, nThreads: ctx.n_threads ?? null, nBatch: ctx.n_batch };
    },
    { tr: t, runs: RUNS },
  );
  const promptMs = median(w.runs.map((r) => r.promptMs ?? r.wallMs));
  results['wllama prompt'] = { tokens: w.runs[0].promptN, ms: promptMs, tokPerS: (w.runs[0].promptN * 1000) / promptMs, wallMs: w.runs.map((r) => +r.wallMs.toFixed(1)), runsMs: w.runs.map((r) => +(r.promptMs ?? r.wallMs).toFixed(1)) };
  log(`wllama: ${w.runs[0].promptN} prompt tokens, median prompt ${promptMs.toFixed(0)} ms`);

  const ratio = results['stepscore value-head'].tokPerS / results['wllama prompt'].tokPerS;
  const report = {
    date: new Date().toISOString(),
    chromium: info.userAgent,
    machine: { cpus: cpus()[0]?.model, cores: availableParallelism(), loadavg: loadavg().map((x) => +x.toFixed(2)) },
    model: { file: GGUF, bytes: statSync(GGUF).size },
    runs: RUNS,
    results,
    ratioValueHeadVsWllama: +ratio.toFixed(3),
  };
  console.log('| engine (Chromium, 1 thread) | tokens | median ms | tokens/s |');
  console.log('|---|---:|---:|---:|');
  for (const [k, r] of Object.entries(results)) console.log(`| ${k} | ${r.tokens} | ${r.ms.toFixed(0)} | ${r.tokPerS.toFixed(1)} |`);
  console.log(`\nstepscore value-head / wllama prompt: ${ratio.toFixed(2)}x; load average ${report.machine.loadavg.join(' ')}`);
  if (args.json) writeFileSync(args.json, JSON.stringify(report, null, 2));
} finally {
  await chrome.close();
  await server.close();
}
