// The app's state in the URL hash (#s=<base64url of UTF-8 JSON>), so a link
// reproduces a view without any server. Scores travel along so the receiver
// sees the result before loading a model; reading is defensive because the
// hash comes from whoever sent the link.

export interface SharedState {
  v: 1;
  problem: string;
  response: string;
  segmenter: string;
  regex?: string;
  aggregation: string;
  /** Absent when the link holds none in [0, 1]: the slider keeps the model's threshold in force. */
  threshold?: number;
  /** The scored steps and their scores, when there is a result. */
  steps?: string[];
  scores?: Array<number | null>;
  model?: string;
  /** Best-of-N candidate responses. */
  candidates?: string[];
  /** The scored best-of-N: each candidate's steps and their scores. */
  bon?: { responses: string[]; steps: string[][]; scores: Array<Array<number | null>> };
}

const MAX_HASH = 512 * 1024;

function toBase64Url(bytes: Uint8Array): string {
  let bin = '';
  for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function fromBase64Url(text: string): Uint8Array {
  const b64 = text.replace(/-/g, '+').replace(/_/g, '/');
  const bin = atob(b64 + '='.repeat((4 - (b64.length % 4)) % 4));
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}

export function encodeState(state: SharedState): string {
  return `#s=${toBase64Url(new TextEncoder().encode(JSON.stringify(state)))}`;
}

const isStr = (v: unknown): v is string => typeof v === 'string';
const isScore = (x: unknown): boolean => x === null || (typeof x === 'number' && Number.isFinite(x));

/** The state a hash holds, or null (with no exception) when it holds none or garbage. */
export function decodeState(hash: string): SharedState | null {
  const m = /^#s=([A-Za-z0-9_-]+)$/.exec(hash);
  if (!m || m[1].length > MAX_HASH) return null;
  let raw: unknown;
  try {
    raw = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(fromBase64Url(m[1])));
  } catch {
    return null;
  }
  if (typeof raw !== 'object' || raw === null) return null;
  const o = raw as Record<string, unknown>;
  if (o.v !== 1 || !isStr(o.problem) || !isStr(o.response) || !isStr(o.segmenter) || !isStr(o.aggregation)) return null;
  const state: SharedState = { v: 1, problem: o.problem, response: o.response, segmenter: o.segmenter, aggregation: o.aggregation };
  if (typeof o.threshold === 'number' && o.threshold >= 0 && o.threshold <= 1) state.threshold = o.threshold;
  if (isStr(o.regex)) state.regex = o.regex;
  if (isStr(o.model)) state.model = o.model;
  if (Array.isArray(o.steps) && o.steps.every(isStr) && Array.isArray(o.scores) && o.scores.length === o.steps.length
    && o.scores.every(isScore)) {
    state.steps = o.steps;
    state.scores = o.scores as Array<number | null>;
  }
  if (Array.isArray(o.candidates) && o.candidates.every(isStr)) state.candidates = o.candidates;
  const bon = o.bon as Record<string, unknown> | undefined;
  if (bon && typeof bon === 'object' && Array.isArray(bon.responses) && bon.responses.every(isStr)
    && Array.isArray(bon.steps) && Array.isArray(bon.scores)
    && bon.steps.length === bon.responses.length && bon.scores.length === bon.responses.length
    && bon.steps.every((st) => Array.isArray(st) && st.every(isStr))
    && bon.scores.every((sc, i) => Array.isArray(sc) && sc.length === (bon.steps as string[][])[i].length && sc.every(isScore))) {
    state.bon = { responses: bon.responses, steps: bon.steps as string[][], scores: bon.scores as Array<Array<number | null>> };
  }
  return state;
}
