// The demo app: load a PRM, score a pasted or loaded trace step by step, see
// the dense reward, compare N candidates. Every piece of trace text reaches
// the page through textContent (see dom.ts), never as markup.
import {
  aggregate,
  firstError,
  segment,
  selectBest,
  StepScorer,
  StepscoreError,
  type Aggregation,
  type Backend,
  type Family,
  type ModelSource,
  type ScorerInfo,
  type Selection,
  type StepConfidence,
} from 'stepscore';
import { drawChart } from './chart';
import { scaleGradient, scoreColor, scoreTint } from './color';
import { DEFAULT_THRESHOLD, MODELS, PROGRESS_BASELINE, type ModelEntry } from './config';
import { $, button, el, fmt, input, nextFrame, replace, select, textarea } from './dom';
import { download } from './download';
import { CANDIDATE_SETS, EXAMPLES } from './gallery';
import { decodeState, encodeState, type SharedState } from './share';
import { parseTraceFile, type AppStep, type AppTrace } from './traces';

// ---------------------------------------------------------------- state

interface Scored {
  problem: string;
  steps: AppStep[];
  scores: Array<number | null>;
  confidence: StepConfidence[] | null;
  /** Where the scores came from. */
  source: 'model' | 'live' | 'file' | 'link';
  tokens: number | null;
  model: string | null;
}

interface BestOfN {
  problem: string;
  responses: string[];
  steps: string[][];
  scores: Array<Array<number | null>>;
  selection: Selection;
}

let scorer: StepScorer | null = null;
let modelName: string | null = null;
let loading: AbortController | null = null;
let busy = false;
let liveStop = false;
let current: Scored | null = null;
let bon: BestOfN | null = null;
/** Steps (with labels) of a trace loaded from a file, until the response is edited. */
let fileSteps: AppStep[] | null = null;
let fileTraces: AppTrace[] = [];
/** Once the user moves the threshold, loading a model no longer resets it. */
let thresholdMoved = false;

const AGG_LABELS: Record<Aggregation, string> = { min: 'min', prod: 'product', last: 'last', mean: 'mean', geo_mean: 'geometric mean' };

const params = new URLSearchParams(location.search);

// ---------------------------------------------------------------- helpers

function errorText(e: unknown): string {
  if (e instanceof StepscoreError) return `${e.code}: ${e.message}`;
  if (e instanceof Error) return e.message;
  return String(e);
}

function setStatus(id: string, text: string, isError = false): void {
  const node = $(id);
  node.textContent = text;
  node.classList.toggle('error', isError);
}

function mb(bytes: number): string {
  return bytes < 1e6 ? `${(bytes / 1e3).toFixed(1)} kB` : `${(bytes / 1e6).toFixed(1)} MB`;
}

function aggregation(): Aggregation {
  return select('aggregation').value as Aggregation;
}

function threshold(): number {
  return Number(input('threshold').value);
}

function segmenterName(): string {
  const s = select('segmenter').value;
  return s === 'regex' ? `regex:${input('regex').value}` : s;
}

function refreshButtons(): void {
  const ready = scorer !== null && !busy;
  button('score-btn').disabled = !ready;
  button('live-btn').disabled = !ready;
  button('bon-score').disabled = !ready;
  button('load-btn').disabled = loading !== null || busy;
  button('abort-btn').disabled = loading === null;
}

// ---------------------------------------------------------------- model

async function webgpuAdapterText(): Promise<string> {
  const gpu = (navigator as Navigator & { gpu?: { requestAdapter(): Promise<unknown> } }).gpu;
  if (!gpu) return 'not available (navigator.gpu is missing)';
  try {
    const adapter = (await gpu.requestAdapter()) as { info?: { vendor?: string; architecture?: string; description?: string } } | null;
    if (!adapter) return 'navigator.gpu is present but no adapter was granted';
    const info = adapter.info ?? {};
    const parts = [info.description, info.vendor, info.architecture].filter((x) => x);
    return `available (adapter: ${parts.join(' / ') || 'unnamed'})`;
  } catch (e) {
    return `requestAdapter failed: ${errorText(e)}`;
  }
}

function showBackend(info: ScorerInfo): void {
  const badge = $('backend-badge');
  badge.classList.remove('gpu', 'cpu');
  if (info.backend === 'webgpu') {
    badge.classList.add('gpu');
    badge.textContent = `Backend: WebGPU — ${info.adapter ?? 'adapter'}`;
  } else {
    badge.classList.add('cpu');
    const why = info.fallbackReason ?? (info.requestedBackend === 'cpu' ? 'the CPU was requested' : 'no reason given');
    badge.textContent = `Backend: CPU (WebAssembly) — ${why}`;
  }
  badge.dataset.backend = info.backend;
}

async function showInfo(info: ScorerInfo, name: string): Promise<void> {
  const dl = $('model-info');
  const rows: Array<[string, string]> = [
    ['Model', name],
    ['Family', info.family],
    ['Format', info.format],
    ['Architecture', info.architectures.join(', ') || '–'],
    ['Backend', info.backend === 'webgpu' ? `WebGPU (${info.adapter ?? '?'})` : 'CPU (WebAssembly)'],
    ['Why this backend', info.fallbackReason ?? (info.requestedBackend === info.backend ? `${info.requestedBackend} was requested` : '–')],
    ['WebGPU in this browser', await webgpuAdapterText()],
    ['Layers × hidden', `${info.layers} × ${info.hiddenSize} (${info.heads} heads, ${info.kvHeads} kv heads)`],
    ['Vocabulary', String(info.vocabSize)],
    ['Token limit', `${info.maxTokens} (context ${info.contextLength})`],
    ['Files', info.files.map((f) => `${f.name} (${mb(f.bytes)})`).join(', ')],
    ['Engine memory', info.wasmMemoryBytes ? mb(info.wasmMemoryBytes) : '–'],
  ];
  replace(dl, ...rows.flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, v)]));
  dl.hidden = false;
}

async function loadModel(source: ModelSource, name: string, entry: ModelEntry | null): Promise<void> {
  loading?.abort(new Error('another load started'));
  const controller = new AbortController();
  loading = controller;
  refreshButtons();
  const progress = $('load-progress') as HTMLProgressElement;
  progress.value = 0;
  setStatus('load-status', `Loading ${name}…`);
  const backend = select('backend-select').value as Backend;
  const family = (select('family-select').value || entry?.family || undefined) as Family | undefined;
  try {
    const next = await StepScorer.load({
      ...(entry?.options ?? {}),
      model: source,
      backend,
      family,
      signal: controller.signal,
      onProgress: (p) => {
        if (p.phase === 'download') {
          if (p.total) {
            progress.value = p.loaded / p.total;
            setStatus('load-status', `Downloading ${p.file ?? ''}: ${mb(p.loaded)} of ${mb(p.total)}`);
          } else {
            progress.removeAttribute('value');
            setStatus('load-status', `Downloading ${p.file ?? ''}: ${mb(p.loaded)}`);
          }
        } else {
          progress.removeAttribute('value');
          setStatus('load-status', 'Building the model…');
        }
      },
    });
    scorer?.dispose();
    scorer = next;
    modelName = name;
    progress.value = 1;
    const info = next.info();
    setStatus('load-status', `Loaded ${name}: ${info.family} family on the ${info.backend === 'webgpu' ? 'GPU (WebGPU)' : 'CPU (WebAssembly)'}.`);
    showBackend(info);
    await showInfo(info, name);
    if (entry?.threshold !== undefined && !thresholdMoved) {
      input('threshold').value = String(entry.threshold);
      renderResults();
    }
    document.body.dataset.modelReady = 'true';
  } catch (e) {
    progress.value = 0;
    setStatus('load-status', `Could not load ${name}: ${errorText(e)}`, true);
  } finally {
    if (loading === controller) loading = null;
    refreshButtons();
  }
}

function selectedEntry(): ModelEntry {
  return MODELS.find((m) => m.id === select('model-select').value) ?? MODELS[0];
}

function modelFilesSource(files: File[]): { source: ModelSource; name: string } | string {
  if (files.length === 0) return 'no files given';
  if (files.length === 1) {
    const f = files[0];
    if (!f.name.toLowerCase().endsWith('.gguf')) {
      return `${f.name}: a single file must be a .gguf model; for a Hugging Face checkpoint choose config.json, tokenizer.json and the .safetensors file(s) together`;
    }
    return { source: f, name: f.name };
  }
  const named: Record<string, Blob> = {};
  for (const f of files) named[f.name] = f;
  const missing = ['config.json', 'tokenizer.json'].filter((n) => !(n in named));
  if (!files.some((f) => f.name.endsWith('.safetensors'))) missing.push('a .safetensors weights file');
  if (missing.length) return `the checkpoint is missing ${missing.join(', ')}`;
  return { source: named, name: files.map((f) => f.name).join(' + ') };
}

function useModelFiles(list: FileList | null): void {
  const got = modelFilesSource([...(list ?? [])]);
  if (typeof got === 'string') {
    setStatus('load-status', `Cannot load these files: ${got}`, true);
    return;
  }
  void loadModel(got.source, got.name, null);
}

function setupModelPanel(): void {
  const sel = select('model-select');
  for (const m of MODELS) sel.append(el('option', { attrs: { value: m.id } }, m.label));
  const wanted = params.get('model');
  if (wanted && MODELS.some((m) => m.id === wanted)) sel.value = wanted;
  const backend = params.get('backend');
  if (backend === 'cpu' || backend === 'webgpu' || backend === 'auto') select('backend-select').value = backend;
  button('load-btn').addEventListener('click', () => {
    const entry = selectedEntry();
    void loadModel(entry.model, entry.label, entry);
  });
  button('abort-btn').addEventListener('click', () => loading?.abort(new Error('cancelled by the user')));
  const files = input('model-files');
  files.addEventListener('change', () => useModelFiles(files.files));
  const zone = $('drop-zone');
  zone.addEventListener('dragover', (ev) => {
    ev.preventDefault();
    zone.classList.add('over');
  });
  zone.addEventListener('dragleave', () => zone.classList.remove('over'));
  zone.addEventListener('drop', (ev) => {
    ev.preventDefault();
    zone.classList.remove('over');
    useModelFiles(ev.dataTransfer?.files ?? null);
  });
  zone.addEventListener('keydown', (ev) => {
    if (ev.target === zone && (ev.key === 'Enter' || ev.key === ' ')) {
      ev.preventDefault();
      files.click();
    }
  });
}

// ---------------------------------------------------------------- input

/** The steps the Score button would score now. */
function draftSteps(): { steps: AppStep[]; error: string | null } {
  if (fileSteps) return { steps: fileSteps, error: null };
  try {
    return { steps: segment(textarea('response').value, segmenterName()).map((s) => ({ text: s.text, role: s.role, tool: s.tool })), error: null };
  } catch (e) {
    return { steps: [], error: errorText(e) };
  }
}

function renderPreview(): void {
  const { steps, error } = draftSteps();
  const list = $('preview');
  const summary = $('preview-summary');
  if (error) {
    summary.textContent = 'Segmentation preview';
    replace(list, el('li', { class: 'error' }, error));
    return;
  }
  summary.textContent = `Segmentation preview: ${steps.length} step${steps.length === 1 ? '' : 's'}${fileSteps ? ' (as given in the file; edit the response to re-split)' : ''}`;
  replace(list, ...steps.map((s) => el('li', {}, s.role ? `[${s.role}${s.tool ? ` ${s.tool}` : ''}] ${s.text}` : s.text)));
}

let previewTimer = 0;
function schedulePreview(): void {
  clearTimeout(previewTimer);
  previewTimer = window.setTimeout(renderPreview, 120);
}

function setDraft(problem: string, response: string, steps: AppStep[] | null = null): void {
  textarea('problem').value = problem;
  textarea('response').value = response;
  fileSteps = steps;
  renderPreview();
}

function activateTab(id: string): void {
  for (const tab of document.querySelectorAll<HTMLButtonElement>('[role=tab]')) {
    const on = tab.id === id;
    tab.setAttribute('aria-selected', String(on));
    tab.tabIndex = on ? 0 : -1;
    const pane = $(tab.getAttribute('aria-controls') ?? '');
    pane.hidden = !on;
  }
}

function setupTabs(): void {
  const tabs = [...document.querySelectorAll<HTMLButtonElement>('[role=tab]')];
  tabs.forEach((tab, i) => {
    tab.addEventListener('click', () => activateTab(tab.id));
    tab.addEventListener('keydown', (ev) => {
      const step = ev.key === 'ArrowRight' ? 1 : ev.key === 'ArrowLeft' ? -1 : 0;
      if (!step) return;
      ev.preventDefault();
      const next = tabs[(i + step + tabs.length) % tabs.length];
      activateTab(next.id);
      next.focus();
    });
  });
}

function setupGallery(): void {
  const list = $('gallery');
  for (const ex of EXAMPLES) {
    const use = el('button', { attrs: { type: 'button', 'data-example': ex.id, 'aria-label': `Use this trace: ${ex.title} (${ex.kind})` } }, 'Use this trace');
    use.addEventListener('click', () => {
      select('segmenter').value = 'blank-line';
      updateRegexVisibility();
      setDraft(ex.problem, ex.response);
      activateTab('tab-paste');
      setStatus('score-status', `Example “${ex.title}” ready (${ex.note}). Press “Score trace”.`);
      textarea('response').focus();
    });
    list.append(
      el('li', {},
        el('strong', {}, ex.title),
        el('span', { class: `tag ${ex.kind === 'correct' ? 'correct' : ''}` }, ex.kind),
        el('p', { class: 'problem' }, ex.problem),
        el('p', { class: 'hint' }, ex.note),
        use),
    );
  }
}

function updateRegexVisibility(): void {
  const on = select('segmenter').value === 'regex';
  input('regex').hidden = !on;
  $('regex-label').hidden = !on;
}

async function readTraceFile(file: File): Promise<void> {
  const text = await file.text();
  const { traces, errors } = parseTraceFile(text, file.name, segmenterName());
  fileTraces = traces;
  setStatus('file-status', `${file.name}: ${traces.length} trace${traces.length === 1 ? '' : 's'} read${errors.length ? `, ${errors.length} row${errors.length === 1 ? '' : 's'} with errors` : ''}.`, traces.length === 0);
  replace($('file-errors'), ...errors.slice(0, 20).map((e) => el('li', {}, e)), errors.length > 20 ? el('li', {}, `… and ${errors.length - 20} more`) : null);
  const sel = select('file-trace-select');
  replace(sel, ...traces.map((t, i) => el('option', { attrs: { value: String(i) } },
    `${i + 1}. [${t.format}] ${t.id ? `${t.id}: ` : ''}${t.problem.slice(0, 60)}${t.problem.length > 60 ? '…' : ''} (${t.steps.length} steps)`)));
  sel.disabled = traces.length === 0;
  button('file-use-btn').disabled = traces.length === 0;
  button('file-bon-btn').disabled = traces.length < 2;
  // A file whose rows all carry scores is shown at once.
  if (traces.length > 0) useFileTrace(0);
}

function useFileTrace(index: number): void {
  const t = fileTraces[index];
  if (!t) return;
  const response = t.response ?? t.steps.map((s) => s.text).join('\n\n');
  setDraft(t.problem, response, t.steps.map((s) => ({ ...s })));
  if (t.steps.every((s) => typeof s.score === 'number')) {
    current = { problem: t.problem, steps: t.steps, scores: t.steps.map((s) => s.score ?? null), confidence: null, source: 'file', tokens: null, model: null };
    renderResults();
  }
  setStatus('score-status', `Trace ${index + 1} from the file is ready (${t.steps.length} steps).`);
}

function setupInput(): void {
  textarea('response').addEventListener('input', () => {
    fileSteps = null;
    schedulePreview();
  });
  select('segmenter').addEventListener('change', () => {
    fileSteps = null;
    updateRegexVisibility();
    renderPreview();
  });
  input('regex').addEventListener('input', () => {
    fileSteps = null;
    schedulePreview();
  });
  const file = input('trace-file');
  file.addEventListener('change', () => {
    const f = file.files?.[0];
    if (f) void readTraceFile(f).catch((e) => setStatus('file-status', `${f.name}: ${errorText(e)}`, true));
  });
  button('file-use-btn').addEventListener('click', () => useFileTrace(Number(select('file-trace-select').value)));
  button('file-bon-btn').addEventListener('click', () => {
    const first = fileTraces[0];
    if (!first) return;
    textarea('problem').value = first.problem;
    setCandidates(fileTraces.map((t) => t.response ?? t.steps.map((s) => s.text).join('\n\n')));
    $('bon-panel').scrollIntoView();
  });
  button('score-btn').addEventListener('click', () => void scoreDraft());
  button('live-btn').addEventListener('click', () => void scoreLive());
  button('stop-live-btn').addEventListener('click', () => {
    liveStop = true;
  });
}

// ---------------------------------------------------------------- scoring

function checkDraft(): { problem: string; steps: AppStep[] } | null {
  const problem = textarea('problem').value;
  const { steps, error } = draftSteps();
  if (error) {
    setStatus('score-status', `Cannot split the response: ${error}`, true);
    return null;
  }
  if (steps.length === 0) {
    setStatus('score-status', 'The response has no steps to score: paste a response first.', true);
    return null;
  }
  return { problem, steps };
}

async function scoreDraft(): Promise<void> {
  if (!scorer || busy) return;
  const draft = checkDraft();
  if (!draft) return;
  busy = true;
  refreshButtons();
  setStatus('score-status', `Scoring ${draft.steps.length} steps on the ${scorer.info().backend === 'webgpu' ? 'GPU' : 'CPU'}… (the page pauses until it is done)`);
  await nextFrame();
  const t0 = performance.now();
  try {
    const res = await scorer.score({ problem: draft.problem, steps: draft.steps.map((s) => s.text) });
    current = {
      problem: draft.problem,
      steps: draft.steps,
      scores: res.stepScores,
      confidence: res.confidence ?? null,
      source: 'model',
      tokens: res.tokens,
      model: modelName,
    };
    const ms = performance.now() - t0;
    setStatus('score-status', `Scored ${draft.steps.length} steps (${res.tokens} tokens) in ${(ms / 1000).toFixed(2)} s${res.truncatedSteps ? `; ${res.truncatedSteps} steps did not fit the token limit` : ''}.`);
    renderResults();
    saveHash();
  } catch (e) {
    setStatus('score-status', `Scoring failed: ${errorText(e)}`, true);
  } finally {
    busy = false;
    refreshButtons();
  }
}

async function scoreLive(): Promise<void> {
  if (!scorer || busy) return;
  const draft = checkDraft();
  if (!draft) return;
  busy = true;
  liveStop = false;
  refreshButtons();
  button('stop-live-btn').disabled = false;
  const session = scorer.session(draft.problem);
  current = { problem: draft.problem, steps: draft.steps, scores: draft.steps.map(() => null), confidence: null, source: 'live', tokens: null, model: modelName };
  renderResults(0);
  try {
    for (const [i, step] of draft.steps.entries()) {
      if (liveStop) {
        setStatus('score-status', `Stopped after ${i} of ${draft.steps.length} steps.`);
        break;
      }
      setStatus('score-status', `Live: step ${i + 1} of ${draft.steps.length} arrives…`);
      // Let the page paint between steps, as if the trace were being generated.
      await nextFrame();
      await new Promise((r) => setTimeout(r, 150));
      current.scores[i] = await session.append(step.text);
      const conf = session.confidence;
      current.confidence = conf.length ? conf : null;
      current.tokens = session.tokens.cached;
      renderResults(i + 1);
    }
    if (!liveStop) {
      const { computed, cached } = session.tokens;
      setStatus('score-status', `Live scoring done: ${draft.steps.length} steps, ${computed} tokens computed for ${cached} in the cache (each step ran only its own tokens).`);
    }
    saveHash();
  } catch (e) {
    setStatus('score-status', `Live scoring failed: ${errorText(e)}`, true);
  } finally {
    session.dispose();
    busy = false;
    button('stop-live-btn').disabled = true;
    refreshButtons();
  }
}

// ---------------------------------------------------------------- results

/** Running value of the aggregation over steps 0..k. */
function running(scores: Array<number | null>, how: Aggregation, upto: number): Array<number | null> {
  return scores.map((_, k) => (k < upto ? aggregate(scores.slice(0, k + 1), how) : null));
}

function progress(scores: Array<number | null>, upto: number): Array<number | null> {
  return scores.map((v, k) => {
    if (k >= upto || v === null) return null;
    const prev = k === 0 ? PROGRESS_BASELINE : scores[k - 1];
    return prev === null ? null : v - prev;
  });
}

function renderLegend(t: number): void {
  const ramp = el('div', { class: 'ramp', style: { background: scaleGradient(t) }, attrs: { role: 'img', 'aria-label': `Colour scale: red below the threshold ${t.toFixed(2)}, white at it, blue above` } },
    el('span', { class: 'tick', style: { left: `calc(${(t * 100).toFixed(1)}% - 1px)` } }));
  replace($('legend'), el('span', {}, '0 · likely wrong'), ramp, el('span', {}, '1 · likely right'), el('span', { class: 'hint' }, `(white = threshold ${t.toFixed(2)})`));
}

function stepCard(step: AppStep, i: number, score: number | null, conf: StepConfidence | null, first: number, t: number, pending: boolean): HTMLLIElement {
  const color = scoreColor(score, t);
  const isFirst = i === first;
  const roleText = step.role ? ` · ${step.role.replace('_', ' ')}${step.tool ? ` (${step.tool})` : ''}` : '';
  const label = step.label === true ? 'labelled correct' : step.label === false ? 'labelled wrong' : null;
  const head = el('div', { class: 'step-head' },
    el('h3', {}, `Step ${i + 1}${roleText}`),
    isFirst ? el('span', { class: 'marker', attrs: { 'data-first-error': 'true' } }, `First error (below ${t.toFixed(2)})`) : null,
    label ? el('span', { class: 'label-tag' }, `ground truth: ${label}`) : null,
    el('span', { class: 'step-score' }, pending ? 'pending…' : `score ${fmt(score)}`));
  const bar = el('div', { class: 'bar', attrs: { role: 'meter', 'aria-valuemin': '0', 'aria-valuemax': '1', 'aria-valuenow': String(score ?? 0), 'aria-label': `Step ${i + 1} score` } },
    el('span', { style: { width: `${Math.max(0, Math.min(1, score ?? 0)) * 100}%`, background: color } }));
  // Confidence shading: the SDK gives per-step token statistics, so the whole step is tinted.
  const text = el('p', { class: 'step-text' }, step.text);
  if (conf) text.style.background = scoreTint(Math.exp(conf.meanLogprob), t);
  const confLine = conf
    ? el('p', { class: 'conf' }, `${conf.tokens} tokens · mean log-prob ${fmt(conf.meanLogprob)} (p ≈ ${fmt(Math.exp(conf.meanLogprob))}) · min log-prob ${fmt(conf.minLogprob)} · mean entropy ${fmt(conf.meanEntropy)} nats`)
    : null;
  const card = el('li', { class: `step-card${isFirst ? ' is-first-error' : ''}${pending ? ' pending' : ''}`, style: { borderLeftColor: color }, attrs: { 'data-step': String(i), 'data-score': score === null ? '' : String(score), 'aria-label': `Step ${i + 1}, ${pending ? 'not scored yet' : `score ${fmt(score, 2)}`}${isFirst ? ', first error' : ''}` } },
    head, bar, text, confLine);
  return card;
}

/** Draws the current result; `upto` steps are scored (live mode), the rest pending. */
function renderResults(upto?: number): void {
  if (!current) return;
  const c = current;
  const n = upto ?? c.steps.length;
  const how = aggregation();
  const t = threshold();
  $('threshold-value').textContent = t.toFixed(2);
  const scored = c.scores.slice(0, n);
  const agg = scored.length ? aggregate(scored, how) : null;
  const first = scored.length ? firstError(scored, t) : -1;
  $('aggregate').textContent = agg === null ? '–' : fmt(agg);
  const fe = $('first-error');
  fe.dataset.index = String(first);
  fe.textContent = n === 0 ? 'Waiting for the first step…'
    : first >= 0 ? `First error: step ${first + 1} (score ${fmt(scored[first])} < ${t.toFixed(2)})`
      : `No step below the threshold ${t.toFixed(2)}${n < c.steps.length ? ' so far' : ''}.`;
  renderLegend(t);
  drawChart($('chart') as HTMLCanvasElement, {
    scores: c.scores.map((v, k) => (k < n ? v : null)),
    progress: progress(c.scores, n),
    running: running(c.scores, how, n),
    aggregationLabel: AGG_LABELS[how],
    threshold: t,
    firstError: first,
  });
  const prog = progress(c.scores, n);
  const run = running(c.scores, how, n);
  replace($('chart-table').querySelector('tbody')!, ...c.scores.map((v, k) => el('tr', {},
    el('th', { attrs: { scope: 'row' } }, String(k + 1)), el('td', {}, k < n ? fmt(v) : 'pending'), el('td', {}, fmt(prog[k])), el('td', {}, fmt(run[k])))));
  const note = $('confidence-note');
  note.hidden = !c.confidence;
  note.textContent = c.confidence
    ? 'Step text is shaded by the model’s confidence in it (p = exp(mean token log-prob)). The SDK reports confidence per step, not per token, so each step is shaded as a whole.'
    : '';
  const sourceNote = c.source === 'file' ? 'Scores as given in the file.' : c.source === 'link' ? `Scores from the shared link${c.model ? ` (model: ${c.model})` : ''}; load a model and score to recompute.` : null;
  replace($('steps'), ...c.steps.map((s, i) => stepCard(s, i, c.scores[i], c.confidence?.[i] ?? null, first, t, i >= n)));
  if (sourceNote) $('steps').prepend(el('li', { class: 'hint' }, sourceNote));
  const section = $('results');
  section.hidden = false;
  section.dataset.rendered = String(n);
}

// ---------------------------------------------------------------- export & share

function exportRows(): Array<Record<string, unknown>> {
  const rows: Array<Record<string, unknown>> = [];
  const how = aggregation();
  const t = threshold();
  if (current) {
    const c = current;
    rows.push({
      id: 'trace',
      problem: c.problem,
      steps: c.steps.map((s, i) => ({ text: s.text, score: c.scores[i], ...(s.label !== undefined && s.label !== null ? { label: s.label } : {}), ...(s.role ? { role: s.role } : {}), ...(s.tool ? { tool: s.tool } : {}) })),
      metadata: {
        model: c.model,
        source: c.source,
        aggregation: how,
        aggregate: aggregate(c.scores, how),
        threshold: t,
        first_error: firstError(c.scores, t),
        ...(c.confidence ? { confidence: c.confidence } : {}),
      },
    });
  }
  if (bon) {
    const b = bon;
    b.responses.forEach((_, i) => {
      const cand = b.selection.candidates.find((x) => x.index === i);
      rows.push({
        id: `candidate-${i + 1}`,
        problem: b.problem,
        steps: b.steps[i].map((text, k) => ({ text, score: b.scores[i][k] })),
        metadata: { aggregation: b.selection.aggregation, aggregate: cand?.score ?? null, answer: cand?.answer ?? null, best: b.selection.best === i },
      });
    });
  }
  return rows;
}

function exportJson(): void {
  const body = {
    format: 'stepscore-demo-export',
    version: 1,
    exportedAt: new Date().toISOString(),
    model: scorer ? (({ backend, family, format, architectures, fallbackReason }) => ({ name: modelName, backend, family, format, architectures, fallbackReason }))(scorer.info()) : { name: current?.model ?? null },
    aggregation: aggregation(),
    threshold: threshold(),
    traces: exportRows(),
    bestOfN: bon ? { aggregation: bon.selection.aggregation, best: bon.selection.best, majority: bon.selection.majority, weighted: bon.selection.weighted, candidates: bon.selection.candidates } : null,
  };
  download('stepscore-scores.json', `${JSON.stringify(body, null, 2)}\n`, 'application/json');
}

function exportJsonl(): void {
  // One native stepscore trace row per line: readable again by the SDK and the CLI.
  download('stepscore-scores.jsonl', exportRows().map((r) => JSON.stringify(r)).join('\n') + '\n', 'application/x-ndjson');
}

function currentState(): SharedState {
  const state: SharedState = {
    v: 1,
    problem: textarea('problem').value,
    response: textarea('response').value,
    segmenter: select('segmenter').value,
    aggregation: aggregation(),
    threshold: threshold(),
  };
  if (state.segmenter === 'regex') state.regex = input('regex').value;
  if (current && current.scores.every((s) => s === null || Number.isFinite(s))) {
    state.steps = current.steps.map((s) => s.text);
    state.scores = current.scores;
    if (current.model) state.model = current.model;
  }
  const cands = candidateTexts();
  if (cands.some((c) => c.trim())) state.candidates = cands;
  if (bon && bon.scores.every((sc) => sc.every((x) => x === null || Number.isFinite(x)))) {
    state.bon = { responses: bon.responses, steps: bon.steps, scores: bon.scores };
  }
  return state;
}

function saveHash(): void {
  history.replaceState(null, '', encodeState(currentState()));
}

async function share(statusId: string): Promise<void> {
  saveHash();
  try {
    await navigator.clipboard.writeText(location.href);
    setStatus(statusId, 'Link copied: it holds the traces, the scores and the settings (no server involved).');
  } catch {
    setStatus(statusId, 'The link in the address bar now holds the traces, the scores and the settings; copy it from there.');
  }
}

function restoreFromHash(): boolean {
  const state = decodeState(location.hash);
  if (!state) return false;
  if ([...select('segmenter').options].some((o) => o.value === state.segmenter)) select('segmenter').value = state.segmenter;
  if (state.regex !== undefined) input('regex').value = state.regex;
  updateRegexVisibility();
  if ((Object.keys(AGG_LABELS) as string[]).includes(state.aggregation)) {
    select('aggregation').value = state.aggregation;
    select('bon-aggregation').value = state.aggregation;
  }
  input('threshold').value = String(state.threshold);
  thresholdMoved = true;
  setDraft(state.problem, state.response);
  if (state.candidates) setCandidates(state.candidates);
  if (state.bon) {
    bon = { problem: state.problem, ...state.bon, selection: selectBest([], aggregation()) };
    rankCandidates();
  }
  if (state.steps && state.scores) {
    current = { problem: state.problem, steps: state.steps.map((text) => ({ text })), scores: state.scores, confidence: null, source: 'link', tokens: null, model: state.model ?? null };
    renderResults();
  }
  return true;
}

function setupResults(): void {
  // Two selectors (results and best-of-N), one setting.
  for (const [id, other] of [['aggregation', 'bon-aggregation'], ['bon-aggregation', 'aggregation']]) {
    select(id).addEventListener('change', () => {
      select(other).value = select(id).value;
      renderResults();
      if (bon) rankCandidates();
      saveHash();
    });
  }
  input('threshold').addEventListener('input', () => {
    thresholdMoved = true;
    $('threshold-value').textContent = threshold().toFixed(2);
    renderResults();
  });
  input('threshold').addEventListener('change', saveHash);
  button('export-json').addEventListener('click', exportJson);
  button('export-jsonl').addEventListener('click', exportJsonl);
  button('share-btn').addEventListener('click', () => void share('share-status'));
  button('bon-share').addEventListener('click', () => void share('bon-share-status'));
  button('bon-export').addEventListener('click', exportJson);
}

// ---------------------------------------------------------------- best of N

function candidateTexts(): string[] {
  return [...document.querySelectorAll<HTMLTextAreaElement>('#bon-inputs textarea')].map((t) => t.value);
}

function setCandidates(texts: string[]): void {
  const list = $('bon-inputs');
  replace(list);
  texts.forEach((t) => addCandidate(t));
}

function addCandidate(text = ''): void {
  const list = $('bon-inputs');
  const k = list.children.length + 1;
  const id = `bon-cand-${k}-${Math.random().toString(36).slice(2, 8)}`;
  const area = el('textarea', { id, attrs: { rows: '4', spellcheck: 'false' } });
  area.value = text;
  const remove = el('button', { class: 'secondary', attrs: { type: 'button', 'aria-label': `Remove candidate ${k}` } }, 'Remove');
  const item = el('li', {}, el('label', { attrs: { for: id } }, `Candidate ${k}`), area, remove);
  remove.addEventListener('click', () => {
    item.remove();
    relabelCandidates();
  });
  list.append(item);
}

function relabelCandidates(): void {
  [...$('bon-inputs').children].forEach((li, i) => {
    const label = li.querySelector('label');
    if (label) label.textContent = `Candidate ${i + 1}`;
    li.querySelector('button')?.setAttribute('aria-label', `Remove candidate ${i + 1}`);
  });
}

async function scoreCandidates(): Promise<void> {
  if (!scorer || busy) return;
  const problem = textarea('problem').value;
  const responses = candidateTexts().filter((t) => t.trim());
  if (responses.length < 2) {
    setStatus('score-status', 'Best of N needs at least two candidate responses.', true);
    $('bon-panel').scrollIntoView();
    return;
  }
  let steps: string[][];
  try {
    steps = responses.map((r) => segment(r, segmenterName()).map((s) => s.text));
  } catch (e) {
    setStatus('score-status', `Cannot split a candidate: ${errorText(e)}`, true);
    return;
  }
  const empty = steps.findIndex((s) => s.length === 0);
  if (empty >= 0) {
    setStatus('score-status', `Candidate ${empty + 1} has no steps.`, true);
    return;
  }
  busy = true;
  refreshButtons();
  setStatus('score-status', `Scoring ${responses.length} candidates… (the page pauses until it is done)`);
  await nextFrame();
  try {
    const results = await scorer.scoreMany(steps.map((s) => ({ problem, steps: s })));
    bon = { problem, responses, steps, scores: results.map((r) => r.stepScores), selection: selectBest([], aggregation()) };
    rankCandidates();
    setStatus('score-status', `Scored ${responses.length} candidates.`);
    saveHash();
  } catch (e) {
    setStatus('score-status', `Scoring the candidates failed: ${errorText(e)}`, true);
  } finally {
    busy = false;
    refreshButtons();
  }
}

function rankCandidates(): void {
  if (!bon) return;
  const b = bon;
  const how = aggregation();
  const t = threshold();
  b.selection = selectBest(b.responses.map((response, i) => ({ steps: b.steps[i], scores: b.scores[i], response, id: `candidate ${i + 1}` })), how);
  const sel = b.selection;
  const vote = (title: string, v: typeof sel.majority, detail: (v: NonNullable<typeof sel.majority>) => string) =>
    el('div', { attrs: { 'data-vote': title } }, el('strong', {}, title), el('br'), v ? `${v.display} — ${detail(v)}` : 'no answer found');
  replace($('bon-votes'),
    vote('Majority vote', sel.majority, (v) => `${v.count} of ${b.responses.length} candidates`),
    vote('PRM-weighted vote', sel.weighted, (v) => `weight ${fmt(v.weight)} (sum of ${AGG_LABELS[how]} scores)`),
    el('div', { attrs: { 'data-vote': 'best' } }, el('strong', {}, `Best single candidate (${AGG_LABELS[how]})`), el('br'),
      sel.best === null ? 'none has a finite score' : `candidate ${sel.best + 1}: ${sel.candidates.find((c) => c.index === sel.best)?.rawAnswer ?? 'no answer'}`));
  const disagree = sel.majority && sel.weighted && sel.majority.answer !== sel.weighted.answer;
  $('bon-votes').append(el('p', { class: 'hint', attrs: { 'data-votes-agree': String(!disagree) } },
    disagree ? `The votes disagree: weighting by the PRM picks ${sel.weighted!.display} over the majority's ${sel.majority!.display}.`
      : 'Both votes agree.'));
  const ranked = [...sel.candidates].sort((a, b2) => (b2.score ?? -Infinity) - (a.score ?? -Infinity));
  replace($('bon-ranking'), ...ranked.map((c, rank) => {
    const win = c.index === sel.best;
    return el('li', { class: `bon-card${win ? ' winner' : ''}`, attrs: { 'data-candidate': String(c.index), 'data-rank': String(rank + 1), 'aria-label': `Rank ${rank + 1}: candidate ${c.index + 1}${win ? ', best' : ''}` } },
      el('h3', {}, `#${rank + 1} · Candidate ${c.index + 1} `, win ? el('span', { class: 'winner-tag' }, '★ best') : null),
      el('p', {}, `${AGG_LABELS[how]}: `, el('strong', {}, fmt(c.score)), ` · answer: ${c.rawAnswer ?? 'none found'}`),
      el('div', { class: 'mini', attrs: { role: 'img', 'aria-label': `Step scores: ${b.scores[c.index].map((s) => fmt(s, 2)).join(', ')}` } },
        ...b.scores[c.index].map((s, k) => el('span', { title: `step ${k + 1}: ${fmt(s)}`, style: { background: scoreColor(s, t) } }))),
      el('div', { class: 'response' }, b.responses[c.index]));
  }));
  $('bon-results').hidden = false;
}

function setupBestOfN(): void {
  const sel = select('bon-example');
  for (const s of CANDIDATE_SETS) sel.append(el('option', { attrs: { value: s.id } }, s.title));
  button('bon-example-btn').addEventListener('click', () => {
    const set = CANDIDATE_SETS.find((s) => s.id === sel.value);
    if (!set) return;
    textarea('problem').value = set.problem;
    setCandidates(set.candidates);
    setStatus('score-status', `Example set “${set.title}” ready (${set.note}).`);
  });
  button('bon-add').addEventListener('click', () => {
    addCandidate();
    const areas = $('bon-inputs').querySelectorAll('textarea');
    areas[areas.length - 1]?.focus();
  });
  button('bon-score').addEventListener('click', () => void scoreCandidates());
}

// ---------------------------------------------------------------- start

function start(): void {
  setupModelPanel();
  setupTabs();
  setupGallery();
  setupInput();
  setupResults();
  setupBestOfN();
  input('threshold').value = String(DEFAULT_THRESHOLD);
  if (!restoreFromHash()) {
    const ex = EXAMPLES[0];
    setDraft(ex.problem, ex.response);
    setCandidates(['', '']);
  }
  refreshButtons();
  document.body.dataset.appReady = 'true';
  if (params.get('autoload') === '1') button('load-btn').click();
}

start();
