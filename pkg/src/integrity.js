// Manifests: which bytes a URL must hold. A manifest is small JSON that
// lists files by URL with their size and sha256, and may name the model
// (and head) to load, so a page can be pointed at one URL:
//
//   { "version": 1,
//     "model": "SmolLM2-135M-Instruct.Q4_1.gguf",
//     "head": "head.safetensors",
//     "files": [ { "url": "SmolLM2-135M-Instruct.Q4_1.gguf", "size": 98362432, "sha256": "b179…" } ] }
//
// Relative URLs resolve against the manifest's own URL (or the page's, for a
// manifest given as an object). Downloads of listed URLs are checked; others
// are not. pkg/README.md documents the format.

import { StepscoreError } from './errors.js';

const SHA256_HEX = /^[0-9a-f]{64}$/;

function bad(message) {
  return new StepscoreError('INVALID_ARGUMENT', `manifest: ${message}`);
}

function resolveAgainst(ref, base, what) {
  if (typeof ref !== 'string' || ref === '') throw bad(`${what} must be a non-empty string`);
  try {
    return new URL(ref, base).href;
  } catch {
    throw bad(`${what} ${JSON.stringify(ref)} is not a URL (and cannot be resolved against ${base ?? 'nothing'})`);
  }
}

/**
 * Checks a manifest object and resolves its URLs against `base`. Returns
 * `{ model, head, files: Map<url, { size, sha256 }> }` (model/head null when absent).
 */
export function parseManifest(json, base) {
  if (!json || typeof json !== 'object' || Array.isArray(json)) throw bad('must be a JSON object');
  if (json.version !== 1) throw bad(`\`version\` must be 1, got ${JSON.stringify(json.version)}`);
  if (!Array.isArray(json.files)) throw bad('`files` must be an array');
  const files = new Map();
  json.files.forEach((f, i) => {
    const at = `files[${i}]`;
    if (!f || typeof f !== 'object') throw bad(`${at} must be an object`);
    const url = resolveAgainst(f.url, base, `${at}.url`);
    if (f.size !== undefined && !(Number.isSafeInteger(f.size) && f.size >= 0)) {
      throw bad(`${at}.size must be a non-negative integer, got ${JSON.stringify(f.size)}`);
    }
    let sha256;
    if (f.sha256 !== undefined) {
      sha256 = typeof f.sha256 === 'string' ? f.sha256.toLowerCase() : '';
      if (!SHA256_HEX.test(sha256)) throw bad(`${at}.sha256 must be 64 hex digits, got ${JSON.stringify(f.sha256)}`);
    }
    if (files.has(url)) throw bad(`${at}: ${url} is listed twice`);
    files.set(url, { size: f.size ?? null, sha256: sha256 ?? null });
  });
  const model = json.model === undefined ? null : resolveAgainst(json.model, base, '`model`');
  const head = json.head === undefined ? null : resolveAgainst(json.head, base, '`head`');
  return { model, head, files };
}

function hex(buffer) {
  return Array.from(new Uint8Array(buffer), (b) => b.toString(16).padStart(2, '0')).join('');
}

/** The sha256 of `bytes` as lowercase hex, through SubtleCrypto (browsers, workers, Node 20). */
export async function sha256Hex(bytes) {
  const subtle = globalThis.crypto?.subtle;
  if (!subtle) {
    throw new StepscoreError('INTEGRITY_ERROR', 'cannot check sha256: SubtleCrypto is unavailable (pages need a secure context: https or localhost)');
  }
  return hex(await subtle.digest('SHA-256', bytes));
}

/**
 * Rejects with INTEGRITY_ERROR when `bytes` are not what `expect` says.
 * `where` tells the message whether the bytes came from the network or the cache.
 */
export async function verify(bytes, expect, url, where) {
  if (!expect) return;
  // `by`: who pinned the bytes (a manifest, the catalog, a PyPI index).
  const by = expect.by ?? 'the manifest';
  if (expect.size !== null && expect.size !== undefined && bytes.length !== expect.size) {
    throw new StepscoreError('INTEGRITY_ERROR', `${url} (${where}): ${bytes.length} bytes, ${by} says ${expect.size}`);
  }
  if (expect.sha256 !== null && expect.sha256 !== undefined) {
    const got = await sha256Hex(bytes);
    if (got !== expect.sha256) {
      throw new StepscoreError('INTEGRITY_ERROR', `${url} (${where}): sha256 ${got}, ${by} says ${expect.sha256}`);
    }
  }
}

/**
 * The `manifest` option as parsed by parseManifest: a URL (fetched without
 * the HTTP cache, so a changed manifest is seen at once) or an object.
 */
export async function loadManifest(source, signal) {
  if (typeof source === 'string' || source instanceof URL) {
    let url;
    try {
      url = new URL(source, globalThis.location?.href).href;
    } catch {
      throw bad(`URL ${JSON.stringify(String(source))} is not absolute (and there is no page URL to resolve it against)`);
    }
    let response;
    try {
      response = await fetch(url, { signal, cache: 'no-cache' });
    } catch (e) {
      if (signal?.aborted) throw abortError(signal);
      throw new StepscoreError('FETCH_FAILED', `GET ${url}: ${e?.message ?? e}`, { cause: e });
    }
    if (!response.ok) {
      await response.body?.cancel();
      throw new StepscoreError('FETCH_FAILED', `GET ${url}: HTTP ${response.status} ${response.statusText}`.trim());
    }
    let json;
    try {
      json = JSON.parse(await response.text());
    } catch (e) {
      if (signal?.aborted) throw abortError(signal);
      throw bad(`${url} is not valid JSON: ${e.message}`);
    }
    return parseManifest(json, url);
  }
  return parseManifest(source, globalThis.location?.href);
}

function abortError(signal) {
  const r = signal.reason;
  return new StepscoreError('ABORTED', `loading was aborted: ${r?.message ?? (r === undefined ? 'no reason given' : String(r))}`, { cause: r });
}
