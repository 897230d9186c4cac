// The demo app: load a PRM, score a pasted or loaded trace step by step, see
// the dense reward, compare N candidates. Every piece of trace text reaches
// the page through textContent (see dom.ts), never as markup.
import {
  ready,
  segment,
  selectBest,
  StepScorer,
  type Aggregation,
  type Backend,
  type Family,
  type ModelSource,
} from 'stepscore';
import { addCandidate, candidateTexts, renderRanking, setCandidates } from './bestofn';
import { MODELS, type ModelEntry } from './config';
import { $, button, el, input, nextFrame, numberSections, replace, select, textarea } from './dom';
import { download } from './download';
import { exportDocument, exportRows } from './exporting';
import { CANDIDATE_SETS, EXAMPLES } from './gallery';
import { errorText, mb, modelFilesSource, showBackend, showInfo } from './modelview';
import { renderResults as renderView } from './results';
import { decodeState, encodeState, type SharedState } from './share';
import { readTraceFile as readTraceText, type AppStep, type AppTrace } from './reader';
import { setupSolve, solveRunning } from './solve';
import { AGG_LABELS, type BestOfN, type Scored } from './types';

// ---------------------------------------------------------------- state

let scorer: StepScorer | null = null;
let modelName: string | null = null;
let loading: AbortController | null = null;
let busy = false;
/** Seconds per token of the last whole-trace scoring with the loaded model on this device. */
let secondsPerToken: number | null = null;
let liveStop = false;
let current: Scored | null = null;
let bon: BestOfN | null = null;
/** Steps (with labels) of a trace loaded from a file, until the response is edited. */
let fileSteps: AppStep[] | null = null;
let fileTraces: AppTrace[] = [];
/** Once the user moves the threshold, loading a model no longer resets it. */
let thresholdMoved = false;

const params = new URLSearchParams(location.search);

// ---------------------------------------------------------------- helpers

function setStatus(id: string, text: string, isError = false): void {
  const node = $(id);
  node.textContent = text;
  node.classList.toggle('error', isError);
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
  button('solve-btn').disabled = !ready || solveRunning();
  button('load-btn').disabled = loading !== null || busy;
  button('abort-btn').disabled = loading === null;
}

// ---------------------------------------------------------------- model

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
      // The engine runs in the package's worker: the page never pauses while it scores.
      worker: true,
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
    secondsPerToken = null;
    progress.value = 1;
    const info = next.info();
    setStatus('load-status', `Loaded ${name}: ${info.family} family on the ${info.backend === 'webgpu' ? 'GPU (WebGPU)' : 'CPU (WebAssembly)'}.`);
    showBackend(info);
    await showInfo(info, name, entry?.note ?? null);
    if (!thresholdMoved) {
      // The model's own entry, else the threshold its head ships with.
      input('threshold').value = String(entry?.threshold ?? info.thresholdInForce);
      renderResults();
    }
    void showEstimate(draftSteps().steps);
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
  void showEstimate(steps);
}

/** How long scoring the draft will take: its exact token count times this device's measured time per token. */
async function estimateText(problem: string, steps: string[]): Promise<string> {
  if (!scorer || steps.length === 0) return '';
  const tokens = await scorer.countTokens({ problem, steps });
  if (secondsPerToken === null) return `${tokens} tokens; the first scoring measures this device's speed.`;
  const s = tokens * secondsPerToken;
  const time = s < 0.1 ? 'under 0.1 s' : `about ${s < 10 ? s.toFixed(1) : Math.round(s)} s`;
  return `${tokens} tokens: ${time} on this device (${Math.round(1 / secondsPerToken)} tokens/s on the last trace).`;
}

let estimateSeq = 0;
async function showEstimate(steps: AppStep[]): Promise<void> {
  const seq = ++estimateSeq;
  let text = '';
  try {
    text = await estimateText(textarea('problem').value, steps.map((s) => s.text));
  } catch {
    text = ''; // a draft the model cannot encode: scoring reports why
  }
  if (seq === estimateSeq) $('estimate').textContent = text;
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
      select('segmenter').value = 'auto';
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
  const { records, errors: bad } = readTraceText(text, file.name, segmenterName());
  const traces: AppTrace[] = records.map((r) => ({ ...r.trace, format: r.format }));
  const errors = bad.map((e) => e.text);
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
  // The problem is part of the tokens scoring runs: it changes the estimate.
  textarea('problem').addEventListener('input', () => void showEstimate(draftSteps().steps));
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
  const onGpu = scorer.info().backend === 'webgpu';
  const estimate = await estimateText(draft.problem, draft.steps.map((s) => s.text)).catch(() => '');
  setStatus('score-status', `Scoring ${draft.steps.length} steps on the ${onGpu ? 'GPU' : 'CPU'}…${estimate ? ` ${estimate}` : ''}`);
  const t0 = performance.now();
  try {
    const res = await scorer.score({ problem: draft.problem, steps: draft.steps.map((s) => s.text) }, { tokenLogprobs: true });
    current = {
      problem: draft.problem,
      steps: draft.steps,
      scores: res.stepScores,
      confidence: res.confidence ?? null,
      tokenLogprobs: res.tokenLogprobs ?? null,
      leastLikely: res.leastLikely ?? null,
      source: 'model',
      family: scorer.info().family,
      tokensRead: scorer.info().tokensRead,
      tokens: res.tokens,
      model: modelName,
    };
    const ms = performance.now() - t0;
    if (res.tokens > 0) secondsPerToken = ms / 1000 / res.tokens;
    void showEstimate(draft.steps);
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
  current = { problem: draft.problem, steps: draft.steps, scores: draft.steps.map(() => null), confidence: null, source: 'live', family: scorer.info().family, tokensRead: scorer.info().tokensRead, tokens: null, model: modelName };
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
      current.tokenLogprobs = session.tokenLogprobs;
      current.leastLikely = session.leastLikely;
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

function renderResults(upto?: number): void {
  if (current) renderView(current, aggregation(), threshold(), upto);
}

// ---------------------------------------------------------------- export & share

function exportJson(): void {
  const info = scorer?.info() ?? null;
  const body = exportDocument({ current, bon, how: aggregation(), t: threshold(), info, modelName: modelName ?? current?.model ?? null });
  download('stepscore-scores.json', `${JSON.stringify(body, null, 2)}\n`, 'application/json');
}

function exportJsonl(): void {
  // One native stepscore trace row per line: readable again by the SDK and the CLI.
  const rows = exportRows({ current, bon, how: aggregation(), t: threshold() });
  download('stepscore-scores.jsonl', rows.map((r) => JSON.stringify(r)).join('\n') + '\n', 'application/x-ndjson');
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
  if (state.threshold !== undefined) {
    input('threshold').value = String(state.threshold);
    thresholdMoved = true;
  }
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
  setStatus('score-status', `Scoring ${responses.length} candidates…`);
  try {
    // The problem's tokens run once for all candidates.
    const scores = await scorer.scoreCandidates(problem, steps);
    bon = { problem, responses, steps, scores, selection: selectBest([], aggregation()) };
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
  if (bon) renderRanking(bon, aggregation(), threshold());
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
  numberSections();
  setupModelPanel();
  setupTabs();
  setupGallery();
  setupInput();
  setupResults();
  setupBestOfN();
  setupSolve({
    scorer: () => scorer,
    begin: () => {
      if (busy || !scorer) return false;
      busy = true;
      refreshButtons();
      return true;
    },
    end: () => {
      busy = false;
      refreshButtons();
    },
    threshold,
  });
  if (!restoreFromHash()) {
    const ex = EXAMPLES[0];
    setDraft(ex.problem, ex.response);
    setCandidates(['', '']);
  }
  refreshButtons();
  document.body.dataset.appReady = 'true';
  if (params.get('autoload') === '1') button('load-btn').click();
}

// The package instantiates its engine on ready() (importing it runs nothing); the helpers need it.
void ready().then(start);
