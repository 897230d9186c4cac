// Which wasm build a scorer runs on, and the threaded build's worker pool.
//
// The package ships two builds of the same engine: wasm/ (one thread) and
// wasm-threads/ (atomics + shared memory; the core's `par` module runs its
// parallel loops on a rayon pool). The threaded build needs shared memory
// (SharedArrayBuffer: Node, or a cross-origin isolated page, i.e. one served
// with COOP/COEP) and a thread that may wait for its pool (Node, or a
// worker; a page's main thread may not). Its pool is started once per
// instance, by the first load that uses it: `threads - 1` workers (Web
// Workers or worker_threads, started by the host's hooks), each running
// pool-worker.js on the same module and memory, the calling thread the last.
//
// The entry modules register the host: `setThreadedHost(null, reason)`
// where the threaded build cannot run at all (a page's main thread), or
// `setThreadedHost({ compile, spawn, cores })` where it can.

import * as single from './wasm/stepscore_wasm.js';
import { StepscoreError } from './errors.js';
import { wasmMemoryBytes } from './runtime.js';

let host = null;
let hostMissing = 'the threaded build is not set up in this host';
let started = null;

export function setThreadedHost(value, missing) {
  host = value;
  if (missing) hostMissing = missing;
}

/** Why the threaded build cannot run here, or null when it can. */
export function threadedUnavailable() {
  // Browsers hide SharedArrayBuffer on pages that are not isolated: say so first.
  const isNode = typeof globalThis.process?.versions?.node === 'string';
  if (!isNode && globalThis.crossOriginIsolated !== true) {
    return 'the page is not cross-origin isolated (serve it with Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp)';
  }
  if (typeof SharedArrayBuffer !== 'function' || typeof Atomics !== 'object') {
    return 'this host has no SharedArrayBuffer/Atomics';
  }
  if (!host) return hostMissing;
  return null;
}

/** Starts one pool worker; resolves once it instantiated the module (it then runs its rayon thread). */
function startPoolWorker(module, memory, builder) {
  return new Promise((resolve, reject) => {
    let port;
    try {
      port = host.spawn();
    } catch (e) {
      reject(e);
      return;
    }
    port.onMessage((m) => {
      if (m?.type === 'stepscore-pool-ready') {
        port.idle?.();
        resolve(port);
      }
      else if (m?.type === 'stepscore-pool-failed') reject(new Error(m.message));
    });
    port.onError((why) => reject(new Error(why)));
    port.post({ type: 'stepscore-pool-init', module, memory, receiver: builder.receiver() });
  });
}

async function startThreaded(threads) {
  const glue = await import('./wasm-threads/stepscore_wasm.js');
  const module = await host.compile();
  const exports = await glue.default({ module_or_path: module });
  const builder = new glue.PoolBuilder(threads - 1);
  try {
    // Queues one rayon thread per worker (and waits for none); each worker
    // takes one when it starts.
    builder.build();
    const workers = [];
    for (let i = 0; i < threads - 1; i++) workers.push(startPoolWorker(module, exports.memory, builder));
    await Promise.all(workers);
  } finally {
    builder.free();
  }
  return { glue, exports };
}

/** The single-thread build (the one the package's sync helpers use). */
export function singleBuild(reason) {
  return { name: 'single', bindings: single, reason, memoryBytes: wasmMemoryBytes };
}

function threadedBuild({ glue, exports }) {
  return { name: 'threads', bindings: glue, reason: null, memoryBytes: () => exports.memory?.buffer?.byteLength ?? null };
}

/**
 * The build a load runs on: the threaded one unless `threads` is 1 or it
 * cannot run here (then the single-thread build, with the reason). The
 * first threaded load starts the pool with `threads` (default: every core)
 * threads; later ones share it.
 */
export async function chooseBuild(threads) {
  if (threads !== undefined && threads !== null && !(Number.isInteger(threads) && threads >= 1)) {
    throw new StepscoreError('INVALID_ARGUMENT', `option \`threads\` must be a positive integer, got ${JSON.stringify(threads)}`);
  }
  if (threads === 1) return singleBuild('threads: 1 asks for the single-thread build');
  const missing = threadedUnavailable();
  if (missing) return singleBuild(`single-thread build: ${missing}`);
  const cores = Math.max(1, host.cores());
  if (!started) {
    const n = threads ?? cores;
    if (n <= 1) return singleBuild('single-thread build: this host reports one core');
    started = startThreaded(n).catch((e) => {
      started = null;
      throw new StepscoreError('INTERNAL', `the threaded wasm build failed to start: ${e?.message ?? e}`, { cause: e });
    });
  }
  return threadedBuild(await started);
}

/** The threaded build's host in a browser worker: module Web Workers, the wasm fetched next to this file. */
export function webThreadsHost() {
  return {
    compile: async () => {
      const url = new URL('./wasm-threads/stepscore_wasm_bg.wasm', import.meta.url);
      const response = await fetch(url);
      if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
      return WebAssembly.compile(await response.arrayBuffer());
    },
    spawn: () => {
      const worker = new Worker(new URL('./pool-worker.js', import.meta.url), { type: 'module', name: 'stepscore-pool' });
      return {
        post: (message) => worker.postMessage(message),
        onMessage: (f) => worker.addEventListener('message', (e) => f(e.data)),
        onError: (f) =>
          worker.addEventListener('error', (e) => {
            e.preventDefault();
            f(e.message || 'a pool worker failed to start');
          }),
      };
    },
    cores: () => globalThis.navigator?.hardwareConcurrency || 1,
  };
}
