import { defineConfig, type Plugin } from 'vite';
import { serveModels } from './server/models.ts';

// pkg/package.json says "sideEffects": false, but its browser entry's body is a
// side effect: it instantiates the wasm module (top-level await). Without this
// the bundler drops that body and every engine call fails. Keep the entry's
// side effects whatever the package declares.
function keepStepscoreInit(): Plugin {
  return {
    name: 'stepscore-keep-wasm-init',
    enforce: 'pre',
    async resolveId(source, importer, options) {
      if (source !== 'stepscore') return null;
      const resolved = await this.resolve(source, importer, { ...options, skipSelf: true });
      return resolved ? { ...resolved, moduleSideEffects: true } : null;
    },
  };
}

// base './': the built site works from any path (a static host's sub-folder too).
// Top-level await (pkg's entry instantiates the wasm module) needs ES2022.
export default defineConfig({
  base: './',
  plugins: [keepStepscoreInit(), serveModels()],
  build: {
    target: 'es2022',
    outDir: 'dist',
    // The wasm engine (~2.3 MB) is the one large asset; it is fetched, not inlined.
    assetsInlineLimit: 0,
    chunkSizeWarningLimit: 1024,
  },
  // pkg/ is linked from outside node_modules: let the dev server read it (and nothing else outside web/).
  server: { fs: { allow: ['.', '../pkg'] } },
  worker: { format: 'es' },
});
