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

/**
 * stepscore's default PRM (catalog `stepscore-prm-qwen1.5b`): Qwen2.5-Coder-1.5B's GGUF plus the
 * head trained on human step labels, guarded by the built-in arithmetic head (models/,
 * docs/TRAINING.md).
 */
export const DEFAULT_MODEL: ModelEntry = {
  id: 'qwen1.5b-prm',
  label: 'Qwen2.5-Coder-1.5B-Instruct Q4_K_M + stepscore real-errors head (default, 1.1 GB)',
  model: 'models/Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf',
  family: 'value-head',
  options: { head: 'models/qwen2.5-coder-1.5b-real-errors-head.safetensors' },
  note: 'Scores are probabilities that a step is correct: the lower of a head trained on human step labels of other models\u2019 solutions and the arithmetic head (how unlikely the model finds the step\u2019s least likely result, operand, sign and operation). First-error F1 0.31 on real validation traces (the arithmetic head alone: 0.14), ProcessBench average F1 37.2 (Skywork-PRM-1.5B: 36.4); step AUROC 0.89 on held-out arithmetic generators (docs/TRAINING.md). Many plan and reading errors are still missed.',
  // No `threshold`: the one shipped in the head file (stepscore.threshold), from the package's info().threshold.
};

/**
 * The browser-size PRM (catalog `stepscore-prm-qwen0.5b`): Qwen2.5-Coder-0.5B's GGUF plus the
 * real-label head trained on it, the best of stepscore's verifiers below a gigabyte.
 */
export const SMALL_MODEL: ModelEntry = {
  id: 'qwen0.5b-prm',
  label: 'Qwen2.5-Coder-0.5B-Instruct + stepscore real-errors head (browser-size, 491 MB)',
  model: 'models/Qwen2.5-Coder-0.5B-Instruct.gguf',
  family: 'value-head',
  options: { head: 'models/qwen2.5-coder-0.5b-real-errors-head.safetensors' },
  note: 'A linear head over the 0.5B\u2019s layer 12 and nine step statistics, trained on human step labels of other models\u2019 solutions. First-error F1 0.30 on real validation traces, ProcessBench average F1 28.1 (the default: 37.2; the fast model: 13.6; docs/TRAINING.md).',
  // No `threshold`: the head file ships its F1-optimal one on the validation split (0.490523).
};

/** The fast PRM (catalog `stepscore-prm-smollm2`): SmolLM2's GGUF plus the real-label head trained on it. */
export const FAST_MODEL: ModelEntry = {
  id: 'smollm2-prm',
  label: 'SmolLM2-135M-Instruct Q4_1 + stepscore real-errors head (fast, 98 MB)',
  model: 'models/SmolLM2-135M-Instruct.Q4_1.gguf',
  family: 'value-head',
  options: { head: 'models/smollm2-135m-real-errors-head.safetensors' },
  note: 'A linear head over SmolLM2\u2019s layer 12 and nine step statistics, trained on human step labels of other models\u2019 solutions. A weak verifier: first-error F1 0.28 on real validation traces, ProcessBench average F1 13.6 (the default: 37.2), near chance on arithmetic slips (docs/TRAINING.md).',
  // No `threshold`: the head file ships its F1-optimal one on the validation split (0.607107,
  // scripts/train/train-smollm2-real-errors-head.sh), which the slider shows as 0.61.
};

/** The same backbone, training-free: its own confidence in each step. */
export const CONFIDENCE_MODEL: ModelEntry = {
  id: 'smollm2-confidence',
  label: 'SmolLM2-135M-Instruct Q4_1 \u2014 confidence (training-free)',
  model: 'models/SmolLM2-135M-Instruct.Q4_1.gguf',
  family: 'confidence',
  note: 'Scores are the model\u2019s own confidence in each step (geometric mean token probability), not a trained verifier.',
  // Set by hand from the gallery traces (correct steps ~0.1–0.6, answer lines ~0.07–0.10), not calibrated.
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

export const MODELS: ModelEntry[] = [DEFAULT_MODEL, SMALL_MODEL, FAST_MODEL, CONFIDENCE_MODEL, ...FIXTURE_MODELS];

/** v_{-1} of the progress rewards r_k = v_k - v_{k-1} drawn in the chart. */
export const PROGRESS_BASELINE = 0.5;
