// Shared by the tests: fixture files, and a local HTTP server on 127.0.0.1
// that serves them (plus a slow route to abort mid-download).

import { createServer } from 'node:http';
import { readFileSync, existsSync, statSync, createReadStream } from 'node:fs';
import { join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import { homedir } from 'node:os';

export const FIXTURES = fileURLToPath(new URL('../../tests/fixtures/prm/', import.meta.url));
export const SMOLLM2 = join(homedir(), '.cache', 'stepscore', 'SmolLM2-135M-Instruct.Q4_1.gguf');

/** The tiny PRM fixtures and the family each is loaded with (rlhflow and confidence must be named). */
export const FAMILIES = [
  ['qwen2-prm-tiny', undefined],
  ['skywork-prm-tiny', undefined],
  ['math-shepherd-tiny', undefined],
  ['rlhflow-tiny', 'rlhflow'],
  ['confidence-tiny', 'confidence'],
];

export const CHECKPOINT_FILES = ['config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json'];

export function reference(name) {
  return JSON.parse(readFileSync(join(FIXTURES, name, 'reference.json'), 'utf8'));
}

/** The checkpoint's files as an object of named Uint8Arrays. */
export function checkpointFiles(name) {
  return Object.fromEntries(CHECKPOINT_FILES.map((f) => [f, new Uint8Array(readFileSync(join(FIXTURES, name, f)))]));
}

/** Tolerance of the native tests: 1e-4, relative for the confidence family's tiny probabilities. */
export function tolerance(family, want) {
  return family === 'confidence' ? 1e-4 * Math.abs(want) : 1e-4;
}

/**
 * Serves `/fixtures/<path>` from tests/fixtures/prm, `/smollm2.gguf` from the
 * cache, and `/slow/fixtures/<path>`, which sends 1 KiB every 20 ms so a
 * test can abort mid-body, and `memory`'s paths with their bytes. Everything else is a 404. Resolves to
 * `{ url, close, requests }`.
 */
export async function startServer({ memory = {} } = {}) {
  const requests = [];
  const sockets = new Set();
  const server = createServer((req, res) => {
    requests.push(req.url);
    const url = new URL(req.url, 'http://x');
    let path = url.pathname;
    const slow = path.startsWith('/slow/');
    if (slow) path = path.slice('/slow'.length);
    let file = null;
    if (Object.hasOwn(memory, path)) {
      res.writeHead(200, { 'content-length': String(memory[path].length), 'content-type': 'application/octet-stream' });
      res.end(memory[path]);
      return;
    }
    if (path === '/smollm2.gguf') file = SMOLLM2;
    else if (path.startsWith('/fixtures/')) {
      const rel = normalize(decodeURIComponent(path.slice('/fixtures/'.length)));
      if (!rel.startsWith('..')) file = join(FIXTURES, rel);
    }
    if (!file || !existsSync(file) || !statSync(file).isFile()) {
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end('not found');
      return;
    }
    const size = statSync(file).size;
    res.writeHead(200, { 'content-length': String(size), 'content-type': 'application/octet-stream' });
    if (!slow) {
      createReadStream(file).pipe(res);
      return;
    }
    const bytes = readFileSync(file);
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
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(resolve);
      }),
  };
}

/** Asserts that `promise` rejects with a StepscoreError of `code`; returns the error. */
export async function rejectsWith(assert, promise, code, messagePart) {
  let error = null;
  try {
    await promise;
  } catch (e) {
    error = e;
  }
  assert.ok(error, `expected a rejection with ${code}, but it resolved`);
  assert.equal(error.name, 'StepscoreError', `not a StepscoreError: ${error.stack ?? error}`);
  assert.equal(error.code, code, `code: ${error.message}`);
  if (messagePart) assert.match(error.message, messagePart);
  return error;
}

/**
 * A value-head safetensors file as `stepscore train` writes it:
 * `v_head.summary.weight` [1, width] and `v_head.summary.bias` [1], f32.
 */
export function headFile(weights, bias) {
  const n = weights.length;
  const header = {
    'v_head.summary.bias': { dtype: 'F32', shape: [1], data_offsets: [0, 4] },
    'v_head.summary.weight': { dtype: 'F32', shape: [1, n], data_offsets: [4, 4 + 4 * n] },
  };
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - (json.length % 8)) % 8);
  const out = new Uint8Array(8 + json.length + 4 + 4 * n);
  const view = new DataView(out.buffer);
  view.setBigUint64(0, BigInt(json.length), true);
  out.set(new TextEncoder().encode(json), 8);
  const data = 8 + json.length;
  view.setFloat32(data, bias, true);
  weights.forEach((w, i) => view.setFloat32(data + 4 + 4 * i, w, true));
  return out;
}
