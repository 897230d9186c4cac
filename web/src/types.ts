// Shapes the app's modules share.
import type { Aggregation, Family, Selection, StepConfidence, TextSpan, TokenLogprob } from 'stepscore';
import type { AppStep } from './reader';

export interface Scored {
  problem: string;
  steps: AppStep[];
  scores: Array<number | null>;
  confidence: StepConfidence[] | null;
  /** Per scored step, its tokens' log-probs (UTF-16 spans), when the model's head reads them. */
  tokenLogprobs?: TokenLogprob[][] | null;
  /** Per scored step, its least likely number (the package's rule), or null. */
  leastLikely?: Array<TextSpan | null> | null;
  /** Where the scores came from. */
  source: 'model' | 'live' | 'file' | 'link';
  /** The scoring model's family; absent for file and link scores. */
  family?: Family | null;
  /** Which tokens its score reads (the package's info().tokensRead); absent for file and link scores. */
  tokensRead?: 'all' | 'arithmetic' | 'none' | null;
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
