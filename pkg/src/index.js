// Entry for browsers and bundlers: fetches the wasm module next to this file
// (bundlers see the `new URL(..., import.meta.url)` and ship the asset).
import init from './wasm/stepscore_wasm.js';
import { setWasmExports } from './runtime.js';

setWasmExports(await init({ module_or_path: new URL('./wasm/stepscore_wasm_bg.wasm', import.meta.url) }));

export * from './core.js';
