// What a Vite app needs for the package: module workers ('es': the engine's
// worker imports the wasm glue), ES2022 (main.js awaits at top level), and
// the dev server serving the package as it is (pre-bundling would move its
// modules away from the wasm files their `new URL(..., import.meta.url)` name).
export default {
  build: { target: 'es2022' },
  worker: { format: 'es' },
  optimizeDeps: { exclude: ['stepscore'] },
};
