#!/usr/bin/env node
// Tokens/s in headless Debian Chromium: stepscore's CPU-wasm engine against
// wllama (llama.cpp compiled to wasm, npm @wllama/wllama) on the same GGUF
// bytes and the same 512-token text, for each model asked for, on 1 thread
// and on `--threads` threads (default 2). One page, served with COOP/COEP
// (cross-origin isolated), so both sides can use wasm threads:
//   stepscore  worker mode (`worker: true`): `threads: N` runs the threaded
//              build (atomics, shared memory, a pool of Web Workers),
//              `threads: 1` the single-thread build (info() says which);
//   wllama     its own worker; `n_threads: N` runs its multi-thread build
//              (pthreads over Web Workers), `n_threads: 1` the single one.
// What each side computes over the 512 tokens:
//   stepscore value-head   the backbone + a (zero) value head at each step
//                          marker: a value-head PRM's work, no vocabulary
//                          projection;
//   stepscore default PRM  (qwen1.5b only) the shipped digit head, as the
//                          demo runs it: the backbone + every step token's
//                          full-vocabulary logits for its statistics;
//   wllama prompt          llama.cpp's prompt processing: the backbone + the
//                          logits of the last token (its own timings.prompt_ms).
// `--webgpu` adds stepscore's WebGPU engine (on headless Chromium without a
// GPU: SwiftShader, the kernels on the CPU) for the first model.
// Each engine is warmed up on a short input, then timed `--runs` times
// (default 1; the median is reported), the engines interleaved so that other
// load on the machine slows them alike.
//
// Usage: node scripts/bench/bench-browser.mjs [--models smollm2,qwen0.5b,qwen1.5b] [--threads 2] [--runs N] [--webgpu] [--json out.json]
// Needs: pkg/dist (scripts/build-wasm.sh), pkg/node_modules (npm ci in pkg/),
// /usr/bin/chromium, and the models in stepscore's cache
// (`stepscore fetch stepscore-prm-smollm2 qwen2.5-coder-0.5b stepscore-prm-qwen1.5b`).

import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { cacheDir, openPage, startServer } from '../../pkg/test/browser/harness.mjs';

const MODELS = {
  smollm2: { file: 'SmolLM2-135M-Instruct.Q4_1.gguf', label: 'SmolLM2-135M-Instruct Q4_1', fetch: 'stepscore-prm-smollm2' },
  'qwen0.5b': { file: 'Qwen2.5-Coder-0.5B-Instruct.gguf', label: 'Qwen2.5-Coder-0.5B-Instruct (Q5_0/Q8_0/Q6_K/Q4_K)', fetch: 'qwen2.5-coder-0.5b' },
  // The default PRM's backbone; its shipped digit head adds a row (`prmHead`).
  'qwen1.5b': {
    file: 'Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf',
    label: 'Qwen2.5-Coder-1.5B-Instruct Q4_K_M (the default PRM)',
    fetch: 'stepscore-prm-qwen1.5b',
    prmHead: 'qwen2.5-coder-1.5b-digit-head.safetensors',
  },
};
const HEADS = fileURLToPath(new URL('../../crates/stepscore/models/', import.meta.url));

const { values: args } = parseArgs({
  options: {
    models: { type: 'string', default: 'smollm2,qwen0.5b' },
    threads: { type: 'string', default: '2' },
    runs: { type: 'string', default: '1' },
    webgpu: { type: 'boolean', default: false },
    json: { type: 'string' },
  },
});
const RUNS = Math.max(1, Number(args.runs));
const THREADS = Math.max(2, Number(args.threads));
const models = args.models.split(',').map((m) => {
  const spec = MODELS[m.trim()];
  if (!spec) {
    console.error(`bench-browser: unknown model '${m}' (known: ${Object.keys(MODELS).join(', ')})`);
    process.exit(2);
  }
  const path = join(cacheDir(), spec.file);
  if (!existsSync(path)) {
    console.error(`bench-browser: ${path} is missing (run \`stepscore fetch ${spec.fetch}\`)`);
    process.exit(2);
  }
  return { key: m.trim(), ...spec, path };
});

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

const server = await startServer({ isolate: true });
const chrome = await openPage(server);
const { page } = chrome;
const log = (m) => console.error(`# ${m}`);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const env = await page.evaluate(() => ({ userAgent: navigator.userAgent, hardwareConcurrency: navigator.hardwareConcurrency, crossOriginIsolated }));
log(`Chromium: ${env.userAgent}; crossOriginIsolated=${env.crossOriginIsolated}; hardwareConcurrency=${env.hardwareConcurrency}`);
if (!env.crossOriginIsolated) throw new Error('the page is not cross-origin isolated: wasm threads are off');

const report = {
  date: new Date().toISOString(),
  chromium: env.userAgent,
  machine: { cpus: cpus()[0]?.model, cores: availableParallelism(), loadavgStart: loadavg().map((x) => +x.toFixed(2)) },
  threads: THREADS,
  runs: RUNS,
  models: {},
};

try {
  for (const [mi, model] of models.entries()) {
    log(`model ${model.label}: ${model.path}`);
    const url = `${server.url}/cache/${basename(model.path)}`;
    if (model.prmHead) server.put(model.prmHead, readFileSync(join(HEADS, model.prmHead)));
    const prmHeadUrl = model.prmHead ? `${server.url}/mem/${model.prmHead}` : null;
    // Load every engine of this model: stepscore on N threads and on 1 (both
    // in worker mode), a zero value head of the model's width, wllama on N and 1.
    // A model with a shipped PRM head (the 1.1 GB default) runs lean: that
    // PRM and wllama on N threads only, as five 1.1 GB copies do not fit in
    // one tab; its token counts come from the PRM's own countTokens.
    const lean = !!model.prmHead;
    const loaded = await page.evaluate(
      async ({ url, threads, webgpu, prmHeadUrl, lean }) => {
        const s = window.stepscore;
        const bytes = new Uint8Array(await (await fetch(url)).arrayBuffer());
        window.engines = {};
        let n = null;
        if (!lean) {
          const probe = await s.StepScorer.load({ model: bytes, family: 'confidence', maxTokens: 1, threads: 1 });
          n = probe.info().hiddenSize;
          probe.dispose();
          const header = JSON.stringify({
            'v_head.summary.bias': { dtype: 'F32', shape: [1], data_offsets: [0, 4] },
            'v_head.summary.weight': { dtype: 'F32', shape: [1, n], data_offsets: [4, 4 + 4 * n] },
          });
          const padded = header + ' '.repeat((8 - (header.length % 8)) % 8);
          const head = new Uint8Array(8 + padded.length + 4 + 4 * n);
          new DataView(head.buffer).setBigUint64(0, BigInt(padded.length), true);
          head.set(new TextEncoder().encode(padded), 8);
          window.countValueHead = await s.StepScorer.load({ model: bytes, head, maxTokens: 1, threads: 1 });
          window.engines[`stepscore-${threads}`] = await s.StepScorer.load({ model: bytes, head, backend: 'cpu', worker: true, threads });
          window.engines['stepscore-1'] = await s.StepScorer.load({ model: bytes, head, backend: 'cpu', worker: true, threads: 1 });
          if (webgpu) window.engines['stepscore-webgpu'] = await s.StepScorer.load({ model: bytes, head, backend: 'webgpu' });
        }
        // The default PRM as the demo runs it: its head reads every step token's
        // full-vocabulary logits (statistics), more work than a value head.
        if (prmHeadUrl) {
          const prmHead = new Uint8Array(await (await fetch(prmHeadUrl)).arrayBuffer());
          window.engines[`prm-${threads}`] = await s.StepScorer.load({ model: bytes, head: prmHead, backend: 'cpu', worker: true, threads });
          n ??= window.engines[`prm-${threads}`].info().hiddenSize;
        }
        const { Wllama } = await import('/wllama/index.js');
        const quiet = { debug() {}, log() {}, warn() {}, error: console.error };
        window.wllamas = {};
        for (const t of lean ? [threads] : [threads, 1]) {
          const w = new Wllama({ default: '/wllama/wasm/wllama.wasm' }, { suppressNativeLog: true, logger: quiet });
          await w.loadModel([new Blob([bytes])], { n_ctx: 1024, n_batch: 512, n_ubatch: 512, n_threads: t });
          window.wllamas[`wllama-${t}`] = w;
        }
        const infos = {};
        for (const [k, e] of Object.entries(window.engines)) {
          const i = e.info();
          infos[k] = { backend: i.backend, build: i.build, threads: i.threads, buildReason: i.buildReason, adapter: i.adapter, wasmMemoryBytes: i.wasmMemoryBytes };
        }
        for (const [k, w] of Object.entries(window.wllamas)) infos[k] = { multithread: w.isMultithread(), threads: w.getNumThreads() };
        return { infos, hidden: n };
      },
      { url, threads: THREADS, webgpu: args.webgpu && mi === 0, prmHeadUrl, lean },
    );
    for (const [k, i] of Object.entries(loaded.infos)) log(`  ${k}: ${JSON.stringify(i)}`);
    const main = lean ? `prm-${THREADS}` : `stepscore-${THREADS}`;
    if (loaded.infos[main].build !== 'threads' || !loaded.infos[`wllama-${THREADS}`].multithread) {
      throw new Error('an engine did not start its multi-thread build');
    }

    // Token counts without running the model: a scorer limited to 1 token
    // rejects every trace with TRACE_TOO_LONG, whose message states the count
    // (lean: the PRM's countTokens, same value-head template).
    const count = (tr) =>
      page.evaluate(
        async ({ tr, lean, main }) => {
          if (lean) return window.engines[main].countTokens(tr);
          try {
            await window.countValueHead.score(tr);
          } catch (e) {
            const m = /the trace is (\d+) tokens/.exec(e.message);
            if (e.code === 'TRACE_TOO_LONG' && m) return Number(m[1]);
            throw e;
          }
          throw new Error('expected TRACE_TOO_LONG');
        },
        { tr, lean, main },
      );
    // The most steps that fit in 512 tokens, then words added to the problem
    // until the value-head prompt is exactly 512 tokens.
    let steps = 1;
    while ((await count(trace(steps + 1))) <= 512) steps++;
    const t = trace(steps);
    for (let pad = 0; (await count(t)) < 512 && pad < 200; pad++) t.problem += ' Thanks';
    const tokens = await count(t);
    log(`  trace: ${steps} steps, ${tokens} tokens with the value-head template`);

    // Warm-up (V8 tiers up hot wasm functions in the background).
    await page.evaluate(async () => {
      const warm = { problem: 'What is 2 + 2?', steps: ['2 + 2 = 4.'] };
      for (const e of Object.values(window.engines)) await e.score(warm);
      for (const w of Object.values(window.wllamas)) await w.createCompletion({ prompt: 'What is 2 + 2?', max_tokens: 1, temperature: 0, cache_prompt: false });
    });
    const timeStepscore = (which, tr) =>
      page.evaluate(
        async ({ which, tr }) => {
          const t0 = performance.now();
          const r = await window.engines[which].score(tr);
          return { ms: performance.now() - t0, tokens: r.tokens };
        },
        { which, tr },
      );
    // wllama on the same text: the problem, then the steps, each after a blank line.
    const timeWllama = (which, tr) =>
      page.evaluate(
        async ({ which, tr }) => {
          const prompt = [tr.problem, ...tr.steps].join('\n\n');
          const t0 = performance.now();
          const r = await window.wllamas[which].createCompletion({ prompt, max_tokens: 1, temperature: 0, cache_prompt: false });
          return { wallMs: performance.now() - t0, tokens: r.timings?.prompt_n ?? r.usage?.prompt_tokens, ms: r.timings?.prompt_ms ?? performance.now() - t0 };
        },
        { which, tr },
      );
    const rows = lean
      ? [
          [`stepscore default PRM (its head), ${THREADS} threads`, () => timeStepscore(`prm-${THREADS}`, t)],
          [`wllama prompt, ${THREADS} threads`, () => timeWllama(`wllama-${THREADS}`, t)],
        ]
      : [
          [`stepscore value-head, ${THREADS} threads`, () => timeStepscore(`stepscore-${THREADS}`, t)],
          [`wllama prompt, ${THREADS} threads`, () => timeWllama(`wllama-${THREADS}`, t)],
          ['stepscore value-head, 1 thread', () => timeStepscore('stepscore-1', t)],
          ['wllama prompt, 1 thread', () => timeWllama('wllama-1', t)],
        ];
    if (loaded.infos['stepscore-webgpu']) rows.push(['stepscore value-head, WebGPU', () => timeStepscore('stepscore-webgpu', t)]);
    const runs = Object.fromEntries(rows.map(([k]) => [k, []]));
    for (let i = 0; i < RUNS; i++) {
      for (const [k, run] of rows) {
        runs[k].push(await run());
        log(`  run ${i + 1}/${RUNS}: ${k} ${runs[k][i].ms.toFixed(0)} ms (load ${loadavg()[0].toFixed(2)})`);
      }
    }
    await page.evaluate(async () => {
      for (const e of Object.values(window.engines)) e.dispose();
      window.countValueHead?.dispose();
      for (const w of Object.values(window.wllamas)) await w.exit();
      window.engines = window.wllamas = window.countValueHead = null;
    });
    const results = {};
    for (const [k, v] of Object.entries(runs)) {
      const ms = median(v.map((r) => r.ms));
      results[k] = { tokens: v[0].tokens, ms, tokPerS: (v[0].tokens * 1000) / ms, runsMs: v.map((r) => +r.ms.toFixed(1)) };
    }
    const ratio = (a, b) => +(results[a].tokPerS / results[b].tokPerS).toFixed(3);
    report.models[model.key] = {
      label: model.label,
      file: model.path,
      bytes: statSync(model.path).size,
      hidden: loaded.hidden,
      traceSteps: steps,
      engines: loaded.infos,
      results,
      ratioThreads: ratio(lean ? `stepscore default PRM (its head), ${THREADS} threads` : `stepscore value-head, ${THREADS} threads`, `wllama prompt, ${THREADS} threads`),
      ratioOneThread: lean ? null : ratio('stepscore value-head, 1 thread', 'wllama prompt, 1 thread'),
      loadavg: loadavg().map((x) => +x.toFixed(2)),
    };
  }
} finally {
  await chrome.close();
  await server.close();
}

for (const m of Object.values(report.models)) {
  console.log(`\n${m.label} (Chromium, cross-origin isolated; load average after: ${m.loadavg.join(' ')})\n`);
  console.log('| engine | tokens | median ms | tokens/s |');
  console.log('|---|---:|---:|---:|');
  for (const [k, r] of Object.entries(m.results)) console.log(`| ${k} | ${r.tokens} | ${r.ms.toFixed(0)} | ${r.tokPerS.toFixed(1)} |`);
  const one = m.ratioOneThread === null ? '' : `, ${m.ratioOneThread.toFixed(2)}x on 1 thread`;
  console.log(`\nstepscore / wllama: ${m.ratioThreads.toFixed(2)}x on ${THREADS} threads${one}`);
}
if (args.json) writeFileSync(args.json, JSON.stringify(report, null, 2));
