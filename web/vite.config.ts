import { defineConfig } from 'vite';
import { serveModels } from './server/models.ts';

// Cross-origin isolation (COOP/COEP) on the dev and preview servers: with it
// the package's worker runs the threaded wasm build (SharedArrayBuffer);
// every asset is same-origin, so require-corp blocks nothing. A static host
// serving dist/ should send the same two headers.
const isolation = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
};

// base './': the built site works from any path (a static host's sub-folder too).
// ES2022: the package uses private class members and ??=.
export default defineConfig({
  base: './',
  plugins: [serveModels()],
  build: {
    target: 'es2022',
    outDir: 'dist',
    // The wasm engine (~2.3 MB) is the one large asset; it is fetched, not inlined.
    assetsInlineLimit: 0,
    chunkSizeWarningLimit: 1024,
  },
  // pkg/ is linked from outside node_modules: let the dev server read it (and nothing else outside web/).
  server: { fs: { allow: ['.', '../pkg'] }, headers: isolation },
  preview: { headers: isolation },
  worker: { format: 'es' },
});
