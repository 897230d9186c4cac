// Entry for Node: its fetch cannot read file: URLs, so the wasm bytes are
// read from disk and handed to the same initializer the browser entry uses.
// Worker mode runs node-worker.js in a worker_threads Worker. Scorers run on
// the threaded build unless `threads: 1` (threads.js, node-threads.js).
import { readFile } from 'node:fs/promises';
import { Worker } from 'node:worker_threads';
import init from './wasm/stepscore_wasm.js';
import { setWasmExports, setWorkerFactory } from './runtime.js';
import { nodeThreadsHost } from './node-threads.js';
import { setThreadedHost } from './threads.js';

const bytes = await readFile(new URL('./wasm/stepscore_wasm_bg.wasm', import.meta.url));
setWasmExports(await init({ module_or_path: bytes }));
setThreadedHost(nodeThreadsHost());

setWorkerFactory((url) => {
  const worker = new Worker(url ? new URL(url) : new URL('./node-worker.js', import.meta.url));
  // An idle worker must not keep the process alive; a busy one does.
  worker.unref();
  let ended = false;
  return {
    post: (message) => worker.postMessage(message),
    listen: (onMessage, onFatal) => {
      worker.on('message', onMessage);
      worker.on('error', (e) => onFatal(e?.message ?? String(e)));
      worker.on('messageerror', () => onFatal('a message from the worker could not be deserialized'));
      worker.on('exit', (code) => {
        if (!ended) onFatal(`the worker exited (code ${code})`);
      });
    },
    setBusy: (busy) => (busy ? worker.ref() : worker.unref()),
    terminate: () => {
      ended = true;
      return worker.terminate();
    },
  };
});

export * from './core.js';
