// The threaded build's host under Node (threads.js): worker_threads workers
// running pool-worker-node.js, the wasm read from disk. Unreferenced once
// started: an idle pool never keeps the process alive.
import { readFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';

export function nodeThreadsHost() {
  return {
    compile: async () => WebAssembly.compile(await readFile(new URL('./wasm-threads/stepscore_wasm_bg.wasm', import.meta.url))),
    spawn: () => {
      const worker = new Worker(new URL('./pool-worker-node.js', import.meta.url));
      return {
        post: (message) => worker.postMessage(message),
        onMessage: (f) => worker.on('message', f),
        onError: (f) => {
          worker.on('error', (e) => f(e?.message ?? String(e)));
          worker.on('exit', (code) => f(`a pool worker exited (code ${code})`));
        },
        // Started: drop the listeners (a 'message' listener refs the port)
        // and the worker's own reference.
        idle: () => {
          worker.removeAllListeners('message');
          worker.unref();
        },
      };
    },
    cores: () => availableParallelism(),
  };
}
