#!/usr/bin/env python3
"""Benchmark (not a test) of the Python package and `stepscore serve`.

1. traces/s of `Scorer.score_batch` against `stepscore score` on the same
   file, same model, same threads (the CLI's own scoring time from its
   stderr summary, and its wall time with model loading);
2. the server's throughput and p50/p99 latency at 1, 4 and 16 concurrent
   loopback clients, each request one trace (as GRPO sends one completion).

Run after installing the wheel (scripts/test/test-python.sh, or `pip install
./crates/stepscore-py`) and building the CLI in the same profile:

    python scripts/bench/bench_python.py --cli target/release/stepscore --threads 2

Prints a markdown table; nothing is asserted.
"""

import argparse
import gzip
import json
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import stepscore
from stepscore.client import RewardClient

ROOT = Path(__file__).resolve().parents[2]


def read_rows(path, limit, out_dir):
    """The first `limit` rows of a JSONL (or .jsonl.gz) file, also written to
    a plain JSONL file so the CLI reads exactly the same traces."""
    opener = gzip.open if str(path).endswith(".gz") else open
    rows = []
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                rows.append(json.loads(line))
            if len(rows) == limit:
                break
    same = Path(out_dir) / "bench_traces.jsonl"
    same.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return rows, str(same)


def bench_batch(args, rows):
    t0 = time.perf_counter()
    scorer = stepscore.Scorer(args.model, threads=args.threads)
    load = time.perf_counter() - t0
    scorer.score_batch(rows[:2])  # warm-up
    t0 = time.perf_counter()
    results = scorer.score_batch(rows, errors="none")
    secs = time.perf_counter() - t0
    tokens = sum(r.tokens for r in results if r)
    return {"load": load, "secs": secs, "traces": sum(1 for r in results if r), "tokens": tokens}


def bench_cli(args):
    t0 = time.perf_counter()
    proc = subprocess.run(
        [args.cli, "score", args.traces, "--model", args.model, "--backend", "cpu",
         "--threads", str(args.threads), "--output", "jsonl"],
        capture_output=True, text=True,
    )
    wall = time.perf_counter() - t0
    m = re.search(r"scored (\d+) traces, (\d+) tokens in ([\d.]+)s", proc.stderr)
    if not m:
        sys.exit("could not read the CLI's summary:\n" + proc.stderr)
    return {"wall": wall, "traces": int(m.group(1)), "tokens": int(m.group(2)), "secs": float(m.group(3))}


def start_server(args):
    proc = subprocess.Popen(
        [args.cli, "serve", "--model", args.model, "--backend", "cpu", "--threads", str(args.threads),
         "--listen", "127.0.0.1:0"],
        stderr=subprocess.PIPE, text=True,
    )
    for line in proc.stderr:
        m = re.search(r"serving on (http://\S+)", line)
        if m:
            threading.Thread(target=proc.stderr.read, daemon=True).start()
            return proc, m.group(1)
    sys.exit("the server did not start")


def bench_server(url, rows, clients, requests):
    client = RewardClient(url, timeout=600)
    queries = [(r["problem"] + "\n", r["problem"] + "\n" + r.get("response", "\n\n".join(r.get("steps", []))))
               for r in rows]
    latencies = []
    lock = threading.Lock()
    per_client = max(1, requests // clients)

    def run(k):
        for j in range(per_client):
            prompt, query = queries[(k * per_client + j) % len(queries)]
            t0 = time.perf_counter()
            client.get_reward([query], [prompt])
            with lock:
                latencies.append(time.perf_counter() - t0)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(run, range(clients)))
    wall = time.perf_counter() - t0
    latencies.sort()
    q = lambda p: latencies[min(len(latencies) - 1, int(round(p * (len(latencies) - 1))))]  # noqa: E731
    return {"n": len(latencies), "rps": len(latencies) / wall, "p50": q(0.5), "p99": q(0.99)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="stepscore-prm-smollm2", help="path or catalog name")
    ap.add_argument("--traces", default=str(ROOT / "data" / "gsm_symbolic_val.jsonl.gz"))
    ap.add_argument("--limit", type=int, default=32, help="traces taken from the file")
    ap.add_argument("--cli", default=str(ROOT / "target" / "release" / "stepscore"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--requests", type=int, default=32, help="requests per concurrency level")
    ap.add_argument("--clients", default="1,4,16")
    args = ap.parse_args()
    rows, args.traces = read_rows(args.traces, args.limit, tempfile.mkdtemp())

    py = bench_batch(args, rows)
    cli = bench_cli(args)
    print(f"model {args.model}, {len(rows)} traces from {args.traces}, {args.threads} engine threads\n")
    print("| path | traces | tokens | scoring s | traces/s | tokens/s |")
    print("|---|---:|---:|---:|---:|---:|")
    print(f"| Scorer.score_batch | {py['traces']} | {py['tokens']} | {py['secs']:.2f} | "
          f"{py['traces'] / py['secs']:.2f} | {py['tokens'] / py['secs']:.0f} |")
    print(f"| stepscore score (scoring) | {cli['traces']} | {cli['tokens']} | {cli['secs']:.2f} | "
          f"{cli['traces'] / cli['secs']:.2f} | {cli['tokens'] / cli['secs']:.0f} |")
    print(f"| stepscore score (wall, with load) | {cli['traces']} | | {cli['wall']:.2f} | "
          f"{cli['traces'] / cli['wall']:.2f} | |")
    print(f"\n(Python model load {py['load']:.2f}s)\n")

    proc, url = start_server(args)
    try:
        bench_server(url, rows, 1, 2)  # warm-up
        print("| concurrent clients | requests | traces/s | p50 ms | p99 ms |")
        print("|---:|---:|---:|---:|---:|")
        for c in [int(x) for x in args.clients.split(",")]:
            r = bench_server(url, rows, c, args.requests)
            print(f"| {c} | {r['n']} | {r['rps']:.2f} | {r['p50'] * 1e3:.0f} | {r['p99'] * 1e3:.0f} |")
    finally:
        proc.terminate()
        proc.wait(timeout=60)


if __name__ == "__main__":
    main()
