#!/usr/bin/env bash
# The Python package (crates/stepscore-py): installs the wheel that
# scripts/release.sh put in target/release-artifacts (scripts/test.sh runs
# `release.sh --profile dev` first, so CI builds one wheel, not two; run
# alone, this runs it when there is no wheel yet) into a venv under target/,
# then runs its pytest suite (API and errors, CLI parity, dense rewards,
# trainer adapters, the `stepscore serve` server on loopback, Ray Data on a
# 2-CPU local cluster), then every example in examples/ (examples/run.sh).
# `transformers` (~45 MB with its dependencies, no torch) gives the adapter
# tests real policy tokenizers; TRL, verl and OpenRLHF themselves pull torch
# (a 539 MB wheel plus CUDA libraries) and are tested through their call
# shapes instead.
set -euo pipefail
cd "$(dirname "$0")/../.."

venv=target/pyenv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check "numpy>=1.21" "pytest>=7" "ray[data]>=2.9" "transformers>=4.56" "jinja2>=3" "omegaconf>=2.3"
export PATH="$PWD/$venv/bin:$PATH"

# The CLI binary the parity and server tests run (target/debug/stepscore;
# scripts/test.sh has built it already, STEPSCORE_DEV_CLI).
[ -n "${STEPSCORE_DEV_CLI:-}" ] || cargo build --locked -q -p stepscore-cli

shopt -s nullglob
wheels=(target/release-artifacts/stepscore-*.whl)
if [ ${#wheels[@]} -eq 0 ]; then
    scripts/release.sh --profile dev
    wheels=(target/release-artifacts/stepscore-*.whl)
fi
python -m pip install -q --disable-pip-version-check --force-reinstall --no-deps "${wheels[0]}"
echo "test-python: installed ${wheels[0]}"

(cd crates/stepscore-py && python -m pytest -q -p no:cacheprovider tests)

examples/run.sh
