// scorer.generate(): tokens as an async iterator, the result, cancellation
// (AbortSignal, `break`), options in the core's serde form with camelCase
// keys, typed errors; in this thread and in the worker, with the same tokens.
// The tiny confidence fixture (random weights, a causal LM with its LM head)
// needs no download; smollm2.test.js checks real text against the native CLI.

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { StepScorer } from 'stepscore';
import { checkpointFiles, rejectsWith } from './helpers.js';

const TINY = 'confidence-tiny';
const load = (extra = {}) => StepScorer.load({ model: checkpointFiles(TINY), family: 'confidence', ...extra });

const scorers = [];
async function both() {
  const local = await load();
  const remote = await load({ worker: true });
  scorers.push(local, remote);
  return [
    ['in-thread', local],
    ['worker', remote],
  ];
}
after(() => {
  for (const s of scorers) s.dispose();
});

async function collect(generation) {
  const tokens = [];
  for await (const t of generation) tokens.push(t);
  return tokens;
}

test('tokens stream, the result holds their ids and text, and both engines write the same', async () => {
  const options = { maxNewTokens: 12, chat: false, sampling: { temperature: 0.9, topK: 0, topP: 1, minP: 0, seed: 3 } };
  const outs = [];
  for (const [where, scorer] of await both()) {
    const generation = scorer.generate('Step 1: 2 + 2 = 4.', options);
    assert.equal(generation.stopReason, null);
    const tokens = await collect(generation);
    const result = await generation.result();
    assert.ok(tokens.length >= 1 && tokens.length <= 12, `${where}: ${tokens.length} tokens`);
    for (const t of tokens) {
      assert.ok(Number.isInteger(t.id) && typeof t.text === 'string', where);
      assert.ok(t.logprob <= 0 && Number.isFinite(t.logprob), `${where}: logprob ${t.logprob}`);
    }
    assert.deepEqual(result.tokens, tokens.map((t) => t.id), where);
    assert.equal(result.text, tokens.map((t) => t.text).join(''), where);
    assert.ok(['max-tokens', 'end-of-turn'].includes(result.stopReason), `${where}: ${result.stopReason}`);
    if (result.stopReason === 'max-tokens') assert.equal(tokens.length, 12);
    assert.ok(result.promptTokens > 0);
    assert.equal(generation.text, result.text);
    assert.equal(generation.stopReason, result.stopReason);
    outs.push(result);
  }
  assert.deepEqual(outs[0], outs[1], 'the worker writes what this thread writes');
  // The same seed again: the same tokens; result() alone drains the stream.
  const again = await scorers[0].generate('Step 1: 2 + 2 = 4.', options).result();
  assert.deepEqual(again, outs[0]);
});

test('a stop string is cut from the text and named as the stop reason', async () => {
  const [[, scorer]] = await both();
  const free = await scorer.generate('Once upon a time', { maxNewTokens: 16, chat: false, sampling: { temperature: 0 } }).result();
  // Stop at a piece of what greedy decoding writes anyway.
  const piece = free.text.slice(3, 5);
  assert.ok(piece.length === 2, `greedy text too short: ${JSON.stringify(free.text)}`);
  const cut = await scorer.generate('Once upon a time', { maxNewTokens: 16, chat: false, sampling: { temperature: 0 }, stop: [piece] }).result();
  assert.equal(cut.stopReason, 'stop-string');
  assert.equal(cut.text, free.text.slice(0, free.text.indexOf(piece)));
});

test('an abort, a break and cancel() end the stream with stop reason cancelled', async () => {
  for (const [where, scorer] of await both()) {
    const controller = new AbortController();
    const generation = scorer.generate('Once upon a time', { maxNewTokens: 400, chat: false, sampling: { temperature: 1, topK: 0, topP: 1, minP: 0, seed: 1 }, signal: controller.signal });
    let seen = 0;
    for await (const _ of generation) {
      if (++seen === 2) controller.abort(new Error('enough'));
    }
    assert.equal(generation.stopReason, 'cancelled', where);
    // In this thread the flag is read before the next token; a worker sees the message a little later.
    if (where === 'in-thread') assert.equal(seen, 2);
    assert.ok(seen < 400, `${where}: ${seen} tokens`);
    assert.equal((await generation.result()).stopReason, 'cancelled');

    const broken = scorer.generate('Once upon a time', { maxNewTokens: 400, chat: false, sampling: { temperature: 1, seed: 2, topK: 0, topP: 1, minP: 0 } });
    for await (const _ of broken) break;
    assert.equal(broken.stopReason, 'cancelled', `${where}: break`);

    // Aborted before it starts: nothing is written.
    const early = await scorer.generate('Hi', { signal: AbortSignal.abort() }).result();
    assert.deepEqual([early.stopReason, early.tokens], ['cancelled', []], where);
  }
});

test('bad options and prompts reject with typed errors naming the field as written', async () => {
  for (const [where, scorer] of await both()) {
    const first = (prompt, options) => scorer.generate(prompt, options).next();
    await rejectsWith(assert, first('x', { max_new_tokens: 3 }), 'INVALID_ARGUMENT', /unknown option `max_new_tokens` \(options are camelCase: `maxNewTokens`\)/);
    await rejectsWith(assert, first('x', { sampling: { topP: 2 } }), 'INVALID_ARGUMENT', /sampling topP = 2: must be in \(0, 1\]/);
    await rejectsWith(assert, first('x', { sampling: { topKk: 2 } }), 'INVALID_ARGUMENT', /unknown field `topKk`, expected one of .*`topK`/);
    await rejectsWith(assert, first('x', { maxNewTokens: -1 }), 'INVALID_ARGUMENT', /`maxNewTokens`: invalid value/);
    await rejectsWith(assert, first('x', { maxNewTokens: 0 }), 'INVALID_ARGUMENT', /maxNewTokens must be at least 1/);
    await rejectsWith(assert, first('x', { stop: [''] }), 'INVALID_ARGUMENT', /empty stop string/);
    await rejectsWith(assert, first('x', 'fast'), 'INVALID_ARGUMENT', /generate options must be an object, got a string/);
    await rejectsWith(assert, first(42), 'INVALID_ARGUMENT', /prompt must be a string, got number/);
    // result() rejects the same way, and again on a second call.
    const bad = scorer.generate('x', { sampling: { temperature: -1 } });
    await rejectsWith(assert, bad.result(), 'INVALID_ARGUMENT', /temperature = -1/);
    await rejectsWith(assert, bad.result(), 'INVALID_ARGUMENT', /temperature = -1/);
  }
  // A prompt that fills the context (here a 16-token limit) leaves no room to write.
  const short = await load({ maxTokens: 16 });
  scorers.push(short);
  await rejectsWith(assert, short.generate('one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen', { chat: false }).result(), 'TRACE_TOO_LONG', /over the limit of 16/);
});

test('a PRM loaded without its LM head (a score head needs none) cannot generate, and says so', async () => {
  const prm = await StepScorer.load({ model: checkpointFiles('qwen2-prm-tiny') });
  try {
    await rejectsWith(assert, prm.generate('x').result(), 'INVALID_ARGUMENT', /without its LM head/);
  } finally {
    prm.dispose();
  }
});
