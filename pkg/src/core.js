// The public API over the wasm glue. The entry modules (index.js for
// browsers and bundlers, node.js for Node) instantiate the wasm module first,
// then re-export everything here.

import {
  WasmScorer,
  HfFiles,
  segment as wasmSegment,
  aggregate as wasmAggregate,
  firstError as wasmFirstError,
  selectBest as wasmSelectBest,
  extractAnswer as wasmExtractAnswer,
} from './wasm/stepscore_wasm.js';
import { StepscoreError, callWasm } from './errors.js';
import { resolveModel, throwIfAborted } from './fetch.js';
import { wasmMemoryBytes } from './runtime.js';

export { StepscoreError } from './errors.js';

const BACKENDS = ['auto', 'webgpu', 'cpu'];
const NO_WEBGPU_ENGINE = "stepscore's WebGPU engine is not in this version of the package";
// Guards the constructors: scorers come from StepScorer.load, sessions from scorer.session.
const INTERNAL = Symbol('stepscore.internal');

/** Why WebGPU cannot be used here, or null when an adapter API is present. */
function webgpuMissing() {
  return globalThis.navigator?.gpu ? null : 'WebGPU is not available here (navigator.gpu is missing)';
}

/** Picks the engine; 'webgpu' fails now, before any download. */
function chooseBackend(requested) {
  if (!BACKENDS.includes(requested)) {
    throw new StepscoreError('INVALID_ARGUMENT', `backend must be one of ${BACKENDS.map((b) => `'${b}'`).join(', ')}, got ${JSON.stringify(requested)}`);
  }
  if (requested === 'cpu') return { backend: 'cpu', fallbackReason: null };
  const missing = webgpuMissing();
  if (requested === 'webgpu') {
    if (missing) throw new StepscoreError('WEBGPU_UNAVAILABLE', `backend 'webgpu': ${missing}; use backend 'cpu' or 'auto'`);
    throw new StepscoreError('NOT_IMPLEMENTED', `backend 'webgpu': ${NO_WEBGPU_ENGINE}; use backend 'cpu' or 'auto'`);
  }
  return { backend: 'cpu', fallbackReason: `${missing ?? NO_WEBGPU_ENGINE}; using the CPU (wasm) engine` };
}

function engineOptions(options) {
  const { family, maxTokens, truncation, quantize } = options;
  return { family, maxTokens, truncation, quantize };
}

export class StepScorer {
  #inner;
  #info;
  #sessions = new Set();

  constructor(token, inner, info) {
    if (token !== INTERNAL) throw new TypeError('use StepScorer.load() to create a scorer');
    this.#inner = inner;
    this.#info = info;
  }

  /**
   * Downloads (or reads) a model and builds a scorer. See index.d.ts for the options.
   */
  static async load(options) {
    if (!options || typeof options !== 'object') {
      throw new StepscoreError('INVALID_ARGUMENT', 'StepScorer.load needs an options object with `model`');
    }
    const { model, backend: requested = 'auto', onProgress, signal } = options;
    if (onProgress !== undefined && typeof onProgress !== 'function') {
      throw new StepscoreError('INVALID_ARGUMENT', '`onProgress` must be a function');
    }
    const { backend, fallbackReason } = chooseBackend(requested);
    const resolved = await resolveModel(model, { signal, onProgress });
    throwIfAborted(signal);
    onProgress?.({ phase: 'load', file: null, loaded: 0, total: null });
    const wasmOptions = engineOptions(options);
    let inner;
    let files;
    if (resolved.kind === 'gguf') {
      files = [{ name: resolved.name, bytes: resolved.bytes.length }];
      inner = callWasm(() => WasmScorer.fromGguf(resolved.bytes, resolved.name, wasmOptions));
    } else {
      files = [...resolved.files].map(([name, bytes]) => ({ name, bytes: bytes.length }));
      const hf = new HfFiles();
      try {
        for (const [name, bytes] of resolved.files) callWasm(() => hf.add(name, bytes));
        inner = callWasm(() => WasmScorer.fromHf(hf, wasmOptions));
      } finally {
        hf.free();
      }
    }
    const model_ = callWasm(() => inner.info());
    const info = { backend, requestedBackend: requested, adapter: null, fallbackReason, ...model_, files };
    return new StepScorer(INTERNAL, inner, info);
  }

  #live() {
    if (!this.#inner) throw new StepscoreError('DISPOSED', 'this scorer was disposed');
    return this.#inner;
  }

  /** Scores every step of a trace. */
  async score(trace) {
    const inner = this.#live();
    return callWasm(() => inner.score(trace));
  }

  /** Scores several traces (all are checked before any is scored). */
  async scoreMany(traces) {
    const inner = this.#live();
    return callWasm(() => inner.scoreMany(traces));
  }

  /** Starts scoring a trace step by step, reusing the work of earlier steps. */
  session(problem) {
    const inner = this.#live();
    const session = new Session(INTERNAL, callWasm(() => inner.session(problem)), this.#sessions);
    this.#sessions.add(session);
    return session;
  }

  /** Backend, family, dimensions and sizes of the loaded model. */
  info() {
    this.#live();
    return { ...this.#info, files: this.#info.files.map((f) => ({ ...f })), wasmMemoryBytes: wasmMemoryBytes() };
  }

  /** Frees the model and every session started on it. Safe to call twice. */
  dispose() {
    for (const s of [...this.#sessions]) s.dispose();
    this.#inner?.free();
    this.#inner = null;
  }
}

if (typeof Symbol.dispose === 'symbol') {
  StepScorer.prototype[Symbol.dispose] = StepScorer.prototype.dispose;
}

export class Session {
  #inner;
  #owner;

  constructor(token, inner, owner) {
    if (token !== INTERNAL) throw new TypeError('use scorer.session(problem) to start a session');
    this.#inner = inner;
    this.#owner = owner;
  }

  #live() {
    if (!this.#inner) throw new StepscoreError('DISPOSED', 'this session (or its scorer) was disposed');
    return this.#inner;
  }

  /** Appends a step and resolves to its score. */
  async append(step) {
    const inner = this.#live();
    return callWasm(() => inner.append(step));
  }

  /** Scores of the steps appended so far. */
  get scores() {
    const inner = this.#live();
    return Array.from(callWasm(() => inner.scores()));
  }

  /** The steps appended so far. */
  get steps() {
    const inner = this.#live();
    return callWasm(() => inner.steps());
  }

  /** Confidence-family statistics per step (empty for other families). */
  get confidence() {
    const inner = this.#live();
    return callWasm(() => inner.confidence());
  }

  /** Tokens run through the model over the session's life, and tokens held in its cache. */
  get tokens() {
    const inner = this.#live();
    return { computed: callWasm(() => inner.computedTokens()), cached: callWasm(() => inner.cachedTokens()) };
  }

  dispose() {
    this.#inner?.free();
    this.#inner = null;
    this.#owner.delete(this);
  }
}

if (typeof Symbol.dispose === 'symbol') {
  Session.prototype[Symbol.dispose] = Session.prototype.dispose;
}

/** Splits a response into steps with UTF-16 spans: `text.slice(start, end) === step.text`. */
export function segment(text, segmenter) {
  return callWasm(() => wasmSegment(text, segmenter));
}

/** Combines step scores into one ('min' by default); null for no scores. */
export function aggregate(scores, how) {
  return callWasm(() => wasmAggregate(scores, how)) ?? null;
}

/** Index of the first step scoring below `threshold` (default 0.5), or -1. */
export function firstError(scores, threshold) {
  return callWasm(() => wasmFirstError(scores, threshold));
}

/** Best-of-N, majority and weighted vote over scored candidate responses. */
export function selectBest(candidates, how) {
  return callWasm(() => wasmSelectBest(candidates, how));
}

/** The final answer a response states, or null. */
export function extractAnswer(text) {
  return callWasm(() => wasmExtractAnswer(text)) ?? null;
}
