// The threaded wasm build (dist/wasm-threads: atomics, shared memory, the
// core's `par` loops on a pool of worker_threads) against the single-thread
// build (dist/wasm): the same step scores, bit for bit. The core splits
// each matmul by output rows, activation quantization by blocks and
// attention by query tokens; every output value is computed whole by one
// thread with the same instructions, so the thread count cannot change a
// bit. Tolerance: 0 (deepEqual on the whole results). info() says which
// build ran and with how many threads; `threads: 1` forces the single one.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { StepScorer } from 'stepscore';
import { FAMILIES, SMOLLM2, checkpointFiles, reference, rejectsWith } from './helpers.js';

const have = existsSync(SMOLLM2);
const skip = have ? false : `${SMOLLM2} is missing (run \`stepscore fetch stepscore-prm-smollm2\`)`;
if (!have) console.log(`# SKIPPED SmolLM2 thread tests: ${skip}`);

// Long enough that every parallel site splits its work over the threads
// (a matmul splits above 2^18 multiply-adds: here 576 x 576 x ~90 tokens).
const TRACE = {
  problem: 'A shop sells 14 boxes of 12 pencils and 9 boxes of 8 pens. How many items does it sell?',
  steps: ['14 boxes of 12 pencils are 14 * 12 = 168 pencils.', '9 boxes of 8 pens are 9 * 8 = 72 pens.', 'Together that is 168 + 72 = 240 items.', 'The answer is 240.'],
};

// The first threaded load sizes the pool: 3 threads (more than this
// machine's 2 cores is fine) so that splits have uneven parts.
test('SmolLM2: the threaded build scores exactly like the single-thread build', { skip, timeout: 600_000 }, async () => {
  const bytes = new Uint8Array(readFileSync(SMOLLM2));
  const threaded = await StepScorer.load({ model: bytes, family: 'confidence', backend: 'cpu', threads: 3 });
  const single = await StepScorer.load({ model: bytes, family: 'confidence', backend: 'cpu', threads: 1 });
  try {
    const t = threaded.info();
    assert.deepEqual([t.build, t.buildReason, t.threads, t.worker], ['threads', null, 3, false]);
    const s = single.info();
    assert.deepEqual([s.build, s.threads], ['single', 1]);
    assert.match(s.buildReason, /threads: 1/);
    const options = { tokenLogprobs: true };
    const a = await threaded.score(TRACE, options);
    const b = await single.score(TRACE, options);
    assert.ok(a.tokens > 90, `${a.tokens} tokens`);
    assert.deepEqual(a, b);
    // Sessions: the KV cache path, step by step.
    const sa = threaded.session(TRACE.problem);
    const sb = single.session(TRACE.problem);
    for (const step of TRACE.steps) assert.equal(await sa.append(step), await sb.append(step));
    sa.dispose();
    sb.dispose();
    // A later load shares the pool and may use fewer of its threads.
    const two = await StepScorer.load({ model: bytes, family: 'confidence', backend: 'cpu', threads: 2 });
    try {
      assert.deepEqual([two.info().build, two.info().threads], ['threads', 2]);
      assert.deepEqual(await two.score(TRACE, options), b);
    } finally {
      two.dispose();
    }
  } finally {
    threaded.dispose();
    single.dispose();
  }
});

test('every tiny PRM family: threaded and single-thread builds agree exactly', async () => {
  for (const [name, family] of FAMILIES) {
    const traces = reference(name).cases.map((c) => ({ problem: c.problem, steps: c.steps }));
    const threaded = await StepScorer.load({ model: checkpointFiles(name), backend: 'cpu', family });
    const single = await StepScorer.load({ model: checkpointFiles(name), backend: 'cpu', family, threads: 1 });
    try {
      assert.equal(threaded.info().build, 'threads', name);
      for (const [k, t] of traces.entries()) assert.deepEqual(await threaded.score(t), await single.score(t), `${name} case ${k}`);
    } finally {
      threaded.dispose();
      single.dispose();
    }
  }
});

test('worker mode under Node runs the threaded build in its worker', { skip, timeout: 300_000 }, async () => {
  const bytes = new Uint8Array(readFileSync(SMOLLM2));
  const scorer = await StepScorer.load({ model: bytes, family: 'confidence', backend: 'cpu', worker: true, threads: 2 });
  try {
    const info = scorer.info();
    assert.deepEqual([info.build, info.threads, info.worker], ['threads', 2, true]);
    const single = await StepScorer.load({ model: bytes, family: 'confidence', backend: 'cpu', threads: 1 });
    try {
      assert.deepEqual(await scorer.score(TRACE), await single.score(TRACE));
    } finally {
      single.dispose();
    }
  } finally {
    scorer.dispose();
  }
});

test('a bad `threads` option is refused before any work', async () => {
  for (const threads of [0, -1, 1.5, '2']) {
    await rejectsWith(assert, StepScorer.load({ model: checkpointFiles(FAMILIES[0][0]), backend: 'cpu', threads }), 'INVALID_ARGUMENT', /threads/);
  }
});
