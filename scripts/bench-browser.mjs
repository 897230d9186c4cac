#!/usr/bin/env node
// Tokens/s in headless Debian Chromium on SmolLM2-135M-Instruct (GGUF Q4_1):
// stepscore's CPU-wasm and WebGPU engines against wllama (llama.cpp compiled
// to wasm, npm @wllama/wllama) on the same file and the same 512-token text,
// one thread each for the wasm engines (the page is served without
// COOP/COEP, so neither can use wasm threads; wllama is also told n_threads
// 1). WebGPU runs on whatever adapter the browser gives: in headless
// Chromium without a GPU that is SwiftShader, the kernels on the CPU.
//
// What each side computes over the 512 tokens:
//   stepscore value-head   the backbone + a value head at each step marker
//                          (the trained default PRM's work; no vocabulary
//                          projection), on CPU-wasm and on WebGPU - the
//                          like-for-like rows against
//   wllama prompt          llama.cpp's prompt processing: the backbone + the
//                          logits of the last token;
//   stepscore confidence   the backbone + full-vocabulary logits at every
//                          step token (49152 x 576 more per token).
// Each is warmed up on a short input, then timed `--runs` times (default 1;
// the median is reported), the three interleaved so that other load on the
// machine slows them alike.
//
// Usage: node scripts/bench-browser.mjs [--runs N] [--json out.json]
// Needs: pkg/dist (scripts/build-wasm.sh), pkg/node_modules (npm ci in pkg/),
// /usr/bin/chromium, and the model in stepscore's cache (`stepscore fetch stepscore-prm-smollm2`).

import { existsSync, statSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { openPage, smollm2Path, startServer } from '../pkg/test/browser/harness.mjs';

const { values: args } = parseArgs({ options: { runs: { type: 'string', default: '1' }, json: { type: 'string' } } });
const RUNS = Math.max(1, Number(args.runs));
const GGUF = smollm2Path();
if (!existsSync(GGUF)) {
  console.error(`bench-browser: ${GGUF} is missing (run \`stepscore fetch stepscore-prm-smollm2\`)`);
  process.exit(2);
}

// A deterministic arithmetic trace; the step count is fitted to 512 tokens below.
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
      window.headBytes = head;
      window.valueHead = await s.StepScorer.load({ model: bytes, head, backend: 'cpu' });
      window.valueHeadGpu = await s.StepScorer.load({ model: bytes, head, backend: 'webgpu' });
      window.confidence = await s.StepScorer.load({ model: bytes, backend: 'cpu' });
      return { userAgent: navigator.userAgent, hardwareConcurrency: navigator.hardwareConcurrency, crossOriginIsolated, adapter: window.valueHeadGpu.info().adapter };
    },
    { gguf: `${server.url}/smollm2.gguf` },
  );
  log(`Chromium: ${info.userAgent}; crossOriginIsolated=${info.crossOriginIsolated}; WebGPU adapter: ${info.adapter}`);

  // Token counts without running the model: a scorer limited to 1 token
  // rejects every trace with TRACE_TOO_LONG, whose message states the count.
  const count = (tr, template) =>
    page.evaluate(
      async ({ tr, template }) => {
        try {
          await window[template].score(tr);
        } catch (e) {
          const m = /the trace is (\d+) tokens/.exec(e.message);
          if (e.code === 'TRACE_TOO_LONG' && m) return Number(m[1]);
          throw e;
        }
        throw new Error('expected TRACE_TOO_LONG');
      },
      { tr, template },
    );
  await page.evaluate(async () => {
    const s = window.stepscore;
    window.countValueHead = await s.StepScorer.load({ model: window.ggufBytes, head: window.headBytes, maxTokens: 1 });
    window.countConfidence = await s.StepScorer.load({ model: window.ggufBytes, maxTokens: 1 });
  });
  // The most steps that fit in 512 tokens, then words added to the problem
  // until the value-head prompt is exactly 512 tokens.
  let steps = 1;
  while ((await count(trace(steps + 1), 'countValueHead')) <= 512) steps++;
  const t = trace(steps);
  for (let pad = 0; (await count(t, 'countValueHead')) < 512 && pad < 200; pad++) t.problem += ' Thanks';
  const tokensValueHead = await count(t, 'countValueHead');
  const tokensConfidence = await count(t, 'countConfidence');
  log(`trace: ${steps} steps; ${tokensValueHead} tokens with the value-head template, ${tokensConfidence} with the confidence one`);

  // One short scoring each first (V8 compiles hot wasm functions with its
  // optimizing tier in the background), then the timed runs, interleaved
  // with wllama's below so a busy machine slows both alike.
  await page.evaluate(async () => {
    const warm = { problem: 'What is 2 + 2?', steps: ['2 + 2 = 4.'] };
    await window.valueHead.score(warm);
    await window.valueHeadGpu.score(warm);
    await window.confidence.score(warm);
  });
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

  // wllama on the same bytes and the confidence template's text (problem,
  // then the steps, each after a blank line, which is the separator stepscore uses).
  await page.evaluate(async () => {
    const { Wllama } = await import('/wllama/index.js');
    const quiet = { debug() {}, log() {}, warn() {}, error: console.error };
    window.wllama = new Wllama({ default: '/wllama/wasm/wllama.wasm' }, { suppressNativeLog: true, logger: quiet });
    await window.wllama.loadModel([new Blob([window.ggufBytes])], { n_ctx: 1024, n_batch: 512, n_ubatch: 512, n_threads: 1 });
    await window.wllama.createCompletion({ prompt: 'What is 2 + 2?', max_tokens: 1, temperature: 0, cache_prompt: false });
  });
  const wllamaOnce = (tr) =>
    page.evaluate(async (tr) => {
      const prompt = [tr.problem, ...tr.steps].join('\n\n');
      const t0 = performance.now();
      const r = await window.wllama.createCompletion({ prompt, max_tokens: 1, temperature: 0, cache_prompt: false });
      return { wallMs: performance.now() - t0, tokens: r.timings?.prompt_n ?? r.usage?.prompt_tokens, ms: r.timings?.prompt_ms ?? performance.now() - t0 };
    }, tr);

  const runs = { 'stepscore value-head': [], 'stepscore value-head WebGPU': [], 'wllama prompt': [], 'stepscore confidence': [] };
  for (let i = 0; i < RUNS; i++) {
    runs['stepscore value-head'].push(await time('valueHead', t));
    runs['stepscore value-head WebGPU'].push(await time('valueHeadGpu', t));
    runs['wllama prompt'].push(await wllamaOnce(t));
    runs['stepscore confidence'].push(await time('confidence', t));
    log(`run ${i + 1}/${RUNS}: ${Object.entries(runs).map(([k, v]) => `${k} ${v[i].ms.toFixed(0)} ms`).join(', ')}`);
  }
  await page.evaluate(async () => {
    for (const k of ['valueHead', 'valueHeadGpu', 'confidence', 'countValueHead', 'countConfidence']) window[k].dispose();
    await window.wllama.exit();
  });
  const results = {};
  for (const [k, v] of Object.entries(runs)) {
    const ms = median(v.map((r) => r.ms));
    results[k] = { tokens: v[0].tokens, ms, tokPerS: (v[0].tokens * 1000) / ms, runsMs: v.map((r) => +r.ms.toFixed(1)) };
  }

  const ratio = results['stepscore value-head'].tokPerS / results['wllama prompt'].tokPerS;
  const gpuRatio = results['stepscore value-head WebGPU'].tokPerS / results['wllama prompt'].tokPerS;
  const gpuVsCpu = results['stepscore value-head WebGPU'].tokPerS / results['stepscore value-head'].tokPerS;
  const report = {
    date: new Date().toISOString(),
    chromium: info.userAgent,
    machine: { cpus: cpus()[0]?.model, cores: availableParallelism(), loadavg: loadavg().map((x) => +x.toFixed(2)) },
    model: { file: GGUF, bytes: statSync(GGUF).size },
    runs: RUNS,
    results,
    webgpuAdapter: info.adapter,
    ratioValueHeadVsWllama: +ratio.toFixed(3),
    ratioWebGpuVsWllama: +gpuRatio.toFixed(3),
    ratioWebGpuVsCpuWasm: +gpuVsCpu.toFixed(3),
  };
  console.log('| engine (Chromium, 1 thread) | tokens | median ms | tokens/s |');
  console.log('|---|---:|---:|---:|');
  for (const [k, r] of Object.entries(results)) console.log(`| ${k} | ${r.tokens} | ${r.ms.toFixed(0)} | ${r.tokPerS.toFixed(1)} |`);
  console.log(`\nstepscore value-head / wllama prompt: CPU-wasm ${ratio.toFixed(2)}x, WebGPU (${info.adapter}) ${gpuRatio.toFixed(2)}x; WebGPU / CPU-wasm ${gpuVsCpu.toFixed(2)}x; load average ${report.machine.loadavg.join(' ')}`);
  if (args.json) writeFileSync(args.json, JSON.stringify(report, null, 2));
} finally {
  await chrome.close();
  await server.close();
}
