// Entry for Node: its fetch cannot read file: URLs, so the wasm bytes are
// read from disk and handed to the same initializer the browser entry uses.
import { readFile } from 'node:fs/promises';
import init from './wasm/stepscore_wasm.js';
import { setWasmExports } from './runtime.js';

const bytes = await readFile(new URL('./wasm/stepscore_wasm_bg.wasm', import.meta.url));
setWasmExports(await init({ module_or_path: bytes }));

export * from './core.js';
