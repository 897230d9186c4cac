#!/usr/bin/env python3
"""Whole traces from `stepscore features` chunks, for first-error metrics and thresholds.

ProcessBench's F1 is a property of whole traces: the first step flagged must
be the first error, and a correct trace must have no step flagged. The
extraction (extract_features.py, `--from-first-label`) writes a PRM800K row's
rated step only, since its prefix steps are other rows' rated steps with the
same bits (the prefix is shared). This rebuilds every trajectory whose steps
all have rows: a row's prefix step j is the row of the same problem with
prefix[:j] and that step. Its labels are the rows' ratings (1 and 0 good, -1
bad; 0 as the readers take it); its first error is the first step rated -1,
and the trajectory is kept when that is its last step, or when it has none
and ends in a solution (`is_solution`: ProcessBench's correct traces are
finished solutions). Records of the first-error sets that start at step 0
are whole already and pass through. Everything else is left out and counted.

Output: features records (`first_step` 0, one row per step, `label` the first
error or -1), for `stepscore-train --threshold-on` and
scripts/eval/real_steps_probe.py --whole.

  assemble_trajectories.py feats/val/chunk_*.jsonl > val-whole.jsonl
"""
import argparse
import json
import sys
from collections import Counter

PER_STEP = ("features_b64", "features", "confidence", "digit_confidence", "labels")


def read_chunk(path):
    """(features records, their input rows by id); an unfinished last line is skipped."""
    recs, rows = [], {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.endswith("\n"):
                recs.append(json.loads(line))
    with open(path[: -len(".jsonl")] + ".in.jsonl", encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            rows[r.get("id")] = r
    return recs, rows


def whole(recs, rows, counts):
    """Yields the whole-trace records of one chunk."""
    node, by_id = {}, {}
    for rec in recs:
        by_id[rec["id"]] = rec
        row = rows.get(rec["id"])
        if row is not None and "prefix" in row:
            node[(row["problem"], tuple(row["prefix"]), row["step"])] = rec
    for rec in recs:
        row = rows.get(rec["id"])
        if row is None:
            counts["no input row"] += 1
            continue
        if "prefix" not in row:
            if rec.get("first_step") == 0 and rec.get("label") is not None:
                counts[f"{row.get('set')} whole"] += 1
                yield rec
            else:
                counts[f"{row.get('set')} not from step 0 or unlabelled"] += 1
            continue
        chain = []
        for j, step in enumerate(row["prefix"]):
            a = node.get((row["problem"], tuple(row["prefix"][:j]), step))
            if a is None:
                break
            chain.append(a)
        if len(chain) < len(row["prefix"]):
            counts["prm800k prefix step without a row"] += 1
            continue
        chain.append(rec)
        ratings = [rows[a["id"]].get("rating") for a in chain]
        if any(r is None for r in ratings):
            counts["prm800k unrated step"] += 1
            continue
        first = next((j for j, r in enumerate(ratings) if r == -1), -1)
        if first == -1 and not row.get("is_solution"):
            counts["prm800k unfinished"] += 1
            continue
        if first not in (-1, len(chain) - 1):
            counts["prm800k past its first error"] += 1
            continue
        counts["prm800k trajectory"] += 1
        out = {"id": rec["id"], "label": first, "first_step": 0,
               "metadata": dict(rec.get("metadata", {}), trajectory=True)}
        for key in ("layers",):
            if key in rec:
                out[key] = rec[key]
        for key in PER_STEP:
            if key in rec:
                # Each chain member's last row is that step's.
                out[key] = [a[key][-1] for a in chain]
        out["labels"] = [r != -1 for r in ratings]
        yield out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("chunks", nargs="+", help="features chunk outputs (their .in.jsonl beside them)")
    args = ap.parse_args()
    counts = Counter()
    for path in args.chunks:
        recs, rows = read_chunk(path)
        for out in whole(recs, rows, counts):
            sys.stdout.write(json.dumps(out, separators=(",", ":")) + "\n")
    for k, v in sorted(counts.items()):
        print(f"{k}: {v}", file=sys.stderr)


if __name__ == "__main__":
    main()
