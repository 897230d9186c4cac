// The public API over the wasm glue. The entry modules (index.js for
// browsers and bundlers, node.js for Node) instantiate the wasm module first,
// then re-export everything here.

import {
  segment as wasmSegment,
  aggregate as wasmAggregate,
  firstError as wasmFirstError,
  selectBest as wasmSelectBest,
  extractAnswer as wasmExtractAnswer,
  checkArithmetic as wasmCheckArithmetic,
  readTraces as wasmReadTraces,
  parseBackend as wasmParseBackend,
  isSoftwareAdapter as wasmIsSoftwareAdapter,
  checkTraces as wasmCheckTraces,
} from './wasm/stepscore_wasm.js';
import { catalogMatch, classifyModel } from './catalog.js';
import { env } from './env.js';
import { StepscoreError, callWasm, toStepscoreError } from './errors.js';
import { Downloader, resolveFile, resolveModel, throwIfAborted } from './fetch.js';
import { loadManifest } from './integrity.js';
import { loadInWorker } from './remote.js';
import { ready, requireReady, SCORE_AT, SEARCH_WITH, VERIFIER } from './runtime.js';
import { abortable, checkSignal, nextTurn } from './abort.js';
import { Generation, LocalGeneration } from './generation.js';
import { verifyEvents } from './verify-stream.js';
import { SessionState } from './session-state.js';
import { chooseBuild, singleBuild } from './threads.js';

export { StepscoreError } from './errors.js';
export { clearCache, DEFAULT_CACHE } from './fetch.js';
export { catalog } from './catalog.js';
export { env } from './env.js';
export { ready } from './runtime.js';

// Guards the constructors: scorers come from StepScorer.load, sessions from scorer.session.
const INTERNAL = Symbol('stepscore.internal');

/** The core's name for a backend ('auto', 'gpu' (also 'webgpu'), 'cpu'); throws INVALID_ARGUMENT. */
function checkBackend(requested) {
  return callWasm(() => wasmParseBackend(requested));
}

/** The adapter WebGPU would give us, described, or why there is none. */
async function probeWebGpu() {
  const gpu = globalThis.navigator?.gpu;
  if (!gpu) return { missing: 'WebGPU is not available here (navigator.gpu is missing)' };
  let adapter = null;
  try {
    adapter = await gpu.requestAdapter();
  } catch (e) {
    return { missing: `WebGPU's requestAdapter() failed: ${e?.message ?? e}` };
  }
  if (!adapter) return { missing: "WebGPU's requestAdapter() found no adapter" };
  const info = adapter.info ?? {};
  const parts = [info.vendor, info.architecture, info.device, info.description].filter((p) => typeof p === 'string' && p !== '');
  const name = [...new Set(parts)].join(' ') || 'unnamed adapter';
  // The core's policy decides which adapters run the kernels on the CPU.
  const software = wasmIsSoftwareAdapter(parts.join(' '), Boolean(info.isFallbackAdapter ?? adapter.isFallbackAdapter));
  return { name, software };
}

/**
 * Picks the engine before any download: 'webgpu' fails now when there is no
 * adapter; 'auto' takes WebGPU only on a hardware adapter (on a software one
 * the CPU engine is faster than the kernels on the same CPU, as natively).
 */
async function chooseBackend(requested) {
  const wanted = checkBackend(requested);
  if (wanted === 'cpu') return { backend: 'cpu', adapter: null, fallbackReason: null };
  const probe = await probeWebGpu();
  if (probe.missing) {
    if (wanted === 'gpu') throw new StepscoreError('WEBGPU_UNAVAILABLE', `backend '${requested}': ${probe.missing}; use backend 'cpu' or 'auto'`);
    return { backend: 'cpu', adapter: null, fallbackReason: `${probe.missing}; using the CPU (wasm) engine` };
  }
  if (wanted === 'auto' && probe.software) {
    return {
      backend: 'cpu',
      adapter: probe.name,
      fallbackReason: `the WebGPU adapter (${probe.name}) is a software rasterizer; the CPU (wasm) engine is faster than running the kernels on the same CPU (use backend 'webgpu' to force it)`,
    };
  }
  return { backend: 'webgpu', adapter: probe.name, fallbackReason: null };
}

/** `[options without signal, signal]`; options that are not an object go to the engine as they are (it names the fault). */
function splitSignal(options, where) {
  if (!options || typeof options !== 'object' || !('signal' in options)) return [options, undefined];
  const { signal, ...rest } = options;
  checkSignal(signal, where);
  return [rest, signal ?? undefined];
}

/** Awaits a Promise-returning wasm call, its failure as a StepscoreError. */
async function callWasmAsync(fn) {
  try {
    return await callWasm(fn);
  } catch (e) {
    throw toStepscoreError(e);
  }
}

function engineOptions(options) {
  const { family, maxTokens, truncation, quantize, threads } = options;
  return { family, maxTokens, truncation, quantize, threads };
}

function checkLoadOptions(options) {
  if (!options || typeof options !== 'object') {
    throw new StepscoreError('INVALID_ARGUMENT', 'StepScorer.load needs an options object with `model`');
  }
  if (options.remoteHost !== undefined && typeof options.remoteHost !== 'string') {
    throw new StepscoreError('INVALID_ARGUMENT', '`remoteHost` must be a string (the hub\'s origin)');
  }
  if (options.pypiIndex !== undefined && typeof options.pypiIndex !== 'string') {
    throw new StepscoreError('INVALID_ARGUMENT', '`pypiIndex` must be a string (a PyPI simple index URL, as PIP_INDEX_URL)');
  }
  if (options.onProgress !== undefined && typeof options.onProgress !== 'function') {
    throw new StepscoreError('INVALID_ARGUMENT', '`onProgress` must be a function');
  }
  const { cache } = options;
  if (cache !== undefined && typeof cache !== 'boolean' && !(typeof cache === 'string' && cache !== '')) {
    throw new StepscoreError('INVALID_ARGUMENT', '`cache` must be true, false or a cache name');
  }
}

/** Loads in this thread: downloads, builds the wasm scorer, moves it to WebGPU when chosen. */
async function loadLocal(options) {
  const { backend: requested = 'auto', onProgress, signal, cache } = options;
  checkBackend(requested);
  throwIfAborted(signal);
  const choice = await chooseBackend(requested);
  throwIfAborted(signal);
  // The CPU engine on the threaded build where it can run (threads.js); the
  // WebGPU engine's work is on the device, so it stays on the single one.
  const wasmBuild =
    choice.backend === 'webgpu' ? singleBuild('the WebGPU engine runs on the single-thread build') : await chooseBuild(options.threads);
  const { WasmScorer, HfFiles } = wasmBuild.bindings;
  throwIfAborted(signal);
  let { model, head } = options;
  let expected = new Map();
  if (options.manifest !== undefined && options.manifest !== null) {
    const manifest = await loadManifest(options.manifest, signal);
    model ??= manifest.model ?? undefined;
    head ??= manifest.head ?? undefined;
    expected = manifest.files;
  }
  const downloader = new Downloader({ signal, onProgress, cache, expected });
  const where = { remoteHost: options.remoteHost ?? env.remoteHost, pypiIndex: options.pypiIndex ?? env.pypiIndex };
  let resolved = await resolveModel(model, downloader, where);
  const headFile = head === undefined || head === null ? null : await resolveFile(head, 'head', 'head.safetensors', downloader);
  throwIfAborted(signal);
  // A GGUF that is a catalog file loads as that entry, built-in head included, as by name
  // (unless the caller chose the family or the head: then the file is read as they say).
  const chosen = headFile || (options.family !== undefined && options.family !== null);
  const match = resolved.kind === 'gguf' && !chosen ? await catalogMatch(resolved.bytes) : null;
  throwIfAborted(signal);
  if (match?.entry) resolved = { kind: 'catalog', entry: match.entry, name: resolved.name, bytes: resolved.bytes, matched: true };
  onProgress?.({ phase: 'load', file: null, loaded: 0, total: null });
  const wasmOptions = engineOptions(options);
  let files;
  let build;
  if (resolved.kind === 'catalog' && !headFile) {
    files = [{ name: resolved.name, bytes: resolved.bytes.length }];
    // The core's embedded head for a PRM entry (none for a backbone).
    build = () => WasmScorer.fromCatalog(resolved.bytes, resolved.entry.name, wasmOptions);
  } else if (resolved.kind === 'gguf' || resolved.kind === 'catalog') {
    files = [{ name: resolved.name, bytes: resolved.bytes.length }];
    if (headFile) {
      if (typeof WasmScorer.fromGgufWithHead !== 'function') {
        throw new StepscoreError('NOT_IMPLEMENTED', 'this build of the engine cannot load a separate `head` file');
      }
      files.push({ name: headFile.name, bytes: headFile.bytes.length });
      build = () => WasmScorer.fromGgufWithHead(resolved.bytes, resolved.name, headFile.bytes, headFile.name, wasmOptions);
    } else {
      build = () => WasmScorer.fromGguf(resolved.bytes, resolved.name, wasmOptions);
    }
  } else {
    if (headFile) {
      throw new StepscoreError('INVALID_ARGUMENT', 'a separate `head` file goes with a GGUF backbone; for a checkpoint directory, put the head tensors in its safetensors');
    }
    files = [...resolved.files].map(([name, bytes]) => ({ name, bytes: bytes.length }));
    build = () => {
      const hf = new HfFiles();
      try {
        for (const [name, bytes] of resolved.files) hf.add(name, bytes);
        return WasmScorer.fromHf(hf, wasmOptions);
      } finally {
        hf.free();
      }
    };
  }
  let inner = callWasm(build);
  let { backend, fallbackReason } = choice;
  if (backend === 'webgpu') {
    onProgress?.({ phase: 'upload', file: null, loaded: 0, total: null });
    try {
      // Consumes the CPU scorer; resolves to the same model on the GPU.
      inner = await callWasmAsync(() => inner.withBackend('gpu'));
    } catch (e) {
      if (checkBackend(requested) === 'gpu' || e.code === 'INTERNAL') throw e;
      // 'auto': the same bytes again, on the CPU engine.
      inner = callWasm(build);
      backend = 'cpu';
      fallbackReason = `WebGPU failed (${e.message}); using the CPU (wasm) engine`;
    }
  }
  const model_ = callWasm(() => inner.info());
  const { engine, adapter: engineAdapter, engineReason, ...facts } = model_;
  const adapter = engine === 'gpu' ? engineAdapter || choice.adapter : choice.adapter;
  const catalogName = resolved.kind === 'catalog' ? resolved.entry.name : null;
  const familyReason = whyFamily(facts.family, { options, resolved, headFile, match });
  const info = {
    backend,
    requestedBackend: requested,
    adapter,
    fallbackReason,
    ...facts,
    catalog: catalogName,
    familyReason,
    build: wasmBuild.name,
    buildReason: wasmBuild.reason,
    files,
    worker: false,
  };
  return new LocalEngine(inner, info, wasmBuild.memoryBytes);
}

/**
 * Why the scorer has `family` (info().familyReason): the `family` option, a
 * head file, a catalog entry's built-in head (by name, or by a GGUF's
 * sha256), or what the file itself carries, saying when a GGUF had a
 * catalog entry's size but not its sha256.
 */
function whyFamily(family, { options, resolved, headFile, match }) {
  if (options.family !== undefined && options.family !== null) return `the \`family\` option ('${options.family}')`;
  if (headFile) return `the tensors of the head file ${headFile.name}`;
  if (resolved.kind === 'catalog') {
    const { entry } = resolved;
    const how = resolved.matched ? `${resolved.name} has the sha256 of catalog entry \`${entry.name}\`'s file` : `catalog entry \`${entry.name}\``;
    if (entry.head) return `${how}: its built-in head ${entry.head}`;
    return `${how}, a backbone with no head: detected from the file's tensors and vocabulary`;
  }
  let why = `detected from ${resolved.kind === 'hf' ? "the checkpoint's" : "the file's"} tensors and vocabulary`;
  if (family === 'confidence') {
    why += ": no PRM head in it, so the LM's own token probabilities score steps (no shipped threshold; give `head` or `family` for another)";
  }
  if (match?.sizeOf) {
    why += `; it has the size of catalog entry ${match.sizeOf.map((n) => `\`${n}\``).join(', ')}'s file but sha256 ${match.sha256}, not the catalog's, so no built-in head was applied`;
  }
  return why;
}

/** The wasm scorer of this thread behind the engine interface StepScorer uses. */
class LocalEngine {
  #inner;
  #info;
  #memoryBytes;

  constructor(inner, info, memoryBytes) {
    this.#inner = inner;
    this.#info = info;
    this.#memoryBytes = memoryBytes;
  }

  score(trace, options, what) {
    return callWasmAsync(() => this.#inner.score(trace, options, what));
  }

  scoreMany(traces, options) {
    return callWasmAsync(() => this.#inner.scoreMany(traces, options));
  }

  scoreCandidates(problem, candidates) {
    return callWasmAsync(() => this.#inner.scoreCandidates(problem, candidates));
  }

  async countTokens(trace) {
    return callWasm(() => this.#inner.countTokens(trace));
  }

  session(problem) {
    return new LocalSession(callWasm(() => this.#inner.session(problem)));
  }

  generate(prompt, options) {
    return new LocalGeneration(() => this.#inner.generate(prompt, options));
  }

  /**
   * A stream verifier for `problem` (see verify-stream.js): `feed(kind,
   * data)` pushes one piece of the source and resolves to the events it
   * completed. `threshold`: undefined (the head's), null (never stops) or a number.
   */
  verifier(problem, threshold) {
    return new LocalVerifier(callWasm(() => this.#inner.verifyStream(problem, threshold, 'the stream')));
  }

  /**
   * `verifier`: another LocalEngine (or null: this one). `onEvent(event)`
   * sees each event; `shouldStop()` is asked after each, and true ends the
   * search (the core then returns what was done, `cancelled: true`).
   */
  search(problem, options, { onEvent, shouldStop, verifier }) {
    if (verifier && !(verifier instanceof LocalEngine)) {
      throw new StepscoreError('INVALID_ARGUMENT', 'search: the verifier must run where the generator runs (both in this thread)');
    }
    const on = (event) => {
      onEvent?.(event);
      return !shouldStop?.();
    };
    if (verifier) return callWasmAsync(() => this.#inner.searchVerifiedBy(problem, options, on, verifier.#inner));
    return callWasmAsync(() => this.#inner.search(problem, options, on));
  }

  info() {
    return {
      ...this.#info,
      files: this.#info.files.map((f) => ({ ...f })),
      wasmMemoryBytes: this.#memoryBytes(),
      gpuBuffers: callWasm(() => this.#inner.gpuBuffers()),
    };
  }

  dispose() {
    this.#inner.free();
  }
}

class LocalSession extends SessionState {
  #inner;
  // Appends run one after another; a getter sees the state after the last
  // settled one.
  #queue = Promise.resolve();

  constructor(inner) {
    super();
    this.#inner = inner;
  }

  append(step, signal) {
    const run = async () => {
      // Queued appends whose signal fired never start.
      throwIfAborted(signal, 'the append');
      try {
        return await callWasmAsync(() => this.#inner.append(step));
      } finally {
        if (this.#inner) this.#snapshot();
      }
    };
    const result = this.#queue.then(run, run);
    this.#queue = result.catch(() => undefined);
    return result;
  }

  #snapshot() {
    const inner = this.#inner;
    this.setState({
      scores: Array.from(callWasm(() => inner.scores())),
      steps: callWasm(() => inner.steps()),
      confidence: callWasm(() => inner.confidence()),
      ...callWasm(() => inner.tokenLogprobs()),
      tokens: { computed: callWasm(() => inner.computedTokens()), cached: callWasm(() => inner.cachedTokens()) },
    });
  }

  dispose() {
    // An append in flight holds its own reference to the session's state.
    this.#inner?.free();
    this.#inner = null;
  }
}

class LocalVerifier {
  #inner;

  constructor(inner) {
    this.#inner = inner;
  }

  async feed(kind, data) {
    const v = this.#inner;
    if (!v) throw new StepscoreError('DISPOSED', 'this stream verification ended');
    const push = { bytes: () => v.push(data), chunk: () => v.pushChunk(data), text: () => v.pushText(data), end: () => v.end(data ?? undefined), close: () => v.close() }[kind];
    if (!push) throw new StepscoreError('INTERNAL', `verifier: unknown input kind ${JSON.stringify(kind)}`);
    callWasm(push);
    const events = [];
    for (let e = await callWasmAsync(() => v.next()); e !== null; e = await callWasmAsync(() => v.next())) events.push(e);
    return events;
  }

  dispose() {
    this.#inner?.free();
    this.#inner = null;
  }
}

/** `[options without the keys, { key: value }]` for keys the JS layer handles itself. */
function takeKeys(options, keys) {
  if (!options || typeof options !== 'object' || Array.isArray(options)) return [options, {}];
  const rest = { ...options };
  const taken = {};
  for (const k of keys) {
    taken[k] = rest[k];
    delete rest[k];
  }
  return [rest, taken];
}

export class StepScorer {
  #engine;
  #sessions = new Set();
  #generations = new Set();

  constructor(token, engine) {
    if (token !== INTERNAL) throw new TypeError('use StepScorer.load() to create a scorer');
    this.#engine = engine;
  }

  /**
   * Downloads (or reads) a model and builds a scorer, in this thread or, with
   * `worker`, in a Web Worker. See index.d.ts for the options.
   */
  static async load(options) {
    // `load('stepscore-prm-smollm2')`: a catalog name (or URL, or path in Node) alone.
    if (typeof options === 'string' || options instanceof URL) options = { model: options };
    checkLoadOptions(options);
    checkSignal(options.signal, 'StepScorer.load');
    await abortable(ready(), options.signal, 'loading');
    // An unknown name or a missing path fails before any pool or worker starts.
    if (typeof options.model === 'string') classifyModel(options.model);
    let engine;
    if (options.worker) {
      // Refuse what the worker would refuse before starting one.
      checkBackend(options.backend ?? 'auto');
      throwIfAborted(options.signal);
      engine = await loadInWorker(options);
    } else {
      engine = await loadLocal(options);
    }
    return new StepScorer(INTERNAL, engine);
  }

  #live() {
    if (!this.#engine) throw new StepscoreError('DISPOSED', 'this scorer was disposed');
    return this.#engine;
  }

  /** Scores every step of a trace; `{ tokenLogprobs: true }` adds per-token log-probs, `{ signal }` aborts. */
  async score(trace, options) {
    const [rest, signal] = splitSignal(options, 'score');
    throwIfAborted(signal, 'scoring');
    return abortable(this.#live().score(trace, rest), signal, 'scoring');
  }

  /**
   * Scores several traces (all are checked before any is scored). With a
   * `signal`, one trace at a time: an abort rejects at once and no further
   * trace starts.
   */
  async scoreMany(traces, options) {
    const [rest, signal] = splitSignal(options, 'scoreMany');
    if (!signal) return this.#live().scoreMany(traces, rest);
    throwIfAborted(signal, 'scoring');
    callWasm(() => wasmCheckTraces(traces));
    const out = [];
    for (let i = 0; i < traces.length; i++) {
      await nextTurn();
      throwIfAborted(signal, 'scoring');
      out.push(await abortable(this.#live().score(traces[i], rest, `traces[${i}]`), signal, 'scoring'));
    }
    return out;
  }

  /**
   * Scores N candidate step lists for one problem, running the problem's
   * tokens once: one list of step scores per candidate, equal bit for bit to
   * scoring each alone. All are checked before any runs; an abort rejects at once.
   */
  async scoreCandidates(problem, candidates, options) {
    const [rest, signal] = splitSignal(options, 'scoreCandidates');
    const unknown = rest && typeof rest === 'object' ? Object.keys(rest) : [];
    if (unknown.length) {
      throw new StepscoreError('INVALID_ARGUMENT', `scoreCandidates options: unknown option \`${unknown[0]}\` (known: signal)`);
    }
    throwIfAborted(signal, 'scoring');
    return abortable(this.#live().scoreCandidates(problem, candidates), signal, 'scoring');
  }

  /**
   * The tokens scoring `trace` runs (the family's template included), without
   * running the model: times a measured seconds-per-token, how long it will take.
   */
  async countTokens(trace) {
    return this.#live().countTokens(trace);
  }

  /** The engine's own score call, naming the trace `what` in errors (the worker's scoreMany). */
  [SCORE_AT](trace, options, what) {
    return this.#live().score(trace, options, what);
  }

  /** Index of the first step below `threshold` (default: info().thresholdInForce, the core's rule), or -1. */
  firstError(scores, threshold) {
    return firstError(scores, threshold ?? this.info().thresholdInForce);
  }

  /** Starts scoring a trace step by step, reusing the work of earlier steps. */
  session(problem) {
    const engine = this.#live();
    const session = new Session(INTERNAL, engine.session(problem), this.#sessions);
    this.#sessions.add(session);
    return session;
  }

  /**
   * Generates after `prompt`: an async iterator of tokens; `result()` gives
   * the text and the stop reason. Options are the core's GenerateOptions in
   * camelCase, plus `signal` (an abort ends the stream, stop reason
   * 'cancelled'). Errors (bad options, a prompt over the context) reject the
   * first `next()` / `result()`.
   */
  generate(prompt, options) {
    const [rest, signal] = splitSignal(options, 'generate');
    const generation = new Generation(this.#live().generate(prompt, rest), signal, (g) => this.#generations.delete(g));
    this.#generations.add(generation);
    return generation;
  }

  /**
   * PRM-guided search for `problem`: this scorer generates, `verifier` (this
   * scorer by default) scores each step. Options are the core's
   * SearchOptions in camelCase, plus `onEvent`, `verifier` and `signal` (an
   * abort rejects with 'ABORTED' and stops the search at its next event).
   */
  async search(problem, options) {
    const [withoutSignal, signal] = splitSignal(options, 'search');
    const [rest, { onEvent, verifier }] = takeKeys(withoutSignal, ['onEvent', 'verifier']);
    if (onEvent !== undefined && typeof onEvent !== 'function') {
      throw new StepscoreError('INVALID_ARGUMENT', 'search: `onEvent` must be a function');
    }
    if (verifier !== undefined && verifier !== null && !(verifier instanceof StepScorer)) {
      throw new StepscoreError('INVALID_ARGUMENT', 'search: `verifier` must be a StepScorer');
    }
    throwIfAborted(signal, 'the search');
    // An exception in onEvent stops the search and rejects it as it was thrown.
    let thrown = null;
    const hooks = {
      verifier: verifier && verifier !== this ? verifier.#live() : null,
      onEvent: (event) => {
        if (thrown || signal?.aborted) return;
        try {
          onEvent?.(event);
        } catch (e) {
          thrown = { error: e };
        }
      },
      shouldStop: () => thrown !== null || Boolean(signal?.aborted),
    };
    const result = await abortable(this[SEARCH_WITH](problem, rest, hooks), signal, 'the search');
    if (thrown) throw thrown.error;
    return result;
  }

  /**
   * Verifies an external generator's answer to `problem` while it is
   * written: `source` is a fetch Response or ReadableStream of an
   * OpenAI-compatible server's SSE body, or an async iterable of chat
   * completion chunk objects (WebLLM, wllama) or of text. An async iterator
   * of events: `text`, `step` (its score the moment it completes), `stopped`
   * (a step scored below `threshold`: the head's shipped one unless given;
   * null never stops) and `finished`. The source is cancelled on `stopped`,
   * on abort (`signal`: rejects with 'ABORTED') and on `break`.
   */
  verifyStream(problem, source, options) {
    // Every error, bad options included, rejects the first next(), as generate's do.
    return verifyEvents(() => {
      const [rest, signal] = splitSignal(options, 'verifyStream');
      const [unknown, { threshold }] = takeKeys(rest ?? {}, ['threshold']);
      const extra = Object.keys(unknown ?? {});
      if (extra.length) throw new StepscoreError('INVALID_ARGUMENT', `verifyStream: unknown option \`${extra[0]}\` (options: threshold, signal)`);
      if (threshold !== undefined && threshold !== null && typeof threshold !== 'number') {
        throw new StepscoreError('INVALID_ARGUMENT', 'verifyStream: `threshold` must be a number, null or left out');
      }
      return { verifier: this[VERIFIER](problem, threshold), signal };
    }, source);
  }

  /** The engine's stream verifier (the worker's; see LocalEngine.verifier). */
  [VERIFIER](problem, threshold) {
    return this.#live().verifier(problem, threshold);
  }

  /** The engine's search with its hooks (the worker's search; see LocalEngine.search). */
  [SEARCH_WITH](problem, options, hooks) {
    return this.#live().search(problem, options, hooks);
  }

  /** Backend, family, dimensions and sizes of the loaded model. */
  info() {
    return this.#live().info();
  }

  /** Frees the model and every session started on it (and ends its worker). Safe to call twice. */
  dispose() {
    for (const s of [...this.#sessions]) s.dispose();
    for (const g of [...this.#generations]) g.cancel();
    this.#engine?.dispose();
    this.#engine = null;
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

  /** Appends a step and resolves to its score; `{ signal }`: an append whose signal fires before it starts never runs. */
  async append(step, options) {
    const [, signal] = splitSignal(options, 'append');
    throwIfAborted(signal, 'the append');
    return this.#live().append(step, signal);
  }

  /** Scores of the steps appended so far. */
  get scores() {
    return this.#live().scores;
  }

  /** The steps appended so far. */
  get steps() {
    return this.#live().steps;
  }

  /** Confidence-family statistics per step (empty for other families). */
  get confidence() {
    return this.#live().confidence;
  }

  /** Per step, its tokens' log-probs with UTF-16 spans in the step (empty when the head reads none). */
  get tokenLogprobs() {
    return this.#live().tokenLogprobs;
  }

  /** Per step, the span of its least likely number (or token), or null. */
  get leastLikely() {
    return this.#live().leastLikely;
  }

  /** Tokens run through the model over the session's life, and tokens held in its cache. */
  get tokens() {
    return this.#live().tokens;
  }

  dispose() {
    this.#inner?.dispose();
    this.#inner = null;
    this.#owner.delete(this);
  }
}

if (typeof Symbol.dispose === 'symbol') {
  Session.prototype[Symbol.dispose] = Session.prototype.dispose;
}

/** A synchronous helper's wasm call: NOT_READY before `ready()`. */
function sync(fn) {
  requireReady();
  return callWasm(fn);
}

/** Splits a response into steps with UTF-16 spans: `text.slice(start, end) === step.text`. */
export function segment(text, segmenter) {
  return sync(() => wasmSegment(text, segmenter));
}

/** Combines step scores into one ('min' by default); null for no scores. */
export function aggregate(scores, how) {
  return sync(() => wasmAggregate(scores, how)) ?? null;
}

/** Index of the first step scoring below `threshold` (default 0.5), or -1. */
export function firstError(scores, threshold) {
  return sync(() => wasmFirstError(scores, threshold));
}

/**
 * Reads a trace file's text with the core's reader (what `stepscore read`
 * prints): every row format, the good rows kept when others are bad.
 */
export function readTraces(text, options) {
  return sync(() => wasmReadTraces(text, options));
}

/** Best-of-N, majority and weighted vote over scored candidate responses. */
export function selectBest(candidates, how) {
  return sync(() => wasmSelectBest(candidates, how));
}

/**
 * The equations `text` writes, each checked in exact rational arithmetic
 * (no model): `{ start, end, left, right, leftValue, rightValue, approx,
 * holds, explanation }`, spans in string indices.
 */
export function checkArithmetic(text) {
  return sync(() => wasmCheckArithmetic(text));
}

/** The final answer a response states, or null. */
export function extractAnswer(text) {
  return sync(() => wasmExtractAnswer(text)) ?? null;
}
