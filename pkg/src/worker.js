// The module worker that `StepScorer.load({ worker: true })` starts in
// browsers: its own wasm instance, driven by messages (worker-host.js).
import init from './wasm/stepscore_wasm.js';
import { setWasmExports } from './runtime.js';
import { serve } from './worker-host.js';

// Listen at once; calls wait for the engine inside serve().
const ready = init({ module_or_path: new URL('./wasm/stepscore_wasm_bg.wasm', import.meta.url) }).then(setWasmExports);
serve(
  {
    post: (message) => self.postMessage(message),
    listen: (onMessage) => self.addEventListener('message', (e) => onMessage(e.data)),
  },
  ready,
);
