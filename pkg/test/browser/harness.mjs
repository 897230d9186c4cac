// The browser suite's harness: a static server on 127.0.0.1 (Node http, no
// extra dependencies) and Debian's Chromium driven through playwright-core.
//
// The server serves
//   /dist/…        the built package (pkg/dist), with JS and wasm MIME types;
//   /page/…        this folder's test page;
//   /fixtures/…    tests/fixtures/prm (the tiny PRM checkpoints);
//   /smollm2.gguf  SmolLM2-135M-Instruct Q4_1 from stepscore's model cache;
//   /wllama/…      @wllama/wllama's ESM build (for the benchmark);
//   /cache/<f>.gguf a GGUF file of stepscore's model cache (the benchmark);
//   /mem/<name>    bytes a test registered with `server.put(name, bytes)`;
//   /slow/<path>   any of the above at 1 KiB per 20 ms, to abort mid-body;
// and 404s everything else. It counts requests per path.

import { createServer } from 'node:http';
import { createReadStream, existsSync, readFileSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { extname, join, normalize, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const PKG = fileURLToPath(new URL('../../', import.meta.url));
export const FIXTURES = join(PKG, '..', 'tests', 'fixtures', 'prm');

/** stepscore's model cache directory (the catalog's rule: $STEPSCORE_CACHE > $XDG_CACHE_HOME/stepscore > ~/.cache/stepscore). */
export function cacheDir() {
  const env = (k) => (process.env[k] ? process.env[k] : null);
  if (env('STEPSCORE_CACHE')) return env('STEPSCORE_CACHE');
  return env('XDG_CACHE_HOME') ? join(env('XDG_CACHE_HOME'), 'stepscore') : join(env('HOME') ?? homedir(), '.cache', 'stepscore');
}

/** Where stepscore keeps SmolLM2 (format::find_smollm2_gguf's rules). */
export function smollm2Path() {
  if (process.env.STEPSCORE_SMOLLM2_GGUF) return process.env.STEPSCORE_SMOLLM2_GGUF;
  return join(cacheDir(), 'SmolLM2-135M-Instruct.Q4_1.gguf');
}

export const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';

// WebGPU in headless Debian Chromium: --enable-unsafe-webgpu is what exposes
// navigator.gpu (its adapter is the bundled SwiftShader, vendor 'google',
// architecture 'swiftshader', a fallback adapter without shader-f16).
// --no-sandbox because CI runs as root. The rest keep a closed network quiet.
export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--enable-unsafe-webgpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-default-apps',
  '--no-first-run',
  '--no-default-browser-check',
  '--js-flags=--expose-gc',
];

const MIME = {
  '.js': 'text/javascript',
  '.mjs': 'text/javascript',
  '.html': 'text/html; charset=utf-8',
  '.json': 'application/json',
  '.wasm': 'application/wasm',
};

const ROOTS = {
  '/dist/': join(PKG, 'dist'),
  '/page/': join(PKG, 'test', 'browser', 'page'),
  '/fixtures/': FIXTURES,
  '/wllama/': join(PKG, 'node_modules', '@wllama', 'wllama', 'esm'),
  // *.gguf files of the model cache (the browser benchmark's models)
  '/cache/': cacheDir(),
};

function inside(root, rel) {
  const path = normalize(join(root, rel));
  return path === root || path.startsWith(root + sep) ? path : null;
}

/**
 * Starts the server. `isolate`: send COOP/COEP headers (cross-origin
 * isolation, for wasm threads). Resolves to `{ url, put, requests, count, close }`.
 */
export async function startServer({ isolate = false } = {}) {
  const requests = [];
  const memory = new Map();
  const sockets = new Set();
  const server = createServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    requests.push(url.pathname);
    let path = decodeURIComponent(url.pathname);
    const slow = path.startsWith('/slow/');
    if (slow) path = path.slice('/slow'.length);
    const headers = { 'cache-control': 'no-store' };
    if (isolate) {
      headers['cross-origin-opener-policy'] = 'same-origin';
      headers['cross-origin-embedder-policy'] = 'require-corp';
    }
    let body = null;
    let file = null;
    if (path.startsWith('/mem/') && memory.has(path.slice(5))) {
      body = memory.get(path.slice(5));
    } else if (path === '/smollm2.gguf') {
      file = smollm2Path();
    } else {
      for (const [prefix, root] of Object.entries(ROOTS)) {
        if (path.startsWith(prefix)) file = inside(root, path.slice(prefix.length));
      }
      if (path.startsWith('/cache/') && !path.endsWith('.gguf')) file = null;
    }
    if (body === null && (!file || !existsSync(file) || !statSync(file).isFile())) {
      res.writeHead(404, { ...headers, 'content-type': 'text/plain' });
      res.end('not found');
      return;
    }
    const size = body ? body.length : statSync(file).size;
    const type = MIME[extname(body ? path : file)] ?? 'application/octet-stream';
    res.writeHead(200, { ...headers, 'content-type': type, 'content-length': String(size) });
    if (!slow) {
      if (body) res.end(body);
      else createReadStream(file).pipe(res);
      return;
    }
    const bytes = body ?? readFileSync(file);
    let at = 0;
    const timer = setInterval(() => {
      if (res.destroyed || at >= bytes.length) {
        clearInterval(timer);
        if (!res.destroyed) res.end();
        return;
      }
      res.write(bytes.subarray(at, at + 1024));
      at += 1024;
    }, 20);
    res.on('close', () => clearInterval(timer));
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${server.address().port}`;
  return {
    url: base,
    requests,
    /** Requests so far whose path ends with `suffix`. */
    count: (suffix) => requests.filter((p) => p.endsWith(suffix)).length,
    put: (name, bytes) => {
      memory.set(name, typeof bytes === 'string' ? Buffer.from(bytes) : Buffer.from(bytes));
      return `${base}/mem/${name}`;
    },
    close: () =>
      new Promise((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(resolve);
      }),
  };
}

/**
 * Launches headless Chromium (a fresh profile each time) and opens the test
 * page, which imports the package as `window.stepscore`. Page errors and
 * console errors are collected in `errors`. Resolves to
 * `{ browser, page, cdp, errors, close }`.
 */
export async function openPage(server, { args = [], page: pagePath = '/page/index.html' } = {}) {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: run scripts/test/test-browser.sh (it installs Debian's chromium)`);
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: [...CHROMIUM_ARGS, ...args] });
  const context = await browser.newContext();
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    // Failed loads are the 404 tests (and the favicon); anything else is a bug.
    if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) errors.push(`console: ${m.text()}`);
  });
  await page.goto(`${server.url}${pagePath}`);
  await page.waitForFunction(() => window.stepscoreReady === true || window.stepscoreFailed, null, { timeout: 30_000 });
  const failed = await page.evaluate(() => window.stepscoreFailed ?? null);
  if (failed) throw new Error(`the package failed to load in Chromium: ${failed}`);
  const cdp = await context.newCDPSession(page);
  return { browser, context, page, cdp, errors, close: () => browser.close() };
}

/** The page's used JS heap in bytes after two forced garbage collections (CDP). */
export async function heapAfterGc(cdp) {
  await cdp.send('HeapProfiler.collectGarbage');
  await cdp.send('HeapProfiler.collectGarbage');
  const { usedSize } = await cdp.send('Runtime.getHeapUsage');
  return usedSize;
}

/**
 * Runs `fn(stepscore, arg)` in the page; resolves to `{ ok: true, value }`
 * or `{ ok: false, name, code, message }` so tests can assert on codes.
 */
export function inPage(page, fn, arg) {
  return page.evaluate(
    async ({ source, arg }) => {
      // eslint-disable-next-line no-new-func
      const f = new Function(`return (${source})`)();
      try {
        return { ok: true, value: await f(window.stepscore, arg) };
      } catch (e) {
        return { ok: false, name: e?.name, code: e?.code, message: e?.message ?? String(e) };
      }
    },
    { source: fn.toString(), arg },
  );
}

/** Asserts an inPage result failed with a StepscoreError of `code`. */
export function assertCode(assert, result, code, messagePart) {
  assert.equal(result.ok, false, `expected ${code}, got a result: ${JSON.stringify(result.value)?.slice(0, 200)}`);
  assert.equal(result.name, 'StepscoreError', result.message);
  assert.equal(result.code, code, result.message);
  if (messagePart) assert.match(result.message, messagePart);
}

/** Unwraps an inPage result, failing the test with the page's error. */
export function value(result) {
  if (!result.ok) throw new Error(`in the page: ${result.code ?? result.name}: ${result.message}`);
  return result.value;
}

/**
 * The leak soak both engines' tests run: loads `options` (plus `model: url`)
 * as `window.soakScorer`, scores `warmup` calls, then two rounds of `n`,
 * forcing a GC after the warm-up and each round. A call alternates between
 * scoring a whole trace and a session appended step by step, then disposed.
 * Resolves to `{ heaps, rounds }`: the post-GC heap and `{ info, last }`
 * (the scorer's info() and the last whole-trace step scores) after each.
 */
export async function soak(chrome, { url, options, traces, warmup, n = 200 }) {
  const { page, cdp } = chrome;
  value(
    await inPage(
      page,
      async (s, { url, options, traces }) => {
        window.soakScorer = await s.StepScorer.load({ ...options, model: url, cache: false });
        window.soakTraces = traces;
      },
      { url, options, traces },
    ),
  );
  const run = (count) =>
    inPage(
      page,
      async (s, count) => {
        let last = null;
        for (let i = 0; i < count; i++) {
          const t = window.soakTraces[i % window.soakTraces.length];
          if (i % 2) {
            last = (await window.soakScorer.score(t)).stepScores;
          } else {
            const session = window.soakScorer.session(t.problem);
            for (const step of t.steps) await session.append(step);
            session.dispose();
          }
        }
        return { info: window.soakScorer.info(), last };
      },
      count,
    ).then(value);
  const heaps = [];
  const rounds = [];
  for (const count of [warmup, n, n]) {
    rounds.push(await run(count));
    heaps.push(await heapAfterGc(cdp));
  }
  await inPage(page, () => window.soakScorer.dispose());
  return { heaps, rounds };
}
