// One thread of the threaded build's pool in a browser (threads.js starts
// it as a module Web Worker): the same module on the same shared memory,
// then the core's pool thread for good.
import { initSync, poolWorkerRun } from './wasm-threads/stepscore_wasm.js';

self.addEventListener(
  'message',
  ({ data }) => {
    if (data?.type !== 'stepscore-pool-init') return;
    try {
      initSync({ module: data.module, memory: data.memory });
    } catch (e) {
      self.postMessage({ type: 'stepscore-pool-failed', message: e?.message ?? String(e) });
      return;
    }
    self.postMessage({ type: 'stepscore-pool-ready' });
    poolWorkerRun(data.receiver);
  },
  { once: true },
);
