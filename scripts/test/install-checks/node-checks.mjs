// test-install.sh's checks of the installed npm package in Node, after the
// quickstart ran (its output in $RESULT): the result's shape; a catalog
// file whose bytes differ from the catalog's sha256 (HF_ENDPOINT serves a
// tampered copy) refused with both hashes named and nothing cached under
// its name; an unknown name listing the catalog.
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { StepScorer, catalog } from 'stepscore';

const result = JSON.parse(process.env.RESULT);
assert.equal(result.stepScores.length, 2);
for (const s of result.stepScores) assert.ok(s >= 0 && s <= 1, `score ${s}`);
const entry = catalog().find((e) => e.name === 'stepscore-prm-smollm2');
assert.ok(entry && entry.head, 'the catalog lists the fast PRM with its head');

await assert.rejects(StepScorer.load('stepscore-prm-smollm2'), (e) => {
  assert.equal(e.code, 'INTEGRITY_ERROR', e.message);
  assert.match(e.message, new RegExp(entry.file.sha256));
  assert.match(e.message, new RegExp(process.env.HF_ENDPOINT.replace(/[.:/]/g, '\\$&')));
  return true;
});
const dir = process.env.STEPSCORE_CACHE;
const left = existsSync(dir) ? readdirSync(dir) : [];
assert.ok(!existsSync(join(dir, entry.file.file_name)), `a refused download was cached: ${left}`);
assert.deepEqual(left.filter((f) => f.includes('.part-')), [], 'no partial file left behind');

await assert.rejects(StepScorer.load('stepscore-prm-smolm2'), (e) => {
  assert.equal(e.code, 'INVALID_ARGUMENT');
  assert.match(e.message, /stepscore-prm-smollm2/);
  return true;
});
console.log('   Node checks: result shape, tampered hub file refused (nothing cached), unknown name lists the catalog');
