// Solve mode: the loaded model writes N candidate solutions to a problem
// (scorer.search), the page shows every candidate being written token by
// token, colours each step the moment the verifier scores it, greys the
// candidates the search prunes, then marks the chosen one and the three
// votes side by side. Model text reaches the page only as text nodes.
import { checkArithmetic, selectBest, type SearchCandidate, type SearchEvent, type SearchMethod, type SearchResult, type Selection, type StepScorer, type StopReason } from 'stepscore';
import { scoreColor, scoreTint, WRONG_COLOR } from './color';
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
  steps: SolveStep[];
  tokens: number;
  /** One state per card, named by its one state tag. */
  state: CardState;
  stateTag: HTMLSpanElement;
}

/**
 * A written, scored step. `wrong`: exact arithmetic proves one of its equations
 * false (wrong whatever the verifier scored, as in the step-reward view);
 * `restsOn`: the earlier step of the same candidate it builds on that is wrong
 * or scored below the threshold (the first such), else null.
 */
interface SolveStep {
  text: string;
  score: number;
  wrong: string | null;
  restsOn: number | null;
}

/**
 * What a card is doing: being written (a beam paused at a step's end counts),
 * pruned (greyed; a finished beam set aside past the first N counts too),
 * finished (any stop reason) or continued by its forks (DVTS: a beam lives on
 * in its children). The running status counts exactly these.
 */
type CardState = 'writing' | 'pruned' | 'finished' | 'continued';

const METHOD_LABELS: Record<SearchMethod, string> = { 'best-of-n': 'best-of-N', beam: 'beam search', dvts: 'diverse verifier tree search' };

const STOP_LABELS: Record<StopReason, string> = {
  'end-of-turn': 'finished',
  'stop-string': 'hit a stop string',
  'step-end': 'step done',
  'max-tokens': 'cut off at the token limit',
  context: 'cut off: context full',
  cancelled: 'cancelled',
  budget: 'cut off: token budget spent',
};

/** Stop reasons that end a candidate mid-answer: it never finished writing. */
const CUT_OFF: ReadonlySet<StopReason> = new Set<StopReason>(['max-tokens', 'context', 'budget', 'cancelled']);

/**
 * Whether a text states a final answer: \boxed{…}, "####", "the (final) answer is …"
 * or "Answer:". The core's extractor also falls back to the last number written,
 * which a text cut off mid-sentence always has; that is not a final answer.
 */
export function statesAnswer(text: string): boolean {
  return /\\(boxed|fbox)\{|####|\b(final answer|the answer is|answer:)/i.test(text);
}

/** Why a finalist is left out of the choice: cut off, or no final answer; null when complete. */
export function incomplete(c: SearchCandidate): 'cut-off' | 'no-answer' | null {
  if (c.stopReason !== null && CUT_OFF.has(c.stopReason)) return 'cut-off';
  if (!statesAnswer(c.text)) return 'no-answer';
  return null;
}

/**
 * The demo's choice (web/README.md, "Solve"): the search's own selection made
 * again over the complete finalists only (the best by aggregated PRM score, the
 * majority and the PRM-weighted vote); indices are candidate indices. Null when
 * no finalist is complete.
 */
function completeChoice(result: SearchResult, complete: SearchCandidate[]): Selection | null {
  if (complete.length === 0) return null;
  const sel = selectBest(complete.map((c) => ({
    steps: c.steps.slice(0, c.scores.length),
    scores: c.scores,
    response: c.text,
    ...(c.answer ? { finalAnswer: c.answer } : {}),
  })), result.selection.aggregation);
  const idx = (k: number) => complete[k].index;
  return {
    ...sel,
    best: sel.best === null ? null : idx(sel.best),
    candidates: sel.candidates.map((c) => ({ ...c, index: idx(c.index) })),
    majority: sel.majority ? { ...sel.majority, members: sel.majority.members.map(idx) } : null,
    weighted: sel.weighted ? { ...sel.weighted, members: sel.weighted.members.map(idx) } : null,
  };
}

let running: AbortController | null = null;
let views: CandidateView[] = [];
/** The running search's method and N, for the status line. */
let runMethod: SearchMethod = 'beam';
let runN = 0;

function setStatus(text: string, isError = false): void {
  const node = $('solve-status');
  node.textContent = text;
  node.classList.toggle('error', isError);
}

function stepSpan(step: SolveStep, t: number): HTMLSpanElement {
  const { text, score, wrong, restsOn } = step;
  const attrs: Record<string, string> = { 'data-score': String(score) };
  if (wrong) attrs['data-arithmetic'] = 'false';
  if (restsOn !== null) attrs['data-rests-on'] = String(restsOn);
  const title = `step score ${fmt(score)}${wrong ? `; wrong by exact arithmetic: ${wrong}` : ''}${restsOn !== null ? `; rests on the error in step ${restsOn + 1}` : ''}`;
  return el('span', {
    class: `solve-step${wrong ? ' wrong' : ''}${restsOn !== null ? ' rests-on-error' : ''}`,
    title,
    attrs,
    style: {
      backgroundColor: wrong ? 'rgba(178, 24, 43, 0.3)' : scoreTint(score, t, 0.45),
      borderLeftColor: wrong || restsOn !== null ? WRONG_COLOR : scoreColor(score, t),
    },
  }, text);
}

/** A new step of `view`, judged like the step-reward view judges one. */
function judge(view: CandidateView, text: string, score: number, t: number): SolveStep {
  const wrong = checkArithmetic(text).find((e) => !e.holds)?.explanation ?? null;
  const bad = view.steps.findIndex((s) => s.wrong !== null || s.score < t);
  return { text, score, wrong, restsOn: bad >= 0 ? bad : null };
}

function newView(index: number, from: number | null, t: number): CandidateView {
  const tail = document.createTextNode('');
  const head = el('h3', {}, `Candidate ${index + 1}`, from === null ? '' : ` (from ${from + 1})`);
  const body = el('div', { class: 'solve-text' });
  const stateTag = el('span', { class: 'solve-tag solve-state' }, 'writing');
  head.append(stateTag);
  const item = el('li', { class: 'solve-card writing', attrs: { 'data-candidate': String(index), 'data-state': 'writing', 'aria-label': `Candidate ${index + 1}` } }, head, body);
  const view: CandidateView = { item, head, body, tail, steps: [], tokens: 0, state: 'writing', stateTag };
  if (from !== null && views[from]) {
    // A fork starts with its parent's text: its scored steps and the rest.
    const parent = views[from];
    for (const s of parent.steps) body.append(stepSpan(s, t));
    view.steps = parent.steps.map((s) => ({ ...s }));
    tail.data = parent.tail.data;
  }
  body.append(tail);
  return view;
}

function setState(view: CandidateView, state: CardState, label: string): void {
  view.state = state;
  view.item.dataset.state = state;
  view.item.classList.toggle('writing', state === 'writing');
  view.stateTag.textContent = label;
}

function markPruned(view: CandidateView): void {
  if (view.item.classList.contains('pruned')) return;
  view.item.classList.add('pruned');
  view.item.dataset.pruned = 'true';
  // Beam search sets aside the finished beams past the first N: finished, then not kept.
  setState(view, 'pruned', view.state === 'finished' ? `${view.stateTag.textContent}, then set aside (not among the first ${runN} to finish)` : 'pruned');
}

/** What is on screen, by state; the running status line says exactly this. */
function counts(): Record<CardState, number> & { shown: number } {
  const c = { writing: 0, pruned: 0, finished: 0, continued: 0, shown: 0 };
  for (const v of views) {
    if (!v) continue;
    c[v.state]++;
    c.shown++;
  }
  return c;
}

let lastStatus = 0;
function showRunning(force = false): void {
  const now = performance.now();
  if (!force && now - lastStatus < 150) return;
  lastStatus = now;
  const c = counts();
  if (c.shown === 0) return;
  setStatus(`${METHOD_LABELS[runMethod]}, N = ${runN}: ${c.shown} candidate${c.shown === 1 ? '' : 's'} on screen: ${c.writing} writing, ${c.pruned} pruned, ${c.finished} finished${c.continued ? `, ${c.continued} continued by forks` : ''}…`);
}

function onEvent(e: SearchEvent, t: number): void {
  if (e.event === 'forked') {
    const view = newView(e.candidate, e.from, t);
    views[e.candidate] = view;
    $('solve-candidates').append(view.item);
    // DVTS: a beam stops writing and lives on in its children (beam search continues the parent itself).
    const parent = e.from === null ? null : views[e.from];
    if (runMethod === 'dvts' && parent && parent.state === 'writing') setState(parent, 'continued', 'continued by forks');
    showRunning(true);
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
      const step = judge(view, view.tail.data, e.score, t);
      view.steps.push(step);
      view.body.insertBefore(stepSpan(step, t), view.tail);
      view.tail.data = '';
      break;
    }
    case 'pruned':
      markPruned(view);
      break;
    case 'finished':
      view.item.dataset.stopReason = e.stopReason;
      setState(view, 'finished', STOP_LABELS[e.stopReason] ?? e.stopReason);
      break;
  }
  showRunning(e.event !== 'token');
}

function showResult(result: SearchResult): void {
  const sel = result.selection;
  const complete: SearchCandidate[] = [];
  for (const c of result.candidates) {
    const view = views[c.index];
    if (!view) continue;
    if (view.state === 'writing') setState(view, 'continued', 'continued by forks');
    if (c.finalist) {
      view.item.dataset.finalist = 'true';
      const why = incomplete(c);
      view.item.dataset.complete = String(why === null);
      if (why === null) complete.push(c);
      else {
        view.item.classList.add('incomplete');
        // The stop reason already says "cut off" on the card; a missing answer is said here.
        if (why === 'no-answer' || !view.item.dataset.stopReason) {
          view.head.append(el('span', { class: 'solve-tag incomplete-tag' }, why === 'cut-off' ? 'cut off' : 'no final answer'));
        }
      }
    }
    // Beam search sets aside finished beams past the first N at its end, without an event.
    if (c.pruned) markPruned(view);
    view.head.append(el('span', { class: 'solve-score' }, ` ${sel.aggregation}: ${fmt(c.score)}`));
  }
  const choice = completeChoice(result, complete);
  const chosenIndex = choice?.best ?? null;
  if (chosenIndex !== null && views[chosenIndex]) {
    const chosen = views[chosenIndex];
    chosen.item.classList.add('chosen');
    chosen.head.append(el('span', { class: 'winner-tag' }, '★ chosen'));
  }
  document.body.dataset.solveChosen = chosenIndex === null ? '' : String(chosenIndex);
  const byIndex = (i: number) => result.candidates.find((c) => c.index === i);
  const answerOf = (i: number) => byIndex(i)?.answer ?? 'no answer';
  const vote = (key: string, title: string, body: string) => el('div', { attrs: { 'data-vote': key } }, el('strong', {}, title), el('br'), body);
  const left = result.finalists.length - complete.length;
  const leftOut = left === 0 ? null
    : el('p', { class: 'hint', attrs: { 'data-left-out': String(left) } },
      `${left} of ${result.finalists.length} finalists ${left === 1 ? 'is' : 'are'} left out of the choice: cut off (at the token limit or the budget) or with no final answer. `
      + 'Only complete candidates, which end on their own with a final answer, are chosen and voted on.');
  if (!choice) {
    replace($('solve-votes'),
      vote('best', `Best (PRM ${sel.aggregation})`, 'nothing chosen: no finalist is complete'),
      vote('majority', 'Majority vote', 'no complete candidate'),
      vote('weighted', 'PRM-weighted vote', 'no complete candidate'),
      leftOut,
      el('p', { class: 'hint' }, 'Raise “Tokens per candidate” (or the token budget) so candidates can finish.'));
  } else {
    replace($('solve-votes'),
      vote('best', `Best (PRM ${choice.aggregation})`, choice.best === null ? 'no complete candidate has a score' : `${answerOf(choice.best)} — candidate ${choice.best + 1}, score ${fmt(byIndex(choice.best)?.score ?? null)}`),
      vote('majority', 'Majority vote', choice.majority ? `${choice.majority.display} — ${choice.majority.count} of ${complete.length} complete finalists` : 'no answer found'),
      vote('weighted', 'PRM-weighted vote', choice.weighted ? `${choice.weighted.display} — weight ${fmt(choice.weighted.weight)}` : 'no answer found'),
      leftOut);
  }
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
  runMethod = method;
  runN = n;
  setStatus(`${METHOD_LABELS[method]}, N = ${n}: starting…`);
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
    // Counted from the cards on screen, so the line and the cards agree.
    const c = counts();
    const finalists = views.filter((v) => v && v.item.dataset.finalist === 'true').length;
    const complete = views.filter((v) => v && v.item.dataset.complete === 'true').length;
    setStatus(`Done in ${s} s: ${c.shown} candidates written: ${finalists} finalists (${complete} complete), ${c.pruned} pruned${c.continued ? `, ${c.continued} continued by forks` : ''}; ${result.tokensGenerated} tokens written, ${result.tokensScored} scored${result.budgetExhausted ? ' (the token budget ran out)' : ''}.`);
    document.body.dataset.solve = 'done';
  } catch (e) {
    const cancelled = controller.signal.aborted;
    for (const v of views) if (v && v.state === 'writing') setState(v, 'finished', cancelled ? 'cancelled' : 'stopped');
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
