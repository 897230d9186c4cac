// The instantiated wasm module's exports, recorded by the entry module so
// info() can report the engine's memory.

let exports = null;

export function setWasmExports(value) {
  exports = value;
}

export function wasmMemoryBytes() {
  return exports?.memory?.buffer?.byteLength ?? null;
}
