// Compiled by `npm run typecheck` (tsc, no emit): the published types accept
// the documented calls and reject misuse (each @ts-expect-error must error).
import { StepScorer, StepscoreError, segment, aggregate, firstError, selectBest, extractAnswer, clearCache, DEFAULT_CACHE, readTraces } from 'stepscore';
import type { ErrorCode, Progress, ScorerInfo, TraceScore, Selection, Manifest, ReadResult, RowFormat, TokenLogprob, TextSpan, GenerationResult, StopReason, SearchEvent, SearchResult, SearchCandidate } from 'stepscore';

export async function usage(bytes: Uint8Array, file: File): Promise<void> {
  const controller = new AbortController();
  const scorer = await StepScorer.load({
    model: 'https://example.test/model/',
    backend: 'auto',
    signal: controller.signal,
    onProgress: (p: Progress) => void p.loaded,
    family: 'rlhflow',
    maxTokens: 512,
    truncation: 'drop-steps',
  });
  await StepScorer.load({ model: bytes });
  const manifest: Manifest = { version: 1, model: 'm.gguf', head: 'head.safetensors', files: [{ url: 'm.gguf', size: 3, sha256: 'ab' }] };
  const inWorker = await StepScorer.load({ manifest, worker: true, cache: 'my-models' });
  await StepScorer.load({ model: 'm.gguf', head: file, manifest: 'https://example.test/m.json', cache: false, worker: new URL('https://example.test/w.js') });
  const w: boolean = inWorker.info().worker;
  const cached: boolean | undefined = ({} as Progress).cached;
  const cleared: boolean = await clearCache(DEFAULT_CACHE);
  const integrity: ErrorCode = 'INTEGRITY_ERROR';
  // @ts-expect-error: manifests have a version
  await StepScorer.load({ manifest: { files: [] } });
  // @ts-expect-error: cache is a boolean or a name
  await StepScorer.load({ model: bytes, cache: 1 });
  await StepScorer.load({ model: file, backend: 'cpu' });
  await StepScorer.load({ model: { 'config.json': '{}', 'model.safetensors': bytes.buffer as ArrayBuffer } });
  const r: TraceScore = await scorer.score({ problem: 'p', steps: ['a', 'b'] });
  await scorer.score({ problem: 'p', steps: [{ text: 'a', label: true }, { text: 'b', score: null }] });
  const read: ReadResult = readTraces('{"problem": "p", "steps": ["a"]}', { format: 'auto', segmenter: 'newline', name: 'f.jsonl' });
  const format: RowFormat = read.records[0].format;
  const field: string | null = read.errors[0]?.at.field;
  // A trace read from a file scores as it is.
  await scorer.score(read.records[0].trace);
  const first: number | null = r.stepScores[0];
  const many: TraceScore[] = await scorer.scoreMany([{ problem: 'p', steps: ['a'] }], { tokenLogprobs: false });
  const tokens: number = await scorer.countTokens({ problem: 'p', steps: ['a'] });
  const candidates: number[][] = await scorer.scoreCandidates('p', [['a', 'b'], ['c']], { signal: new AbortController().signal });
  const withTokens = await scorer.score({ problem: 'p', steps: ['a'] }, { tokenLogprobs: true });
  const token: TokenLogprob | undefined = withTokens.tokenLogprobs?.[0][0];
  const where: TextSpan | null | undefined = withTokens.leastLikely?.[0];
  const entropy: number | undefined = token?.entropy;
  // @ts-expect-error: the option is a boolean
  await scorer.score({ problem: 'p', steps: ['a'] }, { tokenLogprobs: 1 });
  const session = scorer.session('p');
  const s: number = await session.append('step');
  const sessionTokens: TokenLogprob[][] = session.tokenLogprobs;
  const sessionWhere: Array<TextSpan | null> = session.leastLikely;
  const info: ScorerInfo = scorer.info();
  const backend: 'cpu' | 'webgpu' = info.backend;
  const steps = segment('a\n\nb', 'newline').map((x) => x.text.slice(0, x.end - x.start));
  const agg: number | null = aggregate([0.5, null], 'geo_mean');
  const idx: number = firstError(new Float64Array([0.2]), 0.5);
  const sel: Selection = selectBest([{ steps: ['a'], scores: [0.5] }], 'last');
  const answer: string | null = extractAnswer('\\boxed{1}');
  try {
    scorer.dispose();
  } catch (e) {
    if (e instanceof StepscoreError) {
      const code: ErrorCode = e.code;
      void code;
    }
  }
  await StepScorer.load({ model: bytes, backend: 'gpu' });
  // @ts-expect-error: not a backend
  await StepScorer.load({ model: bytes, backend: 'cuda' });
  // @ts-expect-error: steps are all strings or all objects
  await scorer.score({ problem: 'p', steps: ['a', { text: 'b' }] });
  // @ts-expect-error: not a row format
  readTraces('', { format: 'csv' });
  // @ts-expect-error: a trace needs a problem
  await scorer.score({ steps: ['a'] });
  // @ts-expect-error: not an aggregation
  aggregate([1], 'median');
  // @ts-expect-error: scorers come from load()
  new StepScorer();
  void [first, many, token, where, entropy, sessionTokens, sessionWhere, s, backend, steps, agg, idx, sel, answer, w, cached, cleared, integrity, format, field];
}

// Issue 22: catalog names, the hub setting, abort signals, trace shapes, the shipped threshold.
import { catalog, env, ready } from 'stepscore';
import type { CatalogEntry, TraceInput } from 'stepscore';

export async function installable(): Promise<void> {
  await ready();
  env.remoteHost = 'http://127.0.0.1:8080';
  const entries: CatalogEntry[] = catalog();
  const sha: string = entries[0].file.sha256;
  const scorer = await StepScorer.load('stepscore-prm-smollm2');
  await StepScorer.load({ model: 'stepscore-prm-qwen1.5b', remoteHost: 'https://hf-mirror.example', worker: true });
  env.pypiIndex = 'http://127.0.0.1:8081/simple';
  await StepScorer.load({ model: 'stepscore-prm-smollm2', pypiIndex: 'https://pypi.example/simple', onProgress: (p) => p.source === 'pypi' && p.part });
  const t: number | null = scorer.info().threshold;
  const reads: 'all' | 'arithmetic' | 'none' = scorer.info().tokensRead;
  const matched: string | null = scorer.info().catalog;
  const why: string = scorer.info().familyReason;
  const first: number = scorer.firstError([0.9, 0.1]);
  const phase: Progress['phase'] = 'upload';
  const c = new AbortController();
  await scorer.score({ problem: 'p', response: 'a\n\nb' }, { signal: c.signal });
  await scorer.scoreMany([{ messages: [{ role: 'user', content: 'p' }, { role: 'assistant', content: 'a' }] }], { signal: c.signal });
  await scorer.session('p').append('a', { signal: c.signal });
  const shapes: TraceInput[] = [{ problem: 'p', steps: ['a'] }, { problem: 'p', response: 'a' }];
  // @ts-expect-error: a trace needs a problem (or messages)
  await scorer.score({ response: 'a' });
  // @ts-expect-error: a chat message has a role the core reads
  await scorer.score({ messages: [{ role: 'robot', content: 'a' }] });
  void [sha, t, first, phase, shapes];
}

export async function generateAndSearch(scorer: StepScorer): Promise<void> {
  const controller = new AbortController();
  const generation = scorer.generate('What is 2 + 2?', { maxNewTokens: 32, sampling: { temperature: 0, topK: 0, seed: 1 }, stop: ['\n\n'], stopAtStep: true, chat: true, system: 's', signal: controller.signal });
  for await (const token of generation) {
    const t: string = token.text;
    const id: number = token.id;
    const lp: number = token.logprob;
  }
  const done: GenerationResult = await generation.result();
  const why: StopReason = done.stopReason;
  const soFar: string = generation.text;
  const reason: StopReason | null = generation.stopReason;
  // @ts-expect-error: options are camelCase
  scorer.generate('x', { max_new_tokens: 3 });
  const events: SearchEvent[] = [];
  const result: SearchResult = await scorer.search('What is 2 + 2?', {
    method: 'dvts',
    n: 8,
    beamWidth: 2,
    maxSteps: 10,
    aggregation: 'last',
    tokenBudget: 4000,
    generate: { maxNewTokens: 128, sampling: { temperature: 0.7 }, system: null },
    verifier: scorer,
    signal: controller.signal,
    onEvent: (e) => {
      events.push(e);
      if (e.event === 'step') {
        const score: number = e.score;
      }
      if (e.event === 'finished') {
        const s: StopReason = e.stopReason;
      }
    },
  });
  const chosen: SearchCandidate | null = result.chosen === null ? null : result.candidates[result.chosen];
  const votes: Selection = result.selection;
  // @ts-expect-error: methods are kebab-case
  await scorer.search('x', { method: 'best_of_n' });
}

export async function verifyStream(scorer: StepScorer, response: Response, chunks: AsyncIterable<object>) {
  const controller = new AbortController();
  for await (const e of scorer.verifyStream('What is 2 + 3?', response, { threshold: 0.5, signal: controller.signal })) {
    if (e.event === 'step') {
      const span: [number, number] = [e.start, e.end];
      const score: number = e.score;
    }
    if (e.event === 'finished') {
      const reason: string | null = e.finishReason;
    }
  }
  for await (const e of scorer.verifyStream('x', chunks, { threshold: null })) {
    if (e.event === 'stopped') controller.abort();
  }
  // @ts-expect-error: the threshold is a number
  scorer.verifyStream('x', chunks, { threshold: 'high' });
}
