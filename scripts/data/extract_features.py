#!/usr/bin/env python3
"""Resumable feature extraction over scripts/data/real_steps.py's files.

Cuts DATA/SPLIT.jsonl (train, val, and processbench when asked: the test
set, whose features are extracted once so that every candidate head is scored
on the same rows, never fitted on) into chunks of whole problems (in the
files' sampling order) and runs `stepscore features` on them in the order
--pattern cycles through, each chunk into its own output file (resumed by id
when rerun), until every chunk is done or the process is stopped. Rerunning
it continues where it stopped; a chunk's output is complete when its `.done`
marker exists. OUT/manifest.json keys the cache: the model's and each split's
sha256, the layers and the chunk size; a rerun with any of them different stops
with an error naming it instead of mixing two extractions' rows.

  scripts/data/extract_features.py --data DIR --out DIR --model GGUF \
      [--layers 8,12,...] [--pattern train,train,train,val] [--chunks N]
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import time


def chunks(path, problems_per_chunk):
    """Lists of lines, each covering up to N consecutive problems."""
    out, cur, seen, last = [], [], 0, None
    with open(path, encoding="utf-8") as f:
        for line in f:
            p = json.loads(line)["problem"]
            if p != last:
                if seen == problems_per_chunk:
                    out.append(cur)
                    cur, seen = [], 0
                seen += 1
                last = p
            cur.append(line)
    if cur:
        out.append(cur)
    return out


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_manifest(out, want):
    """The cache is keyed by what its rows depend on: a resumed run must match the first.

    Keys are flat ("data_sha256.train"); a split first extracted now is added."""
    path = os.path.join(out, "manifest.json")
    have = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            have = json.load(f)
    for key in sorted(set(have) & set(want)):
        if have[key] != want[key]:
            sys.exit(f"{path}: {key} was {have[key]}, this run's is {want[key]}: these features are "
                     f"another extraction's; use another --out")
    os.makedirs(out, exist_ok=True)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(dict(have, **want), f, indent=1, sort_keys=True)
    os.replace(path + ".tmp", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--stepscore", default="stepscore")
    ap.add_argument("--layers", default="8,12,16,20,24,28")
    ap.add_argument("--problems-per-chunk", type=int, default=20)
    ap.add_argument("--pattern", default="train,train,train,val",
                    help="the splits' chunks in the order they are cycled through")
    ap.add_argument("--chunks", type=int, default=None,
                    help="only each split's first N chunks (another backbone on the rows "
                         "already extracted for the first, to compare them on the same data)")
    args = ap.parse_args()

    pattern = args.pattern.split(",")
    check_manifest(args.out, {
        "model_sha256": sha256(args.model),
        "layers": args.layers,
        "problems_per_chunk": args.problems_per_chunk,
        **{f"data_sha256.{split}": sha256(os.path.join(args.data, f"{split}.jsonl"))
           for split in dict.fromkeys(pattern)},
    })
    queues = {}
    for split in dict.fromkeys(pattern):
        d = os.path.join(args.out, split)
        os.makedirs(d, exist_ok=True)
        parts = chunks(os.path.join(args.data, f"{split}.jsonl"), args.problems_per_chunk)
        queues[split] = []
        for i, lines in enumerate(parts[:args.chunks]):
            inp = os.path.join(d, f"chunk_{i:04d}.in.jsonl")
            if not os.path.exists(inp):
                with open(inp, "w", encoding="utf-8") as f:
                    f.writelines(lines)
            if not os.path.exists(os.path.join(d, f"chunk_{i:04d}.done")):
                queues[split].append(i)
    order = []
    while any(queues.values()):
        for split in pattern:
            if queues[split]:
                order.append((split, queues[split].pop(0)))
    for split, i in order:
        d = os.path.join(args.out, split)
        inp = os.path.join(d, f"chunk_{i:04d}.in.jsonl")
        out = os.path.join(d, f"chunk_{i:04d}.jsonl")
        t0 = time.time()
        cmd = [args.stepscore, "features", "--model", args.model, "--family", "value-head",
               "--layers", args.layers, "--confidence", "--encoding", "base64",
               "--from-first-label", "--out", out, inp]
        r = subprocess.run(cmd, stderr=subprocess.PIPE, text=True)
        tail = r.stderr.strip().splitlines()[-1:] if r.stderr else []
        print(f"{time.strftime('%H:%M:%S')} {split} chunk {i}: exit {r.returncode} in {time.time() - t0:.0f} s; {' '.join(tail)}", flush=True)
        # Exit 1 is "some records bad" (reported); anything else stops.
        if r.returncode not in (0, 1):
            sys.exit(r.stderr)
        open(os.path.join(d, f"chunk_{i:04d}.done"), "w").close()


if __name__ == "__main__":
    main()
