// The worker_threads worker of worker mode under Node (see worker.js).
import { readFileSync } from 'node:fs';
import { parentPort } from 'node:worker_threads';
import { initSync } from './wasm/stepscore_wasm.js';
import { nodeHost } from './node-files.js';
import { setHost, setWasmExports } from './runtime.js';
import { nodeThreadsHost } from './node-threads.js';
import { setThreadedHost } from './threads.js';
import { serve } from './worker-host.js';

setHost(nodeHost());
setThreadedHost(nodeThreadsHost());
const ready = Promise.resolve().then(() =>
  setWasmExports(initSync({ module: readFileSync(new URL('./wasm/stepscore_wasm_bg.wasm', import.meta.url)) })),
);
serve(
  {
    post: (message) => parentPort.postMessage(message),
    listen: (onMessage) => parentPort.on('message', onMessage),
  },
  ready,
);
