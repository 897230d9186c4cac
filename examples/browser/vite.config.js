// What a Vite app needs for the package: module workers ('es': the engine's
// worker imports the wasm glue) and ES2022 (main.js awaits at top level).
export default {
  build: { target: 'es2022' },
  worker: { format: 'es' },
};
