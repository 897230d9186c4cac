// Catalog names (`StepScorer.load('stepscore-prm-smollm2')`): the core's
// catalog, read through wasm (never a second list here); its files come
// from their sources (sources.js). A GGUF given any other way whose size
// and sha256 are an entry's is that entry (`catalogMatch`).

import { catalog as wasmCatalog } from './wasm/stepscore_wasm.js';
import { StepscoreError, callWasm } from './errors.js';
import { env } from './env.js';
import { sha256Hex } from './integrity.js';
import { hostHooks, requireReady } from './runtime.js';

let entries = null;

/** Every catalog entry in the core's JSON form (as `stepscore fetch --list --json` prints it). */
export function catalog() {
  requireReady();
  entries ??= callWasm(() => wasmCatalog());
  return entries.map((e) => structuredClone(e));
}

function find(name) {
  requireReady();
  entries ??= callWasm(() => wasmCatalog());
  return entries.find((e) => e.name === name) ?? null;
}

// A URL with a scheme (not a Windows drive letter).
const SCHEME = /^[a-zA-Z][a-zA-Z0-9+.-]+:/;

/**
 * What a model string names, by the CLI's rule: a URL as it is; in Node an
 * existing path, else a catalog name; in browsers a catalog name, else a URL
 * relative to the page. `{ kind: 'url', url }` or `{ kind: 'catalog', entry }`.
 */
export function classifyModel(spec) {
  if (SCHEME.test(spec)) return { kind: 'url', url: spec };
  const local = hostHooks().localFile(spec);
  if (local) return { kind: 'url', url: local };
  const entry = find(spec);
  if (entry) return { kind: 'catalog', entry };
  const pathLike = /[\\/]/.test(spec) || /\.[A-Za-z0-9]+$/.test(spec);
  if (!pathLike) {
    const names = entries.map((e) => e.name).join(', ');
    throw new StepscoreError('INVALID_ARGUMENT', `\`${spec}\` is neither a catalog model (known: ${names}) nor a path or URL`);
  }
  if (hostHooks().readLocal) {
    throw new StepscoreError('IO_ERROR', `${spec}: no such file or directory (and not a catalog name)`);
  }
  return { kind: 'url', url: spec };
}

/**
 * The catalog entry a GGUF's bytes are, by size and sha256 (hashed only
 * when the size is an entry's): a PRM entry before a backbone of the same
 * file, so the bytes get the head they would by name. `{ entry, sha256 }`
 * when one matches; `{ entry: null, sizeOf, sha256 }` when entries have the
 * size (`sizeOf`, their names) but not the hash; null when none has the size.
 */
export async function catalogMatch(bytes) {
  requireReady();
  entries ??= callWasm(() => wasmCatalog());
  const sized = entries.filter((e) => e.file.size === bytes.length);
  if (sized.length === 0) return null;
  const sha256 = await sha256Hex(bytes);
  const same = sized.filter((e) => e.file.sha256 === sha256);
  const entry = same.find((e) => e.kind === 'prm') ?? same[0] ?? null;
  return entry ? { entry: structuredClone(entry), sha256 } : { entry: null, sizeOf: sized.map((e) => e.name), sha256 };
}

/** Whether `spec` is a catalog name (a string the page passes to its worker unchanged). */
export function isCatalogName(spec) {
  return typeof spec === 'string' && find(spec) !== null;
}

/** The URL of a hub source (`{ repo, revision, file }`) on the hub at `remoteHost` (default `env.remoteHost`). */
export function hubUrl(hub, remoteHost = env.remoteHost) {
  let base;
  try {
    base = new URL(remoteHost.endsWith('/') ? remoteHost : `${remoteHost}/`);
  } catch {
    throw new StepscoreError('INVALID_ARGUMENT', `remoteHost ${JSON.stringify(remoteHost)} is not an absolute URL`);
  }
  const path = [...hub.repo.split('/'), 'resolve', hub.revision, ...hub.file.split('/')].map(encodeURIComponent).join('/');
  return new URL(path, base).href;
}
