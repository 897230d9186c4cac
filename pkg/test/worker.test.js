// Worker mode (worker_threads under Node): the same API as the in-thread
// engine, the same numbers, error codes kept across the boundary, progress
// and abort across it, and dispose ending the worker.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { StepScorer } from 'stepscore';
import { checkpointFiles, reference, rejectsWith, startServer } from './helpers.js';

let server;
before(async () => {
  server = await startServer();
});
after(async () => {
  await server.close();
});

const SKYWORK = 'skywork-prm-tiny';

test('worker mode scores, sessions and info like the in-thread engine', async () => {
  const ref = reference(SKYWORK);
  const events = [];
  const remote = await StepScorer.load({ model: `${server.url}/fixtures/${SKYWORK}`, worker: true, onProgress: (p) => events.push(p) });
  const local = await StepScorer.load({ model: checkpointFiles(SKYWORK) });
  try {
    const info = remote.info();
    assert.equal(info.worker, true);
    assert.equal(local.info().worker, false);
    assert.equal(info.family, 'value-head');
    assert.ok(info.wasmMemoryBytes > info.modelBytes, 'memory of the worker instance is reported');
    assert.ok(events.some((e) => e.phase === 'download' && e.file === 'model.safetensors' && e.loaded === e.total));
    assert.deepEqual(events[events.length - 1], { phase: 'load', file: null, loaded: 0, total: null });

    const traces = ref.cases.map((c) => ({ problem: c.problem, steps: c.steps }));
    for (const t of traces) assert.deepEqual(await remote.score(t), await local.score(t));
    for (const t of traces) assert.equal(await remote.countTokens(t), await local.countTokens(t));
    await rejectsWith(assert, remote.countTokens({ problem: 'p' }), 'TRACE_INVALID');
    assert.deepEqual(await remote.scoreMany(traces), await local.scoreMany(traces));
    const candidates = traces.map((t) => t.steps);
    assert.deepEqual(await remote.scoreCandidates(traces[0].problem, candidates), await local.scoreCandidates(traces[0].problem, candidates));

    const c = ref.cases[0];
    const full = await local.score({ problem: c.problem, steps: c.steps });
    const session = remote.session(c.problem);
    assert.deepEqual(session.scores, []);
    // Appends sent back to back keep their order.
    const scores = await Promise.all(c.steps.map((s) => session.append(s)));
    for (const [i, s] of scores.entries()) assert.ok(Math.abs(s - full.stepScores[i]) <= 1e-4, `step ${i}: ${s} vs ${full.stepScores[i]}`);
    assert.deepEqual(session.steps, c.steps);
    assert.deepEqual(session.scores, scores);
    assert.ok(session.tokens.computed > 0);
    session.dispose();
    await rejectsWith(assert, session.append('more'), 'DISPOSED');
  } finally {
    remote.dispose();
    local.dispose();
  }
});

test('worker mode keeps error codes and rejects pending calls on dispose', async () => {
  await rejectsWith(assert, StepScorer.load({ model: `${server.url}/fixtures/missing.gguf`, worker: true }), 'FETCH_FAILED', /missing\.gguf: HTTP 404/);
  await rejectsWith(assert, StepScorer.load({ model: new Uint8Array([0x47, 0x47, 0x55, 0x46, 3, 0, 0, 0, 1]), worker: true }), 'MODEL_INVALID');
  await rejectsWith(assert, StepScorer.load({ model: checkpointFiles(SKYWORK), worker: 'file:///nonexistent/worker.js' }), 'INTERNAL', /worker/);
  await rejectsWith(assert, StepScorer.load({ model: checkpointFiles(SKYWORK), worker: 7 }), 'INVALID_ARGUMENT', /`worker`/);

  const scorer = await StepScorer.load({ model: checkpointFiles(SKYWORK), worker: true, maxTokens: 24 });
  await rejectsWith(assert, scorer.score({ steps: ['a'] }), 'TRACE_INVALID', /missing field `problem`/);
  await rejectsWith(assert, scorer.score({ problem: 'p', steps: [() => 1] }), 'TRACE_INVALID', /cannot be sent to the worker/);
  await rejectsWith(assert, scorer.score({ problem: 'What is 2 + 3?', steps: ['2 + 3 = 5, because two plus three is five.', 'So the answer is 5, as we computed above.'] }), 'TRACE_TOO_LONG');
  assert.throws(() => scorer.session(3), (e) => e.code === 'TRACE_INVALID');
  const pending = scorer.score({ problem: 'p', steps: ['a'] });
  scorer.dispose();
  await rejectsWith(assert, pending, 'DISPOSED');
  await rejectsWith(assert, scorer.score({ problem: 'p', steps: ['a'] }), 'DISPOSED');
});

test('aborting a worker load rejects with ABORTED mid-download', async () => {
  const early = new AbortController();
  early.abort(new Error('user left'));
  await rejectsWith(assert, StepScorer.load({ model: `${server.url}/fixtures/${SKYWORK}`, worker: true, signal: early.signal }), 'ABORTED', /user left/);

  const mid = new AbortController();
  let sawBytes = 0;
  const load = StepScorer.load({
    model: `${server.url}/slow/fixtures/${SKYWORK}/`,
    worker: true,
    signal: mid.signal,
    onProgress: (p) => {
      if (p.file === 'model.safetensors' && p.loaded > 0 && !sawBytes) {
        sawBytes = p.loaded;
        mid.abort(new Error('stop now'));
      }
    },
  });
  await rejectsWith(assert, load, 'ABORTED', /stop now/);
  assert.ok(sawBytes > 0 && sawBytes < 129356, `aborted mid-body after ${sawBytes} bytes`);
});
