// What a user without Rust meets first (issue 22): the package imports
// without running anything, `TraceInput` shapes are what the core reads,
// local paths in Node, catalog names (unknown ones list the catalog), the
// head's shipped threshold, and AbortSignal on the scoring calls.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { existsSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { StepScorer, catalog, readTraces } from 'stepscore';
import { FIXTURES, SMOLLM2, checkpointFiles, rejectsWith } from './helpers.js';
import { CHAT_ROLES, TRACE_INPUTS } from './trace-inputs.js';

test('importing runs no top-level await: require() works and the browser entry waits for ready()', async () => {
  // Node refuses to require() an ES module graph with top-level await (ERR_REQUIRE_ASYNC_MODULE).
  const require = createRequire(import.meta.url);
  const cjs = require('stepscore');
  assert.equal(typeof cjs.StepScorer, 'function');
  assert.equal(cjs.segment('a\n\nb').length, 2);
  // The browser entry fetched its wasm at import (a file: URL Node's fetch cannot read); now
  // nothing happens until ready(). Its own process: this one's modules are already initialized.
  const script = `const web = await import(${JSON.stringify(new URL('../dist/index.js', import.meta.url).href)});
    try { web.segment('a'); console.log('no error'); } catch (e) { console.log(e.code, e.message); }`;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
  assert.match(out, /^NOT_READY .*ready\(\)/);
});

test('every TraceInput shape in the types is read by the core as the format it names, and scores', async () => {
  const jsonl = TRACE_INPUTS.map(([, t]) => JSON.stringify(t)).join('\n');
  const { records, errors } = readTraces(jsonl);
  assert.deepEqual(errors, []);
  assert.deepEqual(records.map((r) => r.format), TRACE_INPUTS.map(([f]) => f));
  for (const r of records) assert.equal(r.trace.steps.length, 2, JSON.stringify(r.trace));
  // Every chat role the types allow is one the core reads.
  for (const role of Object.keys(CHAT_ROLES)) {
    const chat = { messages: [{ role: 'user', content: 'What is 2+2?' }, { role, content: 'x' }, { role: 'assistant', content: '4.' }] };
    assert.deepEqual(readTraces(JSON.stringify(chat)).errors, [], role);
  }
  const scorer = await StepScorer.load({ model: checkpointFiles('skywork-prm-tiny'), threads: 1 });
  const scores = await scorer.scoreMany(TRACE_INPUTS.map(([, t]) => t));
  for (const s of scores) assert.equal(s.stepScores.length, 2);
  scorer.dispose();
});

test('Node: a local path (relative or absolute) loads; a missing one is an I/O error; an unknown name lists the catalog', async () => {
  const dir = join(FIXTURES, 'skywork-prm-tiny');
  for (const model of [dir, relative(process.cwd(), dir)]) {
    const scorer = await StepScorer.load({ model, threads: 1 });
    assert.equal(scorer.info().format, 'hf');
    scorer.dispose();
  }
  await rejectsWith(assert, StepScorer.load({ model: 'no/such/model.gguf' }), 'IO_ERROR', /no\/such\/model\.gguf/);
  const names = catalog().map((e) => e.name);
  assert.ok(names.includes('stepscore-prm-smollm2') && names.includes('stepscore-prm-qwen1.5b'), names.join());
  const e = await rejectsWith(assert, StepScorer.load('stepscore-prm-smolm2'), 'INVALID_ARGUMENT', /stepscore-prm-smolm2/);
  for (const n of names) assert.match(e.message, new RegExp(n.replace('.', '\\.')));
});

test("catalog() is the core's catalog: the CLI's `fetch --list --json` rows, less their cache state", () => {
  const entries = catalog();
  for (const e of entries) {
    assert.match(e.file.sha256, /^[0-9a-f]{64}$/, e.name);
    assert.equal(e.kind === 'prm', typeof e.head === 'string', e.name);
  }
  const cli = fileURLToPath(new URL('../../target/debug/stepscore', import.meta.url));
  if (!existsSync(cli)) return; // the CLI is built before these tests in scripts/test.sh
  const rows = execFileSync(cli, ['fetch', '--list', '--json'], { encoding: 'utf8' }).trim().split('\n').map((l) => JSON.parse(l));
  assert.deepEqual(entries, rows.map(({ cached, path, default: _, ...entry }) => entry));
});

test('info().threshold is the head file\'s stepscore.threshold; thresholdInForce is the core\'s rule and firstError\'s default', { skip: !existsSync(SMOLLM2) && 'SmolLM2 not in the cache' }, async () => {
  const bytes = new Uint8Array(readFileSync(SMOLLM2));
  // The default PRM's head ships 0.75; on SmolLM2's width it is the same format with the threshold.
  const head = headWithThreshold(576, '0.7');
  const scorer = await StepScorer.load({ model: bytes, head, threads: 1 });
  assert.equal(scorer.info().threshold, 0.7);
  assert.equal(scorer.info().thresholdInForce, 0.7);
  assert.equal(scorer.info().tokensRead, 'none'); // a hidden-state head reads no token statistics
  assert.equal(scorer.firstError([0.9, 0.65, 0.2]), 1);
  assert.equal(scorer.firstError([0.9, 0.65, 0.2], 0.5), 2);
  scorer.dispose();
  const plain = await StepScorer.load({ model: bytes, family: 'confidence', threads: 1 });
  assert.equal(plain.info().threshold, null);
  assert.equal(plain.info().thresholdInForce, 0.5); // the core's DEFAULT_THRESHOLD
  assert.equal(plain.info().tokensRead, 'all');
  assert.equal(plain.firstError([0.9, 0.65, 0.2]), 2);
  plain.dispose();
});

test('AbortSignal: score, scoreMany between traces (all checked first), queued appends', async () => {
  const scorer = await StepScorer.load({ model: checkpointFiles('skywork-prm-tiny'), threads: 1 });
  const trace = TRACE_INPUTS[0][1];
  await rejectsWith(assert, scorer.score(trace, { signal: AbortSignal.abort(new Error('stop')) }), 'ABORTED', /scoring was aborted: stop/);
  await rejectsWith(assert, scorer.score(trace, { signal: 'nope' }), 'INVALID_ARGUMENT', /AbortSignal/);
  // A bad trace anywhere is reported before anything is scored.
  const live = new AbortController();
  await rejectsWith(assert, scorer.scoreMany([trace, { problem: 'p' }], { signal: live.signal }), 'TRACE_INVALID', /traces\[1\]/);
  const all = await scorer.scoreMany([trace, trace], { signal: live.signal });
  assert.equal(all.length, 2);
  // Aborted while the first trace scores: the second never starts.
  const c = new AbortController();
  const many = scorer.scoreMany([trace, trace, trace], { signal: c.signal });
  setTimeout(() => c.abort(), 0);
  await rejectsWith(assert, many, 'ABORTED');
  // Candidates: every one checked before any runs, errors name the step.
  await rejectsWith(assert, scorer.scoreCandidates('p', [['a'], ['b', ' \u200b ']]), 'TRACE_INVALID', /candidates\[1\]\[1\] is empty/);
  await rejectsWith(assert, scorer.scoreCandidates('p', [['a'], 'b']), 'TRACE_INVALID', /candidates\[1\] must be an array of step strings, got string/);
  await rejectsWith(assert, scorer.scoreCandidates('p', [[3]]), 'TRACE_INVALID', /candidates\[0\]\[0\] must be a string, got number/);
  await rejectsWith(assert, scorer.scoreCandidates(7, [['a']]), 'TRACE_INVALID', /problem must be a string/);
  await rejectsWith(assert, scorer.scoreCandidates('p', [['a']], { singal: live.signal }), 'INVALID_ARGUMENT', /unknown option `singal`/);
  await rejectsWith(assert, scorer.scoreCandidates('p', [['a']], { signal: AbortSignal.abort() }), 'ABORTED');
  assert.equal((await scorer.scoreCandidates('p', [['a'], ['b']], { signal: live.signal })).length, 2);
  // A queued append whose signal fired never runs.
  const session = scorer.session('What is 2+2?');
  const q = new AbortController();
  const first = session.append('2+2 = 4.');
  const second = session.append('The answer is 4.', { signal: q.signal });
  q.abort();
  await first;
  await rejectsWith(assert, second, 'ABORTED', /append was aborted/);
  assert.deepEqual(session.steps, ['2+2 = 4.']);
  scorer.dispose();
});

/** A value head over `width` hidden units carrying stepscore.threshold in its metadata. */
function headWithThreshold(width, threshold) {
  const header = {
    __metadata__: { 'stepscore.threshold': threshold },
    'v_head.summary.bias': { dtype: 'F32', shape: [1], data_offsets: [0, 4] },
    'v_head.summary.weight': { dtype: 'F32', shape: [1, width], data_offsets: [4, 4 + 4 * width] },
  };
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - (json.length % 8)) % 8);
  const out = new Uint8Array(8 + json.length + 4 + 4 * width);
  new DataView(out.buffer).setBigUint64(0, BigInt(json.length), true);
  out.set(new TextEncoder().encode(json), 8);
  return out;
}
