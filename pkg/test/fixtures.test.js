// Every PRM family's tiny fixture, loaded from bytes, scored by the wasm CPU
// engine against the independent float64 reference (reference.json), the way
// the native tests do: |Δ| ≤ 1e-4 (relative for the confidence family).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { StepScorer } from 'stepscore';
import { FAMILIES, checkpointFiles, reference, tolerance } from './helpers.js';

for (const [name, family] of FAMILIES) {
  test(`${name}: score() matches the reference`, async () => {
    const ref = reference(name);
    const scorer = await StepScorer.load({ model: checkpointFiles(name), backend: 'cpu', family });
    try {
      const info = scorer.info();
      assert.equal(info.family, ref.family);
      assert.equal(info.backend, 'cpu');
      for (const [k, c] of ref.cases.entries()) {
        const got = await scorer.score({ problem: c.problem, steps: c.steps });
        assert.equal(got.tokens, c.input_ids.length, `case ${k}: tokens`);
        assert.equal(got.truncatedSteps, 0);
        assert.equal(got.stepScores.length, c.step_scores.length);
        for (const [i, want] of c.step_scores.entries()) {
          const g = got.stepScores[i];
          assert.ok(Math.abs(g - want) <= tolerance(ref.family, want), `case ${k} step ${i}: ${g} vs reference ${want}`);
        }
        if (c.mean_logprob) {
          for (const [i, s] of got.confidence.entries()) {
            assert.ok(Math.abs(s.meanLogprob - c.mean_logprob[i]) < 1e-4, `case ${k} step ${i}: mean log-prob`);
            assert.ok(Math.abs(s.minLogprob - c.min_logprob[i]) < 1e-4, `case ${k} step ${i}: min log-prob`);
            assert.ok(Math.abs(s.meanEntropy - c.mean_entropy[i]) < 1e-4, `case ${k} step ${i}: entropy`);
          }
        } else {
          assert.equal(got.confidence, undefined);
        }
      }
    } finally {
      scorer.dispose();
    }
  });

  test(`${name}: session.append and scoreMany equal full scoring`, async () => {
    const ref = reference(name);
    const scorer = await StepScorer.load({ model: checkpointFiles(name), family });
    try {
      const many = await scorer.scoreMany(ref.cases.map((c) => ({ problem: c.problem, steps: c.steps.map((text) => ({ text })) })));
      assert.equal(many.length, ref.cases.length);
      for (const [k, c] of ref.cases.entries()) {
        const full = await scorer.score({ problem: c.problem, steps: c.steps });
        assert.deepEqual(many[k], full, `case ${k}: scoreMany vs score`);
        assert.equal(await scorer.countTokens({ problem: c.problem, steps: c.steps }), c.input_ids.length, `case ${k}: countTokens`);
        const session = scorer.session(c.problem);
        for (const [i, step] of c.steps.entries()) {
          const got = await session.append(step);
          const want = full.stepScores[i];
          assert.ok(Math.abs(got - want) <= tolerance(ref.family, want), `case ${k} step ${i}: incremental ${got} vs full ${want}`);
        }
        assert.deepEqual(session.steps, c.steps);
        assert.equal(session.scores.length, c.steps.length);
        // Each token runs about once (the native bound: total + 3 per step).
        const { computed } = session.tokens;
        assert.ok(computed <= c.input_ids.length + 3 * c.steps.length, `case ${k}: ${computed} tokens computed`);
        assert.equal(session.confidence.length, ref.family === 'confidence' ? c.steps.length : 0);
        session.dispose();
      }
    } finally {
      scorer.dispose();
    }
  });

  test(`${name}: scoreCandidates equals score on each candidate, bit for bit`, async () => {
    const ref = reference(name);
    const scorer = await StepScorer.load({ model: checkpointFiles(name), family });
    try {
      const problem = ref.cases[0].problem;
      // Whole, cut short, another case's steps under this problem, and empty.
      const candidates = [ref.cases[0].steps, ref.cases[0].steps.slice(0, 1), ref.cases.at(-1).steps, []];
      const got = await scorer.scoreCandidates(problem, candidates);
      assert.equal(got.length, candidates.length);
      for (const [i, steps] of candidates.entries()) {
        const want = steps.length ? (await scorer.score({ problem, steps })).stepScores : [];
        assert.deepEqual(got[i], want, `candidate ${i}`);
      }
    } finally {
      scorer.dispose();
    }
  });
}

test('generative-tiny: the verifier writes its critique and each verdict scores its step', async () => {
  const ref = reference('generative-tiny');
  const scorer = await StepScorer.load({ model: checkpointFiles('generative-tiny'), backend: 'cpu', family: 'generative' });
  try {
    assert.equal(scorer.info().family, 'generative');
    for (const [k, c] of ref.cases.entries()) {
      const got = await scorer.score({ problem: c.problem, steps: c.steps });
      assert.equal(got.critique.text, c.critique, `case ${k}: critique`);
      assert.deepEqual(got.critique.verdicts, c.verdicts, `case ${k}: verdicts`);
      assert.equal(got.critique.stopReason, c.stop_reason, `case ${k}: stop`);
      for (const [i, want] of c.step_scores.entries()) {
        if (want === null) assert.equal(got.stepScores[i], null, `case ${k} step ${i}`);
        else assert.ok(Math.abs(got.stepScores[i] - want) <= 1e-4, `case ${k} step ${i}: ${got.stepScores[i]} vs ${want}`);
      }
    }
  } finally {
    scorer.dispose();
  }
});

test('outcome-tiny: one score for the whole solution, on its last step, and its logit', async () => {
  const ref = reference('outcome-tiny');
  const scorer = await StepScorer.load({ model: checkpointFiles('outcome-tiny'), backend: 'cpu' });
  try {
    assert.equal(scorer.info().family, 'outcome');
    for (const [k, c] of ref.cases.entries()) {
      const got = await scorer.score({ problem: c.problem, steps: c.steps });
      const n = c.steps.length;
      assert.equal(got.tokens, c.input_ids.length, `case ${k}: tokens`);
      assert.deepEqual(got.stepScores.slice(0, n - 1), Array(n - 1).fill(null), `case ${k}`);
      const want = c.step_scores[n - 1];
      assert.ok(Math.abs(got.stepScores[n - 1] - want) <= 1e-4, `case ${k}: ${got.stepScores[n - 1]} vs ${want}`);
      assert.ok(Math.abs(got.outcomeLogit - c.logit) <= 1e-4, `case ${k}: logit ${got.outcomeLogit} vs ${c.logit}`);
      // The package's helpers read the one score where the core puts it.
      assert.equal(scorer.firstError(got.stepScores, 1), n - 1);
    }
  } finally {
    scorer.dispose();
  }
});
