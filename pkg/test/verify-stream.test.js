// scorer.verifyStream(): a recorded llama-cpp-python chat stream (SmolLM2
// answering a word problem, tests/fixtures/stream/) verified as SSE bytes
// (ReadableStream, Response), as chunk objects (what WebLLM and wllama hand
// over) and as plain text, in this thread and in the worker: the same steps
// in every form, each step's score equal to scoring the finished steps with
// score(); stopping below a threshold cancels the source; bad input and
// aborts are typed errors. The tiny value-head fixture scores (no download).

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { StepScorer } from 'stepscore';
import { checkpointFiles, rejectsWith } from './helpers.js';

const PROBLEM = 'Tom has 3 apples and buys 5 more. Then he gives 2 away. How many apples does he have? Think step by step.';
const SSE = readFileSync(new URL('../../tests/fixtures/stream/llama_cpp_python_smollm2.sse', import.meta.url));
const CHUNKS = SSE.toString('utf8')
  .split('\n')
  .filter((l) => l.startsWith('data: ') && l !== 'data: [DONE]')
  .map((l) => JSON.parse(l.slice('data: '.length)));
const CONTENT = CHUNKS.map((c) => c.choices[0]?.delta?.content ?? '').join('');

const scorers = [];
async function both() {
  const local = await StepScorer.load({ model: checkpointFiles('skywork-prm-tiny') });
  const remote = await StepScorer.load({ model: checkpointFiles('skywork-prm-tiny'), worker: true });
  scorers.push(local, remote);
  return [
    ['in-thread', local],
    ['worker', remote],
  ];
}
after(() => {
  for (const s of scorers) s.dispose();
});

/** The SSE bytes as a ReadableStream in `size`-byte pieces; `cancelled` says whether it was cancelled. */
function byteStream(size = 7) {
  const state = { cancelled: false };
  let at = 0;
  const stream = new ReadableStream({
    pull(controller) {
      if (at >= SSE.length) return controller.close();
      controller.enqueue(new Uint8Array(SSE.subarray(at, at + size)));
      at += size;
    },
    cancel() {
      state.cancelled = true;
    },
  });
  return [stream, state];
}

async function* chunkObjects() {
  for (const c of CHUNKS) yield structuredClone(c);
}

async function* textPieces() {
  for (let i = 0; i < CONTENT.length; i += 5) yield CONTENT.slice(i, i + 5);
}

async function collect(events) {
  const out = [];
  for await (const e of events) out.push(e);
  return out;
}

test('every source form gives the same steps, scored as score() scores them', async () => {
  for (const [where, scorer] of await both()) {
    const [stream] = byteStream();
    const events = await collect(scorer.verifyStream(PROBLEM, stream));
    const steps = events.filter((e) => e.event === 'step');
    assert.ok(steps.length >= 3, `${where}: ${steps.length} steps`);
    assert.deepEqual(
      steps.map((s) => s.step),
      steps.map((_, i) => i),
    );
    const text = events.filter((e) => e.event === 'text').map((e) => e.text).join('');
    assert.equal(text, CONTENT, where);
    const finished = events.at(-1);
    assert.equal(finished.event, 'finished', where);
    assert.equal(finished.finishReason, 'stop');
    assert.equal(finished.steps, steps.length);
    // The same steps scored at once, after the fact.
    const whole = await scorer.score({ problem: PROBLEM, steps: steps.map((s) => s.text) });
    assert.deepEqual(
      steps.map((s) => s.score),
      whole.stepScores,
      where,
    );
    // Byte spans point into the generated text.
    const bytes = Buffer.from(CONTENT, 'utf8');
    for (const s of steps) assert.ok(bytes.subarray(s.start, s.end).toString('utf8').includes(s.text.trim().slice(0, 10)));

    const stepsOf = async (source) => (await collect(scorer.verifyStream(PROBLEM, source))).filter((e) => e.event === 'step');
    assert.deepEqual(await stepsOf(new Response(byteStream(64)[0])), steps, `${where}: Response`);
    assert.deepEqual(await stepsOf(chunkObjects()), steps, `${where}: chunk objects`);
    const fromText = await stepsOf(textPieces());
    assert.deepEqual(
      fromText.map((s) => [s.text, s.score]),
      steps.map((s) => [s.text, s.score]),
      `${where}: text`,
    );
  }
});

test('a step below the threshold stops the stream and cancels the source', async () => {
  for (const [where, scorer] of await both()) {
    const [stream, state] = byteStream();
    const events = await collect(scorer.verifyStream(PROBLEM, stream, { threshold: 0.999 }));
    const last = events.at(-1);
    assert.equal(last.event, 'stopped', where);
    assert.equal(last.step, 0);
    assert.equal(last.threshold, 0.999);
    assert.equal(events.filter((e) => e.event === 'step').length, 1);
    assert.ok(state.cancelled, `${where}: the source was cancelled`);

    // An iterator is returned early, as a `break` would.
    let returned = false;
    async function* chunks() {
      try {
        yield* chunkObjects();
      } finally {
        returned = true;
      }
    }
    const again = await collect(scorer.verifyStream(PROBLEM, chunks(), { threshold: 0.999 }));
    assert.equal(again.at(-1).event, 'stopped');
    assert.ok(returned, where);
    // null never stops.
    const all = await collect(scorer.verifyStream(PROBLEM, chunkObjects(), { threshold: null }));
    assert.equal(all.at(-1).event, 'finished');
  }
});

test('an abort rejects with ABORTED and cancels the source', async () => {
  for (const [where, scorer] of await both()) {
    const controller = new AbortController();
    const [stream, state] = byteStream();
    const events = scorer.verifyStream(PROBLEM, stream, { signal: controller.signal });
    const first = await events.next();
    assert.equal(first.done, false, where);
    controller.abort();
    await rejectsWith(assert, collect(events), 'ABORTED', /stream verification/);
    assert.ok(state.cancelled, where);
  }
});

test('bad input is a typed error', async () => {
  const [[, scorer]] = await both();
  const first = (source, options) => scorer.verifyStream(PROBLEM, source, options).next();
  await rejectsWith(assert, first(byteStream()[0], { threshold: 2 }), 'INVALID_ARGUMENT', /threshold 2/);
  await rejectsWith(assert, first(byteStream()[0], { threshold: 'high' }), 'INVALID_ARGUMENT', /`threshold` must be a number/);
  await rejectsWith(assert, first(byteStream()[0], { treshold: 0.5 }), 'INVALID_ARGUMENT', /unknown option `treshold`/);
  await rejectsWith(assert, first(42), 'INVALID_ARGUMENT', /Response, a ReadableStream or an async iterable/);
  await rejectsWith(assert, first(new Response('nope', { status: 503, statusText: 'Service Unavailable' })), 'FETCH_FAILED', /HTTP 503/);
  async function* numbers() {
    yield 1;
  }
  await rejectsWith(assert, first(numbers()), 'INVALID_ARGUMENT', /chunk objects, strings or bytes/);
  // A chunk that is not one of a chat stream names what is wrong.
  async function* garbage() {
    yield { choices: 'none' };
  }
  await rejectsWith(assert, collect(scorer.verifyStream(PROBLEM, garbage())), 'INVALID_ARGUMENT', /choices/);
});
