// A GGUF backbone plus a value head in its own safetensors file (the trained
// default PRM's layout): loaded from bytes, a URL or a manifest, in the page
// thread or a worker. Needs SmolLM2 (skipped without it).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { StepScorer } from 'stepscore';
import { SMOLLM2, checkpointFiles, headFile, rejectsWith, startServer } from './helpers.js';

const have = existsSync(SMOLLM2);
const skip = have ? false : `${SMOLLM2} is missing (run \`stepscore fetch stepscore-prm-smollm2\`)`;
const TRACE = { problem: 'What is 12 * 3?', steps: ['12 * 3 = 36.', 'So the answer is 36.'] };
// Deterministic, non-trivial weights for SmolLM2's 576-wide hidden state.
const WEIGHTS = Array.from({ length: 576 }, (_, i) => (((i * 37) % 11) - 5) * 0.01);

let server;
let gguf;
before(async () => {
  if (!have) return;
  server = await startServer({ memory: { '/head.safetensors': headFile(WEIGHTS, -0.2) } });
  gguf = new Uint8Array(readFileSync(SMOLLM2));
});
after(async () => {
  await server?.close();
});

test('a zero-weight head scores every step sigmoid(bias); the family becomes value-head', { skip, timeout: 120_000 }, async () => {
  const head = headFile(new Array(576).fill(0), 0.7);
  const scorer = await StepScorer.load({ model: gguf, head });
  try {
    const info = scorer.info();
    assert.equal(info.family, 'value-head');
    assert.deepEqual(info.files, [
      { name: 'model.gguf', bytes: gguf.length },
      { name: 'head.safetensors', bytes: head.length },
    ]);
    const r = await scorer.score(TRACE);
    const want = 1 / (1 + Math.exp(-0.7));
    for (const s of r.stepScores) assert.ok(Math.abs(s - want) < 1e-6, `${s} vs sigmoid(0.7) = ${want}`);
    assert.equal(r.confidence, undefined);
  } finally {
    scorer.dispose();
  }
});

test('a head by URL (and through a manifest) in a worker scores like bytes in the page', { skip, timeout: 180_000 }, async () => {
  const head = headFile(WEIGHTS, -0.2);
  const local = await StepScorer.load({ model: gguf, head });
  const want = await local.score(TRACE);
  const session = local.session(TRACE.problem);
  for (const [i, step] of TRACE.steps.entries()) {
    const s = await session.append(step);
    assert.ok(Math.abs(s - want.stepScores[i]) <= 1e-4, `step ${i}: incremental ${s} vs full ${want.stepScores[i]}`);
  }
  local.dispose();
  // The scores depend on the head: sigmoid of a real dot product, not the bias alone.
  for (const s of want.stepScores) assert.ok(s > 0 && s < 1 && Math.abs(s - 1 / (1 + Math.exp(0.2))) > 1e-3, `${s}`);

  const events = [];
  const manifest = {
    version: 1,
    model: `${server.url}/smollm2.gguf`,
    head: `${server.url}/head.safetensors`,
    files: [
      { url: `${server.url}/smollm2.gguf`, size: gguf.length, sha256: createHash('sha256').update(gguf).digest('hex') },
      { url: `${server.url}/head.safetensors`, size: head.length, sha256: createHash('sha256').update(head).digest('hex') },
    ],
  };
  const remote = await StepScorer.load({ manifest, worker: true, onProgress: (e) => events.push(e) });
  try {
    assert.deepEqual(await remote.score(TRACE), want);
    assert.equal(remote.info().family, 'value-head');
    assert.ok(events.some((e) => e.file === 'smollm2.gguf' && e.loaded === gguf.length));
    assert.ok(events.some((e) => e.file === 'head.safetensors' && e.loaded === head.length));
    assert.deepEqual(remote.info().files.map((f) => f.name), ['smollm2.gguf', 'head.safetensors']);
  } finally {
    remote.dispose();
  }
});

test('bad heads are refused by name and code', { skip, timeout: 120_000 }, async () => {
  await rejectsWith(assert, StepScorer.load({ model: gguf, head: headFile([0.5, 0.5, 0.5], 0) }), 'MODEL_INVALID', /v_head\.summary\.weight.*\[1, 3\]/);
  await rejectsWith(assert, StepScorer.load({ model: gguf, head: new Blob(['not safetensors'], { type: 'x' }) }), 'MODEL_INVALID', /head\.safetensors/);
  await rejectsWith(assert, StepScorer.load({ model: gguf, head: `${server.url}/fixtures/nope.safetensors` }), 'FETCH_FAILED', /nope\.safetensors: HTTP 404/);
  await rejectsWith(assert, StepScorer.load({ model: gguf, head: 42 }), 'INVALID_ARGUMENT', /`head`/);
  await rejectsWith(assert, StepScorer.load({ model: checkpointFiles('skywork-prm-tiny'), head: headFile(WEIGHTS, 0) }), 'INVALID_ARGUMENT', /GGUF backbone/);
});
