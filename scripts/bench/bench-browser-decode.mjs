#!/usr/bin/env node
// Decode speed in headless Debian Chromium: tokens/s of single-token steps
// after a 256-token prompt, stepscore's CPU-wasm engine (`scorer.generate`,
// worker mode, the threaded build) against wllama (llama.cpp compiled to
// wasm, its multi-thread build) on the same GGUF bytes, the same prompt
// text and the same thread count (default 2), in one cross-origin isolated
// page. A benchmark, not a test.
//
// Both write greedily (temperature 0) and are timed the same way, on the
// page, from the arrival of the first generated token to that of the last:
// (tokens - 1) single-token forward passes over a growing KV cache (the
// first token comes from the prompt's own pass). stepscore streams tokens
// from its worker (the package's async iterator); wllama streams chunks
// from its worker (`stream: true`); wllama's own `timings.predicted_per_second`
// is reported beside it. The end-of-turn token is ignored on both sides
// (`chat: false` on a plain-text prompt; wllama `ignore_eos`), and the run
// checks that each wrote the tokens asked for. The engines are interleaved,
// `--runs` times (median reported), after a warm-up.
//
// Usage: node scripts/bench/bench-browser-decode.mjs [--tokens 64] [--threads 2] [--runs 3] [--json out.json]
// Needs: pkg/dist (scripts/build-wasm.sh), pkg/node_modules (npm ci in pkg/),
// /usr/bin/chromium, and SmolLM2 in stepscore's cache (`stepscore fetch stepscore-prm-smollm2`).

import { existsSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { cacheDir, openPage, startServer } from '../../pkg/test/browser/harness.mjs';

const FILE = 'SmolLM2-135M-Instruct.Q4_1.gguf';
const PROMPT_TOKENS = 256;

const { values: args } = parseArgs({
  options: {
    tokens: { type: 'string', default: '64' },
    threads: { type: 'string', default: '2' },
    runs: { type: 'string', default: '3' },
    json: { type: 'string' },
  },
});
const TOKENS = Math.max(8, Number(args.tokens));
const THREADS = Math.max(1, Number(args.threads));
const RUNS = Math.max(1, Number(args.runs));
const path = join(cacheDir(), FILE);
if (!existsSync(path)) {
  console.error(`bench-browser-decode: ${path} is missing (run \`stepscore fetch stepscore-prm-smollm2\`)`);
  process.exit(2);
}
const log = (m) => console.error(`# ${m}`);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** Plain text that a small model continues without ending its turn. */
function promptText(lines) {
  const out = ['Inventory list of the warehouse, one item per line:'];
  for (let i = 1; i <= lines; i++) out.push(`${i}. Box ${i} holds ${(i * 37) % 91} red pencils and ${(i * 11) % 23} blue pens.`);
  return out.join('\n');
}

const server = await startServer({ isolate: true });
const chrome = await openPage(server);
const { page } = chrome;
const report = { date: new Date().toISOString(), machine: { cpus: cpus()[0]?.model, cores: availableParallelism() }, threads: THREADS, tokens: TOKENS, runs: RUNS };

try {
  const env = await page.evaluate(() => ({ userAgent: navigator.userAgent, crossOriginIsolated }));
  report.chromium = env.userAgent;
  log(`Chromium: ${env.userAgent}; crossOriginIsolated=${env.crossOriginIsolated}`);
  if (!env.crossOriginIsolated) throw new Error('the page is not cross-origin isolated: wasm threads are off');

  const infos = await page.evaluate(
    async ({ url, threads }) => {
      const s = window.stepscore;
      const bytes = new Uint8Array(await (await fetch(url)).arrayBuffer());
      // The confidence family keeps the LM head: the model generates.
      window.gen = await s.StepScorer.load({ model: bytes, family: 'confidence', backend: 'cpu', worker: true, threads });
      const { Wllama } = await import('/wllama/index.js');
      const quiet = { debug() {}, log() {}, warn() {}, error: console.error };
      window.wl = new Wllama({ default: '/wllama/wasm/wllama.wasm' }, { suppressNativeLog: true, logger: quiet });
      await window.wl.loadModel([new Blob([bytes])], { n_ctx: 1024, n_batch: 512, n_ubatch: 512, n_threads: threads });
      const i = window.gen.info();
      return { stepscore: { build: i.build, threads: i.threads, backend: i.backend }, wllama: { multithread: window.wl.isMultithread(), threads: window.wl.getNumThreads() } };
    },
    { url: `${server.url}/cache/${FILE}`, threads: THREADS },
  );
  log(`engines: ${JSON.stringify(infos)}`);
  if (THREADS > 1 && (infos.stepscore.build !== 'threads' || !infos.wllama.multithread)) throw new Error('an engine did not start its multi-thread build');
  report.engines = infos;

  // Lines added until the prompt is 256 tokens for stepscore's tokenizer
  // (its promptTokens; the same text for wllama, which reports its own count).
  const promptTokens = (text) =>
    page.evaluate(async (text) => (await window.gen.generate(text, { chat: false, maxNewTokens: 1, sampling: { temperature: 0 } }).result()).promptTokens, text);
  let lines = 1;
  while ((await promptTokens(promptText(lines + 1))) <= PROMPT_TOKENS) lines++;
  let prompt = promptText(lines);
  const words = ['Checked', 'by', 'the', 'night', 'shift', 'on', 'Monday', 'and', 'stored', 'in', 'aisle', 'four'];
  for (let pad = 0; (await promptTokens(prompt)) < PROMPT_TOKENS && pad < 64; pad++) prompt += ` ${words[pad % words.length]}`;
  report.promptTokens = await promptTokens(prompt);
  log(`prompt: ${report.promptTokens} tokens (stepscore's count)`);

  const stepscoreRun = (n) =>
    page.evaluate(
      async ({ prompt, n }) => {
        const times = [];
        const g = window.gen.generate(prompt, { chat: false, maxNewTokens: n, sampling: { temperature: 0 } });
        for await (const _ of g) times.push(performance.now());
        const r = await g.result();
        return { tokens: times.length, ms: times[times.length - 1] - times[0], stopReason: r.stopReason, promptTokens: r.promptTokens, text: r.text.slice(0, 80) };
      },
      { prompt, n },
    );
  const wllamaRun = (n) =>
    page.evaluate(
      async ({ prompt, n }) => {
        const times = [];
        let last = null;
        const stream = await window.wl.createCompletion({ prompt, max_tokens: n, temperature: 0, ignore_eos: true, cache_prompt: false, stream: true });
        // A chunk with text per token; the last one may only close the stream.
        for await (const chunk of stream) {
          if ((chunk.choices?.[0]?.text ?? chunk.content ?? '') !== '') times.push(performance.now());
          last = chunk;
        }
        return { tokens: last?.timings?.predicted_n ?? times.length, chunks: times.length, ms: times[times.length - 1] - times[0], ownPerSecond: last?.timings?.predicted_per_second ?? null, promptTokens: last?.timings?.prompt_n ?? null };
      },
      { prompt, n },
    );

  log('warm-up');
  await stepscoreRun(8);
  await wllamaRun(8);
  const runs = { stepscore: [], wllama: [] };
  for (let i = 0; i < RUNS; i++) {
    runs.stepscore.push(await stepscoreRun(TOKENS));
    runs.wllama.push(await wllamaRun(TOKENS));
    log(`run ${i + 1}/${RUNS}: stepscore ${JSON.stringify(runs.stepscore[i])}; wllama ${JSON.stringify(runs.wllama[i])} (load ${loadavg()[0].toFixed(2)})`);
  }
  const perSecond = (r, steps) => (steps * 1000) / r.ms;
  const s = runs.stepscore.map((r) => perSecond(r, r.tokens - 1));
  const w = runs.wllama.map((r) => perSecond(r, r.chunks - 1));
  for (const r of runs.stepscore) if (r.tokens !== TOKENS) throw new Error(`stepscore wrote ${r.tokens} tokens (${r.stopReason}), not ${TOKENS}`);
  for (const r of runs.wllama) if (r.chunks !== TOKENS || r.tokens !== TOKENS) log(`note: wllama streamed ${r.chunks} chunks with text for ${r.tokens} tokens (asked: ${TOKENS})`);
  report.results = {
    stepscore: { tokPerS: median(s), runs: s.map((x) => +x.toFixed(1)) },
    wllama: { tokPerS: median(w), runs: w.map((x) => +x.toFixed(1)), ownPredictedPerSecond: median(runs.wllama.map((r) => r.ownPerSecond ?? NaN)) },
  };
  report.ratio = +(report.results.stepscore.tokPerS / report.results.wllama.tokPerS).toFixed(3);
  report.loadavg = loadavg().map((x) => +x.toFixed(2));
  await page.evaluate(async () => {
    window.gen.dispose();
    await window.wl.exit();
  });
} finally {
  await chrome.close();
  await server.close();
}

console.log(`\nSmolLM2-135M-Instruct Q4_1, decode after a ${report.promptTokens}-token prompt, ${THREADS} threads, ${TOKENS} tokens, median of ${RUNS} (CPU: ${report.machine.cpus}; load after: ${report.loadavg.join(' ')})\n`);
console.log('| engine | tokens/s (page clock) | runs |');
console.log('|---|---:|---|');
console.log(`| stepscore generate (worker, ${report.engines.stepscore.build} wasm build) | ${report.results.stepscore.tokPerS.toFixed(1)} | ${report.results.stepscore.runs.join(', ')} |`);
console.log(`| wllama createCompletion (${report.engines.wllama.multithread ? 'multi' : 'single'}-thread wasm build) | ${report.results.wllama.tokPerS.toFixed(1)} | ${report.results.wllama.runs.join(', ')} (its own timings: ${report.results.wllama.ownPredictedPerSecond?.toFixed(1)}) |`);
console.log(`\nstepscore / wllama: ${report.ratio.toFixed(2)}x`);
if (args.json) writeFileSync(args.json, JSON.stringify(report, null, 2));
