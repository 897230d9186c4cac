#!/usr/bin/env python3
"""Deterministic subsets of the v2 PRM data for feature extraction on a 1.5B
backbone (2 CPU cores: ~5-12 s a trace). Within each generator, rows are
ordered by sha256 of their id and the first k kept, so the subsets are
spread over every generator of a split and reproducible.

  train: 5 per generator (62 generators), the first 244 of them (the
         session-5 extraction stopped there for time)
  val:   6 per generator (14 generators)
  test:  6 per generator (21 held-out generators)
  bon8:  12 best-of-8 groups (every 8th group, problem order by generator)

usage: prm_subsets.py OUTDIR   -> OUTDIR/{train,val,test,bon8}.in.jsonl
"""
import collections
import gzip
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def key(s):
    return hashlib.sha256(s.encode()).hexdigest()


def load(split):
    with gzip.open(ROOT / f"data/prm_v2_{split}.jsonl.gz", "rt") as f:
        return [json.loads(line) for line in f]


def per_generator(rows, k):
    by = collections.defaultdict(list)
    for r in rows:
        by[r["generator"]].append(r)
    return [r for g in sorted(by) for r in sorted(by[g], key=lambda r: key(r["id"]))[:k]]


def bon_groups(rows, n):
    groups = collections.defaultdict(list)
    for r in rows:
        groups[r["group"]].append(r)
    by_gen = collections.defaultdict(list)
    for g, rs in groups.items():
        by_gen[rs[0]["generator"]].append(g)
    order = [g for gen in sorted(by_gen) for g in sorted(by_gen[gen], key=key)[:1]]
    keep = order[:: max(1, len(order) // n)][:n]
    return [r for g in keep for r in groups[g]]


def main():
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    sets = {
        "train": per_generator(load("train"), 5)[:244],
        "val": per_generator(load("val"), 6),
        "test": per_generator(load("test"), 6),
        "bon8": bon_groups(load("test_bon8"), 12),
    }
    for name, rows in sets.items():
        with open(out / f"{name}.in.jsonl", "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
        print(f"{name}: {len(rows)} traces, {len({r['generator'] for r in rows})} generators", file=sys.stderr)


if __name__ == "__main__":
    main()
