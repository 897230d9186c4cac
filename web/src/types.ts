// Shapes the app's modules share.
import type { Aggregation, Selection, StepConfidence } from 'stepscore';
import type { AppStep } from './reader';

export interface Scored {
  problem: string;
  steps: AppStep[];
  scores: Array<number | null>;
  confidence: StepConfidence[] | null;
  /** Where the scores came from. */
  source: 'model' | 'live' | 'file' | 'link';
  tokens: number | null;
  model: string | null;
}

export interface BestOfN {
  problem: string;
  responses: string[];
  steps: string[][];
  scores: Array<Array<number | null>>;
  selection: Selection;
}

export const AGG_LABELS: Record<Aggregation, string> = { min: 'min', prod: 'product', last: 'last', mean: 'mean', geo_mean: 'geometric mean' };
