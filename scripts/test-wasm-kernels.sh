#!/usr/bin/env bash
# The wasm engine's SIMD128 kernels (crates/stepscore/src/quant/wasm.rs and the
# attention sums in model/transformer.rs) against the portable kernels, bit for
# bit, on wasm32 itself: the core crate's lib tests built for
# wasm32-unknown-unknown (SIMD128 on, .cargo/config.toml) and run in Node by
# wasm-bindgen-test-runner. Only `#[wasm_bindgen_test]` functions run there;
# the other lib tests are native tests and run natively.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
    rustup target add wasm32-unknown-unknown
fi
# The runner ships with wasm-bindgen-cli, pinned to Cargo.lock's wasm-bindgen.
want=$(awk '$0 == "name = \"wasm-bindgen\"" { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)
have=$(wasm-bindgen-test-runner --version 2>/dev/null | awk '{ print $2 }' || true)
if [ "$have" != "$want" ]; then
    echo "installing wasm-bindgen-cli $want (found: ${have:-none}); takes a few minutes"
    cargo install wasm-bindgen-cli --version "$want"
fi
CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner \
    cargo test --locked -p stepscore --lib --target wasm32-unknown-unknown
