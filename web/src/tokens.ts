// A step's text shaded token by token by the LM's log-probability, with its
// least likely number marked: where a person should look in a flagged step.
// The spans come from the package (UTF-16 offsets into the step's text, the
// least likely number chosen by the core's rule); every piece of text is a
// text node (dom.ts), never markup.
import type { TextSpan, TokenLogprob } from 'stepscore';
import { el, fmt } from './dom';

/** Log-probs at or below this get the strongest shade (a 1-in-3000 token). */
const FLOOR = -8;
/** A token at least this likely (p ≥ 0.5) is unremarkable: white. */
export const EXPECTED = Math.log(0.5);

/**
 * Red, more opaque the less likely the token: white at p ≥ 0.5 (a token the
 * model expected), the strongest shade at p ≤ e^-8, log-linear between.
 */
export function tokenShade(logprob: number): string {
  const surprise = Math.min(1, Math.max(0, (EXPECTED - logprob) / (EXPECTED - FLOOR)));
  return `rgba(178, 24, 43, ${(0.6 * surprise).toFixed(3)})`;
}

/**
 * Which tokens the verifier reads (the package's info().tokensRead): the
 * confidence family and heads over every token's log-probability (the default
 * PRM's) read them all ('all'); the arithmetic head reads only a step's digit
 * tokens and operation signs (`stepscore::prm::arithmetic`: results, operands,
 * plus/minus and times/divide signs), so only those are shaded ('arithmetic').
 */
export type Reads = 'all' | 'arithmetic';

/** A token the arithmetic head reads: all digits, or an operation sign ("x" only between numbers). */
function arithmeticToken(text: string, start: number, end: number): boolean {
  const t = text.slice(start, end).trim();
  if (/^[0-9]+$/.test(t)) return true;
  if (/^[+\-−×*/÷·]$/.test(t)) return true;
  return t === 'x' && /[0-9]\s*$/.test(text.slice(0, start)) && /^\s*[0-9]/.test(text.slice(end));
}

interface Piece {
  start: number;
  end: number;
  /** The log-prob of the token covering it; null for text no token covers. */
  logprob: number | null;
  /** Whether the verifier reads the token covering it. */
  read: boolean;
}

/**
 * Cuts `text` at every token edge and at the mark's edges. Tokens sharing a
 * character (a byte-level split) give it the lower log-prob.
 */
function pieces(text: string, tokens: TokenLogprob[], mark: TextSpan | null, reads: Reads): Piece[] {
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
    let read = false;
    for (const t of tokens) {
      if (t.start <= start && end <= t.end) {
        if (logprob === null || t.logprob < logprob) logprob = t.logprob;
        read ||= reads === 'all' || arithmeticToken(text, clamp(t.start), clamp(t.end));
      }
    }
    out.push({ start, end, logprob, read });
  }
  return out;
}

function pieceNode(text: string, p: Piece): Node {
  const s = text.slice(p.start, p.end);
  if (p.logprob === null) return document.createTextNode(s);
  // Every token shows its value on hover; only those the verifier reads are shaded.
  return el('span', {
    class: p.read ? 'tok read' : 'tok',
    title: `token log-prob ${fmt(p.logprob, 2)} (p ≈ ${Math.exp(p.logprob).toPrecision(2)})${p.read ? '' : '; the verifier does not read this token'}`,
    style: p.read ? { backgroundColor: tokenShade(p.logprob) } : {},
  }, s);
}

/**
 * The step text as token spans; `mark` (the least likely number, when the
 * step is flagged) wraps its pieces in a <mark data-least-likely>.
 */
export function tokenText(text: string, tokens: TokenLogprob[], mark: TextSpan | null, reads: Reads = 'all'): HTMLParagraphElement {
  const p = el('p', { class: 'step-text tokens' });
  let marked: HTMLElement | null = null;
  for (const piece of pieces(text, tokens, mark, reads)) {
    const inside = mark !== null && piece.start >= mark.start && piece.end <= mark.end && mark.end > mark.start;
    if (inside) {
      marked ??= p.appendChild(el('mark', { class: 'least-likely', attrs: { 'data-least-likely': 'true', 'data-p': String(Math.exp(mark.logprob)) } }));
      marked.appendChild(pieceNode(text, piece));
    } else {
      p.appendChild(pieceNode(text, piece));
    }
  }
  return p;
}

/** Whether a step's least likely number is one the model did not expect (p < 0.5): only then is it marked. */
export function unlikely(mark: TextSpan | null): boolean {
  return mark !== null && mark.logprob < EXPECTED;
}

/**
 * The line under a flagged step: what the mark points at, in words. A number
 * the model expected (p ≥ 0.5) is not called unlikely: the line says the
 * model expected every number, and nothing is marked.
 */
export function leastLikelyLine(text: string, mark: TextSpan): HTMLParagraphElement {
  const p = Math.exp(mark.logprob).toPrecision(2);
  if (!unlikely(mark)) {
    return el('p', { class: 'least-likely-note expected' },
      'The model expected every number in this step (the lowest, “', text.slice(mark.start, mark.end), `”, has p ≈ ${p}): its numbers do not show where it went wrong.`);
  }
  return el('p', { class: 'least-likely-note' },
    'Least likely number: “', el('strong', {}, text.slice(mark.start, mark.end)), `” (token log-prob ${fmt(mark.logprob, 1)}, p ≈ ${p})`);
}
