// What the entry module (index.js, node.js) sets up for the shared code: the
// instantiated wasm module's exports, so info() can report the engine's
// memory, and how to start a worker in this host.

import { StepscoreError } from './errors.js';

let exports = null;
let workerFactory = null;

export function setWasmExports(value) {
  exports = value;
}

export function wasmMemoryBytes() {
  return exports?.memory?.buffer?.byteLength ?? null;
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
