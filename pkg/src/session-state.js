// The getters both engines' sessions share: copies of the state after the
// last settled append (the in-thread session reads it from wasm, the worker
// session receives it with each reply), so they stay synchronous.

export class SessionState {
  #state = { scores: [], steps: [], confidence: [], tokenLogprobs: [], leastLikely: [], tokens: { computed: 0, cached: 0 } };

  /** `{ scores, steps, confidence, tokenLogprobs, leastLikely, tokens: { computed, cached } }`. */
  setState(state) {
    this.#state = state;
  }

  get scores() {
    return [...this.#state.scores];
  }

  get steps() {
    return [...this.#state.steps];
  }

  get confidence() {
    return this.#state.confidence.map((c) => ({ ...c }));
  }

  get tokenLogprobs() {
    return this.#state.tokenLogprobs.map((step) => step.map((t) => ({ ...t })));
  }

  get leastLikely() {
    return this.#state.leastLikely.map((t) => (t ? { ...t } : null));
  }

  get tokens() {
    return { ...this.#state.tokens };
  }
}
