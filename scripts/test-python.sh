#!/usr/bin/env bash
# The Python package (crates/stepscore-py): builds and installs the wheel
# the way users do (`pip install ./crates/stepscore-py`, maturin as the
# PEP 517 backend) into a venv under target/, then runs its pytest suite
# (API and errors, CLI parity, dense rewards, trainer adapters, the
# `stepscore serve` server on loopback, Ray Data on a 2-CPU local cluster),
# then every example in examples/ (examples/run.sh). `transformers` (~45 MB
# with its dependencies, no torch) gives the adapter tests real policy
# tokenizers; TRL, verl and OpenRLHF themselves pull torch (a 539 MB wheel
# plus CUDA libraries) and are tested through their call shapes instead.
# The wheel is built with the dev profile (the workspace's dev profile
# optimizes the core and dependencies at opt-level 2) so it reuses the
# artifacts of `cargo test --workspace`; release wheels: `pip install
# ./crates/stepscore-py` without MATURIN_PEP517_ARGS.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=target/pyenv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check "maturin>=1.9.4,<2" "numpy>=1.21" "pytest>=7" "ray[data]>=2.9" "transformers>=4.56" "jinja2>=3"
export PATH="$PWD/$venv/bin:$PATH"

# The CLI binary the parity and server tests run.
cargo build --locked -q -p stepscore-cli

start=$(date +%s)
MATURIN_PEP517_ARGS="--profile dev --locked" python -m pip install -q --disable-pip-version-check \
    --no-build-isolation --force-reinstall --no-deps ./crates/stepscore-py
echo "test-python: wheel built and installed in $(( $(date +%s) - start ))s"

(cd crates/stepscore-py && python -m pytest -q -p no:cacheprovider tests)

examples/run.sh
