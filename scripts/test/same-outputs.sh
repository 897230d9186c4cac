#!/usr/bin/env bash
# Do two stepscore builds give the same bytes? Runs each binary on the same
# 15 `score` runs (the catalog models on the examples, every tiny PRM fixture,
# ProcessBench rows, a load-time q8_0 quantization, one thread), one sampled
# `generate` and one `search`, and compares the outputs' md5 sums: the check a
# refactor that must not change a bit (issues 25 and 42) is held to.
#
#     scripts/test/same-outputs.sh BEFORE_BIN AFTER_BIN
#
# Needs the catalog models cached (`stepscore fetch stepscore-prm-qwen1.5b
# stepscore-prm-smollm2 qwen2.5-coder-0.5b gemma-3-270m`). Prints one line
# per run and exits 1 when any differs. Each run's output is its stdout and
# exit status.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -eq 2 ] || { echo "usage: $0 BEFORE_BIN AFTER_BIN" >&2; exit 2; }
before=$1
after=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

fx=tests/fixtures/prm
ex=examples/traces.jsonl
runs=(
    "score-default|score --output jsonl $ex"
    "score-smollm2|score --output jsonl --model stepscore-prm-smollm2 $ex"
    "score-0.5b-confidence|score --output jsonl --model qwen2.5-coder-0.5b --family confidence $ex"
    "score-gemma3-confidence|score --output jsonl --model gemma-3-270m --family confidence $ex"
    "score-qwen2-prm-tiny|score --output jsonl --model $fx/qwen2-prm-tiny $ex"
    "score-skywork-prm-tiny|score --output jsonl --model $fx/skywork-prm-tiny $ex"
    "score-math-shepherd-tiny|score --output jsonl --model $fx/math-shepherd-tiny $ex"
    "score-rlhflow-tiny|score --output jsonl --model $fx/rlhflow-tiny $ex"
    "score-confidence-tiny|score --output jsonl --model $fx/confidence-tiny $ex"
    "score-gemma3-confidence-tiny|score --output jsonl --model $fx/gemma3-confidence-tiny $ex"
    "score-outcome-tiny|score --output jsonl --model $fx/outcome-tiny $ex"
    "score-generative-tiny|score --output jsonl --model $fx/generative-tiny --family generative $ex"
    "score-processbench|score --output jsonl --model $fx/qwen2-prm-tiny tests/fixtures/traces/processbench.jsonl"
    "score-q8_0|score --output jsonl --model $fx/qwen2-prm-tiny --quantize q8_0 $ex"
    "score-1-thread|score --output jsonl --model stepscore-prm-smollm2 --threads 1 $ex"
    "generate-0.5b|generate --model qwen2.5-coder-0.5b --temperature 0.7 --seed 3 --max-new-tokens 48 $ex"
    "search-smollm2|search --model stepscore-prm-smollm2 --n 3 --seed 3 --max-new-tokens 32 $ex"
)

differ=0
for run in "${runs[@]}"; do
    name=${run%%|*}
    args=${run#*|}
    for side in before after; do
        bin=$before
        [ "$side" = after ] && bin=$after
        # The exit status is part of the output (a file with bad records
        # exits 1 after scoring the good ones); stderr, with timings, is not.
        rc=0
        # shellcheck disable=SC2086
        "$bin" $args > "$out/$name.$side" 2> "$out/$name.$side.err" || rc=$?
        echo "exit $rc" >> "$out/$name.$side"
    done
    a=$(md5sum < "$out/$name.before" | cut -c1-32)
    b=$(md5sum < "$out/$name.after" | cut -c1-32)
    if [ "$a" = "$b" ] && [ -s "$out/$name.before" ]; then
        echo "same       $name  $a  $(wc -l < "$out/$name.before") lines"
    else
        echo "DIFFERENT  $name  $a vs $b"
        differ=1
    fi
done
exit $differ
