// Reading trace files in every row format the stepscore SDK reads (the same
// detection as the Rust reader, crates/stepscore/src/io/rows.rs):
//   native        {problem, steps: [{text, label?, score?, role?, tool?}], response?}
//   ProcessBench  {problem, steps: [string], label: first wrong step or -1}
//   TRL PRM       {prompt, completions: [string], labels: [bool]}
//   raw           {problem | question | prompt, response}  (cut by the segmenter)
//   OpenAI chat   {messages: [{role, content, tool_calls?, name?, tool_call_id?}]}
// as one JSON object, a JSON array of them, or JSONL (one per line). Bad rows
// are reported with their line and field; the good ones are kept.
import { segment } from 'stepscore';

export type Role = 'system' | 'user' | 'assistant' | 'tool_call' | 'tool_result';

export interface AppStep {
  text: string;
  /** Ground truth when the source gives it: true correct, false wrong. */
  label?: boolean | null;
  /** A score that came with the file (shown until the model rescoring replaces it). */
  score?: number | null;
  role?: Role;
  tool?: string;
}

export interface AppTrace {
  id?: string;
  problem: string;
  steps: AppStep[];
  response?: string;
  finalAnswer?: string;
  referenceAnswer?: string;
  /** Which reader read it. */
  format: 'native' | 'processbench' | 'trl' | 'raw' | 'chat';
}

export interface ParseResult {
  traces: AppTrace[];
  errors: string[];
}

type Obj = Record<string, unknown>;

class RowError extends Error {}

function kind(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'object') return 'an object';
  return `a ${typeof v}`;
}

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function str(row: Obj, key: string): string {
  const v = row[key];
  if (typeof v !== 'string') throw new RowError(v === undefined ? `missing field \`${key}\`` : `${key} must be a string, got ${kind(v)}`);
  return v;
}

function optStr(row: Obj, keys: string[]): string | undefined {
  for (const k of keys) {
    const v = row[k];
    if (v === undefined || v === null) continue;
    if (typeof v === 'string') return v;
    if (typeof v === 'number') return String(v);
    throw new RowError(`${k} must be a string, got ${kind(v)}`);
  }
  return undefined;
}

function strList(row: Obj, key: string): string[] {
  const v = row[key];
  if (!Array.isArray(v)) throw new RowError(v === undefined ? `missing field \`${key}\`` : `${key} must be an array, got ${kind(v)}`);
  if (v.length === 0) throw new RowError(`${key}: empty step list`);
  return v.map((s, i) => {
    if (typeof s !== 'string') throw new RowError(`${key}[${i}] must be a string, got ${kind(s)}`);
    return s;
  });
}

function detect(row: Obj): AppTrace['format'] {
  if ('messages' in row) return 'chat';
  if ('completions' in row) return 'trl';
  if ('steps' in row) {
    const s = row.steps;
    return Array.isArray(s) && isObj(s[0]) ? 'native' : 'processbench';
  }
  if ('response' in row) return 'raw';
  throw new RowError(
    'cannot tell the row format: expected a field `steps` (native/ProcessBench), `completions` (TRL), `response` (raw) or `messages` (chat)',
  );
}

const ROLES: Role[] = ['system', 'user', 'assistant', 'tool_call', 'tool_result'];

function nativeRow(row: Obj): AppTrace {
  const problem = str(row, 'problem');
  const steps = row.steps as unknown[];
  if (steps.length === 0) throw new RowError('steps: empty step list');
  const out = steps.map((v, i): AppStep => {
    if (!isObj(v)) throw new RowError(`steps[${i}] must be an object, got ${kind(v)}`);
    if (typeof v.text !== 'string') throw new RowError(`steps[${i}].text must be a string, got ${kind(v.text)}`);
    const step: AppStep = { text: v.text };
    if (typeof v.label === 'boolean') step.label = v.label;
    else if (v.label !== undefined && v.label !== null) throw new RowError(`steps[${i}].label must be a boolean, got ${kind(v.label)}`);
    if (typeof v.score === 'number') step.score = v.score;
    else if (v.score !== undefined && v.score !== null) throw new RowError(`steps[${i}].score must be a number, got ${kind(v.score)}`);
    if (typeof v.role === 'string' && (ROLES as string[]).includes(v.role)) step.role = v.role as Role;
    if (typeof v.tool === 'string') step.tool = v.tool;
    return step;
  });
  const response = optStr(row, ['response']);
  return { problem, steps: out, response, format: 'native' };
}

function processbenchRow(row: Obj): AppTrace {
  const problem = str(row, 'problem');
  const steps: AppStep[] = strList(row, 'steps').map((text) => ({ text }));
  const label = row.label;
  if (label !== undefined && label !== null) {
    if (typeof label !== 'number' || !Number.isInteger(label)) throw new RowError(`label must be an integer, got ${kind(label)}`);
    if (label < -1 || label >= steps.length) throw new RowError(`label ${label} is outside -1..${steps.length - 1} for ${steps.length} steps`);
    // ProcessBench: steps before the first error correct, it wrong, later ones unknown.
    steps.forEach((s, i) => {
      s.label = label === -1 || i < label ? true : i === label ? false : null;
    });
  }
  return { problem, steps, format: 'processbench' };
}

function trlRow(row: Obj): AppTrace {
  const problem = str(row, 'prompt');
  const steps: AppStep[] = strList(row, 'completions').map((text) => ({ text }));
  const labels = row.labels;
  if (labels !== undefined && labels !== null) {
    if (!Array.isArray(labels)) throw new RowError(`labels must be an array, got ${kind(labels)}`);
    if (labels.length !== steps.length) throw new RowError(`${labels.length} labels for ${steps.length} steps (\`completions\`)`);
    labels.forEach((l, i) => {
      if (typeof l === 'boolean') steps[i].label = l;
      else if (l !== null) throw new RowError(`labels[${i}] must be a boolean, got ${kind(l)}`);
    });
  }
  return { problem, steps, format: 'trl' };
}

function rawRow(row: Obj, segmenter: string): AppTrace {
  const key = ['problem', 'question', 'prompt'].find((k) => k in row) ?? 'problem';
  const problem = str(row, key);
  const response = str(row, 'response');
  const steps = segment(response, segmenter).map((s) => ({ text: s.text }));
  if (steps.length === 0) throw new RowError(`response: the ${segmenter} segmenter found no steps in it`);
  return { problem, response, steps, format: 'raw' };
}

function contentText(v: unknown, field: string): string {
  if (v === undefined || v === null) return '';
  if (typeof v === 'string') return v;
  if (Array.isArray(v)) {
    const texts: string[] = [];
    v.forEach((p, j) => {
      if (typeof p === 'string') texts.push(p);
      else if (isObj(p)) {
        if (p.type === 'text') {
          if (typeof p.text !== 'string') throw new RowError(`${field}[${j}].text must be a string, got ${kind(p.text)}`);
          texts.push(p.text);
        }
      } else throw new RowError(`${field}[${j}] must be a content part object, got ${kind(p)}`);
    });
    return texts.join('\n');
  }
  throw new RowError(`${field}: expected a string, null or a list of parts, found ${kind(v)}`);
}

function functionParts(f: unknown, field: string): [string, string] {
  if (!isObj(f)) throw new RowError(`${field} must be an object, got ${kind(f)}`);
  if (typeof f.name !== 'string') throw new RowError(`${field}.name must be a string, got ${kind(f.name)}`);
  const args = f.arguments;
  const text = args === undefined || args === null ? '' : typeof args === 'string' ? args : JSON.stringify(args);
  return [f.name, text];
}

/** The transcript prefix stepscore's chat segmenter reads back. */
function rolePrefix(role: Role, tool?: string): string {
  const base = { system: 'System', user: 'User', assistant: 'Assistant', tool_call: 'Tool call', tool_result: 'Tool result' }[role];
  return tool && !/[()\n]/.test(tool) ? `${base} (${tool}): ` : `${base}: `;
}

function chatRow(row: Obj): AppTrace {
  const messages = row.messages;
  if (!Array.isArray(messages)) throw new RowError(`messages must be an array, got ${kind(messages)}`);
  const problemParts: string[] = [];
  const steps: AppStep[] = [];
  const callNames = new Map<string, string>();
  let seenAssistant = false;
  const push = (text: string, role: Role, tool?: string) => {
    const t = text.trim();
    if (t) steps.push(tool ? { text: t, role, tool } : { text: t, role });
  };
  messages.forEach((m, i) => {
    const field = `messages[${i}]`;
    if (!isObj(m)) throw new RowError(`${field} must be an object, got ${kind(m)}`);
    if (typeof m.role !== 'string') throw new RowError(`${field}.role must be a string, got ${kind(m.role)}`);
    const name = m.role.toLowerCase();
    const role: Role | null =
      name === 'system' || name === 'developer' ? 'system'
        : name === 'user' || name === 'human' ? 'user'
          : name === 'assistant' ? 'assistant'
            : name === 'tool' || name === 'function' || name === 'ipython' ? 'tool_result'
              : null;
    if (!role) throw new RowError(`${field}.role: unknown role \`${name}\` (expected system, user, assistant or tool)`);
    const content = contentText(m.content, `${field}.content`);
    if (role === 'assistant') seenAssistant = true;
    if (!seenAssistant) {
      if (content.trim()) problemParts.push(content.trim());
      return;
    }
    if (role === 'assistant') {
      push(content, 'assistant');
      const calls = m.tool_calls;
      if (Array.isArray(calls)) {
        calls.forEach((c, k) => {
          if (!isObj(c)) throw new RowError(`${field}.tool_calls[${k}] must be an object, got ${kind(c)}`);
          const [fname, args] = functionParts(c.function, `${field}.tool_calls[${k}].function`);
          if (typeof c.id === 'string') callNames.set(c.id, fname);
          push(`${fname}(${args})`, 'tool_call', fname);
        });
      } else if (calls !== undefined && calls !== null) throw new RowError(`${field}.tool_calls must be an array, got ${kind(calls)}`);
      if (m.function_call !== undefined && m.function_call !== null) {
        const [fname, args] = functionParts(m.function_call, `${field}.function_call`);
        push(`${fname}(${args})`, 'tool_call', fname);
      }
    } else if (role === 'tool_result') {
      const tool = typeof m.name === 'string' ? m.name : typeof m.tool_call_id === 'string' ? callNames.get(m.tool_call_id) : undefined;
      push(content, 'tool_result', tool);
    } else push(content, role);
  });
  if (!seenAssistant) throw new RowError('messages: no assistant message: nothing to score');
  if (steps.length === 0) throw new RowError('messages: empty step list: the assistant turns have no text or tool calls');
  const response = steps.map((s) => rolePrefix(s.role ?? 'assistant', s.tool) + s.text).join('\n\n');
  return { problem: problemParts.join('\n\n'), response, steps, format: 'chat' };
}

/** Converts one parsed row; throws RowError naming the field at fault. */
export function rowToTrace(value: unknown, segmenter = 'auto'): AppTrace {
  if (!isObj(value)) throw new RowError(`expected a JSON object, found ${kind(value)}`);
  const format = detect(value);
  const trace =
    format === 'native' ? nativeRow(value)
      : format === 'processbench' ? processbenchRow(value)
        : format === 'trl' ? trlRow(value)
          : format === 'raw' ? rawRow(value, segmenter)
            : chatRow(value);
  const id = optStr(value, ['id']);
  if (id !== undefined) trace.id = id;
  const fin = optStr(value, ['final_answer', 'finalAnswer', 'answer']);
  if (fin !== undefined) trace.finalAnswer = fin;
  const ref = optStr(value, ['reference_answer', 'referenceAnswer', 'gold', 'ground_truth']);
  if (ref !== undefined) trace.referenceAnswer = ref;
  const scores = value.scores;
  if (scores !== undefined && scores !== null) {
    if (!Array.isArray(scores)) throw new RowError(`scores must be an array, got ${kind(scores)}`);
    if (scores.length !== trace.steps.length) throw new RowError(`scores: ${scores.length} scores for ${trace.steps.length} steps`);
    scores.forEach((s, i) => {
      if (s === null) trace.steps[i].score = null;
      else if (typeof s === 'number') trace.steps[i].score = Number.isFinite(s) ? s : null;
      else throw new RowError(`scores[${i}] must be a number or null, got ${kind(s)}`);
    });
  }
  return trace;
}

/** Reads a file's text: one JSON value (object or array of rows), else JSONL. */
export function parseTraceFile(text: string, name = 'input', segmenter = 'auto'): ParseResult {
  const traces: AppTrace[] = [];
  const errors: string[] = [];
  const trimmed = text.trim();
  if (!trimmed) return { traces, errors: [`${name}: the file is empty`] };
  let whole: unknown;
  let isWhole = false;
  try {
    whole = JSON.parse(trimmed);
    isWhole = true;
  } catch {
    // not one JSON value: read it as JSONL
  }
  const add = (row: unknown, where: string) => {
    try {
      traces.push(rowToTrace(row, segmenter));
    } catch (e) {
      errors.push(`${where}: ${e instanceof Error ? e.message : String(e)}`);
    }
  };
  if (isWhole && Array.isArray(whole)) {
    whole.forEach((row, i) => add(row, `${name}[${i}]`));
  } else if (isWhole) {
    add(whole, name);
  } else {
    text.split(/\r?\n/).forEach((line, i) => {
      if (!line.trim()) return;
      let row: unknown;
      try {
        row = JSON.parse(line);
      } catch (e) {
        errors.push(`${name} line ${i + 1}: not valid JSON (${e instanceof Error ? e.message : String(e)})`);
        return;
      }
      add(row, `${name} line ${i + 1}`);
    });
  }
  return { traces, errors };
}
