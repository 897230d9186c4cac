// Which models the app offers. The first entry is the default model: switch
// it here (one entry: its URL(s), relative to the page, and its PRM family).
// `options` is spread into StepScorer.load, so any load option the SDK takes
// (e.g. a separate head file once the SDK loads backbone + head) goes there.
import type { Family, LoadOptions } from 'stepscore';

export interface ModelEntry {
  id: string;
  label: string;
  /** URL of a .gguf file or of a Hugging Face checkpoint directory (ending in '/'). */
  model: string;
  family?: Family;
  /** Extra load options, passed to StepScorer.load as they are. */
  options?: Partial<Omit<LoadOptions, 'model' | 'onProgress' | 'signal' | 'backend'>> & Record<string, unknown>;
  note?: string;
  /**
   * Where the error threshold starts when this model loads (the slider moves it).
   * PRM probabilities use 0.5; a confidence score is a mean token probability
   * and sits much lower on correct steps too.
   */
  threshold?: number;
}

export const DEFAULT_MODEL: ModelEntry = {
  id: 'smollm2-confidence',
  label: 'SmolLM2-135M-Instruct Q4_1 — confidence (training-free)',
  model: 'models/SmolLM2-135M-Instruct.Q4_1.gguf',
  family: 'confidence',
  note: 'Scores are the model\u2019s own confidence in each step (geometric mean token probability), not a trained verifier.',
  // Set by hand from the gallery traces (correct steps ~0.1–0.6, answer lines ~0.07–0.10),
  // not calibrated: a trained head (issue 7) replaces this entry.
  threshold: 0.1,
};

/** Tiny test checkpoints (random weights), served by the dev/preview server only. */
export const FIXTURE_MODELS: ModelEntry[] = [
  { id: 'qwen2-prm-tiny', label: 'tiny score-head PRM (test fixture)', model: 'fixtures/prm/qwen2-prm-tiny/', family: 'score-head' },
  { id: 'skywork-prm-tiny', label: 'tiny value-head PRM (test fixture)', model: 'fixtures/prm/skywork-prm-tiny/', family: 'value-head' },
  { id: 'math-shepherd-tiny', label: 'tiny Math-Shepherd PRM (test fixture)', model: 'fixtures/prm/math-shepherd-tiny/', family: 'math-shepherd' },
  { id: 'rlhflow-tiny', label: 'tiny RLHFlow PRM (test fixture)', model: 'fixtures/prm/rlhflow-tiny/', family: 'rlhflow' },
  { id: 'confidence-tiny', label: 'tiny causal LM, confidence (test fixture)', model: 'fixtures/prm/confidence-tiny/', family: 'confidence' },
];

export const MODELS: ModelEntry[] = [DEFAULT_MODEL, ...FIXTURE_MODELS];

/** Step scores below this count as errors until the user moves the slider. */
export const DEFAULT_THRESHOLD = 0.5;
/** v_{-1} of the progress rewards r_k = v_k - v_{k-1} drawn in the chart. */
export const PROGRESS_BASELINE = 0.5;
