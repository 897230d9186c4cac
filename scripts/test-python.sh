#!/usr/bin/env bash
# The Python package (crates/stepscore-py): installs the wheel that
# scripts/release.sh put in target/release-artifacts (scripts/test.sh runs
# `release.sh --profile dev` first, so CI builds one wheel, not two; run
# alone, this runs it when there is no wheel yet) into a venv under target/,
# then runs its pytest suite (API and errors, CLI parity, dense rewards,
# trainer adapters, the `stepscore serve` server on loopback, Ray Data on a
# 2-CPU local cluster).
set -euo pipefail
cd "$(dirname "$0")/.."

venv=target/pyenv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check "numpy>=1.21" "pytest>=7" "ray[data]>=2.9"
export PATH="$PWD/$venv/bin:$PATH"

# The CLI binary the parity and server tests run.
cargo build --locked -q -p stepscore-cli

shopt -s nullglob
wheels=(target/release-artifacts/stepscore-*.whl)
if [ ${#wheels[@]} -eq 0 ]; then
    scripts/release.sh --profile dev
    wheels=(target/release-artifacts/stepscore-*.whl)
fi
python -m pip install -q --disable-pip-version-check --force-reinstall --no-deps "${wheels[0]}"
echo "test-python: installed ${wheels[0]}"

cd crates/stepscore-py
python -m pytest -q -p no:cacheprovider tests
