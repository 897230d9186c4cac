// Entry for Node: the wasm bytes are read from disk and instantiated
// synchronously at import (no top-level await: `require('stepscore')` works
// where Node can require ES modules, and the helpers work at once). Worker
// mode runs node-worker.js in a worker_threads Worker. Scorers run on the
// threaded build unless `threads: 1` (threads.js, node-threads.js). Model
// strings may be local paths, and catalog files are cached on disk
// (node-files.js).
import { readFileSync } from 'node:fs';
import { Worker } from 'node:worker_threads';
import { initSync } from './wasm/stepscore_wasm.js';
import { nodeHost } from './node-files.js';
import { setHost, setWasmExports, setWorkerFactory } from './runtime.js';
import { nodeThreadsHost } from './node-threads.js';
import { setThreadedHost } from './threads.js';

setWasmExports(initSync({ module: readFileSync(new URL('./wasm/stepscore_wasm_bg.wasm', import.meta.url)) }));
setThreadedHost(nodeThreadsHost());
setHost(nodeHost());

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
