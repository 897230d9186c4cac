#!/usr/bin/env bash
# Builds the npm package's wasm engine and assembles pkg/dist, offline once
# the tools are installed (each install step is skipped when already done):
#   1. cargo: stepscore-wasm for wasm32 with the wasm-release profile (opt-level 3
#      and SIMD128, see Cargo.toml and .cargo/config.toml);
#   2. wasm-bindgen (the CLI pinned to the crate's exact version in Cargo.lock),
#      `--target web`: one ES module that browsers fetch and Node instantiates
#      from bytes (pkg/src/node.js);
#   3. wasm-opt -Oz from npm binaryen (Debian's binaryen makes modules that fail to load);
#   4. the package's JS and types copied next to the glue.
# Prints each step's time and the wasm size raw and gzipped; fails over the
# budget of 1.5 MB gzipped.
set -euo pipefail
cd "$(dirname "$0")/.."

budget_gz=1500000
target_dir=${CARGO_TARGET_DIR:-target}
dist=pkg/dist

step_start=0
begin() { echo "== build-wasm: $1"; step_start=$(date +%s%N); }
end() {
    local ms=$((($(date +%s%N) - step_start) / 1000000))
    printf '   %s: %d.%01d s\n' "$1" $((ms / 1000)) $((ms % 1000 / 100))
}

begin "tools"
if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
    rustup target add wasm32-unknown-unknown
fi
want=$(awk '$0 == "name = \"wasm-bindgen\"" { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)
if [ -z "$want" ]; then
    echo "build-wasm: no wasm-bindgen entry in Cargo.lock" >&2
    exit 1
fi
have=$(wasm-bindgen --version 2>/dev/null | awk '{ print $2 }' || true)
if [ "$have" != "$want" ]; then
    echo "installing wasm-bindgen-cli $want (found: ${have:-none}); takes a few minutes"
    cargo install wasm-bindgen-cli --version "$want"
fi
# npm ci again whenever package-lock.json changed since the last install.
lock_sum=$(sha256sum pkg/package-lock.json | cut -d' ' -f1)
if [ ! -x pkg/node_modules/.bin/wasm-opt ] || [ "$(cat pkg/node_modules/.lock-sha256 2>/dev/null)" != "$lock_sum" ]; then
    (cd pkg && npm ci --no-audit --no-fund)
    echo "$lock_sum" > pkg/node_modules/.lock-sha256
fi
end "tools"

begin "cargo build (wasm32, profile wasm-release)"
cargo build --locked -p stepscore-wasm --profile wasm-release --target wasm32-unknown-unknown
raw_in="$target_dir/wasm32-unknown-unknown/wasm-release/stepscore_wasm.wasm"
end "cargo build"

begin "wasm-bindgen $want --target web"
rm -rf "$dist"
mkdir -p "$dist/wasm"
wasm-bindgen --target web --out-dir "$dist/wasm" --out-name stepscore_wasm "$raw_in"
end "wasm-bindgen"

begin "wasm-opt -Oz"
wasm="$dist/wasm/stepscore_wasm_bg.wasm"
# The features rustc's wasm32 target enables by default, plus SIMD128
# (.cargo/config.toml); wasm-opt must accept them.
pkg/node_modules/.bin/wasm-opt -Oz --enable-simd \
    --enable-bulk-memory --enable-sign-ext --enable-mutable-globals \
    --enable-nontrapping-float-to-int --enable-multivalue --enable-reference-types \
    "$wasm" -o "$wasm.opt"
mv "$wasm.opt" "$wasm"
end "wasm-opt"

begin "assemble $dist"
cp pkg/src/*.js pkg/src/*.d.ts "$dist/"
end "assemble"

raw=$(stat -c %s "$wasm")
gz=$(gzip -9 -c "$wasm" | wc -c)
before=$(stat -c %s "$raw_in")
echo "wasm size: $raw bytes raw, $gz bytes gzipped (cargo output before wasm-bindgen and wasm-opt: $before bytes)"
if [ "$gz" -gt "$budget_gz" ]; then
    echo "build-wasm: $gz bytes gzipped is over the budget of $budget_gz" >&2
    exit 1
fi
