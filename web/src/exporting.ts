// What "Export" writes. JSONL rows are stepscore's native trace rows
// ({id, problem, steps: [{text, score, label?, role?, tool?}], metadata}), so
// the SDK and the CLI read them back; the JSON document adds the model, the
// settings and the best-of-N votes.
import { aggregate, firstError, type Aggregation, type ScorerInfo } from 'stepscore';
import type { BestOfN, Scored } from './types';

interface ExportInput {
  current: Scored | null;
  bon: BestOfN | null;
  how: Aggregation;
  t: number;
}

export function exportRows({ current, bon, how, t }: ExportInput): Array<Record<string, unknown>> {
  const rows: Array<Record<string, unknown>> = [];
  if (current) {
    const c = current;
    rows.push({
      id: 'trace',
      problem: c.problem,
      steps: c.steps.map((s, i) => ({
        text: s.text,
        score: c.scores[i],
        ...(s.label !== undefined && s.label !== null ? { label: s.label } : {}),
        ...(s.role ? { role: s.role } : {}),
        ...(s.tool ? { tool: s.tool } : {}),
      })),
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

export function exportDocument(input: ExportInput & { info: ScorerInfo | null; modelName: string | null }): Record<string, unknown> {
  const { info, modelName, bon } = input;
  return {
    format: 'stepscore-demo-export',
    version: 1,
    exportedAt: new Date().toISOString(),
    model: info
      ? { name: modelName, backend: info.backend, family: info.family, format: info.format, architectures: info.architectures, fallbackReason: info.fallbackReason }
      : { name: modelName },
    aggregation: input.how,
    threshold: input.t,
    traces: exportRows(input),
    bestOfN: bon
      ? { aggregation: bon.selection.aggregation, best: bon.selection.best, majority: bon.selection.majority, weighted: bon.selection.weighted, candidates: bon.selection.candidates }
      : null,
  };
}
