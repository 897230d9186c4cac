// Manifests (size + sha256 per URL) and the download cache. Node has no Cache
// Storage, so loads there go uncached; the cache logic is exercised here
// with a small in-memory stand-in for `caches` (the browser suite checks the
// real one).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { StepScorer, clearCache, DEFAULT_CACHE } from 'stepscore';
import { FIXTURES, rejectsWith, startServer } from './helpers.js';

let server;
before(async () => {
  server = await startServer();
});
after(async () => {
  await server.close();
});

const SKYWORK = 'skywork-prm-tiny';
const FILES = ['config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json'];
const sha256 = (bytes) => createHash('sha256').update(bytes).digest('hex');

function manifestFor(dir, tamper = {}) {
  return {
    version: 1,
    model: `${dir}/`,
    files: FILES.map((f) => {
      const bytes = readFileSync(join(FIXTURES, SKYWORK, f));
      return { url: `${dir}/${f}`, size: tamper[f]?.size ?? bytes.length, sha256: tamper[f]?.sha256 ?? sha256(bytes) };
    }),
  };
}

/** The part of CacheStorage stepscore uses, in memory. */
class MemoryCaches {
  stores = new Map();
  async open(name) {
    if (!this.stores.has(name)) this.stores.set(name, new Map());
    const store = this.stores.get(name);
    return {
      match: async (url) => {
        const hit = store.get(String(url));
        return hit ? new Response(hit.bytes, { headers: hit.headers }) : undefined;
      },
      put: async (url, response) => {
        store.set(String(url), { bytes: new Uint8Array(await response.arrayBuffer()), headers: [...response.headers] });
      },
      delete: async (url) => store.delete(String(url)),
    };
  }
  async delete(name) {
    return this.stores.delete(name);
  }
}

async function withCaches(fn) {
  const caches = new MemoryCaches();
  globalThis.caches = caches;
  try {
    return await fn(caches);
  } finally {
    delete globalThis.caches;
  }
}

test('a manifest URL names the model, and its sizes and hashes are checked', async () => {
  const dir = `${server.url}/fixtures/${SKYWORK}`;
  const events = [];
  const scorer = await StepScorer.load({ manifest: manifestFor(dir), onProgress: (e) => events.push(e) });
  assert.equal(scorer.info().family, 'value-head');
  // Node: no Cache Storage, so every file came from the network.
  assert.ok(events.filter((e) => e.phase === 'download').every((e) => e.cached === false));
  scorer.dispose();
  assert.equal(await clearCache(), false);

  const badHash = manifestFor(dir, { 'model.safetensors': { sha256: '0'.repeat(64) } });
  await rejectsWith(assert, StepScorer.load({ manifest: badHash }), 'INTEGRITY_ERROR', /model\.safetensors \(download\): sha256 [0-9a-f]{64}, the manifest says 0{64}/);
  const badSize = manifestFor(dir, { 'config.json': { size: 3 } });
  await rejectsWith(assert, StepScorer.load({ manifest: badSize }), 'INTEGRITY_ERROR', /config\.json \(download\): \d+ bytes, the manifest says 3/);
  // Worker mode checks the same way.
  await rejectsWith(assert, StepScorer.load({ manifest: badHash, worker: true }), 'INTEGRITY_ERROR', /sha256/);
});

test('manifests are validated and name the field at fault', async () => {
  const dir = `${server.url}/fixtures/${SKYWORK}`;
  const cases = [
    [{ version: 2, files: [] }, /`version` must be 1/],
    [{ version: 1 }, /`files` must be an array/],
    [{ version: 1, files: [{ url: `${dir}/a`, sha256: 'xyz' }] }, /files\[0\]\.sha256 must be 64 hex digits/],
    [{ version: 1, files: [{ url: `${dir}/a`, size: -1 }] }, /files\[0\]\.size/],
    [{ version: 1, files: [{ url: `${dir}/a` }, { url: `${dir}/a` }] }, /listed twice/],
    [{ version: 1, files: [{ url: 'a' }] }, /files\[0\]\.url "a" is not a URL/],
    [{ version: 1, files: [] }, /`model` option is required/],
  ];
  for (const [manifest, message] of cases) {
    await rejectsWith(assert, StepScorer.load({ manifest }), 'INVALID_ARGUMENT', message);
  }
  await rejectsWith(assert, StepScorer.load({ manifest: `${server.url}/fixtures/nope.json` }), 'FETCH_FAILED', /nope\.json: HTTP 404/);
  await rejectsWith(assert, StepScorer.load({ manifest: `${dir}/tokenizer.json` }), 'INVALID_ARGUMENT', /`version` must be 1/);
});

test('downloads are cached by URL; a hit reports progress and a damaged entry is evicted and fetched again', async () => {
  await withCaches(async (caches) => {
    const dir = `${server.url}/fixtures/${SKYWORK}`;
    const manifest = manifestFor(dir);
    const before = server.requests.length;
    const first = await StepScorer.load({ manifest });
    const score = await first.score({ problem: 'p', steps: ['a'] });
    first.dispose();
    assert.equal(server.requests.length - before, 4, 'four files downloaded');
    assert.deepEqual([...caches.stores.get(DEFAULT_CACHE).keys()].sort(), FILES.map((f) => `${dir}/${f}`).sort());

    const events = [];
    const second = await StepScorer.load({ manifest, onProgress: (e) => events.push(e) });
    assert.deepEqual(await second.score({ problem: 'p', steps: ['a'] }), score);
    second.dispose();
    assert.equal(server.requests.length - before, 4, 'nothing downloaded: all four from the cache');
    const done = events.filter((e) => e.phase === 'download' && e.loaded === e.total && e.total > 0);
    assert.deepEqual(done.map((e) => [e.file, e.cached]).sort(), FILES.map((f) => [f, true]).sort());

    // Damage the cached weights: the hash check catches it, the entry is
    // replaced by a fresh download, and the load succeeds.
    const store = caches.stores.get(DEFAULT_CACHE);
    const entry = store.get(`${dir}/model.safetensors`);
    entry.bytes = entry.bytes.slice();
    entry.bytes[100] ^= 0xff;
    const third = await StepScorer.load({ manifest });
    assert.deepEqual(await third.score({ problem: 'p', steps: ['a'] }), score);
    third.dispose();
    assert.equal(server.requests.length - before, 5, 'only model.safetensors downloaded again');
    assert.equal(sha256(store.get(`${dir}/model.safetensors`).bytes), manifest.files[1].sha256);

    // A download that fails its hash is not stored.
    store.delete(`${dir}/model.safetensors`);
    const bad = manifestFor(dir, { 'model.safetensors': { sha256: 'f'.repeat(64) } });
    await rejectsWith(assert, StepScorer.load({ manifest: bad }), 'INTEGRITY_ERROR');
    assert.equal(store.has(`${dir}/model.safetensors`), false);

    // cache: false bypasses it; a name picks another cache.
    const n = server.requests.length;
    (await StepScorer.load({ model: `${dir}/`, cache: false })).dispose();
    assert.equal(server.requests.length - n, 4);
    (await StepScorer.load({ model: `${dir}/`, cache: 'other' })).dispose();
    assert.ok(caches.stores.has('other'));
    assert.equal(await clearCache('other'), true);
    await rejectsWith(assert, StepScorer.load({ model: `${dir}/`, cache: 3 }), 'INVALID_ARGUMENT', /`cache`/);
  });
});
