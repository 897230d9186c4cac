// One trace reader (issue 13): the same fixture files (every row format and
// layout, bad rows too) read three ways give identical traces and errors:
// the CLI (`stepscore read`, live), the npm package in Node (readTraces), and
// the demo's own path (src/reader.ts, what the file input calls). No page:
// this runs in the test process, where the package loads its Node entry.
import { expect, test } from '@playwright/test';
import { readTraces } from 'stepscore';
import { buildCli, checkCoverage, cliRead, fixtures } from '../../tests/reader/cli.mjs';
import { readTraceFile } from '../src/reader';

test('the CLI, the package and the demo read every fixture identically', async () => {
  test.setTimeout(900_000);
  buildCli();
  const results = [];
  for (const { name, text } of fixtures()) {
    const cli = cliRead(name);
    const pkg = readTraces(text, { name });
    const demo = readTraceFile(text, name, 'auto');
    expect(pkg, `${name}: package vs CLI`).toStrictEqual(cli);
    expect(demo, `${name}: demo vs CLI`).toStrictEqual(cli);
    results.push(demo);
  }
  checkCoverage(results);
});
