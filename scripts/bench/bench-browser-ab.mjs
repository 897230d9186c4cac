#!/usr/bin/env node
// Two builds of the package in one headless Chromium page: the CPU-wasm
// engine of pkg/dist ("after") against a baseline build ("before", e.g. the
// previous commit's pkg/dist copied aside), beside wllama (llama.cpp in
// wasm), all on one thread, on the same GGUF bytes and the same 512-token
// trace, the three interleaved so that other load on the machine slows them
// alike. The rows are scripts/bench/bench-browser.mjs's "stepscore value-head"
// (backbone + a zero value head at each step marker, no vocabulary
// projection) and "wllama prompt" (its prompt processing, its own
// timings.prompt_ms); this script only adds the second build, served from
// the same origin under /mem/before/.
//
// Usage: node scripts/bench/bench-browser-ab.mjs --baseline DIR [--models smollm2,qwen0.5b] [--runs N] [--json out.json]
// Needs what bench-browser.mjs needs, the baseline dist in DIR (a copy of a
// pkg/dist built by scripts/build-wasm.sh at the baseline commit), and the
// models in stepscore's cache (`stepscore fetch stepscore-prm-smollm2 qwen2.5-coder-0.5b`).

import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { parseArgs } from 'node:util';
import { openPage, smollm2Path, startServer } from '../../pkg/test/browser/harness.mjs';

const MODELS = {
  smollm2: { file: 'SmolLM2-135M-Instruct.Q4_1.gguf', label: 'SmolLM2-135M-Instruct Q4_1', hidden: 576 },
  'qwen0.5b': { file: 'Qwen2.5-Coder-0.5B-Instruct.gguf', label: 'Qwen2.5-Coder-0.5B-Instruct (Q5_0/Q8_0/Q6_K/Q4_K)', hidden: 896 },
};

const { values: args } = parseArgs({
  options: {
    baseline: { type: 'string' },
    models: { type: 'string', default: 'smollm2,qwen0.5b' },
    runs: { type: 'string', default: '1' },
    json: { type: 'string' },
  },
});
const RUNS = Math.max(1, Number(args.runs));
if (!args.baseline || !existsSync(join(args.baseline, 'index.js'))) {
  console.error('bench-browser-ab: --baseline DIR must hold a built pkg/dist (index.js, wasm/)');
  process.exit(2);
}
// The harness serves /smollm2.gguf from smollm2Path(), which reads this
// variable on every request: each model is served there in turn.
const cache = dirname(smollm2Path());
const models = args.models.split(',').map((key) => {
  const spec = MODELS[key.trim()];
  if (!spec) {
    console.error(`bench-browser-ab: unknown model '${key}' (known: ${Object.keys(MODELS).join(', ')})`);
    process.exit(2);
  }
  const path = join(cache, spec.file);
  if (!existsSync(path)) {
    console.error(`bench-browser-ab: ${path} is missing`);
    process.exit(2);
  }
  return { key: key.trim(), ...spec, path };
});

function trace(nSteps) {
  const steps = [];
  for (let i = 0; i < nSteps; i++) {
    const a = 17 + i * 7;
    const b = 3 + (i % 5);
    steps.push(`Step ${i + 1}: we multiply ${a} by ${b} and get ${a * b}, then add ${i} to reach ${a * b + i}.`);
  }
  return { problem: 'A shop sells boxes of pencils. Work out the totals for each order below, one order per step.', steps };
}

function filesUnder(dir) {
  return readdirSync(dir, { recursive: true })
    .map((f) => join(dir, f))
    .filter((f) => statSync(f).isFile());
}

const server = await startServer();
for (const f of filesUnder(args.baseline)) server.put(`before/${relative(args.baseline, f)}`, readFileSync(f));
const chrome = await openPage(server);
const { page } = chrome;
const log = (m) => console.error(`# ${m}`);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const report = {
  date: new Date().toISOString(),
  machine: { cpus: cpus()[0]?.model, cores: availableParallelism(), loadavgStart: loadavg().map((x) => +x.toFixed(2)) },
  baseline: args.baseline,
  runs: RUNS,
  models: {},
};

try {
  report.chromium = await page.evaluate(async () => {
    window.before = await import('/mem/before/index.js');
    return navigator.userAgent;
  });
  for (const model of models) {
    process.env.STEPSCORE_SMOLLM2_GGUF = model.path;
    log(`${model.label}: ${model.path}`);
    await page.evaluate(
      async ({ gguf, n }) => {
        const bytes = new Uint8Array(await (await fetch(gguf)).arrayBuffer());
        window.ggufBytes = bytes;
        // A zero value head: the scores are all sigmoid(0), the work is the backbone's.
        const header = JSON.stringify({
          'v_head.summary.bias': { dtype: 'F32', shape: [1], data_offsets: [0, 4] },
          'v_head.summary.weight': { dtype: 'F32', shape: [1, n], data_offsets: [4, 4 + 4 * n] },
        });
        const padded = header + ' '.repeat((8 - (header.length % 8)) % 8);
        const head = new Uint8Array(8 + padded.length + 4 + 4 * n);
        new DataView(head.buffer).setBigUint64(0, BigInt(padded.length), true);
        head.set(new TextEncoder().encode(padded), 8);
        window.after = await window.stepscore.StepScorer.load({ model: bytes, head, backend: 'cpu' });
        window.beforeScorer = await window.before.StepScorer.load({ model: bytes, head, backend: 'cpu' });
        window.counter = await window.stepscore.StepScorer.load({ model: bytes, head, maxTokens: 1 });
      },
      { gguf: `${server.url}/smollm2.gguf?${model.key}`, n: model.hidden },
    );
    // Token counts from the TRACE_TOO_LONG message of a 1-token scorer.
    const count = (tr) =>
      page.evaluate(async (tr) => {
        try {
          await window.counter.score(tr);
        } catch (e) {
          const m = /the trace is (\d+) tokens/.exec(e.message);
          if (e.code === 'TRACE_TOO_LONG' && m) return Number(m[1]);
          throw e;
        }
        throw new Error('expected TRACE_TOO_LONG');
      }, tr);
    let steps = 1;
    while ((await count(trace(steps + 1))) <= 512) steps++;
    const t = trace(steps);
    for (let pad = 0; (await count(t)) < 512 && pad < 200; pad++) t.problem += ' Thanks';
    log(`trace: ${steps} steps, ${await count(t)} tokens`);
    await page.evaluate(async () => {
      const warm = { problem: 'What is 2 + 2?', steps: ['2 + 2 = 4.'] };
      await window.after.score(warm);
      await window.beforeScorer.score(warm);
      // Bit-identical kernels: the two builds give the same confidence-family
      // scores and token log-probs (these read the logits; the zero value
      // head's scores would not tell).
      const same = [];
      for (const lib of [window.stepscore, window.before]) {
        const c = await lib.StepScorer.load({ model: window.ggufBytes, family: 'confidence', backend: 'cpu' });
        same.push(JSON.stringify(await c.score(warm, { tokenLogprobs: true })));
        c.dispose();
      }
      window.sameScores = same[0] === same[1];
      const { Wllama } = await import('/wllama/index.js');
      const quiet = { debug() {}, log() {}, warn() {}, error: console.error };
      window.wllama = new Wllama({ default: '/wllama/wasm/wllama.wasm' }, { suppressNativeLog: true, logger: quiet });
      await window.wllama.loadModel([new Blob([window.ggufBytes])], { n_ctx: 1024, n_batch: 512, n_ubatch: 512, n_threads: 1 });
      await window.wllama.createCompletion({ prompt: 'What is 2 + 2?', max_tokens: 1, temperature: 0, cache_prompt: false });
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
    const wllamaOnce = (tr) =>
      page.evaluate(async (tr) => {
        const prompt = [tr.problem, ...tr.steps].join('\n\n');
        const t0 = performance.now();
        const r = await window.wllama.createCompletion({ prompt, max_tokens: 1, temperature: 0, cache_prompt: false });
        return { tokens: r.timings?.prompt_n ?? r.usage?.prompt_tokens, ms: r.timings?.prompt_ms ?? performance.now() - t0 };
      }, tr);
    const runs = { 'stepscore value-head, before': [], 'stepscore value-head, after': [], 'wllama prompt': [] };
    const identical = await page.evaluate(() => window.sameScores);
    for (let i = 0; i < RUNS; i++) {
      const b = await time('beforeScorer', t);
      const a = await time('after', t);
      runs['stepscore value-head, before'].push(b);
      runs['stepscore value-head, after'].push(a);
      runs['wllama prompt'].push(await wllamaOnce(t));
      log(`run ${i + 1}/${RUNS}: ${Object.entries(runs).map(([k, v]) => `${k} ${v[i].ms.toFixed(0)} ms`).join(', ')}`);
    }
    await page.evaluate(async () => {
      for (const k of ['after', 'beforeScorer', 'counter']) window[k].dispose();
      await window.wllama.exit();
      window.ggufBytes = null;
    });
    const results = {};
    for (const [k, v] of Object.entries(runs)) {
      const ms = median(v.map((r) => r.ms));
      results[k] = { tokens: v[0].tokens, ms, tokPerS: (v[0].tokens * 1000) / ms, runsMs: v.map((r) => +r.ms.toFixed(1)) };
    }
    report.models[model.key] = { label: model.label, bytes: statSync(model.path).size, results, identicalScores: identical };
    const w = results['wllama prompt'].tokPerS;
    console.log(`\n${model.label} (Chromium, 1 thread)\n`);
    console.log('| engine | tokens | median ms | tokens/s | vs wllama |');
    console.log('|---|---:|---:|---:|---:|');
    for (const [k, r] of Object.entries(results)) {
      console.log(`| ${k} | ${r.tokens} | ${r.ms.toFixed(0)} | ${r.tokPerS.toFixed(1)} | ${(r.tokPerS / w).toFixed(2)}x |`);
    }
    const b = results['stepscore value-head, before'].tokPerS;
    const a = results['stepscore value-head, after'].tokPerS;
    console.log(`\nafter / before: ${(a / b).toFixed(2)}x; identical confidence scores and token log-probs: ${identical}`);
  }
  report.machine.loadavgEnd = loadavg().map((x) => +x.toFixed(2));
  console.log(`\nload average ${report.machine.loadavgStart.join(' ')} -> ${report.machine.loadavgEnd.join(' ')}`);
  if (args.json) writeFileSync(args.json, JSON.stringify(report, null, 2));
} finally {
  await chrome.close();
  await server.close();
}
