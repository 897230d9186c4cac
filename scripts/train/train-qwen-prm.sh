#!/usr/bin/env bash
# Trains the default PRM's head on Qwen2.5-Coder-1.5B-Instruct (issue 12) and
# prints its results table: step statistics from the engine's own forward on
# the frozen backbone (`stepscore features --confidence`), a value head over
# them fitted with burn (crates/stepscore-train: class-balanced BCE, early
# stopping on validation step AUROC, then Platt calibration and the
# first-error threshold on validation), the exact arithmetic check added as
# one more input (scripts/train/add_check_weight.py), the solution threshold for use with the model's
# verdict (scripts/train/add_solution_threshold.py), metrics by `stepscore eval/select`.
# Needs numpy for the check's weight.
#
#   scripts/train/train-qwen-prm.sh [WORKDIR]     (default WORKDIR: .cache/qwen-prm)
#
# Extraction is the long part (~1,000 traces at 5-12 s each on 2 cores) and
# resumable: `features --out` skips traces already written, so rerunning
# after an interruption continues. Subsets: scripts/eval/prm_subsets.py.
set -euo pipefail
cd "$(dirname "$0")/../.."
WORK=${1:-.cache/qwen-prm}
OUT=models/qwen2.5-coder-1.5b-digit-head.safetensors
STATS=${STATS:-result_min_logprob,operand_min_logprob,plus_minus_min_logprob,operation_min_logprob}
mkdir -p "$WORK"
cargo build --release -q -p stepscore-cli -p stepscore-train
BIN=target/release/stepscore
M=$($BIN fetch qwen2.5-coder-1.5b)
python3 scripts/eval/prm_subsets.py "$WORK"
for split in train val test bon8; do
  "$BIN" features --model "$M" --family value-head --confidence --threads 0 \
    --out "$WORK/$split.jsonl" "$WORK/$split.in.jsonl"
done
target/release/stepscore-train --train "$WORK/train.jsonl" --val "$WORK/val.jsonl" --out "$WORK/surprise-head.safetensors" \
  --stats "$STATS" --stats-only --epochs 200 --lr 0.05 --batch-size 64 --weight-decay 0 --patience 30
# The exact arithmetic check joins as a fifth input with its own weight, fitted on train with
# the surprise head's logit held fixed (unflagged steps keep their scores and the threshold).
python3 scripts/train/add_check_weight.py --head "$WORK/surprise-head.safetensors" --train "$WORK/train.jsonl" --out "$OUT"
# The solution threshold, for the step scores with the model's verdict (`score --verdict`), is
# fitted on the model-written validation solutions (data/model-written/val).
python3 scripts/eval/verdict_signal.py --set mw-val --write-input "$WORK/mw-val.in.jsonl"
"$BIN" score --model "$M" --head "$OUT" --verdict --threads 0 --output jsonl "$WORK/mw-val.in.jsonl" > "$WORK/mw-val.scored.jsonl"
python3 scripts/train/add_solution_threshold.py "$WORK/mw-val.scored.jsonl" --head "$OUT"
python3 scripts/eval/results_table.py --features "$WORK" --head "$OUT" --stepscore "$BIN" \
  --backbone qwen2.5-coder-1.5b
