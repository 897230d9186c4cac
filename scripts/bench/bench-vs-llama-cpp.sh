#!/usr/bin/env bash
# stepscore vs llama.cpp: prefill and scoring throughput on the same GGUF, the
# same token ids and the same thread count, in one run.
#
#   scripts/bench/bench-vs-llama-cpp.sh [MODEL.gguf]
#
# Environment:
#   LLAMA_VENV  venv with llama-cpp-python built from the sdist
#               (default /work/llama-venv; see scripts/reference/llama_reference.py)
#   THREADS     threads for both runtimes (default 2)
#   TOKENS      trace length in tokens (default 512)
#   REPEATS     timed runs per measurement and round (default 3)
#   WARMUP      untimed runs per measurement and round (default 1)
#   ROUNDS      alternating stepscore / llama.cpp rounds (default 2); on a
#               shared machine the best over rounds is the least disturbed figure
#   OUT_DIR     where the raw JSON goes (default target/bench)
#   UBATCH      llama.cpp micro-batch sizes to try besides the whole trace
#               (default 512, its default; e.g. 256,512,1024,2048)
#   UBATCH_WHOLE=0  do not also try a micro-batch of the whole trace (at 16k
#               tokens without flash attention its score buffer is gigabytes)
#   FLASH_ATTN  llama.cpp flash attention settings to try (default off,on)
#   KV          llama.cpp KV cache types to try (default f16,f32)
#   PREFILL_ONLY=1  time only the prefill (long traces: the logits and
#               score runs take as long again each)
#
# llama.cpp is timed at its defaults and at every setting of UBATCH x flash
# attention off/on x f16/f32 KV (scripts/bench/bench_llama_cpp.py); ratios
# are against its defaults and against the fastest of those settings.
set -euo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
venv="${LLAMA_VENV:-/work/llama-venv}"
threads="${THREADS:-2}"
tokens="${TOKENS:-512}"
repeats="${REPEATS:-3}"
warmup="${WARMUP:-1}"
rounds="${ROUNDS:-2}"
ubatch="${UBATCH:-512}"
prefill_only="${PREFILL_ONLY:-0}"
out_dir="${OUT_DIR:-$root/target/bench}"

python="$venv/bin/python"
if [[ ! -x "$python" ]] || ! "$python" -c "import llama_cpp" 2>/dev/null; then
  echo "bench-vs-llama-cpp: no llama-cpp-python in LLAMA_VENV=$venv." >&2
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
tok_file="$out_dir/tokens.json"

common=(--threads "$threads" --tokens "$tokens" --repeats "$repeats" --warmup "$warmup")
# The table compares CPU engines; the GPU and KV-append timings `bench` can
# add are not in it (and on a software Vulkan adapter would take minutes).
stepscore_only=(--backend cpu --append-prefix 0)
llama_only=(--ubatch "$ubatch" --flash-attn "${FLASH_ATTN:-off,on}" --kv "${KV:-f16,f32}")
if [[ "${UBATCH_WHOLE:-1}" == 0 ]]; then
  llama_only+=(--no-ubatch-whole)
fi
if [[ "$prefill_only" == 1 ]]; then
  stepscore_only+=(--prefill-only)
  llama_only+=(--no-all)
fi
# The model path stepscore resolves is reused for llama.cpp, so both load the same file.
for ((r = 1; r <= rounds; r++)); do
  echo "== round $r/$rounds: stepscore (load average: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  "$bin" bench "${model_args[@]}" "${common[@]}" "${stepscore_only[@]}" --json --dump-tokens "$tok_file" >"$out_dir/stepscore.$r.json"
  model="$("$python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["model"])' "$out_dir/stepscore.$r.json")"
  echo "== round $r/$rounds: llama.cpp (load average: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  "$python" "$root/scripts/bench/bench_llama_cpp.py" "$model" "$tok_file" \
    --threads "$threads" --repeats "$repeats" --warmup "$warmup" "${llama_only[@]}" >"$out_dir/llama.$r.json"
done

"$python" - "$out_dir" "$rounds" <<'EOF'
import json, sys
out_dir, rounds = sys.argv[1], int(sys.argv[2])
ss = [json.load(open(f"{out_dir}/stepscore.{r}.json")) for r in range(1, rounds + 1)]
ll = [json.load(open(f"{out_dir}/llama.{r}.json")) for r in range(1, rounds + 1)]
n = ss[0]["tokens"]

def best(runs, get):
    # Fastest over rounds (tokens/s), and the median of the per-round medians.
    b = max(get(x)["best_tokens_per_s"] for x in runs)
    m = sorted(get(x)["median_tokens_per_s"] for x in runs)
    return b, m[len(m) // 2]

s0 = ss[0]
print(f"model: {s0['model']}")
print(f"tokens: {n} ({s0['steps']} steps, {s0['logit_rows_score']} scored tokens), threads: {s0['threads']}, "
      f"stepscore cpu/{s0['simd']}, llama-cpp-python {ll[0]['llama_cpp_python']}, "
      f"{rounds} rounds x {s0['repeats']} runs")
print()

def setting(r):
    return f"ub {r['n_ubatch']}, fa {'on' if r['flash_attn'] else 'off'}, {r['kv']} KV"

def llama_best(mode, pick):
    # The fastest run of the setting `pick` chooses, over rounds.
    runs = [pick(x)[mode] for x in ll if pick(x).get(mode)]
    return max(runs, key=lambda r: r["best_tokens_per_s"]) if runs else None

rows = [("prefill, last-token logits", lambda x: x["prefill"], "last")]
if s0["logits_all"] is not None and ll[0]["best"].get("all"):
    rows += [("prefill + logits, all rows", lambda x: x["logits_all"], "all"),
             ("score_steps (confidence)", lambda x: x["score"], "all")]
hdr = f"{'measurement':<28} {'stepscore tok/s':>16} {'llama default':>14} {'ratio':>6} {'llama best':>11} {'ratio':>6}  best setting"
print(hdr)
print("-" * len(hdr))
for name, get, mode in rows:
    sb, sm = best(ss, get)
    d = llama_best(mode, lambda x: x["default"]) if mode == "last" else None
    b = llama_best(mode, lambda x: x["best"])
    dcol = f"{d['best_tokens_per_s']:>14.1f} {sb / d['best_tokens_per_s']:>6.2f}" if d else f"{'-':>14} {'-':>6}"
    print(f"{name:<28} {sb:>16.1f} {dcol} {b['best_tokens_per_s']:>11.1f} {sb / b['best_tokens_per_s']:>6.2f}  {setting(b)}")
print()
print("llama.cpp settings timed (best over rounds, tok/s):")
for r in ll[0]["runs"]:
    rr = max((x for y in ll for x in y["runs"] if x["mode"] == r["mode"] and setting(x) == setting(r)),
             key=lambda x: x["best_tokens_per_s"])
    print(f"  {r['mode']:<5} {setting(r):<28} {rr['best_tokens_per_s']:.1f}")
print("(default: llama-cpp-python's Llama() defaults, one decode call: n_ubatch 512, flash attention off, f16 KV)")
print("(best over all runs; stepscore 'prefill' computes no logits at all, llama.cpp's row computes the last token's)")
if len(rows) > 1:
    print("(score_steps is compared with llama.cpp logits_all: it projects only the step tokens' rows, but adds tokenization and a log-softmax/entropy pass)")
med = [(name, best(ss, get)[1]) for name, get, _ in rows]
print("stepscore medians: " + ", ".join(f"{name} {m:.1f}" for name, m in med))
print(f"stepscore load {min(x['load_s'] for x in ss):.3f}s; "
      f"peak RSS {max(x['peak_rss_kib'] or 0 for x in ss) / 1024:.1f} MiB "
      f"(before load {ss[0]['rss_before_load_kib'] / 1024:.1f} MiB)")
print(f"llama.cpp load {min(r['load_s'] for x in ll for r in x['runs']):.3f}s; "
      f"peak RSS {max(x['peak_rss_kib'] for x in ll) / 1024:.1f} MiB "
      f"(Python before load {ll[0]['rss_before_load_kib'] / 1024:.1f} MiB; {len(ll[0]['runs'])} contexts loaded in turn)")
EOF
