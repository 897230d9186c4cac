#!/usr/bin/env bash
# stepscore vs llama.cpp: generation (decode) speed on the same GGUF, the same
# token ids and the same thread count, in one run: DECODE single-token steps,
# each with its full-vocabulary logits, after a PROMPT-token prompt.
#
#   scripts/bench/bench-decode-vs-llama-cpp.sh [MODEL.gguf]
#
# Environment:
#   LLAMA_VENV  venv with llama-cpp-python built from the sdist
#               (default /work/llama-venv; see scripts/reference/llama_reference.py)
#   THREADS     threads for both runtimes (default 2)
#   PROMPT      prompt length in tokens (default 256)
#   DECODE      decode steps per run (default 64)
#   REPEATS     timed runs per round (default 3)
#   WARMUP      untimed runs per round (default 1)
#   ROUNDS      alternating stepscore / llama.cpp rounds (default 3); on a
#               shared machine the best over rounds is the least disturbed figure
#   OUT_DIR     where the raw JSON goes (default target/bench)
#
# llama.cpp is timed with flash attention off (llama-cpp-python's default)
# and on (llama.cpp's CLI default on the CPU), each with an f16 (default) and
# an f32 KV cache; the ratio is against each and against the fastest.
set -euo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
venv="${LLAMA_VENV:-/work/llama-venv}"
threads="${THREADS:-2}"
prompt="${PROMPT:-256}"
decode="${DECODE:-64}"
repeats="${REPEATS:-3}"
warmup="${WARMUP:-1}"
rounds="${ROUNDS:-3}"
out_dir="${OUT_DIR:-$root/target/bench}"

python="$venv/bin/python"
if [[ ! -x "$python" ]] || ! "$python" -c "import llama_cpp" 2>/dev/null; then
  echo "bench-decode-vs-llama-cpp: no llama-cpp-python in LLAMA_VENV=$venv." >&2
  echo "  Build one from the sdist as described in scripts/reference/llama_reference.py, then set LLAMA_VENV." >&2
  exit 2
fi

echo "== building stepscore (release)" >&2
(cd "$root" && cargo build --release -q -p stepscore-cli)
bin="$root/target/release/stepscore"

model_args=()
if [[ $# -ge 1 ]]; then
  model_args=(--model "$1")
fi
mkdir -p "$out_dir"
tok_file="$out_dir/decode_tokens.json"

loads=()
for ((r = 1; r <= rounds; r++)); do
  load="$(cut -d' ' -f1-3 /proc/loadavg)"
  loads+=("$load")
  echo "== round $r/$rounds: stepscore (load average: $load)" >&2
  "$bin" bench "${model_args[@]}" --backend cpu --threads "$threads" --repeats "$repeats" --warmup "$warmup" \
    --decode "$decode" --decode-prompt "$prompt" --json --dump-tokens "$tok_file" >"$out_dir/decode_stepscore.$r.json"
  model="$("$python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["model"])' "$out_dir/decode_stepscore.$r.json")"
  load="$(cut -d' ' -f1-3 /proc/loadavg)"
  loads+=("$load")
  echo "== round $r/$rounds: llama.cpp (load average: $load)" >&2
  "$python" "$root/scripts/bench/bench_llama_cpp.py" "$model" "$tok_file" --decode \
    --threads "$threads" --repeats "$repeats" --warmup "$warmup" >"$out_dir/decode_llama.$r.json"
done

"$python" - "$out_dir" "$rounds" "${loads[@]}" <<'EOF'
import json, sys
out_dir, rounds, loads = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
ss = [json.load(open(f"{out_dir}/decode_stepscore.{r}.json")) for r in range(1, rounds + 1)]
ll = [json.load(open(f"{out_dir}/decode_llama.{r}.json")) for r in range(1, rounds + 1)]
s0 = ss[0]

def best(runs):
    # Fastest over rounds (tokens/s), and the median of the per-round medians.
    b = max(x["best_tokens_per_s"] for x in runs)
    m = sorted(x["median_tokens_per_s"] for x in runs)
    return b, m[len(m) // 2]

sb, sm = best([x["decode"] for x in ss])
print(f"model: {s0['model']}")
print(f"decode: {s0['decode_tokens']} single-token steps after a {s0['prompt_tokens']}-token prompt, "
      f"full-vocabulary logits each; threads: {s0['threads']}, stepscore cpu/{s0['simd']}, "
      f"llama-cpp-python {ll[0]['llama_cpp_python']}, {rounds} rounds x {s0['repeats']} runs")
print(f"load averages at each run's start: {'; '.join(loads)}")
print()
hdr = f"{'runtime':<36} {'best tok/s':>11} {'median tok/s':>13} {'stepscore / it':>15}"
print(hdr)
print("-" * len(hdr))
print(f"{'stepscore':<36} {sb:>11.2f} {sm:>13.2f} {'':>15}")
settings = [(r["flash_attn"], r["kv"]) for r in ll[0]["runs"]]
fastest = None
for fa, kv in settings:
    lb, lm = best([r for x in ll for r in x["runs"] if (r["flash_attn"], r["kv"]) == (fa, kv)])
    name = f"llama.cpp, fa {'on' if fa else 'off'}, {kv} KV" + (" (default)" if (not fa and kv == "f16") else "")
    print(f"{name:<36} {lb:>11.2f} {lm:>13.2f} {sb / lb:>15.2f}")
    if fastest is None or lb > fastest[0]:
        fastest = (lb, name)
print(f"against llama.cpp's fastest setting ({fastest[1]}): {sb / fastest[0]:.2f}x")
print()
print("stepscore one-row matmuls (best round's shapes):")
shapes = min(ss, key=lambda x: x["decode"]["best_s"])["shapes"]
for s in shapes:
    print(f"  {s['roles']:<16} {s['type']:<5} {s['rows']:>6}x{s['cols']:<6} x{s['count_per_token']:<3} "
          f"{s['best_us']:>9.1f} us  {s['gb_per_s']:>5.1f} GB/s")
best_s = min(x["decode"]["best_s"] for x in ss) / s0["decode_tokens"]
mm = min(x["matmul_ms_per_token"] for x in ss)
print(f"  matmuls {mm:.2f} ms of {best_s * 1e3:.2f} ms per token")
EOF
