// The worker_threads worker of worker mode under Node (see worker.js).
import { readFile } from 'node:fs/promises';
import { parentPort } from 'node:worker_threads';
import init from './wasm/stepscore_wasm.js';
import { setWasmExports } from './runtime.js';
import { nodeThreadsHost } from './node-threads.js';
import { setThreadedHost } from './threads.js';
import { serve } from './worker-host.js';

const ready = readFile(new URL('./wasm/stepscore_wasm_bg.wasm', import.meta.url))
  .then((bytes) => init({ module_or_path: bytes }))
  .then(setWasmExports);
setThreadedHost(nodeThreadsHost());
serve(
  {
    post: (message) => parentPort.postMessage(message),
    listen: (onMessage) => parentPort.on('message', onMessage),
  },
  ready,
);
