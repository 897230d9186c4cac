#!/usr/bin/env python3
"""Prompt-processing throughput of llama.cpp (llama-cpp-python) on given token ids.

The llama.cpp side of scripts/bench/bench-vs-llama-cpp.sh. It times `llama_decode`
of the exact token ids `stepscore bench --dump-tokens FILE` wrote, through
the low-level API so no Python-side copying of logits is counted:

- `last`: logits for the last token only (llama.cpp's default prompt eval);
  compare with stepscore's `prefill` (hidden states, no vocabulary projection);
- `all`: logits for every token (`logits_all=True`); compare with stepscore's
  `logits_all` (and, as the scoring workload, `score`).

With `--decode` (the file from `stepscore bench --decode N --dump-tokens`,
whose `decode` list holds the N step tokens), it times generation instead:
the `tokens` prompt decoded once per run (untimed), then each step token as a
batch of one with its logits, as `llama_decode` runs during generation;
compare with stepscore's `decode`.

llama.cpp runs at its defaults and at its best for the shape: every
combination of the micro-batch (`--ubatch`; default 512, llama.cpp's default,
and the whole trace), flash attention off (llama-cpp-python's default) and
on (llama.cpp's CLI default, `-fa auto`, picks it on the CPU), and an f16
(the default) or f32 KV cache is timed, and `best` names the fastest. The
`all` mode (logits for every token) runs at the best prefill setting only;
decode sweeps flash attention and the KV type (the micro-batch only shapes
the untimed prompt).

Setup: a venv with llama-cpp-python built from the sdist, see the docstring of
scripts/reference/llama_reference.py.

    python scripts/bench/bench_llama_cpp.py MODEL.gguf TOKENS.json --threads 2 --repeats 3 --warmup 1

Prints one JSON object. Peak RSS is resource.getrusage(RUSAGE_SELF).ru_maxrss
(the Python interpreter included, and every configuration's load; the RSS before the
first model load is reported too, so the model's share can be told apart).
"""
import argparse
import json
import resource
import statistics
import sys
import time

import llama_cpp


def rss_kib(field: str):
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def timed_decode(llm, tokens, all_logits: bool, warmup: int, repeats: int):
    """Seconds per decode of `tokens` from an empty KV cache."""
    ctx = llm._ctx.ctx
    n = len(tokens)
    batch = llama_cpp.llama_batch_init(n, 0, 1)
    try:
        batch.n_tokens = n
        for i, t in enumerate(tokens):
            batch.token[i] = t
            batch.pos[i] = i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = 1 if (all_logits or i == n - 1) else 0
        mem = llama_cpp.llama_get_memory(ctx)
        secs = []
        for r in range(warmup + repeats):
            llama_cpp.llama_memory_clear(mem, True)
            start = time.perf_counter()
            rc = llama_cpp.llama_decode(ctx, batch)
            llama_cpp.llama_synchronize(ctx)
            elapsed = time.perf_counter() - start
            if rc != 0:
                raise RuntimeError(f"llama_decode returned {rc}")
            if r >= warmup:
                secs.append(elapsed)
        # Touch the outputs so a lazy backend cannot skip them.
        rows = n if all_logits else 1
        vocab = llama_cpp.llama_n_vocab(llama_cpp.llama_model_get_vocab(llm._model.model))
        out = llama_cpp.llama_get_logits(ctx)
        checksum = float(out[0]) + float(out[(rows - 1) * vocab + vocab - 1])
        return secs, checksum
    finally:
        llama_cpp.llama_batch_free(batch)


def timed_steps(llm, prompt, steps, warmup: int, repeats: int):
    """Seconds for the single-token decodes of `steps` after `prompt`."""
    ctx = llm._ctx.ctx
    n = len(prompt)
    batch = llama_cpp.llama_batch_init(max(n, 1), 0, 1)
    one = llama_cpp.llama_batch_init(1, 0, 1)
    vocab = llama_cpp.llama_n_vocab(llama_cpp.llama_model_get_vocab(llm._model.model))
    try:
        batch.n_tokens = n
        for i, t in enumerate(prompt):
            batch.token[i] = t
            batch.pos[i] = i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = 1 if i == n - 1 else 0
        one.n_tokens = 1
        one.n_seq_id[0] = 1
        one.seq_id[0][0] = 0
        one.logits[0] = 1
        mem = llama_cpp.llama_get_memory(ctx)
        secs, checksum = [], 0.0
        for r in range(warmup + repeats):
            llama_cpp.llama_memory_clear(mem, True)
            if llama_cpp.llama_decode(ctx, batch) != 0:
                raise RuntimeError("llama_decode of the prompt failed")
            llama_cpp.llama_synchronize(ctx)
            start = time.perf_counter()
            for i, t in enumerate(steps):
                one.token[0] = t
                one.pos[0] = n + i
                rc = llama_cpp.llama_decode(ctx, one)
                if rc != 0:
                    raise RuntimeError(f"llama_decode returned {rc} at step {i}")
                # What a sampler reads: the step's logits row.
                checksum += float(llama_cpp.llama_get_logits_ith(ctx, -1)[vocab - 1])
            elapsed = time.perf_counter() - start
            if r >= warmup:
                secs.append(elapsed)
        return secs, checksum
    finally:
        llama_cpp.llama_batch_free(batch)
        llama_cpp.llama_batch_free(one)


def summary(secs, n):
    best, median = min(secs), statistics.median(secs)
    return {"best_s": best, "median_s": median, "best_tokens_per_s": n / best, "median_tokens_per_s": n / median}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("tokens", help="JSON file with a `tokens` list (stepscore bench --dump-tokens)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--decode", action="store_true",
                    help="time single-token steps of the file's `decode` list after its `tokens`")
    ap.add_argument("--ubatch", default="512",
                    help="comma-separated micro-batch sizes to try (capped at the trace; default 512)")
    ap.add_argument("--ubatch-whole", action=argparse.BooleanOptionalAction, default=True,
                    help="also try a micro-batch of the whole trace (default on)")
    ap.add_argument("--flash-attn", default="off,on", help="flash attention settings to try: off,on")
    ap.add_argument("--kv", default="f16,f32", help="KV cache types to try: f16,f32")
    ap.add_argument("--no-all", action="store_true",
                    help="skip the logits-for-every-token run at the best setting")
    args = ap.parse_args()
    with open(args.tokens) as f:
        dumped = json.load(f)
    tokens = [int(t) for t in dumped["tokens"]]
    n = len(tokens)
    if args.decode:
        steps = [int(t) for t in dumped.get("decode", [])]
        if not steps:
            sys.exit(f"bench_llama_cpp: {args.tokens}: --decode needs a `decode` list (stepscore bench --decode N --dump-tokens)")
        decode_main(args, tokens, steps)
        return
    if n == 0 or n > 32768:
        sys.exit(f"bench_llama_cpp: {args.tokens}: need 1..32768 tokens, got {n}")
    ubatches = sorted({min(int(u), n) for u in args.ubatch.split(",") if u} | ({n} if args.ubatch_whole else set()))

    rss_start = rss_kib("VmRSS")
    result = header(args, n)
    result["rss_before_load_kib"] = rss_start
    result["runs"] = []

    def run(mode, ub, fa, kv_name):
        start = time.perf_counter()
        llm = llama_cpp.Llama(
            args.model,
            n_ctx=max(1024, n),
            # One decode takes the whole trace, as stepscore runs it; the
            # micro-batch is what llama.cpp computes at a time.
            n_batch=max(512, n),
            n_ubatch=ub,
            n_threads=args.threads,
            n_threads_batch=args.threads,
            logits_all=(mode == "all"),
            type_k=KV_TYPES[kv_name],
            type_v=KV_TYPES[kv_name],
            flash_attn=fa,
            verbose=False,
        )
        load_s = time.perf_counter() - start
        secs, checksum = timed_decode(llm, tokens, mode == "all", args.warmup, args.repeats)
        del llm
        entry = {"mode": mode, "n_ubatch": ub, "flash_attn": fa, "kv": kv_name}
        entry.update(summary(secs, n))
        entry.update({"load_s": load_s, "checksum": checksum})
        result["runs"].append(entry)
        print(f"bench_llama_cpp: {mode} ubatch {ub} fa {int(fa)} kv {kv_name}: "
              f"{entry['best_tokens_per_s']:.1f} tok/s", file=sys.stderr, flush=True)
        return entry

    for ub in ubatches:
        for fa in flags(args.flash_attn):
            for kv_name in args.kv.split(","):
                run("last", ub, fa, kv_name)
    last = [r for r in result["runs"] if r["mode"] == "last"]
    best = max(last, key=lambda r: r["best_tokens_per_s"])
    result["best"] = {"last": best}
    result["default"] = {"last": next((r for r in last if is_default(r, n)), None)}
    if not args.no_all:
        result["best"]["all"] = run("all", best["n_ubatch"], best["flash_attn"], best["kv"])
    result["peak_rss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps(result))


KV_TYPES = {"f32": 0, "f16": 1}


def flags(spec: str):
    return [{"off": False, "on": True}[f] for f in spec.split(",")]


def is_default(run, n) -> bool:
    """llama-cpp-python's defaults for one decode of the trace: n_ubatch 512
    (or the trace, if shorter), flash attention off, f16 KV."""
    return run["n_ubatch"] == min(512, n) and not run["flash_attn"] and run["kv"] == "f16"


def header(args, n):
    return {
        "runtime": "llama.cpp",
        "llama_cpp_python": llama_cpp.__version__,
        "system_info": llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip(),
        "model": args.model,
        "threads": args.threads,
        "tokens": n,
        "repeats": args.repeats,
        "warmup": args.warmup,
    }


def decode_main(args, prompt, steps) -> None:
    n = len(prompt)
    result = header(args, n)
    result.update({"prompt_tokens": n, "decode_tokens": len(steps), "runs": []})
    for fa in flags(args.flash_attn):
        for kv_name in args.kv.split(","):
            llm = llama_cpp.Llama(
                args.model,
                n_ctx=max(1024, n + len(steps)),
                n_batch=max(512, n),
                n_ubatch=min(512, n),
                n_threads=args.threads,
                n_threads_batch=args.threads,
                type_k=KV_TYPES[kv_name],
                type_v=KV_TYPES[kv_name],
                flash_attn=fa,
                verbose=False,
            )
            secs, checksum = timed_steps(llm, prompt, steps, args.warmup, args.repeats)
            del llm
            entry = {"mode": "decode", "flash_attn": fa, "kv": kv_name}
            entry.update(summary(secs, len(steps)))
            entry["checksum"] = checksum
            result["runs"].append(entry)
            print(f"bench_llama_cpp: decode fa {int(fa)} kv {kv_name}: "
                  f"{entry['best_tokens_per_s']:.2f} tok/s", file=sys.stderr, flush=True)
    result["best"] = {"decode": max(result["runs"], key=lambda r: r["best_tokens_per_s"])}
    result["default"] = {"decode": next((r for r in result["runs"]
                                         if not r["flash_attn"] and r["kv"] == "f16"), None)}
    result["peak_rss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps(result))


if __name__ == "__main__":
    main()
