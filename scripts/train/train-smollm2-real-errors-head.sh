#!/usr/bin/env bash
# The fast PRM's head, models/smollm2-135m-real-errors-head.safetensors (issue
# 40; shipped since session 36): a linear value head over
# SmolLM2-135M-Instruct's layer-12 hidden state and nine step statistics,
# trained on human step labels of other models' solutions (PRM800K, Mr-Ben,
# BIG-Bench Mistake, MathDial; scripts/data/real_steps.py), weight decay 0.5:
# session 24's recipe, chosen then on real validation F1 among layers 12/18 and
# weight decays 0.5/1 (docs/TRAINING.md, "Third look on validation"). Prints
# the head's validation figures. ProcessBench is not read.
#
#   scripts/train/train-smollm2-real-errors-head.sh SHARED_DATA WORKDIR [OUT]
#
# SHARED_DATA: the directory holding real-steps/ (../shared/data here). The
# extraction (19 training and 9 validation chunks of 20 problems, ~600k tokens,
# ~40 min on 2 cores alone) is resumable: rerun to go on.
set -euo pipefail
cd "$(dirname "$0")/../.."
SHARED=${1:?shared data directory}
WORK=${2:?work directory}
OUT=${3:-$WORK/smollm2-real-errors-head.safetensors}
LAYERS=12,18
STATS=result_min_logprob,operand_min_logprob,plus_minus_min_logprob,operation_min_logprob,false_equation,log1p_tokens,mean_logprob,min_logprob,mean_entropy
mkdir -p "$WORK"
cargo build --release -q -p stepscore-cli -p stepscore-train
BIN=$PWD/target/release/stepscore
M=$($BIN fetch smollm2-135m)

# shellcheck source=scripts/train/real-step-features.sh
source scripts/train/real-step-features.sh
real_step_features "$SHARED" "$WORK" "$WORK/feats-smollm2" "$M" "$BIN" "$LAYERS" "$WORK/smollm2-val-whole.jsonl"
# shellcheck disable=SC2086
target/release/stepscore-train --train $TRAIN --val $VAL --threshold-on "$WORK/smollm2-val-whole.jsonl" \
  --feature-layers "$LAYERS" --layers 12 --stats "$STATS" --weight-decay 0.5 --out "$OUT"
target/pyenv/bin/python scripts/eval/head_on_validation.py "$OUT" "$WORK/smollm2-val-whole.jsonl" --feature-layers "$LAYERS"
