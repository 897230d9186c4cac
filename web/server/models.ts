// A Vite plugin that serves model files from disk on the app's own server
// (dev server and `vite preview`), so nothing large is copied into the repo
// or into dist/:
//   /models/<file>          -> the first of $STEPSCORE_MODELS_DIR, web/models/,
//                              the repository's models/, stepscore's cache dir ($STEPSCORE_CACHE,
//                              $XDG_CACHE_HOME/stepscore
//                              or ~/.cache/stepscore) that holds <file>
//   /fixtures/prm/<dir>/... -> tests/fixtures/prm (the tiny PRMs the e2e tests use)
// A missing file is a 404 (never the SPA's index.html), so the SDK reports it.
import { createReadStream, statSync, type Stats } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Plugin } from 'vite';

const webDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** stepscore's cache directory, the way the Rust crate computes it. */
export function cacheDir(): string {
  if (process.env.STEPSCORE_CACHE) return resolve(process.env.STEPSCORE_CACHE);
  const xdg = process.env.XDG_CACHE_HOME;
  if (xdg) return join(xdg, 'stepscore');
  return join(process.env.HOME || homedir(), '.cache', 'stepscore');
}

function modelRoots(): string[] {
  // web/models, the repository's models/ (the trained default head), then the cache (the GGUF).
  const roots = [join(webDir, 'models'), resolve(webDir, '..', 'models'), cacheDir()];
  const extra = process.env.STEPSCORE_MODELS_DIR;
  return extra ? [resolve(extra), ...roots] : roots;
}

const MOUNTS: Array<{ prefix: string; roots: () => string[] }> = [
  { prefix: '/models/', roots: modelRoots },
  { prefix: '/fixtures/prm/', roots: () => [resolve(webDir, '..', 'tests', 'fixtures', 'prm')] },
];

const TYPES: Record<string, string> = {
  '.json': 'application/json; charset=utf-8',
  '.gguf': 'application/octet-stream',
  '.safetensors': 'application/octet-stream',
};

function contentType(path: string): string {
  const dot = path.lastIndexOf('.');
  return (dot >= 0 && TYPES[path.slice(dot).toLowerCase()]) || 'application/octet-stream';
}

/** The file under one of `roots` that `rel` names, refusing anything that climbs out. */
function findFile(roots: string[], rel: string): { path: string; stat: Stats } | null {
  const parts = rel.split('/');
  if (parts.some((p) => p === '' || p === '.' || p === '..' || p.includes('\\') || p.includes('\0'))) return null;
  for (const root of roots) {
    const path = resolve(root, ...parts);
    if (!path.startsWith(root + sep)) continue;
    try {
      const stat = statSync(path);
      if (stat.isFile()) return { path, stat };
    } catch {
      // not under this root
    }
  }
  return null;
}

function handle(req: IncomingMessage, res: ServerResponse, next: () => void): void {
  let pathname: string;
  try {
    pathname = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
  } catch {
    res.statusCode = 400;
    res.end('bad path');
    return;
  }
  // With base './' pages under a sub-path still ask for <base>/models/...
  for (const { prefix, roots } of MOUNTS) {
    const at = pathname.indexOf(prefix);
    if (at < 0) continue;
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.statusCode = 405;
      res.end();
      return;
    }
    const found = findFile(roots(), pathname.slice(at + prefix.length));
    if (!found) {
      res.statusCode = 404;
      res.setHeader('Content-Type', 'text/plain; charset=utf-8');
      res.end(`not found: ${pathname}`);
      return;
    }
    res.statusCode = 200;
    res.setHeader('Content-Type', contentType(found.path));
    res.setHeader('Content-Length', String(found.stat.size));
    res.setHeader('Cache-Control', 'no-cache');
    if (req.method === 'HEAD') {
      res.end();
      return;
    }
    const stream = createReadStream(found.path);
    stream.on('error', () => res.destroy());
    stream.pipe(res);
    return;
  }
  next();
}

export function serveModels(): Plugin {
  return {
    name: 'stepscore-serve-models',
    configureServer(server) {
      server.middlewares.use(handle);
    },
    configurePreviewServer(server) {
      server.middlewares.use(handle);
    },
  };
}
