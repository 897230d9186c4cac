#!/usr/bin/env bash
# A real-label head for Qwen2.5-Coder-0.5B-Instruct (issue 40: the browser-size
# verifier between SmolLM2-135M and the 1.5B default): a linear value head
# over one hidden layer and nine step statistics, trained on human step labels
# of other models' solutions (PRM800K, Mr-Ben, BIG-Bench Mistake, MathDial;
# scripts/data/real_steps.py). Chosen on validation (ProcessBench is not read):
# the layer (12, 16 or 20 of 24), the weight decay (0.2, 0.5, 1.0) and
# PRM800K's neutral steps (dropped, or read as good): 18 heads, the one with
# the best whole-trace F1 on validation kept (session 37: layer 12, 0.5,
# good; docs/TRAINING.md "The 0.5B's real-label head").
#
#   scripts/train/train-qwen0.5b-real-errors-head.sh SHARED_DATA WORKDIR [OUT]
#
# SHARED_DATA: the directory holding real-steps/ (../shared/data here). The
# extraction (the same 19 training and 9 validation chunks of 20 problems as
# SmolLM2's, ~600k tokens) is resumable: rerun to go on. Each head's figures
# are in WORKDIR/q05-LAYER-DECAY-NEUTRAL.txt; the chosen head is copied to OUT.
set -euo pipefail
cd "$(dirname "$0")/../.."
SHARED=${1:?shared data directory}
WORK=${2:?work directory}
OUT=${3:-$WORK/qwen2.5-coder-0.5b-real-errors-head.safetensors}
LAYERS=12,16,20
STATS=result_min_logprob,operand_min_logprob,plus_minus_min_logprob,operation_min_logprob,false_equation,log1p_tokens,mean_logprob,min_logprob,mean_entropy
mkdir -p "$WORK"
cargo build --release -q -p stepscore-cli -p stepscore-train
BIN=$PWD/target/release/stepscore
M=$($BIN fetch qwen2.5-coder-0.5b)

# shellcheck source=scripts/train/real-step-features.sh
source scripts/train/real-step-features.sh
real_step_features "$SHARED" "$WORK" "$WORK/feats-q05" "$M" "$BIN" "$LAYERS" "$WORK/q05-val-whole.jsonl"

best="" best_f1=-1
for neutral in drop good; do for wd in 0.2 0.5 1.0; do for layer in ${LAYERS//,/ }; do
  head="$WORK/q05-$layer-$wd-$neutral.safetensors"
  # shellcheck disable=SC2086
  target/release/stepscore-train --train $TRAIN --val $VAL --threshold-on "$WORK/q05-val-whole.jsonl" \
    --feature-layers "$LAYERS" --layers "$layer" --stats "$STATS" --weight-decay "$wd" --neutral "$neutral" \
    --out "$head" 2> "${head%.safetensors}.log"
  target/pyenv/bin/python scripts/eval/head_on_validation.py "$head" "$WORK/q05-val-whole.jsonl" \
    --feature-layers "$LAYERS" > "${head%.safetensors}.txt"
  f1=$(awk '/^F1 all:/ {print $3}' "${head%.safetensors}.txt")
  echo "layer $layer, weight decay $wd, neutral $neutral: $(grep '^step AUROC' "${head%.safetensors}.txt"), F1 $f1"
  if awk -v a="$f1" -v b="$best_f1" 'BEGIN {exit !(a > b)}'; then best=$head best_f1=$f1; fi
done; done; done
cp "$best" "$OUT"
echo "chosen on validation: $best (whole-trace F1 $best_f1) -> $OUT"
