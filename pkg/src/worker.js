// The module worker that `StepScorer.load({ worker: true })` starts in
// browsers: its own wasm instance, driven by messages (worker-host.js). A
// worker may wait, so on a cross-origin isolated page its scorers run on the
// threaded build (threads.js).
import init from './wasm/stepscore_wasm.js';
import { setWasmExports } from './runtime.js';
import { setThreadedHost, webThreadsHost } from './threads.js';
import { serve } from './worker-host.js';

setThreadedHost(webThreadsHost());
// Listen at once; calls wait for the engine inside serve().
const ready = init({ module_or_path: new URL('./wasm/stepscore_wasm_bg.wasm', import.meta.url) }).then(setWasmExports);
serve(
  {
    post: (message) => self.postMessage(message),
    listen: (onMessage) => self.addEventListener('message', (e) => onMessage(e.data)),
  },
  ready,
);
