#!/usr/bin/env bash
# The wasm engine's SIMD128 kernels (crates/stepscore-engine/src/quant/wasm/ and the
# attention sums in model/transformer.rs) against the portable kernels, bit for
# bit, on wasm32 itself: the engine crate's lib tests built for
# wasm32-unknown-unknown (SIMD128 on, .cargo/config.toml) and run in Node by
# wasm-bindgen-test-runner. Only `#[wasm_bindgen_test]` functions run there;
# the other lib tests are native tests and run natively.
set -euo pipefail
cd "$(dirname "$0")/../.."

# The runner ships with wasm-bindgen-cli, pinned to Cargo.lock's wasm-bindgen.
. scripts/lib/wasm-tools.sh
wasm_tools
CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner \
    cargo test --locked -p stepscore-engine --lib --target wasm32-unknown-unknown
