// The step-reward view: summary (aggregate, first error), legend, chart and
// its table twin, one card per step. Step text goes in as text (dom.ts).
import { aggregate, checkArithmetic, firstError, type Aggregation, type Equation, type StepConfidence, type TextSpan, type TokenLogprob } from 'stepscore';
import { drawChart } from './chart';
import { scaleGradient, scoreColor, scoreTint, WRONG_COLOR } from './color';
import { PROGRESS_BASELINE } from './config';
import { $, el, fmt, numberSections, replace } from './dom';
import type { AppStep } from './reader';
import { leastLikelyLine, tokenText, unlikely, type Reads } from './tokens';
import { AGG_LABELS, type Scored } from './types';

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
  const ramp = el('div', { class: 'ramp', style: { background: scaleGradient(t) }, attrs: { role: 'img', 'aria-label': `Colour scale: red below the threshold ${t.toFixed(2)}, blue above, pale near it` } },
    el('span', { class: 'tick', style: { left: `calc(${(t * 100).toFixed(1)}% - 1px)` } }));
  replace($('legend'), el('span', {}, '0 · likely wrong'), ramp, el('span', {}, '1 · likely right'), el('span', { class: 'hint' }, `(red below the threshold ${t.toFixed(2)}, blue above; grey = not scored)`));
}

interface StepTokens {
  tokens: TokenLogprob[] | null;
  least: TextSpan | null;
}

/**
 * The first equation in a step that exact arithmetic finds false, or null. Such a
 * step is wrong for certain, whatever any model scored it: the page flags it the
 * same way for every model (issue 46).
 */
function falseEquation(text: string): Equation | null {
  return checkArithmetic(text).find((e) => !e.holds) ?? null;
}

/** The score bar of a step that rests on an earlier error: its score's colour, striped with the error's red. */
function restsBar(score: number | null, t: number): string {
  return `repeating-linear-gradient(135deg, ${scoreColor(score, t)} 0 6px, rgba(178, 24, 43, 0.75) 6px 10px)`;
}

/** Why a step counts as an error: false arithmetic first (certain), else a score below the threshold. */
type Verdict = 'wrong' | 'below' | null;

function stepCard(step: AppStep, i: number, score: number | null, conf: StepConfidence | null, toks: StepTokens, first: number, t: number, pending: boolean, wrong: Equation | null, reads: Reads): HTMLLIElement {
  const verdict: Verdict = pending ? null : wrong ? 'wrong' : score !== null && score < t ? 'below' : null;
  // A step after the first error builds on it: whatever its own score, it is drawn
  // in the error's red, dashed, and says which step it rests on.
  const restsOn = !pending && first >= 0 && i > first ? first : null;
  const color = verdict === 'wrong' || restsOn !== null ? WRONG_COLOR : scoreColor(score, t);
  const isFirst = i === first;
  const roleText = step.role ? ` · ${step.role.replace('_', ' ')}${step.tool ? ` (${step.tool})` : ''}` : '';
  const label = step.label === true ? 'labelled correct' : step.label === false ? 'labelled wrong' : null;
  const head = el('div', { class: 'step-head' },
    el('h3', {}, `Step ${i + 1}${roleText}`),
    isFirst ? el('span', { class: 'marker', attrs: { 'data-first-error': 'true' } }, 'First error') : null,
    verdict === 'wrong' ? el('span', { class: 'verdict wrong' }, 'Wrong: exact arithmetic')
      : verdict === 'below' ? el('span', { class: 'verdict below' }, `Below the threshold ${t.toFixed(2)}`) : null,
    restsOn !== null ? el('span', { class: 'rests-on' }, `Rests on the error in step ${restsOn + 1}`) : null,
    label ? el('span', { class: 'label-tag' }, `ground truth: ${label}`) : null,
    el('span', { class: 'step-score' }, pending ? 'pending…' : `model score ${fmt(score)}`));
  const bar = el('div', { class: 'bar', attrs: { role: 'meter', 'aria-valuemin': '0', 'aria-valuemax': '1', 'aria-valuenow': String(score ?? 0), 'aria-label': `Step ${i + 1} model score` } },
    el('span', { style: { width: `${Math.max(0, Math.min(1, score ?? 0)) * 100}%`, background: restsOn !== null ? restsBar(score, t) : scoreColor(score, t) } }));
  // Token shading where the head read per-token log-probs (the least likely
  // number marked on the flagged step); else the step tinted by its confidence.
  const least = isFirst && !pending ? toks.least : null;
  // Only a number the model did not expect is outlined (issue 46: "15", p ≈ 0.94, is not).
  const mark = least && unlikely(least) ? least : null;
  let text: HTMLParagraphElement;
  if (toks.tokens && toks.tokens.length > 0 && !pending) {
    text = tokenText(step.text, toks.tokens, mark, reads);
  } else {
    text = el('p', { class: 'step-text' }, step.text);
    if (conf) text.style.background = scoreTint(Math.exp(conf.meanLogprob), t);
  }
  const markLine = least ? leastLikelyLine(step.text, least) : null;
  // Arithmetic that is false in exact arithmetic: wrong for certain, whatever the score.
  const arithLine = wrong && !pending ? el('p', { class: 'arith', attrs: { 'data-arithmetic': 'false' } }, `Exact arithmetic: ${wrong.explanation}`) : null;
  const confLine = conf
    ? el('p', { class: 'conf' }, `${conf.tokens} tokens · mean log-prob ${fmt(conf.meanLogprob)} (p ≈ ${fmt(Math.exp(conf.meanLogprob))}) · min log-prob ${fmt(conf.minLogprob)} · mean entropy ${fmt(conf.meanEntropy)} nats`)
    : null;
  const status = pending ? 'not scored yet' : `model score ${fmt(score, 2)}${verdict === 'wrong' ? ', wrong by exact arithmetic' : verdict === 'below' ? ', below the threshold' : ''}${restsOn !== null ? `, rests on the error in step ${restsOn + 1}` : ''}`;
  const attrs: Record<string, string> = { 'data-step': String(i), 'data-score': score === null ? '' : String(score), 'data-verdict': verdict ?? '', 'aria-label': `Step ${i + 1}, ${status}${isFirst ? ', first error' : ''}` };
  if (restsOn !== null) attrs['data-rests-on'] = String(restsOn);
  const card = el('li', { class: `step-card${isFirst ? ' is-first-error' : ''}${verdict === 'wrong' ? ' is-wrong' : ''}${restsOn !== null ? ' rests-on-error' : ''}${pending ? ' pending' : ''}`, style: { borderLeftColor: color }, attrs },
    head, bar, text, markLine, arithLine, confLine);
  return card;
}

/** Draws a result; `upto` steps are scored (live mode), the rest pending. */
export function renderResults(c: Scored, how: Aggregation, t: number, upto?: number): void {
  const n = upto ?? c.steps.length;
  $('threshold-value').textContent = t.toFixed(2);
  const scored = c.scores.slice(0, n);
  const agg = scored.length ? aggregate(scored, how) : null;
  // The first error: the first step exact arithmetic proves false, or the first
  // scored below the threshold, whichever comes first.
  const wrongs = c.steps.map((s, i) => (i < n ? falseEquation(s.text) : null));
  const byScore = scored.length ? firstError(scored, t) : -1;
  const byArith = wrongs.findIndex((w) => w !== null);
  const first = byArith >= 0 && (byScore < 0 || byArith <= byScore) ? byArith : byScore;
  $('aggregate').textContent = agg === null ? '–' : fmt(agg);
  const fe = $('first-error');
  fe.dataset.index = String(first);
  const firstWrong = first >= 0 ? wrongs[first] : null;
  fe.textContent = n === 0 ? 'Waiting for the first step…'
    : firstWrong ? `First error: step ${first + 1}: ${firstWrong.explanation} (exact arithmetic, so wrong whatever the model scored; the model scored it ${fmt(scored[first])}).`
      : first >= 0 ? `First error: step ${first + 1} (score ${fmt(scored[first])} < ${t.toFixed(2)})`
        : `No step below the threshold ${t.toFixed(2)} and no false arithmetic${n < c.steps.length ? ' so far' : ''}.`;
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
  const perToken = (c.tokenLogprobs?.length ?? 0) > 0;
  note.hidden = !c.confidence && !perToken;
  const reads: Reads = c.tokensRead === 'arithmetic' ? 'arithmetic' : 'all';
  const whatIsRead = reads === 'arithmetic'
    ? 'Each number and operation sign of a step (what this verifier reads; other words stay white)'
    : c.family === 'confidence'
      ? 'Each token of a step (the confidence score averages them all)'
      : 'Each token of a step (this verifier reads every token\u2019s log-probability, with its number and operation statistics)';
  note.textContent = perToken
    ? `${whatIsRead} is shaded by how unlikely the model found it: white where it expected the token (p ≥ 0.5), darker red the less likely (hover a token for its value). In the first flagged step, the least likely number is outlined when the model did not expect it.`
    : c.confidence
      ? 'Step text is shaded by the model’s confidence in it (p = exp(mean token log-prob)). This model reports no per-token log-probs, so each step is shaded as a whole.'
      : '';
  const sourceNote = c.source === 'file' ? 'Scores as given in the file.' : c.source === 'link' ? `Scores from the shared link${c.model ? ` (model: ${c.model})` : ''}; load a model and score to recompute.` : null;
  const toks = (i: number): StepTokens => ({ tokens: c.tokenLogprobs?.[i] ?? null, least: c.leastLikely?.[i] ?? null });
  replace($('steps'), ...c.steps.map((s, i) => stepCard(s, i, c.scores[i], c.confidence?.[i] ?? null, toks(i), first, t, i >= n, wrongs[i], reads)));
  if (sourceNote) $('steps').prepend(el('li', { class: 'hint' }, sourceNote));
  const section = $('results');
  section.hidden = false;
  numberSections();
  section.dataset.rendered = String(n);
}
