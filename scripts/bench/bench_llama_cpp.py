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

Each mode runs with an f32 KV cache (type_k = type_v = 0, as stepscore keeps
K/V) and with llama.cpp's default f16 cache. Flash attention stays off (the
llama-cpp-python default; stepscore has none either).

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
    if n == 0 or n > 8192:
        sys.exit(f"bench_llama_cpp: {args.tokens}: need 1..8192 tokens, got {n}")
    # One decode takes the whole trace (n_batch = n_ubatch >= n), as stepscore
    # runs it as one batch; 512 tokens use the stated 512/512/1024 settings.
    batch = max(512, n)

    rss_start = rss_kib("VmRSS")
    result = {
        "runtime": "llama.cpp",
        "llama_cpp_python": llama_cpp.__version__,
        "system_info": llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip(),
        "model": args.model,
        "threads": args.threads,
        "tokens": n,
        "repeats": args.repeats,
        "warmup": args.warmup,
        "rss_before_load_kib": rss_start,
        "runs": {},
    }
    for kv_name, kv_type in (("f32", 0), ("f16", 1)):
        for mode in ("last", "all"):
            start = time.perf_counter()
            llm = llama_cpp.Llama(
                args.model,
                n_ctx=max(1024, n),
                n_batch=batch,
                n_ubatch=batch,
                n_threads=args.threads,
                n_threads_batch=args.threads,
                logits_all=(mode == "all"),
                type_k=kv_type,
                type_v=kv_type,
                flash_attn=False,
                verbose=False,
            )
            load_s = time.perf_counter() - start
            secs, checksum = timed_decode(llm, tokens, mode == "all", args.warmup, args.repeats)
            entry = summary(secs, n)
            entry.update({"load_s": load_s, "checksum": checksum})
            result["runs"][f"{mode}_kv_{kv_name}"] = entry
            del llm
    result["peak_rss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps(result))


def decode_main(args, prompt, steps) -> None:
    n = len(prompt)
    result = {
        "runtime": "llama.cpp",
        "llama_cpp_python": llama_cpp.__version__,
        "system_info": llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip(),
        "model": args.model,
        "threads": args.threads,
        "prompt_tokens": n,
        "decode_tokens": len(steps),
        "repeats": args.repeats,
        "warmup": args.warmup,
        "runs": {},
    }
    for kv_name, kv_type in (("f32", 0), ("f16", 1)):
        llm = llama_cpp.Llama(
            args.model,
            n_ctx=max(1024, n + len(steps)),
            n_batch=max(512, n),
            n_ubatch=max(512, n),
            n_threads=args.threads,
            n_threads_batch=args.threads,
            type_k=kv_type,
            type_v=kv_type,
            flash_attn=False,
            verbose=False,
        )
        secs, checksum = timed_steps(llm, prompt, steps, args.warmup, args.repeats)
        entry = summary(secs, len(steps))
        entry["checksum"] = checksum
        result["runs"][f"decode_kv_{kv_name}"] = entry
        del llm
    result["peak_rss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps(result))


if __name__ == "__main__":
    main()
