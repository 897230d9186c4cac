// Best-of-N: the candidate inputs, and the ranked view of scored candidates
// (votes, winner, per-step mini bars). Candidate text goes in as text.
import { selectBest, type Aggregation } from 'stepscore';
import { scoreColor } from './color';
import { $, el, fmt, replace } from './dom';
import { AGG_LABELS, type BestOfN } from './types';

export function candidateTexts(): string[] {
  return [...document.querySelectorAll<HTMLTextAreaElement>('#bon-inputs textarea')].map((t) => t.value);
}

export function setCandidates(texts: string[]): void {
  const list = $('bon-inputs');
  replace(list);
  texts.forEach((t) => addCandidate(t));
}

export function addCandidate(text = ''): void {
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

/** Ranks the scored candidates by `how` and draws the votes and the cards. */
export function renderRanking(b: BestOfN, how: Aggregation, t: number): void {
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
