#!/usr/bin/env bash
# Trains the first fast-PRM head (issue 7; shipped until session 36, kept in
# data/previous-heads/) from scratch and prints the
# results table: features from the engine's own forward on the frozen
# SmolLM2-135M-Instruct Q4_1 backbone, a linear value head fitted with burn
# (crates/stepscore-train), metrics by `stepscore eval` / `stepscore select`.
#
#   scripts/train/train-default-head.sh [WORKDIR]     (default WORKDIR: .cache/default-head)
#
# Subsampling (to fit 2 CPU cores, see docs/TRAINING.md): every 10th training
# trace, the first 250 validation traces, the whole test split, the first 32
# best-of-8 groups. Set FULL=1 to use every row.
set -euo pipefail
cd "$(dirname "$0")/../.."
WORK=${1:-.cache/default-head}
OUT=data/previous-heads/smollm2-135m-gsm-value-head.safetensors
mkdir -p "$WORK"
cargo build --release -q -p stepscore-cli -p stepscore-train
BIN=target/release/stepscore
M=$($BIN fetch)

every() { if [ "${FULL:-0}" = 1 ]; then cat; else awk -v n="$1" 'NR % n == 1'; fi; }
first() { if [ "${FULL:-0}" = 1 ]; then cat; else head -n "$1"; fi; }
features() { # split, extra args...
  local split=$1; shift
  "$BIN" features --model "$M" --family value-head --threads 0 "$@" - > "$WORK/$split.jsonl"
}
zcat data/gsm_symbolic_train.jsonl.gz | every 10 | features train
zcat data/gsm_symbolic_val.jsonl.gz | first 250 | features val --confidence
zcat data/gsm_symbolic_test.jsonl.gz | features test --confidence
zcat data/gsm_symbolic_test_bon8.jsonl.gz | first 256 | features bon8 --confidence

target/release/stepscore-train --train "$WORK/train.jsonl" --val "$WORK/val.jsonl" --out "$OUT" --weight-decay 10 --patience 8
python3 scripts/eval/results_table.py --features "$WORK" --head "$OUT" --stepscore "$BIN"
