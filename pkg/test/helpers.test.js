// The model-free helpers, with values worked by hand.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { aggregate, checkArithmetic, extractAnswer, firstError, segment, selectBest, StepscoreError } from 'stepscore';

const throwsCode = (fn, code, pattern) =>
  assert.throws(fn, (e) => {
    assert.ok(e instanceof StepscoreError, `not a StepscoreError: ${e}`);
    assert.equal(e.code, code, e.message);
    if (pattern) assert.match(e.message, pattern);
    return true;
  });

test('segment splits on blank lines with UTF-16 spans', () => {
  // "é" is one UTF-16 unit, "𝑥" two (a surrogate pair): spans must count units.
  const text = 'Step 1: é = 1\n\n  Step 2: 𝑥 + 1 = 2  \n\n\nSo ✓';
  const steps = segment(text, 'blank-line');
  assert.deepEqual(
    steps.map((s) => s.text),
    ['Step 1: é = 1', 'Step 2: 𝑥 + 1 = 2', 'So ✓'],
  );
  for (const s of steps) assert.equal(text.slice(s.start, s.end), s.text);
  // 'Step 1: é = 1' is 13 units; then "\n\n  " (4): step 2 starts at 17 and is
  // 'Step 2: ' (8) + '𝑥' (2) + ' + 1 = 2' (8) = 18 units long.
  assert.deepEqual([steps[1].start, steps[1].end], [17, 35]);
  assert.deepEqual(segment(text, 'newline').length, 3);
  // The default, auto, follows the two "Step k:" markers: "So ✓" joins step 2.
  assert.deepEqual(
    segment(text).map((s) => s.text),
    ['Step 1: é = 1', 'Step 2: 𝑥 + 1 = 2  \n\n\nSo ✓'],
  );
  assert.deepEqual(segment('a\n\nb').map((s) => s.text), ['a', 'b']);
  assert.deepEqual(segment('a\nb').map((s) => s.text), ['a', 'b']);
  assert.deepEqual(segment('a; b;c', 'regex:;\\s*').map((s) => s.text), ['a', 'b', 'c']);
  const chat = segment('User: 2+2?\nAssistant: 4\nTool result (calc): 4', 'chat');
  assert.deepEqual(chat.map((s) => [s.role, s.tool ?? null, s.text]), [
    ['user', null, '2+2?'],
    ['assistant', null, '4'],
    ['tool_result', 'calc', '4'],
  ]);
  assert.deepEqual(segment(''), []);
  throwsCode(() => segment(5), 'INVALID_ARGUMENT', /text must be a string/);
  throwsCode(() => segment('a', 'paragraphs!'), 'INVALID_ARGUMENT', /unknown segmenter/);
  throwsCode(() => segment('a', 'regex:('), 'INVALID_ARGUMENT', /bad regex/);
});

test('aggregate combines step scores', () => {
  const s = [0.9, 0.5, 0.8];
  assert.equal(aggregate(s), 0.5); // min is the default
  assert.equal(aggregate(s, 'min'), 0.5);
  assert.ok(Math.abs(aggregate(s, 'prod') - 0.36) < 1e-15);
  assert.equal(aggregate(s, 'last'), 0.8);
  assert.ok(Math.abs(aggregate(s, 'mean') - 2.2 / 3) < 1e-15);
  // geometric mean: 0.36^(1/3) = 0.71137866...
  assert.ok(Math.abs(aggregate(s, 'geo_mean') - Math.cbrt(0.36)) < 1e-12);
  assert.equal(aggregate(new Float64Array(s), 'last'), 0.8);
  assert.equal(aggregate([]), null);
  // A missing score is never mistaken for a good one.
  assert.ok(Number.isNaN(aggregate([0.9, null], 'mean')));
  throwsCode(() => aggregate('0.5'), 'INVALID_ARGUMENT', /array of numbers/);
  throwsCode(() => aggregate([0.5, '0.7']), 'INVALID_ARGUMENT', /scores\[1\] must be a number/);
  throwsCode(() => aggregate([0.5], 'median'), 'INVALID_ARGUMENT', /unknown aggregation/);
  // Scores are probabilities: out-of-range values are refused, not ranked.
  throwsCode(() => aggregate([0.5, 1.5]), 'INVALID_ARGUMENT', /scores\[1\].*outside \[0, 1\]/);
  throwsCode(() => aggregate([-5, -7], 'prod'), 'INVALID_ARGUMENT', /outside \[0, 1\]/);
});

test('firstError finds the first step below the threshold', () => {
  assert.equal(firstError([0.9, 0.4, 0.2]), 1);
  assert.equal(firstError([0.9, 0.4, 0.2], 0.3), 2);
  assert.equal(firstError([0.9, 0.6]), -1);
  assert.equal(firstError([]), -1);
  assert.equal(firstError([0.9, null, 0.9]), 1);
  // One score on the last step alone (an outcome reward model's) is the
  // whole solution's, at that step, as the core lays it out.
  assert.equal(firstError([null, null, 0.2]), 2);
  assert.equal(firstError([null, null, 0.9]), -1);
  assert.equal(aggregate([null, null, 0.3], 'mean'), 0.3);
  throwsCode(() => firstError([0.9], Number.NaN), 'INVALID_ARGUMENT', /threshold/);
  throwsCode(() => firstError([0.9], 2), 'INVALID_ARGUMENT', /threshold must be a number in \[0, 1\]/);
});

test('selectBest picks best-of-N and the votes', () => {
  const candidates = [
    { id: 'a', steps: ['2 + 2 = 4', 'The answer is \\boxed{4}'], scores: [0.9, 0.8] },
    { id: 'b', steps: ['2 + 2 = 5', 'So \\boxed{5}'], scores: [0.3, 0.9] },
    { id: 'c', steps: [{ text: '4', score: 0.6 }], finalAnswer: '4' },
  ];
  const sel = selectBest(candidates);
  assert.equal(sel.aggregation, 'min');
  // min scores: a 0.8, b 0.3, c 0.6.
  assert.equal(sel.best, 0);
  assert.deepEqual(sel.candidates.map((c) => [c.id, c.answer, c.score]), [
    ['a', '4', 0.8],
    ['b', '5', 0.3],
    ['c', '4', 0.6],
  ]);
  assert.equal(sel.majority.answer, '4');
  assert.deepEqual(sel.majority.members, [0, 2]);
  assert.equal(sel.majority.count, 2);
  assert.ok(Math.abs(sel.weighted.weight - 1.4) < 1e-12);
  // By the last step, b's 0.9 is the best.
  assert.equal(selectBest(candidates, 'last').best, 1);
  assert.deepEqual(selectBest([]).best, null);
  throwsCode(() => selectBest([{ steps: ['a'] }, { steps: 'a' }]), 'TRACE_INVALID', /candidates\[1\], field `steps`: expected an array/);
  throwsCode(() => selectBest([{ steps: ['a', 'b'], scores: [1] }]), 'TRACE_INVALID', /2 steps/);
  throwsCode(() => selectBest([{ steps: ['a'], scores: [-5] }]), 'TRACE_INVALID', /scores\[0\].*outside \[0, 1\]/);
});

test('extractAnswer reads the stated answer', () => {
  assert.equal(extractAnswer('so the total is \\boxed{42}.'), '42');
  assert.equal(extractAnswer('no answer here'), null);
  throwsCode(() => extractAnswer(null), 'INVALID_ARGUMENT');
});

test('checkArithmetic reads the equations a text writes, spans in string indices', () => {
  const text = 'Weng earns 0.2 x 50 = 12 dollars; 3 + 4 = 7.';
  const [slip, ok] = checkArithmetic(text);
  assert.deepEqual([slip.left, slip.right, slip.holds, slip.leftValue, slip.rightValue], ['0.2 x 50', '12', false, '10', null]);
  assert.equal(slip.explanation, '"0.2 x 50 = 12" is false: 0.2 x 50 is 10');
  assert.equal(ok.holds, true);
  const wide = '😀 2 + 2 = 5';
  const [e] = checkArithmetic(wide);
  assert.equal(wide.slice(e.start, e.end), '2 + 2 = 5');
  assert.deepEqual(checkArithmetic('20% of 50 = 10'), []);
  throwsCode(() => checkArithmetic(null), 'INVALID_ARGUMENT');
});
