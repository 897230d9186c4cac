#!/usr/bin/env bash
# Builds the npm package's wasm engine, in two builds, and assembles pkg/dist,
# offline once the tools are installed (scripts/lib/wasm-tools.sh: the
# toolchain pieces, installed only with consent; npm ci into pkg/ when its
# lock file changed):
#   1. cargo: stepscore-wasm for wasm32 with the wasm-release profile (opt-level 3
#      and SIMD128, see Cargo.toml and .cargo/config.toml), twice:
#      - single: one thread (dist/wasm/), target dir $CARGO_TARGET_DIR (target/);
#      - threads: atomics + shared memory (dist/wasm-threads/), std rebuilt with
#        them (`-Z build-std` under RUSTC_BOOTSTRAP=1 on the stable toolchain,
#        rust-src), the linker told to import a shared memory of up to 4 GiB;
#        its own target dir ($CARGO_TARGET_DIR/wasm-threads) so the two builds'
#        flags never invalidate each other's artefacts. The core's `par` runs
#        its parallel loops on a rayon pool there (pkg/src/threads.js starts it);
#   2. wasm-bindgen (the CLI pinned to the crate's exact version in Cargo.lock),
#      `--target web`: one ES module per build that browsers fetch and Node
#      instantiates from bytes (pkg/src/node.js);
#   3. wasm-opt -Oz from npm binaryen (Debian's binaryen makes modules that fail to load);
#   4. the package's JS and types copied next to the glue.
# The two builds run side by side (1 and 2-3 each), and so does a first
# install of wasm-bindgen-cli.
# Prints each step's time and each build's wasm size raw and gzipped; fails
# when either is over the budget of 1.65 MB gzipped (1.5 MB until the
# checkpoints' own chat templates came in: the Jinja engine adds ~190 KB
# gzipped; the smallest model a page loads is ~100 MB).
set -euo pipefail
cd "$(dirname "$0")/.."

budget_gz=1650000
target_dir=${CARGO_TARGET_DIR:-target}
dist=pkg/dist

step_start=0
begin() { echo "== build-wasm: $1"; step_start=$(date +%s%N); }
end() {
    local ms=$((($(date +%s%N) - step_start) / 1000000))
    printf '   %s: %d.%01d s\n' "$1" $((ms / 1000)) $((ms % 1000 / 100))
}

begin "tools"
. scripts/lib/wasm-tools.sh
wasm_tools rust-src --bindgen-later
# npm ci again whenever package-lock.json changed since the last install.
lock_sum=$(sha256sum pkg/package-lock.json | cut -d' ' -f1)
if [ ! -x pkg/node_modules/.bin/wasm-opt ] || [ "$(cat pkg/node_modules/.lock-sha256 2>/dev/null)" != "$lock_sum" ]; then
    (cd pkg && npm ci --no-audit --no-fund)
    echo "$lock_sum" > pkg/node_modules/.lock-sha256
fi
end "tools"

# The threaded build's flags, added to the [target.wasm32-unknown-unknown]
# rustflags of .cargo/config.toml (cargo joins the two lists). rustc no
# longer makes the memory shared for `atomics` alone (rust-lang/rust#147225):
# the link args ask for a shared memory, imported (wasm-bindgen's glue
# creates it and hands it to every worker), and export the TLS symbols
# wasm-bindgen's thread start-up uses.
threads_flags='["-C", "target-feature=+atomics,+bulk-memory,+mutable-globals,+simd128", "-C", "link-args=--shared-memory --import-memory --max-memory=4294967296 --export=__wasm_init_tls --export=__tls_size --export=__tls_align --export=__tls_base"]'

rm -rf "$dist"
wasm_features=(--enable-simd --enable-bulk-memory --enable-sign-ext --enable-mutable-globals
    --enable-nontrapping-float-to-int --enable-multivalue --enable-reference-types)

# compile NAME CARGO_TARGET_DIR [cargo args...]
compile() {
    local name=$1 tdir=$2 envs=()
    shift 2
    # -Z build-std on the stable toolchain
    if [ "$name" = threads ]; then envs=(RUSTC_BOOTSTRAP=1); fi
    begin "cargo build (wasm32, profile wasm-release, $name)"
    env "${envs[@]}" CARGO_TARGET_DIR="$tdir" cargo build --locked -p stepscore-wasm --profile wasm-release \
        --target wasm32-unknown-unknown "$@"
    end "cargo build ($name)"
}

# finish NAME OUT_DIR CARGO_TARGET_DIR: wasm-bindgen, wasm-opt, sizes (into $logs/NAME.size).
finish() {
    local name=$1 out=$2 tdir=$3
    local raw_in="$tdir/wasm32-unknown-unknown/wasm-release/stepscore_wasm.wasm"
    begin "wasm-bindgen $WASM_BINDGEN_VERSION --target web ($name)"
    mkdir -p "$dist/$out"
    wasm-bindgen --target web --out-dir "$dist/$out" --out-name stepscore_wasm "$raw_in"
    # A RUSTFLAGS in the environment replaces the config's flags: check the
    # threaded glue really creates a shared memory.
    if [ "$name" = threads ] && ! grep -q 'shared:true' "$dist/$out/stepscore_wasm.js"; then
        echo "build-wasm: the threaded build has no shared memory (is RUSTFLAGS set?)" >&2
        exit 1
    fi
    end "wasm-bindgen ($name)"

    begin "wasm-opt -Oz ($name)"
    local wasm="$dist/$out/stepscore_wasm_bg.wasm" extra=()
    if [ "$name" = threads ]; then extra=(--enable-threads); fi
    # The features rustc's wasm32 target enables by default, plus SIMD128
    # (.cargo/config.toml) and, threaded, atomics; wasm-opt must accept them.
    pkg/node_modules/.bin/wasm-opt -Oz "${wasm_features[@]}" "${extra[@]}" "$wasm" -o "$wasm.opt"
    mv "$wasm.opt" "$wasm"
    end "wasm-opt ($name)"
    local raw gz before
    raw=$(stat -c %s "$wasm")
    gz=$(gzip -9 -c "$wasm" | wc -c)
    before=$(stat -c %s "$raw_in")
    echo "wasm size ($name): $raw bytes raw, $gz bytes gzipped (cargo output before wasm-bindgen and wasm-opt: $before bytes)"
    echo "$gz" >"$logs/$name.size"
}

# The two builds run side by side, as do their wasm-bindgen + wasm-opt steps
# (and the wasm-bindgen-cli install, on a fresh machine): LTO with one codegen
# unit and wasm-opt keep about one core busy each, so on 2 cores one after the
# other took 7.6 minutes of wall time for 6.4 of CPU. Each job's output is
# printed whole when it ends.
logs="$target_dir/build-wasm-logs"
rm -rf "$logs"
mkdir -p "$logs"
# side_by_side FUNCTION...: runs each function in the background, then prints
# each one's log in order; fails when any of them failed.
side_by_side() {
    local fn names=("$@") pids=() failed=0 i
    for fn in "${names[@]}"; do
        "$fn" >"$logs/$fn.log" 2>&1 &
        pids+=($!)
    done
    for i in "${!pids[@]}"; do
        if ! wait "${pids[$i]}"; then failed=1; fi
        echo "-- ${names[$i]}"
        cat "$logs/${names[$i]}.log"
    done
    return $failed
}

threads_dir="$target_dir/wasm-threads"
compile_single() { compile single "$target_dir"; }
compile_threads() {
    compile threads "$threads_dir" -Z build-std=std,panic_abort \
        --config "target.wasm32-unknown-unknown.rustflags=$threads_flags"
}
finish_single() { finish single wasm "$target_dir"; }
finish_threads() { finish threads wasm-threads "$threads_dir"; }
side_by_side compile_single compile_threads
wasm_bindgen_ready
side_by_side finish_single finish_threads
sizes=("single:$(cat "$logs/single.size")" "threads:$(cat "$logs/threads.size")")

begin "assemble $dist"
cp pkg/src/*.js pkg/src/*.d.ts "$dist/"
end "assemble"

over=0
for entry in "${sizes[@]}"; do
    if [ "${entry#*:}" -gt "$budget_gz" ]; then
        echo "build-wasm: the ${entry%%:*} build is ${entry#*:} bytes gzipped, over the budget of $budget_gz" >&2
        over=1
    fi
done
exit $over
