// Per-token log-probs (`score(trace, { tokenLogprobs: true })`): spans are
// UTF-16 offsets into each step's text, so `step.slice(start, end)` works on
// text with "×", "é" and emoji (which the tiny byte-level tokenizer splits
// into several tokens each); the least likely number is found through them;
// in-thread, worker and session results agree.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { StepScorer } from 'stepscore';
import { checkpointFiles, rejectsWith } from './helpers.js';

const CONFIDENCE = 'confidence-tiny';
// Each step's only number comes after non-ASCII text: a span counted in
// bytes (or in code points, for the emoji) would miss it.
const TRACE = {
  problem: 'What is 6 × 9?',
  steps: ['é × ø = 54', '😀 so then 12.', 'Tabulé: 6×9 → 54 🙂'],
};
const NUMBERS = ['54', '12', /^(6|9|54)$/];
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function checkSpans(tokens, text, what) {
  assert.ok(tokens.length > 0, `${what}: no tokens`);
  assert.equal(tokens[0].start, 0, `${what}: the first token starts the step`);
  let start = 0;
  let covered = 0;
  for (const t of tokens) {
    assert.ok(Number.isInteger(t.start) && Number.isInteger(t.end) && t.start <= t.end, `${what}: ${JSON.stringify(t)}`);
    // In order, without gaps; tokens inside one character share its span.
    assert.ok(t.start >= start && t.start <= covered, `${what}: ${JSON.stringify(t)} after ${start}..${covered}`);
    assert.ok(t.end <= text.length, `${what}: ${JSON.stringify(t)} past ${text.length}`);
    assert.doesNotMatch(text.slice(t.start, t.end), LONE_SURROGATE, `${what}: ${JSON.stringify(t)} cuts a character`);
    assert.ok(Number.isFinite(t.logprob) && t.logprob <= 0, `${what}: log-prob ${t.logprob}`);
    assert.ok(Number.isFinite(t.entropy) && t.entropy >= 0, `${what}: entropy ${t.entropy}`);
    start = t.start;
    covered = Math.max(covered, t.end);
  }
  assert.equal(covered, text.length, `${what}: the tokens cover the step`);
}

test('token log-probs: UTF-16 spans over non-ASCII steps, their mean the confidence statistic, the least likely number', async () => {
  const scorer = await StepScorer.load({ model: checkpointFiles(CONFIDENCE), family: 'confidence' });
  try {
    const plain = await scorer.score(TRACE);
    assert.equal(plain.tokenLogprobs, undefined);
    assert.equal(plain.leastLikely, undefined);
    const r = await scorer.score(TRACE, { tokenLogprobs: true });
    assert.deepEqual(r.stepScores, plain.stepScores);
    assert.equal(r.tokenLogprobs.length, TRACE.steps.length);
    for (const [i, text] of TRACE.steps.entries()) {
      const tokens = r.tokenLogprobs[i];
      checkSpans(tokens, text, `step ${i}`);
      const mean = tokens.reduce((a, t) => a + t.logprob, 0) / tokens.length;
      assert.equal(tokens.length, r.confidence[i].tokens, `step ${i}: one entry per token`);
      assert.ok(Math.abs(mean - r.confidence[i].meanLogprob) < 1e-9, `step ${i}: mean ${mean} vs ${r.confidence[i].meanLogprob}`);
      const entropy = tokens.reduce((a, t) => a + t.entropy, 0) / tokens.length;
      assert.ok(Math.abs(entropy - r.confidence[i].meanEntropy) < 1e-6, `step ${i}: mean entropy ${entropy} vs ${r.confidence[i].meanEntropy}`);
      // The least likely digit token, widened to its number.
      const least = r.leastLikely[i];
      const shown = text.slice(least.start, least.end);
      if (typeof NUMBERS[i] === 'string') assert.equal(shown, NUMBERS[i], `step ${i}`);
      else assert.match(shown, NUMBERS[i], `step ${i}`);
      const digits = tokens.filter((t) => /^\d+$/.test(text.slice(t.start, t.end).trim()));
      const min = Math.min(...digits.map((t) => t.logprob));
      assert.equal(least.logprob, min, `step ${i}: the least likely digit token's log-prob`);
      const token = digits.find((t) => t.logprob === min);
      const piece = text.slice(token.start, token.end);
      const from = token.start + piece.length - piece.trimStart().length;
      assert.ok(least.start <= from && from + piece.trim().length <= least.end, `step ${i}: ${shown} holds its token ${piece}`);
    }

    // A session gives the same, step by step.
    const session = scorer.session(TRACE.problem);
    for (const step of TRACE.steps) await session.append(step);
    assert.equal(session.tokenLogprobs.length, TRACE.steps.length);
    for (const [i, tokens] of session.tokenLogprobs.entries()) {
      assert.deepEqual(tokens.map((t) => [t.start, t.end]), r.tokenLogprobs[i].map((t) => [t.start, t.end]), `session step ${i}`);
      tokens.forEach((t, k) => assert.ok(Math.abs(t.logprob - r.tokenLogprobs[i][k].logprob) < 1e-4, `session step ${i} token ${k}`));
      assert.deepEqual([session.leastLikely[i].start, session.leastLikely[i].end], [r.leastLikely[i].start, r.leastLikely[i].end]);
    }
    session.dispose();

    await rejectsWith(assert, scorer.score(TRACE, { tokenLogprobs: 'yes' }), 'INVALID_ARGUMENT', /tokenLogprobs/);
    await rejectsWith(assert, scorer.score(TRACE, { tokenLogProbs: true }), 'INVALID_ARGUMENT', /unknown score option `tokenLogProbs`/);
    const many = await scorer.scoreMany([TRACE, TRACE], { tokenLogprobs: true });
    assert.deepEqual(many[1], r);
  } finally {
    scorer.dispose();
  }
});

test('token log-probs: absent for a head that reads no token statistics, and the same in worker mode', async () => {
  const value = await StepScorer.load({ model: checkpointFiles('skywork-prm-tiny') });
  try {
    const r = await value.score(TRACE, { tokenLogprobs: true });
    assert.equal(r.tokenLogprobs, undefined);
    assert.equal(r.leastLikely, undefined);
    const session = value.session(TRACE.problem);
    await session.append(TRACE.steps[0]);
    assert.deepEqual(session.tokenLogprobs, []);
    assert.deepEqual(session.leastLikely, []);
  } finally {
    value.dispose();
  }
  const local = await StepScorer.load({ model: checkpointFiles(CONFIDENCE), family: 'confidence' });
  const remote = await StepScorer.load({ model: checkpointFiles(CONFIDENCE), family: 'confidence', worker: true });
  try {
    assert.deepEqual(await remote.score(TRACE, { tokenLogprobs: true }), await local.score(TRACE, { tokenLogprobs: true }));
    assert.deepEqual(await remote.scoreMany([TRACE], { tokenLogprobs: true }), await local.scoreMany([TRACE], { tokenLogprobs: true }));
    const session = remote.session(TRACE.problem);
    for (const step of TRACE.steps) await session.append(step);
    const want = await local.score(TRACE, { tokenLogprobs: true });
    assert.deepEqual(session.leastLikely.map((l) => [l.start, l.end]), want.leastLikely.map((l) => [l.start, l.end]));
    assert.equal(session.tokenLogprobs.length, TRACE.steps.length);
    await rejectsWith(assert, remote.score(TRACE, { tokenLogprobs: 1 }), 'INVALID_ARGUMENT', /tokenLogprobs/);
  } finally {
    remote.dispose();
    local.dispose();
  }
});
