// Catalog names (`StepScorer.load('stepscore-prm-smollm2')`): the core's
// catalog, read through wasm (never a second list here), resolved to the
// hub URL of the entry's hub source on `env.remoteHost`.

import { catalog as wasmCatalog } from './wasm/stepscore_wasm.js';
import { StepscoreError, callWasm } from './errors.js';
import { env } from './env.js';
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

/** Whether `spec` is a catalog name (a string the page passes to its worker unchanged). */
export function isCatalogName(spec) {
  return typeof spec === 'string' && find(spec) !== null;
}

/** The URL of the entry's file on the hub at `remoteHost` (default `env.remoteHost`): its first hub source. */
export function hubUrl(entry, remoteHost = env.remoteHost) {
  const hub = entry.file.sources.find((s) => s.hub)?.hub;
  if (!hub) {
    throw new StepscoreError('FETCH_FAILED', `catalog entry \`${entry.name}\` has no public hub copy; load its file by URL or path`);
  }
  let base;
  try {
    base = new URL(remoteHost.endsWith('/') ? remoteHost : `${remoteHost}/`);
  } catch {
    throw new StepscoreError('INVALID_ARGUMENT', `remoteHost ${JSON.stringify(remoteHost)} is not an absolute URL`);
  }
  const path = [...hub.repo.split('/'), 'resolve', hub.revision, ...hub.file.split('/')].map(encodeURIComponent).join('/');
  return new URL(path, base).href;
}
