// scorer.search(): the core's PRM-guided search with its events, in this
// thread and in the worker (the same result and events), abort, and typed
// errors for bad options. The tiny confidence fixture generates and
// verifies (random weights: the text is noise, the bookkeeping is not);
// smollm2.test.js compares a real search with the native CLI's.

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { StepScorer } from 'stepscore';
import { checkpointFiles, rejectsWith } from './helpers.js';

const TINY = 'confidence-tiny';
const load = (extra = {}) => StepScorer.load({ model: checkpointFiles(TINY), family: 'confidence', ...extra });
const scorers = [];
after(() => {
  for (const s of scorers) s.dispose();
});
async function both() {
  const local = await load();
  const remote = await load({ worker: true });
  scorers.push(local, remote);
  return [
    ['in-thread', local],
    ['worker', remote],
  ];
}

// Blank lines end steps; after this prompt the tiny model writes some with
// this seed, so beams are scored, forked and pruned.
const PROBLEM = '2 + 2 =\n\n';
const OPTIONS = { method: 'beam', n: 4, beamWidth: 2, maxSteps: 3, generate: { maxNewTokens: 16, chat: false, sampling: { seed: 4, temperature: 1.5, topK: 0, topP: 1, minP: 0 } } };

test('events tell the whole search: forks, every token, every step score, ends; the worker agrees', async () => {
  const runs = [];
  for (const [where, scorer] of await both()) {
    const events = [];
    const result = await scorer.search(PROBLEM, { ...OPTIONS, onEvent: (e) => events.push(e) });
    assert.equal(result.method, 'beam');
    assert.equal(result.cancelled, false);
    assert.ok(result.candidates.length > 4, `${where}: ${result.candidates.length} candidates`);
    assert.ok(result.candidates.some((c) => c.parent !== null), `${where}: no fork`);
    assert.ok(result.candidates.some((c) => c.pruned), `${where}: nothing pruned`);
    assert.ok(events.some((e) => e.event === 'step'), `${where}: no step scored`);
    assert.equal(events.filter((e) => e.event === 'forked').length, result.candidates.length, where);
    for (const c of result.candidates) {
      const mine = events.filter((e) => e.candidate === c.index);
      const forked = mine.find((e) => e.event === 'forked');
      assert.equal(forked.from, c.parent, `${where}: candidate ${c.index}'s parent`);
      // A fork starts with its parent's text; its own tokens follow.
      const prefix = c.parent === null ? '' : result.candidates[c.parent].text.slice(0, c.text.length - mine.filter((e) => e.event === 'token').map((e) => e.text).join('').length);
      assert.equal(prefix + mine.filter((e) => e.event === 'token').map((e) => e.text).join(''), c.text, `${where}: candidate ${c.index}'s tokens make its text`);
      const ownSteps = mine.filter((e) => e.event === 'step');
      for (const s of ownSteps) assert.equal(c.scores[s.step], s.score, `${where}: candidate ${c.index} step ${s.step}`);
      const finished = mine.find((e) => e.event === 'finished');
      // Every pruned candidate has its event: one pruned while being written
      // never finishes; a finished beam past the first N is pruned after it
      // finished (and is no finalist).
      const prunedAt = mine.findIndex((e) => e.event === 'pruned');
      assert.equal(prunedAt >= 0, c.pruned, `${where}: candidate ${c.index} pruned event`);
      if (c.pruned && finished) assert.ok(mine.indexOf(finished) < prunedAt && !c.finalist, `${where}: candidate ${c.index} finished, then pruned`);
      assert.equal(finished?.stopReason ?? null, c.stopReason, `${where}: candidate ${c.index} stop reason`);
      for (const key of ['index', 'parent', 'text', 'steps', 'scores', 'score', 'answer', 'tokens', 'stopReason', 'pruned', 'finalist']) {
        assert.ok(key in c, `${where}: candidate field ${key}`);
      }
    }
    assert.deepEqual([...result.finalists].sort((a, b) => a - b), result.candidates.filter((c) => c.finalist).map((c) => c.index));
    assert.equal(result.selection.best, result.chosen, 'the method picks the best aggregate');
    assert.equal(result.selection.aggregation, 'min');
    assert.equal(result.tokensGenerated, events.filter((e) => e.event === 'token').length, where);
    assert.ok(result.promptTokens > 0 && result.tokensScored > 0);
    runs.push({ result, events });
  }
  assert.deepEqual(runs[1], runs[0], 'the worker searches as this thread does');
});

test('a token budget stops every candidate where it is', async () => {
  const [[, scorer]] = await both();
  const result = await scorer.search('2 + 2 =', { ...OPTIONS, method: 'best-of-n', n: 3, tokenBudget: 7 });
  assert.equal(result.tokensGenerated, 7);
  assert.equal(result.budgetExhausted, true);
  assert.ok(result.candidates.some((c) => c.stopReason === 'budget'));
});

test('an abort rejects at once and stops the search; an exception in onEvent rejects with it', async () => {
  for (const [where, scorer] of await both()) {
    const controller = new AbortController();
    let after = 0;
    const aborted = scorer.search('2 + 2 =', {
      ...OPTIONS,
      signal: controller.signal,
      onEvent: (e) => {
        if (controller.signal.aborted) after++;
        if (e.event === 'token') controller.abort(new Error('seen enough'));
      },
    });
    await rejectsWith(assert, aborted, 'ABORTED', /the search was aborted: seen enough/);
    assert.equal(after, 0, `${where}: no event reaches onEvent after the abort`);
    // The engine is free again at once (the worker read the shared stop flag).
    const next = await scorer.search('2 + 2 =', { ...OPTIONS, method: 'best-of-n', n: 1 });
    assert.equal(next.cancelled, false);

    const boom = new Error('boom');
    const thrown = scorer.search('2 + 2 =', { ...OPTIONS, onEvent: () => { throw boom; } });
    await assert.rejects(thrown, (e) => e === boom, where);
    await rejectsWith(assert, scorer.search('2 + 2 =', { signal: AbortSignal.abort() }), 'ABORTED');
  }
});

test('bad options reject with INVALID_ARGUMENT naming the field as written', async () => {
  for (const [where, scorer] of await both()) {
    const cases = [
      [{ n: 0 }, /n = 0: must be 1 to 256/],
      [{ method: 'beam', n: 3, beamWidth: 2 }, /beamWidth = 2 with n = 3: n must be a positive multiple of beamWidth/],
      [{ tokenBudget: 0 }, /tokenBudget must be at least 1/],
      [{ method: 'greedy' }, /`method`: unknown variant `greedy`, expected one of `best-of-n`, `beam`, `dvts`/],
      [{ beam_width: 2 }, /options are camelCase: `beamWidth`/],
      [{ generate: { sampling: { minP: 1 } } }, /sampling minP = 1/],
      [{ onEvent: 'log' }, /`onEvent` must be a function/],
      [{ verifier: {} }, /`verifier` must be a StepScorer/],
    ];
    for (const [options, message] of cases) {
      await rejectsWith(assert, scorer.search('2 + 2 =', options), 'INVALID_ARGUMENT', message);
    }
    await rejectsWith(assert, scorer.search(7), 'INVALID_ARGUMENT', /problem must be a string/);
    void where;
  }
});

test('a second scorer in this thread can verify; a worker takes only itself', async () => {
  const [[, local], [, remote]] = await both();
  const verifier = await load();
  scorers.push(verifier);
  const withOther = await local.search('2 + 2 =', { ...OPTIONS, verifier });
  const alone = await local.search('2 + 2 =', OPTIONS);
  // The same weights verify: the same search.
  assert.deepEqual(withOther, alone);
  await rejectsWith(assert, remote.search('2 + 2 =', { verifier }), 'INVALID_ARGUMENT', /in worker mode the verifier must be the generator itself/);
  await rejectsWith(assert, local.search('2 + 2 =', { verifier: remote }), 'INVALID_ARGUMENT', /the verifier must run where the generator runs/);
});
