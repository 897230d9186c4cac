#!/usr/bin/env bash
# The Python package (crates/stepscore-py): builds and installs the wheel
# the way users do (`pip install ./crates/stepscore-py`, maturin as the
# PEP 517 backend) into a venv under target/, then runs its pytest suite
# (API and errors, CLI parity, dense rewards, trainer adapters, the
# `stepscore serve` server on loopback, Ray Data on a 2-CPU local cluster).
# The wheel is built with the dev profile (the workspace's dev profile
# optimizes the core and dependencies at opt-level 2) so it reuses the
# artifacts of `cargo test --workspace`; release wheels: `pip install
# ./crates/stepscore-py` without MATURIN_PEP517_ARGS.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=target/pyenv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check "maturin>=1.9.4,<2" "numpy>=1.21" "pytest>=7" "ray[data]>=2.9"
export PATH="$PWD/$venv/bin:$PATH"

# The CLI binary the parity and server tests run.
cargo build --locked -q -p stepscore-cli

start=$(date +%s)
MATURIN_PEP517_ARGS="--profile dev --locked" python -m pip install -q --disable-pip-version-check \
    --no-build-isolation --force-reinstall --no-deps ./crates/stepscore-py
echo "test-python: wheel built and installed in $(( $(date +%s) - start ))s"

cd crates/stepscore-py
python -m pytest -q -p no:cacheprovider tests
