// Solve mode: the loaded model writes N candidate solutions to a problem
// (scorer.search), the page shows every candidate being written token by
// token, colours each step the moment the verifier scores it, greys the
// candidates the search prunes, then marks the chosen one and the three
// votes side by side. Model text reaches the page only as text nodes.
import type { SearchEvent, SearchMethod, SearchResult, StepScorer, StopReason } from 'stepscore';
import { scoreColor, scoreTint } from './color';
import { $, button, el, fmt, input, replace, select, textarea } from './dom';
import { errorText } from './modelview';

export interface SolveHooks {
  scorer: () => StepScorer | null;
  /** Claims the engine for a solve; false when it is busy. */
  begin: () => boolean;
  end: () => void;
  threshold: () => number;
}

interface CandidateView {
  item: HTMLLIElement;
  head: HTMLElement;
  body: HTMLElement;
  /** The text written since the last scored step (shown uncoloured). */
  tail: Text;
  steps: Array<{ text: string; score: number }>;
  tokens: number;
}

const STOP_LABELS: Record<StopReason, string> = {
  'end-of-turn': 'finished',
  'stop-string': 'hit a stop string',
  'step-end': 'step done',
  'max-tokens': 'token limit',
  context: 'context full',
  cancelled: 'cancelled',
  budget: 'budget spent',
};

let running: AbortController | null = null;
let views: CandidateView[] = [];

function setStatus(text: string, isError = false): void {
  const node = $('solve-status');
  node.textContent = text;
  node.classList.toggle('error', isError);
}

function stepSpan(text: string, score: number, t: number): HTMLSpanElement {
  return el('span', {
    class: 'solve-step',
    title: `step score ${fmt(score)}`,
    attrs: { 'data-score': String(score) },
    style: { backgroundColor: scoreTint(score, t, 0.45), borderLeftColor: scoreColor(score, t) },
  }, text);
}

function newView(index: number, from: number | null, t: number): CandidateView {
  const tail = document.createTextNode('');
  const head = el('h3', {}, `Candidate ${index + 1}`, from === null ? '' : ` (from ${from + 1})`);
  const body = el('div', { class: 'solve-text' });
  const item = el('li', { class: 'solve-card writing', attrs: { 'data-candidate': String(index), 'aria-label': `Candidate ${index + 1}` } }, head, body);
  const view: CandidateView = { item, head, body, tail, steps: [], tokens: 0 };
  if (from !== null && views[from]) {
    // A fork starts with its parent's text: its scored steps and the rest.
    const parent = views[from];
    for (const s of parent.steps) body.append(stepSpan(s.text, s.score, t));
    view.steps = parent.steps.map((s) => ({ ...s }));
    tail.data = parent.tail.data;
  }
  body.append(tail);
  return view;
}

function markPruned(view: CandidateView): void {
  if (view.item.classList.contains('pruned')) return;
  view.item.classList.add('pruned');
  view.item.classList.remove('writing');
  view.item.dataset.pruned = 'true';
  view.head.append(el('span', { class: 'solve-tag pruned-tag' }, 'pruned'));
}

function onEvent(e: SearchEvent, t: number): void {
  if (e.event === 'forked') {
    const view = newView(e.candidate, e.from, t);
    views[e.candidate] = view;
    $('solve-candidates').append(view.item);
    return;
  }
  const view = views[e.candidate];
  if (!view) return;
  switch (e.event) {
    case 'token':
      view.tail.data += e.text;
      view.tokens++;
      break;
    case 'step': {
      // The written text up to this step becomes the coloured step.
      view.steps.push({ text: view.tail.data, score: e.score });
      view.body.insertBefore(stepSpan(view.tail.data, e.score, t), view.tail);
      view.tail.data = '';
      break;
    }
    case 'pruned':
      markPruned(view);
      break;
    case 'finished':
      view.item.classList.remove('writing');
      view.item.dataset.stopReason = e.stopReason;
      view.head.append(el('span', { class: 'solve-tag' }, STOP_LABELS[e.stopReason] ?? e.stopReason));
      break;
  }
}

function showResult(result: SearchResult): void {
  const sel = result.selection;
  for (const c of result.candidates) {
    const view = views[c.index];
    if (!view) continue;
    view.item.classList.remove('writing');
    if (c.finalist) view.item.dataset.finalist = 'true';
    // Beam search sets aside finished beams past the first N at its end, without an event.
    if (c.pruned) markPruned(view);
    view.head.append(el('span', { class: 'solve-score' }, ` ${sel.aggregation}: ${fmt(c.score)}`));
  }
  if (result.chosen !== null && views[result.chosen]) {
    const chosen = views[result.chosen];
    chosen.item.classList.add('chosen');
    chosen.head.append(el('span', { class: 'winner-tag' }, '★ chosen'));
  }
  const answerOf = (i: number | null) => (i === null ? null : result.candidates[i]?.answer ?? null);
  const vote = (key: string, title: string, body: string) => el('div', { attrs: { 'data-vote': key } }, el('strong', {}, title), el('br'), body);
  replace($('solve-votes'),
    vote('best', `Best (PRM ${sel.aggregation})`, sel.best === null ? 'no candidate has a score' : `${answerOf(sel.best) ?? 'no answer'} — candidate ${sel.best + 1}, score ${fmt(result.candidates[sel.best].score)}`),
    vote('majority', 'Majority vote', sel.majority ? `${sel.majority.display} — ${sel.majority.count} of ${result.finalists.length}` : 'no answer found'),
    vote('weighted', 'PRM-weighted vote', sel.weighted ? `${sel.weighted.display} — weight ${fmt(sel.weighted.weight)}` : 'no answer found'),
  );
  $('solve-votes').hidden = false;
}

async function solve(hooks: SolveHooks): Promise<void> {
  const scorer = hooks.scorer();
  if (!scorer || running) return;
  const problem = textarea('solve-problem').value.trim();
  if (!problem) {
    setStatus('Type a problem first.', true);
    return;
  }
  if (!hooks.begin()) return;
  const controller = new AbortController();
  running = controller;
  button('solve-btn').disabled = true;
  button('solve-stop-btn').disabled = false;
  views = [];
  replace($('solve-candidates'));
  replace($('solve-votes'));
  $('solve-votes').hidden = true;
  const t = hooks.threshold();
  const method = select('solve-method').value as SearchMethod;
  const n = Number(input('solve-n').value);
  const budget = input('solve-budget').value.trim();
  document.body.dataset.solve = 'running';
  setStatus(`Writing ${n} candidates (${method})…`);
  const t0 = performance.now();
  try {
    const result = await scorer.search(problem, {
      method,
      n,
      beamWidth: Number(input('solve-width').value),
      maxSteps: Number(input('solve-steps').value),
      tokenBudget: budget === '' ? null : Number(budget),
      generate: { maxNewTokens: Number(input('solve-max-tokens').value) },
      signal: controller.signal,
      onEvent: (e) => onEvent(e, t),
    });
    showResult(result);
    const s = ((performance.now() - t0) / 1000).toFixed(1);
    setStatus(`Done in ${s} s: ${result.candidates.length} candidates, ${result.tokensGenerated} tokens written, ${result.tokensScored} scored${result.budgetExhausted ? ' (the token budget ran out)' : ''}.`);
    document.body.dataset.solve = 'done';
  } catch (e) {
    const cancelled = controller.signal.aborted;
    for (const v of views) v.item.classList.remove('writing');
    setStatus(cancelled ? `Cancelled after ${views.reduce((a, v) => a + v.tokens, 0)} tokens.` : `Solving failed: ${errorText(e)}`, !cancelled);
    document.body.dataset.solve = cancelled ? 'cancelled' : 'failed';
  } finally {
    running = null;
    button('solve-stop-btn').disabled = true;
    hooks.end();
  }
}

export function setupSolve(hooks: SolveHooks): void {
  const method = select('solve-method');
  const syncWidth = () => {
    const tree = method.value !== 'best-of-n';
    input('solve-width').disabled = !tree;
    input('solve-steps').disabled = !tree;
  };
  method.addEventListener('change', syncWidth);
  syncWidth();
  button('solve-btn').addEventListener('click', () => void solve(hooks));
  button('solve-stop-btn').addEventListener('click', () => running?.abort(new Error('cancelled by the user')));
}

export function solveRunning(): boolean {
  return running !== null;
}
