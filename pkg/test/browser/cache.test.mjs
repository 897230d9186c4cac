// Cache Storage in Chromium: downloads are cached by URL; a second load
// reads the cache (with progress, no requests); a cached copy that fails its
// manifest sha256 is evicted and downloaded again; a download that fails it
// rejects with INTEGRITY_ERROR and is not stored; the page and its worker
// share the cache.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { FIXTURES, assertCode, inPage, openPage, startServer, value } from './harness.mjs';

const NAME = 'math-shepherd-tiny';
const FILES = ['config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json'];
const sha256 = (b) => createHash('sha256').update(b).digest('hex');

let server;
let chrome;
before(async () => {
  server = await startServer();
  chrome = await openPage(server);
});
after(async () => {
  await chrome?.close();
  await server?.close();
});

function manifest(badSha = {}) {
  // Relative URLs: resolved against the manifest's own URL (/mem/…).
  return JSON.stringify({
    version: 1,
    model: `../fixtures/${NAME}/`,
    files: FILES.map((f) => {
      const bytes = readFileSync(join(FIXTURES, NAME, f));
      return { url: `../fixtures/${NAME}/${f}`, size: bytes.length, sha256: badSha[f] ?? sha256(bytes) };
    }),
  });
}

const load = (page, arg) =>
  inPage(
    page,
    async (s, { manifest, worker, problem, steps }) => {
      const events = [];
      const scorer = await s.StepScorer.load({ manifest, worker, onProgress: (e) => events.push(e) });
      try {
        const done = events.filter((e) => e.phase === 'download' && e.total && e.loaded === e.total);
        return { score: await scorer.score({ problem, steps }), done: done.map((e) => [e.file, e.cached]) };
      } finally {
        scorer.dispose();
      }
    },
    arg,
  );

test('Cache Storage: miss, hit, damaged entry, bad download, shared with the worker', async () => {
  const { page } = chrome;
  const url = server.put('manifest.json', manifest());
  const trace = { problem: 'What is 2 + 2?', steps: ['2 + 2 = 4.', 'The answer is 4.'] };
  const fixture = (f) => server.count(`/fixtures/${NAME}/${f}`);
  const args = { manifest: url, worker: false, ...trace };

  const first = value(await load(page, args));
  assert.deepEqual(first.done.sort(), FILES.map((f) => [f, false]).sort());
  for (const f of FILES) assert.equal(fixture(f), 1, `${f}: downloaded once`);
  const stored = value(await inPage(page, async () => (await (await caches.open('stepscore-v1')).keys()).map((r) => r.url)));
  assert.deepEqual(stored.sort(), FILES.map((f) => `${server.url}/fixtures/${NAME}/${f}`).sort());

  // Second load, in the page and then in a worker: all from the cache.
  for (const worker of [false, true]) {
    const again = value(await load(page, { ...args, worker }));
    assert.deepEqual(again.score, first.score);
    assert.deepEqual(again.done.sort(), FILES.map((f) => [f, true]).sort(), `worker=${worker}: hits report progress`);
    for (const f of FILES) assert.equal(fixture(f), 1, `worker=${worker}: ${f} not downloaded again`);
  }

  // Damage the cached weights: the sha256 check evicts them and downloads again.
  value(
    await inPage(
      page,
      async (s, { key }) => {
        const cache = await caches.open('stepscore-v1');
        const bytes = new Uint8Array(await (await cache.match(key)).arrayBuffer());
        bytes[1000] ^= 0xff;
        await cache.put(key, new Response(bytes, { headers: { 'content-length': String(bytes.length) } }));
      },
      { key: `${server.url}/fixtures/${NAME}/model.safetensors` },
    ),
  );
  const repaired = value(await load(page, args));
  assert.deepEqual(repaired.score, first.score);
  assert.equal(fixture('model.safetensors'), 2, 'the damaged file was downloaded again');
  assert.equal(fixture('config.json'), 1);
  const fresh = value(
    await inPage(
      page,
      async (s, { key }) => {
        const bytes = await (await (await caches.open('stepscore-v1')).match(key)).arrayBuffer();
        return Array.from(new Uint8Array(await crypto.subtle.digest('SHA-256', bytes)), (b) => b.toString(16).padStart(2, '0')).join('');
      },
      { key: `${server.url}/fixtures/${NAME}/model.safetensors` },
    ),
  );
  assert.equal(fresh, sha256(readFileSync(join(FIXTURES, NAME, 'model.safetensors'))), 'the cache holds the good copy again');

  // A download that does not match the manifest: INTEGRITY_ERROR, nothing stored.
  const badUrl = server.put('bad-manifest.json', manifest({ 'tokenizer.json': 'a'.repeat(64) }));
  value(await inPage(page, (s) => s.clearCache()));
  for (const worker of [false, true]) {
    const bad = await load(page, { ...args, manifest: badUrl, worker });
    assertCode(assert, bad, 'INTEGRITY_ERROR', /tokenizer\.json \(download\): sha256 [0-9a-f]{64}, the manifest says a{64}/);
  }
  const after = value(await inPage(page, async () => (await (await caches.open('stepscore-v1')).keys()).map((r) => r.url)));
  assert.ok(!after.some((u) => u.endsWith('tokenizer.json')), `not cached: ${after}`);
  assert.equal(value(await inPage(page, (s) => s.clearCache())), true);
  assert.deepEqual(chrome.errors, []);
});
