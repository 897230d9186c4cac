#!/usr/bin/env bash
# ProcessBench's per-split table (accuracy on erroneous and on correct traces,
# F1, and their average) for head files, from one extraction of all 3,400
# traces (scripts/data/extract_features.py --pattern processbench), each head at
# the threshold it ships. Issue 40's rules: run it once per final candidate,
# never choose or fit anything on its output, report every run. It refuses to
# score a partial extraction (a run on part of the set is still a run).
#
#   scripts/eval/processbench_table.sh DATA_DIR FEATS_DIR HEAD.safetensors [HEAD ...]
#
# DATA_DIR holds processbench.jsonl (scripts/data/real_steps.py --processbench);
# FEATS_DIR is the extraction's processbench/ folder. A bare head name is one of
# models/ (e.g. qwen2.5-coder-1.5b-real-errors-head.safetensors).
set -euo pipefail
cd "$(dirname "$0")/../.."
DATA=${1:?data directory}
FEATS=${2:?features directory}
shift 2
BIN=${STEPSCORE:-target/release/stepscore}
rows=$(wc -l < "$DATA/processbench.jsonl")
chunks=$(find "$FEATS" -name 'chunk_*.in.jsonl' | wc -l)
done_=$(find "$FEATS" -name 'chunk_*.done' | wc -l)
if [ "$chunks" -eq 0 ] || [ "$chunks" -ne "$done_" ] || [ "$rows" -ne 3400 ]; then
  echo "the extraction is partial ($done_ of $chunks chunks done, $rows rows): not scored" >&2
  exit 1
fi
# The layers every record holds (records of older binaries do not name them).
layers=$(python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['layers'])" "$FEATS/../manifest.json")
for head in "$@"; do
  [ -f "$head" ] || head=models/$head
  out=$(mktemp)
  python3 scripts/eval/score_from_features.py --head "$head" --features "$FEATS/chunk_*.jsonl" \
    --rows "$DATA/processbench.jsonl" --feature-layers "$layers" > "$out" 2> "$out.err"
  cat "$out.err" >&2
  if grep -q "[1-9][0-9]* rows without features" "$out.err"; then
    echo "$head: some rows have no features: not scored" >&2
    exit 1
  fi
  t=$(python3 -c "import sys; sys.path.insert(0, 'scripts/eval'); from score_from_features import read_head; print(read_head(sys.argv[1])[1].get('stepscore.threshold', '0.5'))" "$head")
  echo "== $head (threshold $t)"
  "$BIN" eval "$out" --threshold "$t" --output table
  rm -f "$out" "$out.err"
done
