// The CLI side of the one-trace-reader check (issue 13): every file of
// tests/fixtures/traces read by `stepscore read --output jsonl`, in the
// shape the npm package's readTraces returns ({records, errors}), so the
// package's suite (pkg/test/read.test.js) and the demo's
// (web/e2e/reader.spec.ts) compare their reader with the CLI's live output.
// The binary is $STEPSCORE_DEV_CLI (scripts/test.sh sets it to the debug CLI its
// workspace build made), else `cargo run` (which rebuilds it when stale; a
// `-p stepscore-cli` build resolves features apart from the workspace's and
// recompiles ~200 crates: 5 minutes of CI before this name was shared).

import { execFileSync, spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** The repository root (file names are given relative to it, as the CLI sees them). */
export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** Every fixture: `{ name, text }`, `name` relative to the repository root. */
export function fixtures() {
  const dir = 'tests/fixtures/traces';
  return readdirSync(ROOT + dir)
    .filter((f) => /\.(jsonl|json)$/.test(f))
    .sort()
    .map((f) => ({ name: `${dir}/${f}`, text: readFileSync(`${ROOT}${dir}/${f}`, 'utf8') }));
}

function command(args) {
  const bin = process.env.STEPSCORE_DEV_CLI;
  return bin ? [bin, args] : ['cargo', ['run', '--locked', '-q', '-p', 'stepscore-cli', '--', ...args]];
}

/** `stepscore read NAME --output jsonl` as `{records, errors}`; exit 0 or 1 (bad rows) only. */
export function cliRead(name, extra = []) {
  const [cmd, args] = command(['read', name, '--output', 'jsonl', ...extra]);
  const run = spawnSync(cmd, args, { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 << 20 });
  if (run.error) throw run.error;
  if (run.status !== 0 && run.status !== 1) {
    throw new Error(`stepscore read ${name}: exit ${run.status}\n${run.stderr}`);
  }
  const out = { records: [], errors: [] };
  for (const line of run.stdout.split('\n').filter((l) => l !== '')) {
    const row = JSON.parse(line);
    if (row.record) out.records.push(row.record);
    else if (row.error) out.errors.push(row.error);
    else throw new Error(`stepscore read ${name}: unexpected line ${line}`);
  }
  if ((run.status === 1) !== out.errors.length > 0) {
    throw new Error(`stepscore read ${name}: exit ${run.status} with ${out.errors.length} errors`);
  }
  return out;
}

/** Builds the CLI once up front (so per-file runs are quick); a no-op with $STEPSCORE_DEV_CLI. */
export function buildCli() {
  if (!process.env.STEPSCORE_DEV_CLI) {
    execFileSync('cargo', ['build', '--locked', '-q', '-p', 'stepscore-cli'], { cwd: ROOT, stdio: 'inherit' });
  }
}

/** The row formats every reader must have seen over all fixtures, and that bad rows were among them. */
export function checkCoverage(results) {
  const formats = new Set(results.flatMap((r) => r.records.map((x) => x.format)));
  const want = ['chat', 'native', 'processbench', 'raw', 'trl'];
  const missing = want.filter((f) => !formats.has(f));
  if (missing.length) throw new Error(`the fixtures read no row of format ${missing.join(', ')}`);
  if (!results.some((r) => r.errors.length > 0)) throw new Error('the fixtures have no bad rows');
}
