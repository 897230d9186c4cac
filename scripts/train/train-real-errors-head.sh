#!/usr/bin/env bash
# Rebuilds the default PRM's head (issue 40), models/
# qwen2.5-coder-1.5b-real-errors-head.safetensors: a linear value head over
# Qwen2.5-Coder-1.5B-Instruct's layer-20 hidden state and nine step statistics,
# trained on human step labels of other models' solutions (PRM800K, Mr-Ben,
# BIG-Bench Mistake, MathDial; scripts/data/real_steps.py), guarded by the
# arithmetic head (score = min(p_arithmetic, p_real ** power)) with the power and
# threshold chosen on validation (scripts/eval/guard_choice.py). docs/TRAINING.md
# has every figure these choices were made on.
#
#   scripts/train/train-real-errors-head.sh SHARED_DATA WORKDIR
#
# TRAIN_CHUNKS (default 30: the shipped head's rows) and NEUTRAL (PRM800K's
# neutral steps in training: drop, the default, or good) choose the rows; the
# session-25 head (shipped until session 36) is TRAIN_CHUNKS=19 NEUTRAL=good
# OUT=data/previous-heads/qwen2.5-coder-1.5b-real-errors-head-v1.safetensors
# (docs/TRAINING.md, "More rows, neutral steps left out").
#
# SHARED_DATA: the directory holding real-steps/, as scripts/data/fetch_real_steps.py writes it (../shared/data
# here). The extraction is the long part (30 training and 9 validation chunks of
# 20 problems: ~880k tokens, ~1.5 h on 2 cores of an AMD Zen 5 alone) and resumable: rerun to go on.
# ProcessBench is not read.
set -euo pipefail
cd "$(dirname "$0")/../.."
SHARED=${1:?shared data directory}
WORK=${2:?work directory}
LAYERS=8,12,16,20,24,28
STATS=result_min_logprob,operand_min_logprob,plus_minus_min_logprob,operation_min_logprob,false_equation,log1p_tokens,mean_logprob,min_logprob,mean_entropy
GUARD=qwen2.5-coder-1.5b-digit-head.safetensors
TRAIN_CHUNKS=${TRAIN_CHUNKS:-30}
NEUTRAL=${NEUTRAL:-drop}
OUT=${OUT:-models/qwen2.5-coder-1.5b-real-errors-head.safetensors}
mkdir -p "$WORK"
cargo build --release -q -p stepscore-cli -p stepscore-train
BIN=$PWD/target/release/stepscore
M=$($BIN fetch qwen2.5-coder-1.5b)

# Real labels: problem-level split, files in sampling order; the first 30
# training and 9 validation chunks are the rows the shipped head saw.
python3 scripts/data/real_steps.py --data "$SHARED/real-steps" --out "$WORK/data"
for split_chunks in "train:$TRAIN_CHUNKS" val:9; do
  python3 scripts/data/extract_features.py --data "$WORK/data" --out "$WORK/feats" --model "$M" \
    --stepscore "$BIN" --layers "$LAYERS" --pattern "${split_chunks%:*}" --chunks "${split_chunks#*:}"
done
TRAIN=$(for i in $(seq 0 $((TRAIN_CHUNKS - 1))); do printf "%s " "$WORK/feats/train/chunk_$(printf %04d "$i").jsonl"; done)
VAL=$(for i in $(seq 0 8); do printf "%s " "$WORK/feats/val/chunk_$(printf %04d "$i").jsonl"; done)
# shellcheck disable=SC2086
python3 scripts/data/assemble_trajectories.py $VAL > "$WORK/val-whole.jsonl"

# Synthetic-arithmetic validation (the arithmetic head's own validation subset).
python3 scripts/eval/prm_subsets.py "$WORK/arith"
"$BIN" features --model "$M" --family value-head --confidence --layers "$LAYERS" --encoding base64 \
  --out "$WORK/arith/val.jsonl" "$WORK/arith/val.in.jsonl"

# shellcheck disable=SC2086
target/release/stepscore-train --train $TRAIN --val $VAL --threshold-on "$WORK/val-whole.jsonl" \
  --feature-layers "$LAYERS" --layers 20 --stats "$STATS" --weight-decay 0.2 --neutral "$NEUTRAL" \
  --out "$WORK/real-head.safetensors"
python3 scripts/eval/guard_choice.py --head "$WORK/real-head.safetensors" --guard "$GUARD" \
  --real "$WORK/val-whole.jsonl" --synthetic "$WORK/arith/val.jsonl" --feature-layers "$LAYERS" \
  --out "$OUT"

# The solution threshold for `--verdict` (the step scores changed, so the
# arithmetic head's 4.217 no longer fits): fitted on mw-val, as issue 26's was.
python3 scripts/eval/verdict_signal.py --set mw-val --write-input "$WORK/mw-val.in.jsonl"
"$BIN" score --verdict --head "$OUT" \
  --output jsonl "$WORK/mw-val.in.jsonl" > "$WORK/mw-val.scored.jsonl"
python3 scripts/train/add_solution_threshold.py "$WORK/mw-val.scored.jsonl" \
  --head "$OUT"
