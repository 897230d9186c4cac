// An external generator verified in the same Chromium page: wllama
// (@wllama/wllama, llama.cpp compiled to wasm) writes an answer with
// SmolLM2-135M-Instruct through its OpenAI-compatible
// `createChatCompletion({ stream: true })`, and `scorer.verifyStream` scores
// each step the moment it completes (SmolLM2 with the fast PRM's head, in a
// stepscore worker). Checked: the steps put together are the text
// wllama wrote, each step's score equals scoring the finished steps with
// score() in the same page, and a step below the threshold stops the
// verification, returns the chunk iterator and (through the AbortSignal the
// page passes to wllama) stops wllama before its token limit.
// Skipped when SmolLM2 is not in the model cache.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { inPage, openPage, smollm2Path, startServer, value } from './harness.mjs';

const GGUF = smollm2Path();
const skip = existsSync(GGUF) ? false : `${GGUF} is missing (run \`stepscore fetch stepscore-prm-smollm2\`)`;
if (skip) console.log(`# SKIPPED wllama stream test: ${skip}`);

const HEAD = new URL('../../../models/smollm2-135m-real-errors-head.safetensors', import.meta.url);
const PROBLEM = 'Tom has 3 apples and buys 5 more. Then he gives 2 away. How many apples does he have? Think step by step.';

let server;
let chrome;
before(async () => {
  if (skip) return;
  server = await startServer();
  server.put('head.safetensors', readFileSync(HEAD));
  chrome = await openPage(server);
});
after(async () => {
  await chrome?.close();
  await server?.close();
});

test('wllama writes, stepscore verifies each step as it completes', { skip, timeout: 300_000 }, async () => {
  const got = value(
    await inPage(
      chrome.page,
      async (s, { base, problem }) => {
        const { Wllama } = await import('/wllama/index.js');
        const quiet = { debug() {}, log() {}, info() {}, warn() {}, error: console.error };
        const wllama = new Wllama({ default: '/wllama/wasm/wllama.wasm' }, { suppressNativeLog: true, logger: quiet });
        const gguf = await (await fetch(`${base}/smollm2.gguf`)).blob();
        await wllama.loadModel([gguf], { n_ctx: 1024, n_threads: 1 });
        const scorer = await s.StepScorer.load({ model: `${base}/smollm2.gguf`, head: `${base}/mem/head.safetensors`, worker: true, cache: false });
        // wllama's chunks, recorded on their way to the verifier; `returned`
        // says whether the verifier let go of the iterator.
        const run = async (threshold, maxTokens) => {
          const controller = new AbortController();
          const stream = await wllama.createChatCompletion({
            messages: [{ role: 'user', content: problem }],
            stream: true,
            max_tokens: maxTokens,
            temperature: 0,
            abortSignal: controller.signal,
          });
          const seen = { chunks: 0, content: '', returned: false };
          async function* recorded() {
            try {
              for await (const chunk of stream) {
                seen.chunks++;
                seen.content += chunk.choices?.[0]?.delta?.content ?? '';
                yield chunk;
              }
            } finally {
              seen.returned = true;
            }
          }
          const events = [];
          for await (const event of scorer.verifyStream(problem, recorded(), { threshold })) {
            events.push(event);
            // What an app does on `stopped`: stop the generator too.
            if (event.event === 'stopped') controller.abort();
          }
          return { events, seen };
        };
        try {
          const full = await run(null, 160);
          const steps = full.events.filter((e) => e.event === 'step');
          const whole = await scorer.score({ problem, steps: steps.map((e) => e.text) });
          const stopped = await run(0.999, 160);
          return { full, whole, stopped, info: scorer.info() };
        } finally {
          scorer.dispose();
          await wllama.exit();
        }
      },
      { base: server.url, problem: PROBLEM },
    ),
  );
  const steps = got.full.events.filter((e) => e.event === 'step');
  const text = got.full.events.filter((e) => e.event === 'text').map((e) => e.text).join('');
  console.log(`# wllama wrote ${got.full.seen.chunks} chunks, ${steps.length} steps scored: ${steps.map((s) => s.score.toFixed(3)).join(', ')}`);
  assert.equal(got.info.worker, true);
  assert.ok(steps.length >= 2, `${steps.length} steps from: ${JSON.stringify(got.full.seen.content)}`);
  assert.equal(text, got.full.seen.content, 'the verifier saw exactly what wllama wrote');
  assert.equal(got.full.events.at(-1).event, 'finished');
  assert.deepEqual(
    steps.map((s) => s.score),
    got.whole.stepScores,
    'each score as it streamed equals scoring the finished steps',
  );

  const stopped = got.stopped.events;
  assert.equal(stopped.at(-1).event, 'stopped');
  assert.equal(stopped.at(-1).step, 0);
  assert.equal(stopped.filter((e) => e.event === 'step').length, 1);
  assert.ok(got.stopped.seen.returned, 'the chunk iterator was returned');
  assert.ok(got.stopped.seen.chunks < got.full.seen.chunks, `wllama stopped early: ${got.stopped.seen.chunks} of ${got.full.seen.chunks} chunks`);
});
