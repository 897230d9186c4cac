// `scorer.generate()`'s stream: an async iterator of tokens over either
// engine's generation (the wasm one in this thread, or a worker's, whose
// tokens arrive as messages). An abort or a `break` ends the stream with the
// core's stop reason 'cancelled'; the text so far is kept.

import { yieldToEvents } from './abort.js';
import { callWasm, toStepscoreError } from './errors.js';

/** The engine side in this thread: one wasm call per token. */
export class LocalGeneration {
  #started;
  #inner = null;
  #cancelled = false;
  #done = null;

  /** `start()` returns the Promise of a WasmGeneration (the prompt runs there). */
  constructor(start) {
    this.#started = Promise.resolve()
      .then(() => callWasm(start))
      .then((g) => {
        this.#inner = g;
        if (this.#cancelled) g.cancel();
        return g;
      })
      .catch((e) => {
        throw toStepscoreError(e);
      });
    this.#started.catch(() => undefined);
  }

  /** `{ token }`, or `{ done: { text, stopReason, tokens, promptTokens } }` once stopped. */
  async next() {
    if (this.#done) return { done: this.#done };
    const g = await this.#started;
    await yieldToEvents();
    let token;
    try {
      token = await callWasm(() => g.next());
    } catch (e) {
      this.#free();
      throw toStepscoreError(e);
    }
    if (token) return { token };
    this.#done = {
      text: g.text(),
      stopReason: g.stopReason(),
      tokens: Array.from(g.tokens()),
      promptTokens: g.promptTokens(),
    };
    this.#free();
    return { done: this.#done };
  }

  cancel() {
    this.#cancelled = true;
    this.#inner?.cancel();
  }

  #free() {
    // A next() in flight holds its own reference to the generation's state.
    this.#inner?.free();
    this.#inner = null;
  }
}

/** The engine side in worker mode: tokens pushed by the worker, pulled by next(). */
export class RemoteGeneration {
  #items = [];
  #waiting = null;
  #cancel;

  /** `cancel()` asks the worker to stop; the worker's replies come in through push(). */
  constructor(cancel) {
    this.#cancel = cancel;
  }

  push(item) {
    const waiting = this.#waiting;
    this.#waiting = null;
    if (waiting) waiting(item);
    else this.#items.push(item);
  }

  async next() {
    const item = this.#items.length > 0 ? this.#items.shift() : await new Promise((resolve) => (this.#waiting = resolve));
    // The end stays the answer to every later call.
    if (!item.token) this.#items.unshift(item);
    if (item.error) throw item.error;
    return item;
  }

  cancel() {
    this.#cancel();
  }
}

/** What `scorer.generate()` returns (see index.d.ts). */
export class Generation {
  #source;
  #signal;
  #onAbort = null;
  #queue = Promise.resolve();
  #text = '';
  #tokens = [];
  #result = null;
  #error = null;
  #onEnd;

  constructor(source, signal, onEnd) {
    this.#source = source;
    this.#signal = signal;
    this.#onEnd = onEnd;
    if (signal?.aborted) source.cancel();
    else if (signal) {
      this.#onAbort = () => source.cancel();
      signal.addEventListener('abort', this.#onAbort, { once: true });
    }
  }

  [Symbol.asyncIterator]() {
    return this;
  }

  /** The next token `{ id, text, logprob }`; `done` once the generation stopped. */
  next() {
    const step = this.#queue.then(() => this.#step());
    this.#queue = step.catch(() => undefined);
    return step;
  }

  async #step() {
    if (this.#result) return { done: true, value: undefined };
    if (this.#error) throw this.#error;
    let item;
    try {
      item = await this.#source.next();
    } catch (e) {
      this.#error = e;
      this.#end();
      throw e;
    }
    if (item.token) {
      this.#tokens.push(item.token.id);
      this.#text += item.token.text;
      return { done: false, value: item.token };
    }
    this.#result = item.done;
    this.#end();
    return { done: true, value: undefined };
  }

  #end() {
    if (this.#onAbort) this.#signal.removeEventListener('abort', this.#onAbort);
    this.#onAbort = null;
    this.#onEnd(this);
  }

  /** Leaving a `for await` early: stops the generation (stop reason 'cancelled'). */
  async return() {
    this.cancel();
    await this.result().catch(() => undefined);
    return { done: true, value: undefined };
  }

  /** Stops the generation before its next token (stop reason 'cancelled'). */
  cancel() {
    if (!this.#result && !this.#error) this.#source.cancel();
  }

  /** Runs the generation to its end (or takes what a loop left) and resolves to its result. */
  async result() {
    for (;;) {
      const { done } = await this.next();
      if (done) break;
    }
    const r = this.#result;
    return { text: r.text, stopReason: r.stopReason, tokens: [...r.tokens], promptTokens: r.promptTokens };
  }

  /** The text so far (the core's text once stopped: a stop string cut off). */
  get text() {
    return this.#result?.text ?? this.#text;
  }

  /** Why the generation stopped; null while it runs. */
  get stopReason() {
    return this.#result?.stopReason ?? null;
  }

  /** The token ids generated so far. */
  get tokens() {
    return this.#result ? [...this.#result.tokens] : [...this.#tokens];
  }
}
