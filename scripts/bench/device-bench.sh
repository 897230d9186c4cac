#!/usr/bin/env bash
# The GPU engine on a hardware GPU: a stripped release CLI built here, run on
# the `device` machine (an NVIDIA H200 box without network, at most 64 MiB
# carried) on the synthetic shapes (`stepscore bench --synthetic`, random
# weights of the real architectures, so no model file travels), GPU engine
# beside the CPU engine on that machine's cores.
#
#   scripts/bench/device-bench.sh prepare   # here: build + strip the CLI into .device/,
#                                           # fetch the Vulkan/GL loader debs into .gl/,
#                                           # print the device call to make
#   scripts/bench/device-bench.sh local     # here: the same binary, smallest shape, on
#                                           # whatever adapter wgpu finds (llvmpipe)
#   scripts/bench/device-bench.sh device    # there: unpack the loaders, print the
#                                           # adapter and its f16/f32 path, bench every shape
#
# The device call (from the checkout the session was started in: that is
# the tree that travels, so run `prepare` there), about 5 minutes for all
# four shapes:
#   run(command="bash scripts/bench/device-bench.sh device", carry=[".gl", ".device"], timeout_s=540)
# The JSON of each shape comes back under $OUT (files_at); the printed
# summary is in output_tail. docs/BENCHMARKS.md ("Hardware GPU") says what
# has run.
#
# Environment (device): SHAPES (default "smollm2-135m qwen2.5-0.5b qwen2.5-1.5b 7b"),
# F16_SHAPES (shapes also run with every matrix in F16, `--weights f16`: the
# 16-bit float kernels; default "smollm2-135m", "" for none), TOKENS (512),
# REPEATS (2), THREADS (all cores), PER_SHAPE_TIMEOUT (240 s).
set -euo pipefail
cd "$(dirname "$0")/../.."

bin=.device/stepscore

prepare() {
    # Never committed: both folders are listed in .git/info/exclude.
    local exclude
    exclude="$(git rev-parse --git-path info/exclude)"
    mkdir -p "$(dirname "$exclude")"
    for d in /.gl/ /.device/; do
        grep -qxF "$d" "$exclude" 2>/dev/null || echo "$d" >>"$exclude"
    done
    echo "== device-bench: release CLI (GPU engine included)"
    nice -n 15 cargo build --release --locked -p stepscore-cli
    mkdir -p .device
    strip --strip-all -o "$bin" target/release/stepscore
    echo "== device-bench: Vulkan/GL loaders (.gl/, the device README's list)"
    if ! ls .gl/libvulkan1_*.deb >/dev/null 2>&1; then
        mkdir -p .gl /tmp/amd64/partial
        local o=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64)
        apt-get "${o[@]}" update
        (cd .gl && apt-get "${o[@]}" download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
    fi
    local tree carried
    tree=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
    carried=$(du -cb .gl .device | tail -1 | cut -f1)
    echo "carried: $((carried / 1024)) KiB (.gl + .device); tracked tree: $((tree / 1024)) KiB; limit 65536 KiB"
    if [ $((tree + carried)) -gt $((64 * 1024 * 1024)) ]; then
        echo "device-bench: the tree and the carried folders are over 64 MiB" >&2
        exit 1
    fi
    echo 'device call: run(command="bash scripts/bench/device-bench.sh device", carry=[".gl", ".device"], timeout_s=540)'
}

# One shape on both engines; the JSON line to stdout.
bench_shape() {
    local shape=$1 threads=$2 tokens=$3 repeats=$4 weights=${5:-real}
    timeout "${PER_SHAPE_TIMEOUT:-240}" "$bin" bench --synthetic "$shape" --weights "$weights" \
        --backend gpu --threads "$threads" --tokens "$tokens" --repeats "$repeats" --warmup 1 \
        --append-prefix 0 --json
}

# The table of a run's JSON files (python3 where there is one, else the raw JSON).
summarize() {
    if command -v python3 >/dev/null; then
        python3 - "$@" <<'PY'
import json, sys
import re
print(f"{'shape':<19} {'threads':>7} {'cpu prefill':>12} {'gpu prefill':>12} {'cpu score':>10} {'gpu score':>10}  (tokens/s, best)")
for path in sys.argv[1:]:
    try:
        r = json.load(open(path))
    except Exception as e:
        print(f"{path}: no result ({e})")
        continue
    g = r.get("gpu", {})
    gp = g.get("prefill", {}).get("best_tokens_per_s")
    gs = g.get("score", {}).get("best_tokens_per_s")
    f = lambda v: f"{v:.1f}" if isinstance(v, (int, float)) else "-"
    name = r['synthetic'] + ("" if r.get('synthetic_weights', 'real') == 'real' else f" {r['synthetic_weights']}")
    print(f"{name:<19} {r['threads']:>7} {f(r['prefill']['best_tokens_per_s']):>12} {f(gp):>12} "
          f"{f(r['score']['best_tokens_per_s']):>10} {f(gs):>10}")
    adapter = g.get('adapter', g.get('skipped')) or ""
    print(f"  gpu: {adapter}")
    # The adapter report names the F16 path the device takes (f16 loads
    # with shader-f16, u32 words without); the f32 math is the same.
    path = re.search(r"f16 weights read as [^;(]*(\([^)]*\))?", adapter)
    print(f"  f16/f32 path: {path.group(0) if path else 'not reported'}")
PY
    else
        cat "$@"
    fi
}

device() {
    # The device README: unpack the loaders into /, and point at NVIDIA's
    # ICD when the loader finds no driver by itself.
    if ls .gl/*.deb >/dev/null 2>&1; then
        for f in .gl/*.deb; do dpkg -x "$f" /; done
        ldconfig
    fi
    if [ -e /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
        export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
        export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
    fi
    local out=${OUT:-/tmp/device-bench}
    mkdir -p "$out"
    local threads=${THREADS:-$(nproc)}
    echo "== machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), $(free -g | awk '/Mem:/ {print $2}') GiB"
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
    echo "== stepscore doctor (adapters, features: shader-f16 decides how F16 weights are read: f16 loads or u32 words, f32 math either way)"
    "$bin" doctor 2>&1 || true
    local files=()
    for shape in ${SHAPES:-smollm2-135m qwen2.5-0.5b qwen2.5-1.5b 7b}; do
        echo "== bench --synthetic $shape (GPU engine and CPU engine, $threads threads)"
        if bench_shape "$shape" "$threads" "${TOKENS:-512}" "${REPEATS:-2}" >"$out/$shape.json"; then
            files+=("$out/$shape.json")
        else
            echo "bench --synthetic $shape failed or timed out (rc $?)"
        fi
    done
    for shape in ${F16_SHAPES-smollm2-135m}; do
        echo "== bench --synthetic $shape --weights f16 (the 16-bit float kernels, $threads threads)"
        if bench_shape "$shape" "$threads" "${TOKENS:-512}" "${REPEATS:-2}" f16 >"$out/$shape-f16.json"; then
            files+=("$out/$shape-f16.json")
        else
            echo "bench --synthetic $shape --weights f16 failed or timed out (rc $?)"
        fi
    done
    echo "== summary"
    [ ${#files[@]} -gt 0 ] && summarize "${files[@]}" | tee "$out/summary.txt"
}

local_check() {
    [ -x "$bin" ] || { echo "device-bench: run \`$0 prepare\` first" >&2; exit 1; }
    local out=target/device-bench-local
    mkdir -p "$out"
    # 300 tokens: the synthetic vocabulary is one token per byte, and the
    # benchmark's problem text alone is over 200 bytes.
    nice -n 15 "$bin" bench --synthetic smollm2-135m --backend gpu --threads 2 --tokens 300 \
        --repeats 1 --warmup 0 --append-prefix 0 --json >"$out/smollm2-135m.json"
    summarize "$out/smollm2-135m.json"
}

case "${1:-}" in
    prepare) prepare ;;
    local) local_check ;;
    device) device ;;
    *)
        sed -n '2,25p' "$0" >&2
        exit 2
        ;;
esac
