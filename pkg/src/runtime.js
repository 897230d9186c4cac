// What the entry module (index.js, node.js) sets up for the shared code: how
// the wasm module is instantiated (started by `ready()`, never at import, so
// importing the package runs no top-level await: SSR and CommonJS bundles
// can load it), its exports, how to start a worker, and the host's own
// hooks for local files and the catalog's download cache (Node).

import { StepscoreError } from './errors.js';

let exports = null;
let initializer = null;
let starting = null;
let workerFactory = null;
let host = { localFile: () => null, catalogStore: null, cacheDir: () => null };

/** StepScorer's score call with the trace named in errors (for worker-host.js; not public API). */
export const SCORE_AT = Symbol('stepscore.scoreAt');

/** StepScorer's search with the engine's hooks `{ onEvent, shouldStop }` (for worker-host.js; not public API). */
export const SEARCH_WITH = Symbol('stepscore.searchWith');
/** StepScorer's engine verifier (`feed`, `dispose`), for the worker host. */
export const VERIFIER = Symbol('stepscore.verifier');

export function setWasmExports(value) {
  exports = value;
}

/** `init()` resolves to the single-thread build's exports; run by the first `ready()`. */
export function setInitializer(init) {
  initializer = init;
}

/** Resolves once the wasm engine is instantiated (at once when the entry did it synchronously). */
export function ready() {
  if (exports) return Promise.resolve();
  starting ??= Promise.resolve()
    .then(() => initializer())
    .then(setWasmExports)
    .catch((e) => {
      starting = null;
      throw new StepscoreError('INTERNAL', `the wasm engine could not be instantiated: ${e?.message ?? e}`, { cause: e });
    });
  return starting;
}

/** Throws NOT_READY before `ready()` has resolved (the synchronous helpers need the engine). */
export function requireReady() {
  if (!exports) {
    throw new StepscoreError('NOT_READY', "the wasm engine is not instantiated yet: `await ready()` (or load a scorer) first");
  }
}

export function wasmMemoryBytes() {
  return exports?.memory?.buffer?.byteLength ?? null;
}

/**
 * The host's hooks: `localFile(spec)` turns a local path into a `file:` URL
 * (null when `spec` is not an existing path; Node only), `catalogStore` gets
 * a catalog entry's file from its cache or the hub (null: the Downloader and
 * Cache Storage), `cacheDir()` names that cache (null where there is none).
 */
export function setHost(value) {
  host = { ...host, ...value };
}

export function hostHooks() {
  return host;
}

/**
 * `factory(url | null)` starts a worker running worker-host.js's `serve` (the
 * package's own worker script when `url` is null) and returns a port:
 * `{ post(message), listen(onMessage, onFatal), setBusy(busy), terminate() }`.
 */
export function setWorkerFactory(factory) {
  workerFactory = factory;
}

export function startWorker(url) {
  if (!workerFactory) {
    throw new StepscoreError('WORKER_UNAVAILABLE', 'worker mode is not available here (no Worker constructor)');
  }
  try {
    return workerFactory(url);
  } catch (e) {
    throw new StepscoreError('WORKER_UNAVAILABLE', `the worker could not be started: ${e?.message ?? e}`, { cause: e });
  }
}
