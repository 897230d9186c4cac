#!/usr/bin/env bash
# Runs every example in examples/ (CI: scripts/test/test-python.sh calls it after
# the wheel is installed). The model is the tiny fixture unless one is given:
#   examples/run.sh [MODEL]
# The trainers' own packages (TRL, verl, OpenRLHF) pull torch and are not
# installed: those examples make the calls the trainers make (see each file).
set -euo pipefail
cd "$(dirname "$0")/.."
model="${1:-$PWD/tests/fixtures/prm/skywork-prm-tiny}"
policy=none
python -c 'import transformers' 2>/dev/null && policy="$PWD/tests/fixtures/prm/qwen2-prm-tiny"

run() { echo "== examples: $*"; "$@"; }
# scripts/test.sh (STEPSCORE_DEV_CLI set) has run the Rust example already, in
# `cargo test --workspace` (examples/rust/tests/runs.rs): `cargo run` here
# would build its dependencies a second time.
[ -n "${STEPSCORE_DEV_CLI:-}" ] || run cargo run --locked -q -p stepscore-example -- "$model"
run python examples/python/score.py "$model"
run python examples/trl/reward.py "$model"
run python examples/verl/reward.py "$model"
run python examples/openrlhf/reward.py "$model" "$policy"
run python examples/ray/score_jsonl.py "$model"
