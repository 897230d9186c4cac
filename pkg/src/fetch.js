// Turning the `model` option into bytes: URLs through fetch with streamed
// progress and AbortSignal, Blobs/Files, buffers, and objects of named files.

import { throwIfAborted } from './abort.js';
import { classifyModel } from './catalog.js';
import { StepscoreError, causeText } from './errors.js';
import { verify } from './integrity.js';
import { hostHooks } from './runtime.js';
import { catalogBytes } from './sources.js';

/** The Cache Storage cache that holds downloaded model files unless `cache` names another. */
export const DEFAULT_CACHE = 'stepscore-v1';

const GGUF_MAGIC = [0x47, 0x47, 0x55, 0x46]; // "GGUF"
// Above this a declared Content-Length is not trusted for preallocation.
const MAX_PREALLOC = 2 ** 31;
// HF shard names are flat file names; anything else could point outside the directory.
const SAFE_NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]*$/;

export { throwIfAborted } from './abort.js';

function isGguf(bytes) {
  return bytes.length >= 4 && GGUF_MAGIC.every((b, i) => bytes[i] === b);
}

function asBytes(value, what) {
  if (value instanceof Uint8Array) return value;
  if (value instanceof ArrayBuffer) return new Uint8Array(value);
  if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  if (typeof value === 'string') return new TextEncoder().encode(value);
  throw new StepscoreError('INVALID_ARGUMENT', `${what} must be a Blob, ArrayBuffer, typed array or string`);
}

function isBlob(value) {
  return typeof Blob !== 'undefined' && value instanceof Blob;
}

async function blobBytes(blob, name, signal, onProgress) {
  throwIfAborted(signal);
  const bytes = new Uint8Array(await blob.arrayBuffer());
  throwIfAborted(signal);
  onProgress?.({ phase: 'download', file: name, loaded: bytes.length, total: bytes.length, cached: false });
  return bytes;
}

/**
 * GETs URLs for one load: from Cache Storage when a copy is there, else over
 * the network (then stored), reporting progress per chunk either way and
 * checking the bytes against the manifest's size and sha256 when it lists the
 * URL. A cached copy that fails the check is evicted and downloaded again; a
 * download that fails it rejects with INTEGRITY_ERROR and is not stored.
 * Caching is best-effort: where Cache Storage is missing (Node, insecure
 * pages) or refuses (quota, private mode), downloads go uncached.
 */
export class Downloader {
  #signal;
  #onProgress;
  #cacheName;
  #cache = undefined; // undefined: not opened yet; null: unavailable
  #expected;

  constructor({ signal, onProgress, cache = DEFAULT_CACHE, expected = new Map() } = {}) {
    this.#signal = signal;
    this.#onProgress = onProgress;
    this.#cacheName = cache === true || cache === undefined ? DEFAULT_CACHE : cache || null;
    this.#expected = expected;
  }

  get signal() {
    return this.#signal;
  }

  progress(event) {
    this.#onProgress?.(event);
  }

  async #openCache() {
    if (this.#cache !== undefined) return this.#cache;
    this.#cache = null;
    if (this.#cacheName && globalThis.caches) {
      try {
        this.#cache = await globalThis.caches.open(this.#cacheName);
      } catch {
        // SecurityError on opaque origins, storage disabled: go uncached.
      }
    }
    return this.#cache;
  }

  /** Adds the size and sha256 `url` must have (a catalog entry's pins). */
  expect(url, pins) {
    this.#expected.set(url, pins);
  }

  /** The bytes at `url`; null for a 404 (a missing local file) when `optional`. `file` names it in progress events. */
  async get(url, { file, optional = false, hint = '' } = {}) {
    const signal = this.#signal;
    throwIfAborted(signal);
    const expect = this.#expected.get(url) ?? null;
    const { readLocal } = hostHooks();
    if (url.startsWith('file:') && readLocal) {
      const bytes = await readLocal(url, optional);
      throwIfAborted(signal);
      if (bytes) {
        this.progress({ phase: 'download', file, loaded: bytes.length, total: bytes.length, cached: false });
        await verify(bytes, expect, url, 'local file');
      }
      return bytes;
    }
    const hit = await this.cached(url, expect, file);
    if (hit) return hit;
    const bytes = await this.download(url, { file, optional, hint, expect });
    if (bytes) await this.keep(url, bytes);
    return bytes;
  }

  /**
   * The copy of `key` in Cache Storage when it passes `expect`, else null (a
   * copy that fails is evicted). Progress events say `cached: true`.
   */
  async cached(key, expect, file, extra = {}) {
    const cache = await this.#openCache();
    if (!cache) return null;
    const hit = await cache.match(key).catch(() => undefined);
    if (!hit) return null;
    const bytes = await this.#read(hit, key, file, true, expect, extra);
    try {
      await verify(bytes, expect, key, 'cached copy');
      return bytes;
    } catch (e) {
      if (e?.code !== 'INTEGRITY_ERROR') throw e;
      // Stale or damaged: the caller downloads it again.
      await cache.delete(key).catch(() => false);
      return null;
    }
  }

  /** Stores `bytes` in Cache Storage under `key`, best-effort. */
  async keep(key, bytes) {
    const cache = await this.#openCache();
    if (!cache) return;
    const headers = { 'content-type': 'application/octet-stream', 'content-length': String(bytes.length) };
    await cache.put(key, new Response(bytes, { headers })).catch(() => undefined);
  }

  /**
   * GETs `url` over the network (never the cache): null for a 404 when
   * `optional`. With `expect`, more bytes than its size are refused as they
   * arrive and the result is checked against it; `limit` (bytes, with
   * `why`) bounds a download whose exact size is not known. `extra` is
   * added to each progress event (none with `silent`); `headers` go with the request.
   */
  async download(url, { file, optional = false, hint = '', expect = null, limit = null, why = '', extra = {}, headers, silent = false } = {}) {
    const signal = this.#signal;
    throwIfAborted(signal);
    let bound = limit === null ? null : { bytes: limit, why };
    if (expect?.size !== null && expect?.size !== undefined && (bound === null || expect.size < bound.bytes)) {
      bound = { bytes: expect.size, by: expect.by ?? 'the manifest' };
    }
    let response;
    try {
      response = await fetch(url, { signal, headers });
    } catch (e) {
      throwIfAborted(signal);
      throw new StepscoreError('FETCH_FAILED', `GET ${url}: ${causeText(e)}${corsNote(url)}${hint}`, { cause: e });
    }
    if (response.status === 404 && optional) {
      await response.body?.cancel();
      return null;
    }
    if (!response.ok) {
      await response.body?.cancel();
      throw new StepscoreError('FETCH_FAILED', `GET ${url}: HTTP ${response.status} ${response.statusText}`.trim() + hint);
    }
    const bytes = await this.#read(response, url, file, false, expect, silent ? null : extra, bound);
    await verify(bytes, expect, url, 'download');
    return bytes;
  }

  /** `extra`: fields added to progress events; null reports none. */
  async #read(response, url, file, cached, expect, extra = {}, bound = null) {
    const signal = this.#signal;
    // A compressed body's Content-Length counts compressed bytes, not the ones we read.
    const encoding = response.headers.get('content-encoding');
    const declared = Number(response.headers.get('content-length') ?? NaN);
    const identity = !encoding || encoding === 'identity';
    if (bound && identity && Number.isSafeInteger(declared) && declared > bound.bytes) {
      await response.body?.cancel();
      throw overBound({ ...bound, url }, declared);
    }
    const total = identity && Number.isSafeInteger(declared) && declared >= 0 ? declared : (expect?.size ?? null);
    const report = extra ? (loaded) => this.progress({ phase: 'download', file, loaded, total, cached, ...extra }) : () => {};
    try {
      if (!response.body) {
        const bytes = new Uint8Array(await response.arrayBuffer());
        report(bytes.length);
        return bytes;
      }
      return await readStream(response.body.getReader(), total, report, signal, bound && { ...bound, url });
    } catch (e) {
      throwIfAborted(signal);
      if (e instanceof StepscoreError) throw e;
      const from = cached ? 'reading the cached copy' : 'reading the body';
      throw new StepscoreError('FETCH_FAILED', `GET ${url}: ${from} failed: ${causeText(e)}`, { cause: e });
    }
  }
}

/**
 * A download over its bound (`{ url, bytes }` and `by`, who pinned the exact
 * size, or `why` the bound is what it is): `announced` bytes refused before
 * reading, or (null) a body cut off at the bound.
 */
function overBound({ url, bytes, by, why }, announced) {
  const what = announced === null ? `more than ${bytes} bytes arrived` : `the server announced ${announced} bytes`;
  const where = announced === null ? 'stopped there' : 'refused before reading';
  const message = by
    ? `${url} (download): ${announced ?? `over ${bytes}`} bytes, ${by} says ${bytes} (${where})`
    : `GET ${url}: ${what}, over the ${bytes}-byte bound (${why}): ${where}`;
  return new StepscoreError('INTEGRITY_ERROR', message);
}

/** In a page, a refused CORS request fails exactly as an unreachable host does: say so. */
function corsNote(url) {
  if (typeof globalThis.location === 'undefined') return '';
  try {
    if (new URL(url).origin === globalThis.location.origin) return '';
  } catch {
    return '';
  }
  return ' (in a browser this is also how a server that does not allow this page\'s origin (CORS) fails)';
}

/** Removes stepscore's cached downloads; resolves to whether there was a cache to remove. */
export async function clearCache(name = DEFAULT_CACHE) {
  if (!globalThis.caches) return false;
  return globalThis.caches.delete(name);
}

async function readStream(reader, total, report, signal, bound = null) {
  // With a trustworthy length, fill one buffer; otherwise (or if the server
  // sends more than it declared) collect chunks and join them at the end.
  let buffer = total !== null && total <= MAX_PREALLOC && (bound === null || total <= bound.bytes) ? new Uint8Array(total) : null;
  const chunks = [];
  let loaded = 0;
  report(0);
  for (;;) {
    if (signal?.aborted) {
      // A cached body does not watch the signal by itself.
      await reader.cancel().catch(() => undefined);
      throwIfAborted(signal);
    }
    const { done, value } = await reader.read();
    if (done) break;
    if (bound && loaded + value.length > bound.bytes) {
      // A server that streams on past the bound is cut off there.
      await reader.cancel().catch(() => undefined);
      throw overBound(bound, null);
    }
    if (buffer && loaded + value.length <= buffer.length) {
      buffer.set(value, loaded);
    } else {
      if (buffer) {
        chunks.push(buffer.subarray(0, loaded));
        buffer = null;
      }
      chunks.push(value);
    }
    loaded += value.length;
    report(loaded);
  }
  if (buffer) return loaded === buffer.length ? buffer : buffer.subarray(0, loaded);
  const out = new Uint8Array(loaded);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

function lastSegment(url, fallback) {
  const parts = url.pathname.split('/').filter(Boolean);
  return decodeURIComponent(parts[parts.length - 1] ?? fallback);
}

/** `ref` as an absolute URL string, resolved against the page (or worker) URL when relative. */
export function absoluteUrl(ref, what = 'model') {
  try {
    return new URL(ref, globalThis.location?.href).href;
  } catch {
    throw new StepscoreError(
      'INVALID_ARGUMENT',
      `${what} URL ${JSON.stringify(String(ref))} is not an absolute URL (and there is no page URL to resolve it against)`,
    );
  }
}

/** A Hugging Face checkpoint directory: config, weights (single or sharded), tokenizer files. */
async function fetchDirectory(base, downloader) {
  const files = new Map();
  const get = async (name, optional = false) => {
    const bytes = await downloader.get(new URL(name, base).href, { file: name, optional });
    if (bytes) files.set(name, bytes);
    return bytes;
  };
  await get('config.json');
  const single = await get('model.safetensors', true);
  if (!single) {
    const index = await get('model.safetensors.index.json', true);
    if (!index) {
      throw new StepscoreError(
        'FETCH_FAILED',
        `GET ${new URL('model.safetensors', base).href}: HTTP 404, and there is no model.safetensors.index.json either`,
      );
    }
    for (const shard of shardNames(index)) await get(shard);
  }
  await get('tokenizer.json');
  await get('tokenizer_config.json', true);
  return files;
}

function shardNames(indexBytes) {
  let index;
  try {
    index = JSON.parse(new TextDecoder().decode(indexBytes));
  } catch (e) {
    throw new StepscoreError('MODEL_INVALID', `model.safetensors.index.json: not valid JSON: ${e.message}`);
  }
  const map = index?.weight_map;
  if (!map || typeof map !== 'object') {
    throw new StepscoreError('MODEL_INVALID', 'model.safetensors.index.json: no `weight_map` object');
  }
  const names = [...new Set(Object.values(map))];
  for (const n of names) {
    if (typeof n !== 'string' || !SAFE_NAME.test(n)) {
      throw new StepscoreError('MODEL_INVALID', `model.safetensors.index.json: shard name ${JSON.stringify(n)} is not a plain file name`);
    }
  }
  return names;
}

/**
 * Resolves the `model` option to `{ kind: 'gguf', name, bytes }`,
 * `{ kind: 'catalog', entry, name, bytes }` or `{ kind: 'hf', files:
 * Map<name, Uint8Array> }`, downloading URLs through `downloader` (a
 * Downloader) and catalog files from their sources (`where`: `{
 * remoteHost, pypiIndex }`, see sources.js).
 */
export async function resolveModel(model, downloader, where) {
  const signal = downloader.signal;
  const onProgress = (e) => downloader.progress(e);
  throwIfAborted(signal);
  if (model === undefined || model === null) {
    throw new StepscoreError('INVALID_ARGUMENT', 'the `model` option is required (or a manifest that names the model)');
  }
  if (typeof model === 'string' || model instanceof URL) {
    const spec = model instanceof URL ? { kind: 'url', url: model.href } : classifyModel(model);
    if (spec.kind === 'catalog') {
      const { entry } = spec;
      return { kind: 'catalog', entry, name: entry.file.file_name, bytes: await catalogBytes(entry, downloader, where) };
    }
    const url = new URL(absoluteUrl(spec.url));
    if (url.pathname.toLowerCase().endsWith('.gguf')) {
      const name = lastSegment(url, 'model.gguf');
      return { kind: 'gguf', name, bytes: await downloader.get(url.href, { file: name }) };
    }
    const base = new URL(url.href.endsWith('/') ? url.href : `${url.href}/`);
    return { kind: 'hf', files: await fetchDirectory(base, downloader) };
  }
  if (isBlob(model)) {
    const name = typeof model.name === 'string' && model.name ? model.name : 'model.gguf';
    const bytes = await blobBytes(model, name, signal, onProgress);
    if (!isGguf(bytes)) {
      throw new StepscoreError(
        'MODEL_INVALID',
        `${name}: a single file must be a GGUF model (it does not start with "GGUF"); pass a checkpoint's files as an object of named files`,
      );
    }
    return { kind: 'gguf', name, bytes };
  }
  if (model instanceof ArrayBuffer || ArrayBuffer.isView(model)) {
    return { kind: 'gguf', name: 'model.gguf', bytes: asBytes(model, 'model') };
  }
  if (typeof model === 'object') {
    const entries = model instanceof Map ? [...model.entries()] : Object.entries(model);
    if (entries.length === 0) throw new StepscoreError('INVALID_ARGUMENT', 'the `model` object names no files');
    const files = new Map();
    for (const [name, value] of entries) {
      files.set(name, isBlob(value) ? await blobBytes(value, name, signal, onProgress) : asBytes(value, `model['${name}']`));
    }
    const ggufs = entries.filter(([name]) => name.toLowerCase().endsWith('.gguf'));
    if (ggufs.length === 1 && entries.length === 1) {
      const [name] = ggufs[0];
      return { kind: 'gguf', name, bytes: files.get(name) };
    }
    return { kind: 'hf', files };
  }
  throw new StepscoreError(
    'INVALID_ARGUMENT',
    `the \`model\` option must be a URL, a File/Blob, an ArrayBuffer/Uint8Array or an object of named files, got ${typeof model}`,
  );
}

/**
 * Resolves a single-file option (the value head) to `{ name, bytes }`: a URL,
 * a File/Blob, or an ArrayBuffer/typed array.
 */
export async function resolveFile(source, what, defaultName, downloader) {
  const signal = downloader.signal;
  throwIfAborted(signal);
  if (typeof source === 'string' || source instanceof URL) {
    const local = typeof source === 'string' && !/^[a-zA-Z][a-zA-Z0-9+.-]+:/.test(source) ? hostHooks().localFile(source) : null;
    const url = new URL(local ?? absoluteUrl(source, what));
    const name = lastSegment(url, defaultName);
    return { name, bytes: await downloader.get(url.href, { file: name }) };
  }
  if (isBlob(source)) {
    const name = typeof source.name === 'string' && source.name ? source.name : defaultName;
    return { name, bytes: await blobBytes(source, name, signal, (e) => downloader.progress(e)) };
  }
  if (source instanceof ArrayBuffer || ArrayBuffer.isView(source)) {
    return { name: defaultName, bytes: asBytes(source, what) };
  }
  throw new StepscoreError('INVALID_ARGUMENT', `the \`${what}\` option must be a URL, a File/Blob or an ArrayBuffer/Uint8Array, got ${typeof source}`);
}
