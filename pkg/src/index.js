// Entry for browsers and bundlers: fetches the wasm module next to this file
// (bundlers see the `new URL(..., import.meta.url)` and ship the asset) on
// the first `ready()` or load, never at import, and starts module workers
// from worker.js next to it for `worker: true`.
import init from './wasm/stepscore_wasm.js';
import { setInitializer, setWorkerFactory } from './runtime.js';
import { setThreadedHost, webThreadsHost } from './threads.js';

setInitializer(() => init({ module_or_path: new URL('./wasm/stepscore_wasm_bg.wasm', import.meta.url) }));

// The threaded build's caller waits for its pool, which a worker may and a
// page's main thread may not: there, worker mode runs it.
if (typeof WorkerGlobalScope === 'function' && globalThis instanceof WorkerGlobalScope) {
  setThreadedHost(webThreadsHost());
} else {
  setThreadedHost(null, "a page's main thread cannot wait for a thread pool; load with { worker: true } for the threaded build");
}

if (typeof Worker === 'function') {
  setWorkerFactory((url) => {
    // The literal `new Worker(new URL('./worker.js', import.meta.url), ...)` is
    // the form bundlers recognize and rewrite.
    const worker = url
      ? new Worker(url, { type: 'module', name: 'stepscore' })
      : new Worker(new URL('./worker.js', import.meta.url), { type: 'module', name: 'stepscore' });
    return {
      post: (message) => worker.postMessage(message),
      listen: (onMessage, onFatal) => {
        worker.addEventListener('message', (e) => onMessage(e.data));
        worker.addEventListener('error', (e) => {
          e.preventDefault();
          onFatal(e.message || 'the worker failed (its script could not be loaded or threw)');
        });
        worker.addEventListener('messageerror', () => onFatal('a message from the worker could not be deserialized'));
      },
      setBusy: () => {},
      terminate: () => worker.terminate(),
    };
  });
}

export * from './core.js';
