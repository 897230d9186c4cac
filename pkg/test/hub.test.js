// Catalog names from a hub (issue 22): a local server in the hub's URL
// layout (tests/hub/hub_server.py serving the cached SmolLM2), never the network.
// A tampered file is refused with both hashes and nothing is cached under
// its name; a good one is cached in env.cacheDir and the next load reads it
// with the server gone. Skipped until the core's catalog lists a hub source
// for the fast PRM, or when SmolLM2 is not in the model cache.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { StepScorer, catalog, env } from 'stepscore';
import { SMOLLM2, rejectsWith } from './helpers.js';

const entry = catalog().find((e) => e.name === 'stepscore-prm-smollm2');
const source = entry.file.sources.find((s) => s.hub)?.hub;
const skip = !source ? 'the catalog lists no hub source for stepscore-prm-smollm2' : !existsSync(SMOLLM2) && 'SmolLM2 not in the cache';
const SERVER = fileURLToPath(new URL('../../tests/hub/hub_server.py', import.meta.url));

/** Starts the hub server (`--tamper`: one byte flipped); resolves to `{ url, stop }`. */
function hub(...args) {
  const child = spawn('python3', [SERVER, '--hub', source.repo, source.revision, source.file, SMOLLM2, ...args], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    child.stdout.once('data', (d) => resolve({ url: /listening on (\S+)/.exec(String(d))[1], stop: () => child.kill() }));
    child.once('error', reject);
  });
}

test('a catalog name loads from the hub, checked by sha256 and cached on disk', { skip }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'stepscore-hub-'));
  const saved = { ...env };
  env.cacheDir = dir;
  // The PyPI mirror, tried after a failing hub, points nowhere: this test is about the hub.
  env.pypiIndex = 'http://127.0.0.1:9/simple';
  try {
    const bad = await hub('--tamper');
    env.remoteHost = bad.url;
    // The hub's other bytes make the whole fetch an integrity failure, the mirror's failure listed after it.
    const e = await rejectsWith(assert, StepScorer.load({ model: entry.name, threads: 1 }), 'INTEGRITY_ERROR');
    assert.match(e.message, new RegExp(`sha256 [0-9a-f]{64}, the catalog says ${entry.file.sha256}`));
    assert.match(e.message, /2\. PyPI .* from http:\/\/127\.0\.0\.1:9\/simple/);
    assert.ok(e.message.includes(`${bad.url}/${source.repo}/resolve/${source.revision}/`), e.message);
    bad.stop();
    assert.deepEqual(readdirSync(dir), [], 'nothing cached from a refused download');

    const good = await hub();
    env.remoteHost = good.url;
    const scorer = await StepScorer.load({ model: entry.name, threads: 1 });
    assert.equal(scorer.info().family, 'value-head');
    scorer.dispose();
    good.stop();
    assert.deepEqual(readdirSync(dir), [entry.file.file_name]);

    // The server is gone: the cached copy is used (and checked).
    const events = [];
    const again = await StepScorer.load({ model: entry.name, threads: 1, onProgress: (p) => events.push(p) });
    assert.ok(events.some((p) => p.phase === 'download' && p.cached === true));
    again.dispose();
  } finally {
    Object.assign(env, saved);
    rmSync(dir, { recursive: true, force: true });
  }
});
