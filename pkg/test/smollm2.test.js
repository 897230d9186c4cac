// A real model: SmolLM2-135M-Instruct (GGUF Q4_1, from `stepscore fetch stepscore-prm-smollm2`)
// loaded by URL from the local server, scored with the confidence family and
// compared with the native CPU engine (itself checked against llama.cpp).
// Skipped when the file is not in ~/.cache/stepscore.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { StepScorer } from 'stepscore';
import { SMOLLM2, startServer } from './helpers.js';

const have = existsSync(SMOLLM2);
const skip = have ? false : `${SMOLLM2} is missing (run \`stepscore fetch stepscore-prm-smollm2\`)`;
if (!have) console.log(`# SKIPPED smollm2 tests: ${skip}`);

const TRACE = { problem: 'What is 12 * 3?', steps: ['12 * 3 = 36.', 'So the answer is 36.'] };
// The native engine's output for TRACE (`stepscore score -m <gguf> --output jsonl`).
const NATIVE = {
  stepScores: [0.6254452131398701, 0.10195754546058244],
  meanLogprob: [-0.4692915418163871, -2.2831987733165406],
  tokens: 30,
};
// ggml's scheme rounds activations to 8 bits before every product, so one
// last-bit difference upstream moves later roundings (0.04 nats when native
// AVX2, native portable and wasm summed in different orders). They now take
// the same float steps (quant/kernels.rs) and one e^x (quant/exp.rs), so
// wasm computes the native f32 bits; only the final f64 statistics use each
// platform's libm. Token counts exact, mean log-prob within 1e-9 nats, the
// step score (its exp) within the matching relative bound.
const LOGPROB_TOL = 1e-9;
const closeScore = (a, b) => Math.abs(a - b) <= (Math.exp(LOGPROB_TOL) - 1) * b;

let server;
before(async () => {
  if (have) server = await startServer();
});
after(async () => {
  await server?.close();
});

test('SmolLM2 GGUF by URL scores like the native engine', { skip, timeout: 300_000 }, async () => {
  let downloaded = 0;
  const scorer = await StepScorer.load({
    model: `${server.url}/smollm2.gguf`,
    // The catalog's file: without a family it would load with the catalog's head.
    family: 'confidence',
    backend: 'cpu',
    onProgress: (p) => {
      if (p.phase === 'download') downloaded = p.loaded;
    },
  });
  try {
    const info = scorer.info();
    assert.equal(downloaded, 98362432);
    assert.deepEqual([info.format, info.family, info.layers, info.hiddenSize, info.vocabSize], ['gguf', 'confidence', 30, 576, 49152]);
    assert.deepEqual(info.files, [{ name: 'smollm2.gguf', bytes: 98362432 }]);

    const got = await scorer.score(TRACE);
    assert.equal(got.tokens, NATIVE.tokens);
    for (let i = 0; i < TRACE.steps.length; i++) {
      assert.ok(closeScore(got.stepScores[i], NATIVE.stepScores[i]), `step ${i}: ${got.stepScores[i]} vs native ${NATIVE.stepScores[i]}`);
      const lp = got.confidence[i].meanLogprob;
      assert.ok(Math.abs(lp - NATIVE.meanLogprob[i]) <= LOGPROB_TOL, `step ${i}: mean log-prob ${lp} vs native ${NATIVE.meanLogprob[i]}`);
    }

    // The same check against a native binary built in this checkout, when there is one.
    const cli = join(process.env.CARGO_TARGET_DIR ?? fileURLToPath(new URL('../../target', import.meta.url)), 'debug', 'stepscore');
    if (existsSync(cli)) {
      const out = execFileSync(cli, ['score', '-m', SMOLLM2, '--output', 'jsonl'], { input: JSON.stringify(TRACE), stdio: ['pipe', 'pipe', 'ignore'] });
      const native = JSON.parse(out.toString().trim().split('\n')[0]).steps.map((s) => s.score);
      for (let i = 0; i < native.length; i++) assert.ok(closeScore(got.stepScores[i], native[i]), `step ${i}: vs live native ${native[i]}`);
    }

    const session = scorer.session(TRACE.problem);
    for (const [i, step] of TRACE.steps.entries()) {
      const s = await session.append(step);
      assert.ok(Math.abs(s - got.stepScores[i]) < 1e-4 * Math.max(1, Math.abs(s)), `step ${i}: incremental ${s} vs full ${got.stepScores[i]}`);
    }
  } finally {
    scorer.dispose();
  }
});

// The native CLI's output on the same GGUF (`stepscore generate` / `stepscore
// search --keep-all`, CPU engine): greedy text and tokens, a seeded sample,
// and a seeded beam search, which the wasm engine must reproduce exactly (the
// engines' logits are bit-identical, the sampler's arithmetic is fixed).
const NATIVE_GREEDY = {
  prompt: 'What is 12 * 3? Answer briefly.',
  promptTokens: 42,
  text: '12 * 3 = 36.',
  tokens: [33, 34, 1672, 216, 35, 446, 216, 35, 38, 30],
  stopReason: 'end-of-turn',
};
const NATIVE_SAMPLED = {
  prompt: 'Write one sentence about the sea.',
  options: { maxNewTokens: 20, sampling: { temperature: 0.8, seed: 7 } },
  text: 'The sea is a majestic and mysterious realm that has captivated people around the world for centuries.',
  tokens: [504, 3426, 314, 253, 26061, 284, 11965, 7815, 338, 553, 32525, 701, 1130, 260, 905, 327, 5034, 30],
};
const NATIVE_BEAM = {
  problem: 'What is 7 * 8 + 5?',
  options: { method: 'beam', n: 2, beamWidth: 2, maxSteps: 2, generate: { maxNewTokens: 24, sampling: { seed: 1 } } },
  texts: ['To find 7 * 8 + 5, we start with 7 * 8 = 56 and', 'To solve this problem, you need to multiply 7 by 8. 7 multiplied by 8 equals 5'],
  scores: [[0.325172001505578], [0.2148499552834562]],
  answers: ['56', '5'],
  chosen: 0,
  promptTokens: 63,
  tokensGenerated: 48,
  tokensScored: 64,
};

test('SmolLM2 generates what the native engine generates, greedy and seeded, in this thread and in the worker', { skip, timeout: 300_000 }, async () => {
  for (const worker of [false, true]) {
    const scorer = await StepScorer.load({ model: `${server.url}/smollm2.gguf`, family: 'confidence', backend: 'cpu', worker });
    try {
      const greedy = await scorer.generate(NATIVE_GREEDY.prompt, { maxNewTokens: 24, sampling: { temperature: 0 } }).result();
      assert.deepEqual(greedy, { text: NATIVE_GREEDY.text, stopReason: NATIVE_GREEDY.stopReason, tokens: NATIVE_GREEDY.tokens, promptTokens: NATIVE_GREEDY.promptTokens }, `worker: ${worker}`);
      const sampled = await scorer.generate(NATIVE_SAMPLED.prompt, NATIVE_SAMPLED.options).result();
      assert.deepEqual([sampled.text, sampled.tokens], [NATIVE_SAMPLED.text, NATIVE_SAMPLED.tokens], `worker: ${worker}`);
    } finally {
      scorer.dispose();
    }
  }
});

test('SmolLM2 beam search equals the native CLI search', { skip, timeout: 300_000 }, async () => {
  const scorer = await StepScorer.load({ model: `${server.url}/smollm2.gguf`, family: 'confidence', backend: 'cpu' });
  try {
    const r = await scorer.search(NATIVE_BEAM.problem, NATIVE_BEAM.options);
    assert.deepEqual(r.candidates.map((c) => c.text), NATIVE_BEAM.texts);
    assert.deepEqual(r.candidates.map((c) => c.answer), NATIVE_BEAM.answers);
    r.candidates.forEach((c, i) => c.scores.forEach((s, k) => assert.ok(closeScore(s, NATIVE_BEAM.scores[i][k]), `candidate ${i} step ${k}: ${s} vs native ${NATIVE_BEAM.scores[i][k]}`)));
    assert.deepEqual([r.chosen, r.promptTokens, r.tokensGenerated, r.tokensScored], [NATIVE_BEAM.chosen, NATIVE_BEAM.promptTokens, NATIVE_BEAM.tokensGenerated, NATIVE_BEAM.tokensScored]);
    assert.equal(r.selection.majority.display, '56');
  } finally {
    scorer.dispose();
  }
});
