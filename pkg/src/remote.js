// The page side of worker mode: the same engine interface as the in-thread
// one (core.js), over messages to a worker running worker-host.js. Only data
// crosses: URLs are made absolute here (the worker's own URL differs from the
// page's), progress comes back as events, and an abort or dispose ends the
// worker, which stops its downloads and frees its memory at once.

import { StepscoreError } from './errors.js';
import { isCatalogName } from './catalog.js';
import { env } from './env.js';
import { absoluteUrl, throwIfAborted } from './fetch.js';
import { parseManifest } from './integrity.js';
import { startWorker } from './runtime.js';
import { SessionState } from './session-state.js';
import { RemoteGeneration } from './generation.js';

function typeName(v) {
  return v === null ? 'null' : Array.isArray(v) ? 'an array' : typeof v;
}

function workerUrl(spec) {
  if (spec === true) return null;
  if (typeof spec === 'string' || spec instanceof URL) return absoluteUrl(spec, 'worker');
  throw new StepscoreError('INVALID_ARGUMENT', '`worker` must be true or the URL of a worker script');
}

/** The load options as the worker receives them. */
function portable(options) {
  const { model, head, manifest, backend, family, maxTokens, truncation, quantize, cache, threads } = options;
  // The page's catalog sources travel with the load (the worker has its own `env`).
  const remoteHost = options.remoteHost ?? env.remoteHost;
  const pypiIndex = options.pypiIndex ?? env.pypiIndex;
  const out = { backend, family, maxTokens, truncation, quantize, cache, threads, remoteHost, pypiIndex };
  // Catalog names go as they are; so do Node's paths (its worker shares the working directory).
  const keep = (v) => isCatalogName(v) || (typeof v === 'string' && typeof globalThis.location === 'undefined');
  const url = (v, what) => (keep(v) ? v : typeof v === 'string' || v instanceof URL ? absoluteUrl(v, what) : v);
  out.model = url(model, 'model');
  out.head = url(head, 'head');
  if (manifest !== undefined && manifest !== null) {
    if (typeof manifest === 'string' || manifest instanceof URL) {
      out.manifest = absoluteUrl(manifest, 'manifest');
    } else {
      // Checked here so relative URLs resolve against the page.
      const m = parseManifest(manifest, globalThis.location?.href);
      out.manifest = {
        version: 1,
        ...(m.model ? { model: m.model } : {}),
        ...(m.head ? { head: m.head } : {}),
        files: [...m.files].map(([u, f]) => ({ url: u, ...(f.size !== null ? { size: f.size } : {}), ...(f.sha256 ? { sha256: f.sha256 } : {}) })),
      };
    }
  }
  return out;
}

class WorkerClient {
  #port;
  #pending = new Map();
  #nextId = 1;
  #dead = null;
  memory = null;
  gpuBuffers = null;

  constructor(port) {
    this.#port = port;
    port.listen(
      (message) => this.#receive(message),
      (why) => this.#fail(new StepscoreError('INTERNAL', `the stepscore worker failed: ${why}`)),
    );
  }

  #receive(message) {
    const call = this.#pending.get(message?.id);
    if (!call) return;
    if (message.progress) {
      call.onProgress?.(message.progress);
      return;
    }
    this.#settle(message.id);
    if (message.memory !== undefined) this.memory = message.memory;
    if (message.gpuBuffers !== undefined) this.gpuBuffers = message.gpuBuffers;
    if (message.ok) call.resolve(message.value);
    else call.reject(new StepscoreError(message.error?.code ?? 'INTERNAL', message.error?.message ?? 'the worker failed'));
  }

  #settle(id) {
    const call = this.#pending.get(id);
    this.#pending.delete(id);
    if (this.#pending.size === 0) this.#port.setBusy(false);
  }

  #fail(error) {
    if (this.#dead) return;
    this.#dead = error;
    for (const [id, call] of [...this.#pending]) {
      this.#settle(id);
      call.reject(error);
    }
    this.#port.terminate();
  }

  /** Sends `{ op, ...args }` and resolves to the reply's value. `code`: the error code if args cannot be sent. */
  call(op, args, { code = 'INVALID_ARGUMENT', onProgress } = {}) {
    if (this.#dead) return Promise.reject(this.#dead);
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      try {
        this.#port.post({ id, op, ...args });
      } catch (e) {
        // DataCloneError: a function, a DOM node, a class instance with private state...
        reject(new StepscoreError(code, `${op}: the argument cannot be sent to the worker: ${e?.message ?? e}`, { cause: e }));
        return;
      }
      this.#pending.set(id, { resolve, reject, onProgress });
      this.#port.setBusy(true);
    });
  }

  terminate(error) {
    this.#fail(error);
  }
}

function disposedError() {
  return new StepscoreError('DISPOSED', 'this scorer was disposed');
}

export async function loadInWorker(options) {
  const url = workerUrl(options.worker);
  const args = { options: portable(options) };
  const { signal, onProgress } = options;
  throwIfAborted(signal);
  const client = new WorkerClient(startWorker(url));
  // Aborting ends the worker: its download stops and the load rejects at once.
  const onAbort = () => client.terminate(abortError(signal));
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    const info = await client.call('load', args, { onProgress });
    return new RemoteEngine(client, { ...info, worker: true });
  } catch (e) {
    client.terminate(e);
    throw e;
  } finally {
    signal?.removeEventListener('abort', onAbort);
  }
}

function abortError(signal) {
  try {
    throwIfAborted(signal);
  } catch (e) {
    return e;
  }
  return new StepscoreError('ABORTED', 'loading was aborted');
}

/**
 * A flag the page sets and the worker reads while a search runs (the worker
 * is busy in wasm then and reads no messages): an Int32Array over shared
 * memory, where there is any (Node, a cross-origin isolated page); null
 * elsewhere, and then the worker finishes an aborted search and drops it.
 */
function sharedFlag() {
  if (typeof SharedArrayBuffer !== 'function' || typeof Atomics !== 'object') return null;
  try {
    return new Int32Array(new SharedArrayBuffer(4));
  } catch {
    return null;
  }
}

class RemoteEngine {
  #client;
  #info;
  #nextSession = 1;
  #nextGeneration = 1;
  #nextVerifier = 1;

  constructor(client, info) {
    this.#client = client;
    this.#info = info;
  }

  score(trace, options, what) {
    return this.#client.call('score', { trace, options, what }, { code: 'TRACE_INVALID' });
  }

  scoreMany(traces, options) {
    return this.#client.call('scoreMany', { traces, options }, { code: 'TRACE_INVALID' });
  }

  countTokens(trace) {
    return this.#client.call('countTokens', { trace }, { code: 'TRACE_INVALID' });
  }

  scoreCandidates(problem, candidates) {
    return this.#client.call('scoreCandidates', { problem, candidates }, { code: 'TRACE_INVALID' });
  }

  session(problem) {
    if (typeof problem !== 'string') {
      throw new StepscoreError('TRACE_INVALID', `problem must be a string, got ${typeName(problem)}`);
    }
    const sid = this.#nextSession++;
    const created = this.#client.call('session', { sid, problem });
    // A failure here also fails the first append, which reports it.
    created.catch(() => undefined);
    return new RemoteSession(this.#client, sid, created);
  }

  generate(prompt, options) {
    const gid = this.#nextGeneration++;
    const client = this.#client;
    const generation = new RemoteGeneration(() => client.call('generateCancel', { gid }).catch(() => undefined));
    client
      .call('generate', { gid, prompt, options }, { onProgress: (token) => generation.push({ token }) })
      .then(
        (done) => generation.push({ done }),
        (error) => generation.push({ error }),
      );
    return generation;
  }

  /** The worker's stream verifier (see LocalEngine.verifier); its feeds run in order. */
  verifier(problem, threshold) {
    const vid = this.#nextVerifier++;
    const client = this.#client;
    // `undefined` does not survive a message as a value of its own.
    const created = client.call('verifierStart', { vid, problem, threshold: threshold === undefined ? { head: true } : { value: threshold } });
    created.catch(() => undefined);
    return {
      feed: async (kind, data) => {
        await created;
        return client.call('verifierFeed', { vid, kind, data });
      },
      dispose: () => {
        client.call('verifierDispose', { vid }).catch(() => undefined);
      },
    };
  }

  search(problem, options, { onEvent, shouldStop, verifier }) {
    if (verifier) {
      throw new StepscoreError('INVALID_ARGUMENT', 'search: in worker mode the verifier must be the generator itself (each worker holds one model)');
    }
    const flag = sharedFlag();
    // Events arrive while the worker runs; the page asks to stop at each.
    return this.#client.call('search', { problem, options, cancel: flag }, {
      onProgress: (event) => {
        onEvent(event);
        if (flag && shouldStop()) Atomics.store(flag, 0, 1);
      },
    });
  }

  info() {
    return {
      ...this.#info,
      files: this.#info.files.map((f) => ({ ...f })),
      wasmMemoryBytes: this.#client.memory ?? this.#info.wasmMemoryBytes,
      gpuBuffers: this.#client.gpuBuffers ?? this.#info.gpuBuffers,
    };
  }

  dispose() {
    this.#client.terminate(disposedError());
  }
}

/** Mirrors the worker's session state after each append, so its getters stay synchronous. */
class RemoteSession extends SessionState {
  #client;
  #sid;
  #created;

  constructor(client, sid, created) {
    super();
    this.#client = client;
    this.#sid = sid;
    this.#created = created;
  }

  async append(step, signal) {
    throwIfAborted(signal, 'the append');
    const reply = this.#client.call('append', { sid: this.#sid, step }, { code: 'TRACE_INVALID' });
    await this.#created;
    const { score, state } = await reply;
    this.setState(state);
    return score;
  }

  dispose() {
    this.#client.call('sessionDispose', { sid: this.#sid }).catch(() => undefined);
  }
}
