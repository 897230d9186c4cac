// One trace reader (issue 13): readTraces in Node returns exactly what the
// CLI's `stepscore read` prints for every fixture file (every row format and
// layout, bad rows too), and keeps the good rows when others are bad.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readTraces, StepscoreError } from 'stepscore';
import { buildCli, checkCoverage, cliRead, fixtures } from '../../tests/reader/cli.mjs';

test('readTraces equals `stepscore read` on every fixture', { timeout: 900_000 }, () => {
  buildCli();
  const results = [];
  for (const { name, text } of fixtures()) {
    const cli = cliRead(name);
    const got = readTraces(text, { name });
    assert.deepStrictEqual(got, cli, name);
    results.push(got);
  }
  checkCoverage(results);
});

test('readTraces takes the CLI options: format and segmenter', { timeout: 900_000 }, () => {
  const { name, text } = fixtures().find((f) => f.name.endsWith('/raw.jsonl'));
  const cli = cliRead(name, ['--segmenter', 'newline', '--input-format', 'raw']);
  assert.deepStrictEqual(readTraces(text, { name, segmenter: 'newline', format: 'raw' }), cli);
  // Forcing a format the rows are not in makes every row bad, each named by line.
  const forced = readTraces(text, { name, format: 'chat' });
  assert.equal(forced.records.length, 0);
  assert.match(forced.errors[0].text, /raw\.jsonl line 1, id `raw-blank`, field `messages`: missing field `messages`/);
});

test('readTraces: good rows survive bad ones; bad options throw INVALID_ARGUMENT', () => {
  const r = readTraces('{"problem": "p", "steps": ["a"]}\nnot json\n{"prompt": "q", "completions": ["b"]}\n');
  assert.deepEqual(r.records.map((x) => [x.at.line, x.format, x.trace.problem]), [[1, 'processbench', 'p'], [3, 'trl', 'q']]);
  assert.equal(r.errors.length, 1);
  assert.deepEqual(r.errors[0].at, { source: '<input>', line: 2, item: null, id: null, field: null });
  assert.deepEqual(readTraces(''), { records: [], errors: [] });
  for (const bad of [{ format: 'csv' }, { fromat: 'chat' }, { segmenter: 'regex:' }, { maxLineBytes: 0 }, 'chat']) {
    assert.throws(() => readTraces('{}', bad), (e) => e instanceof StepscoreError && e.code === 'INVALID_ARGUMENT', JSON.stringify(bad));
  }
  assert.throws(() => readTraces(42), (e) => e instanceof StepscoreError && e.code === 'INVALID_ARGUMENT');
});
