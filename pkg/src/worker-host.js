// The worker side of worker mode: one scorer per worker, driven by messages
// `{ id, op, ...args }` from remote.js. Replies are `{ id, ok: true, value,
// memory, gpuBuffers }` or `{ id, ok: false, error: { code, message } }`; a
// load also sends `{ id, progress }` events. Calls start in arrival order;
// on WebGPU a scoring yields while the device works, and a session's
// appends stay in order (the session queues them).

import { StepScorer } from './core.js';
import { StepscoreError } from './errors.js';
import { SCORE_AT, SEARCH_WITH, VERIFIER, wasmMemoryBytes } from './runtime.js';

function sessionState(session) {
  return {
    scores: session.scores,
    steps: session.steps,
    confidence: session.confidence,
    tokenLogprobs: session.tokenLogprobs,
    leastLikely: session.leastLikely,
    tokens: session.tokens,
  };
}

export function serve(port, ready) {
  let scorer = null;
  const sessions = new Map();
  const generations = new Map();
  const verifiers = new Map();
  const started = ready.then(
    () => null,
    (e) => new StepscoreError('INTERNAL', `the wasm engine failed to start in the worker: ${e?.message ?? e}`),
  );

  const live = () => {
    if (!scorer) throw new StepscoreError('INTERNAL', 'worker: no model is loaded');
    return scorer;
  };
  const session = (sid) => {
    const s = sessions.get(sid);
    if (!s) throw new StepscoreError('DISPOSED', 'this session was disposed');
    return s;
  };

  const ops = {
    async load({ id, options }) {
      if (scorer) throw new StepscoreError('INTERNAL', 'worker: a model is already loaded');
      scorer = await StepScorer.load({
        ...options,
        worker: false,
        onProgress: (progress) => port.post({ id, progress }),
      });
      return scorer.info();
    },
    score: ({ trace, options, what }) => live()[SCORE_AT](trace, options, what ?? undefined),
    scoreMany: ({ traces, options }) => live().scoreMany(traces, options),
    scoreCandidates: ({ problem, candidates }) => live().scoreCandidates(problem, candidates),
    countTokens: ({ trace }) => live().countTokens(trace),
    session({ sid, problem }) {
      sessions.set(sid, live().session(problem));
      return null;
    },
    async append({ sid, step }) {
      const s = session(sid);
      const score = await s.append(step);
      return { score, state: sessionState(s) };
    },
    // Streams `{ id, progress: token }` per token; resolves to the result.
    // The loop yields between tokens, so a generateCancel gets in.
    async generate({ id, gid, prompt, options }) {
      const controller = new AbortController();
      generations.set(gid, controller);
      try {
        const generation = live().generate(prompt, options);
        controller.signal.addEventListener('abort', () => generation.cancel(), { once: true });
        for await (const token of generation) port.post({ id, progress: token });
        return await generation.result();
      } finally {
        generations.delete(gid);
      }
    },
    generateCancel({ gid }) {
      generations.get(gid)?.abort();
      return null;
    },
    // Streams `{ id, progress: event }` per search event; `cancel` (shared
    // memory, or null) is the page's stop flag.
    search({ id, problem, options, cancel }) {
      return live()[SEARCH_WITH](problem, options, {
        onEvent: (event) => port.post({ id, progress: event }),
        shouldStop: () => cancel !== null && cancel !== undefined && Atomics.load(cancel, 0) === 1,
      });
    },
    verifierStart({ vid, problem, threshold }) {
      verifiers.set(vid, live()[VERIFIER](problem, threshold.head ? undefined : threshold.value));
      return null;
    },
    verifierFeed({ vid, kind, data }) {
      const v = verifiers.get(vid);
      if (!v) throw new StepscoreError('DISPOSED', 'this stream verification ended');
      return v.feed(kind, data);
    },
    verifierDispose({ vid }) {
      verifiers.get(vid)?.dispose();
      verifiers.delete(vid);
      return null;
    },
    sessionDispose({ sid }) {
      sessions.get(sid)?.dispose();
      sessions.delete(sid);
      return null;
    },
  };

  port.listen(async (message) => {
    const { id, op } = message ?? {};
    try {
      const failed = await started;
      if (failed) throw failed;
      const handler = Object.hasOwn(ops, op) ? ops[op] : null;
      if (!handler) throw new StepscoreError('INTERNAL', `worker: unknown operation ${JSON.stringify(op)}`);
      const value = await handler(message);
      const gpuBuffers = scorer ? scorer.info().gpuBuffers : null;
      const memory = scorer ? scorer.info().wasmMemoryBytes : wasmMemoryBytes();
      port.post({ id, ok: true, value, memory, gpuBuffers });
    } catch (e) {
      const code = typeof e?.code === 'string' ? e.code : 'INTERNAL';
      port.post({ id, ok: false, error: { code, message: e?.message ?? String(e) } });
    }
  });
}
