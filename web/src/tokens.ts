// A step's text shaded token by token by the LM's log-probability, with its
// least likely number marked: where a person should look in a flagged step.
// The spans come from the package (UTF-16 offsets into the step's text, the
// least likely number chosen by the core's rule); every piece of text is a
// text node (dom.ts), never markup.
import type { TextSpan, TokenLogprob } from 'stepscore';
import { el, fmt } from './dom';

/** Log-probs at or below this get the strongest shade (a 1-in-3000 token). */
const FLOOR = -8;

/** Red, more opaque the less likely the token; none for likely tokens. */
export function tokenShade(logprob: number): string {
  const surprise = Math.min(1, Math.max(0, -logprob / -FLOOR));
  return `rgba(178, 24, 43, ${(0.55 * surprise).toFixed(3)})`;
}

interface Piece {
  start: number;
  end: number;
  /** The log-prob of the token covering it; null for text no token covers. */
  logprob: number | null;
}

/**
 * Cuts `text` at every token edge and at the mark's edges. Tokens sharing a
 * character (a byte-level split) give it the lower log-prob.
 */
function pieces(text: string, tokens: TokenLogprob[], mark: TextSpan | null): Piece[] {
  const cuts = new Set<number>([0, text.length]);
  const clamp = (x: number) => Math.min(text.length, Math.max(0, x));
  for (const t of tokens) {
    cuts.add(clamp(t.start));
    cuts.add(clamp(t.end));
  }
  if (mark) {
    cuts.add(clamp(mark.start));
    cuts.add(clamp(mark.end));
  }
  const edges = [...cuts].sort((a, b) => a - b);
  const out: Piece[] = [];
  for (let k = 0; k + 1 < edges.length; k++) {
    const [start, end] = [edges[k], edges[k + 1]];
    let logprob: number | null = null;
    for (const t of tokens) {
      if (t.start <= start && end <= t.end && (logprob === null || t.logprob < logprob)) logprob = t.logprob;
    }
    out.push({ start, end, logprob });
  }
  return out;
}

function pieceNode(text: string, p: Piece): Node {
  const s = text.slice(p.start, p.end);
  if (p.logprob === null) return document.createTextNode(s);
  return el('span', { class: 'tok', title: `token log-prob ${fmt(p.logprob, 2)}`, style: { backgroundColor: tokenShade(p.logprob) } }, s);
}

/**
 * The step text as token spans; `mark` (the least likely number, when the
 * step is flagged) wraps its pieces in a <mark data-least-likely>.
 */
export function tokenText(text: string, tokens: TokenLogprob[], mark: TextSpan | null): HTMLParagraphElement {
  const p = el('p', { class: 'step-text tokens' });
  let marked: HTMLElement | null = null;
  for (const piece of pieces(text, tokens, mark)) {
    const inside = mark !== null && piece.start >= mark.start && piece.end <= mark.end && mark.end > mark.start;
    if (inside) {
      marked ??= p.appendChild(el('mark', { class: 'least-likely', attrs: { 'data-least-likely': 'true' } }));
      marked.appendChild(pieceNode(text, piece));
    } else {
      p.appendChild(pieceNode(text, piece));
    }
  }
  return p;
}

/** The line under a flagged step: what the mark points at, in words. */
export function leastLikelyLine(text: string, mark: TextSpan): HTMLParagraphElement {
  return el('p', { class: 'least-likely-note' },
    'Least likely: “', el('strong', {}, text.slice(mark.start, mark.end)), `” (token log-prob ${fmt(mark.logprob, 1)}, p ≈ ${Math.exp(mark.logprob).toPrecision(2)})`);
}
