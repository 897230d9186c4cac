// One thread of the threaded build's pool under Node (a worker_threads
// worker; see pool-worker.js for browsers).
import { parentPort } from 'node:worker_threads';
import { initSync, poolWorkerRun } from './wasm-threads/stepscore_wasm.js';

parentPort.once('message', (data) => {
  try {
    initSync({ module: data.module, memory: data.memory });
  } catch (e) {
    parentPort.postMessage({ type: 'stepscore-pool-failed', message: e?.message ?? String(e) });
    return;
  }
  parentPort.postMessage({ type: 'stepscore-pool-ready' });
  poolWorkerRun(data.receiver);
});
