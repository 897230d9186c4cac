#!/usr/bin/env python3
"""Fits the default head's solution threshold on model-written validation
solutions and writes it into the head file's metadata
(`stepscore.solution_threshold`; issue 26's calibration off the generators).

The solution score is `stepscore::prm::verdict::solution_score`: the
log-odds of the lowest step score plus those of the model's verdict P(Yes),
each probability kept within [1e-9, 1 - 1e-9]. The threshold is the one that
maximises F1 on mw-val (the harmonic mean of the accuracies on wrong
solutions, flagged, and right ones, not flagged; the answer check is the
label), taken midway between two neighbouring scores. Step scores and the
step threshold are untouched: only the header metadata changes.

Input: `stepscore score --verdict` output (JSONL) on the file written by
`scripts/eval/verdict_signal.py --set mw-val --write-input FILE`, scored with the
head as shipped.

usage: python3 scripts/train/add_solution_threshold.py SCORED.jsonl [--head models/...safetensors] [--dry-run]
"""
import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "eval"))  # solution_calibration, verdict_signal
from head_file import read_head_file, write_head_file  # noqa: E402
from solution_calibration import best_threshold, f1_at  # noqa: E402
from verdict_signal import ROOT, key, load_set  # noqa: E402

HEAD = ROOT / "models/qwen2.5-coder-1.5b-digit-head.safetensors"


def solution_score(lowest, p_yes):
    logit = lambda p: math.log(min(max(p, 1e-9), 1 - 1e-9) / (1 - min(max(p, 1e-9), 1 - 1e-9)))
    return logit(lowest) + logit(p_yes)


def scored_rows(path, set_name):
    """(right, {"solution": score}) per solution of `set_name` found in the output."""
    got = {}
    for line in Path(path).read_text().splitlines():
        r = json.loads(line)
        v = r.get("metadata", {}).get("stepscore", {}).get("verdict")
        if v is not None:
            got[r["id"]] = solution_score(min(s["score"] for s in r["steps"]), v["p_yes"])
    return [(r["correct"], {"solution": got[key(r)]}) for r in load_set(set_name) if key(r) in got]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scored")
    ap.add_argument("--head", default=str(HEAD))
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args()
    rows = scored_rows(args.scored, "mw-val")
    if not rows:
        sys.exit(f"{args.scored}: no mw-val solution with a verdict")
    t = best_threshold(rows, "solution")
    f1, acc_wrong, acc_right = f1_at(rows, "solution", t)
    print(json.dumps({"solutions": len(rows), "right": sum(ok for ok, _ in rows), "threshold": round(t, 6),
                      "f1": f1, "acc_wrong": acc_wrong, "acc_right": acc_right}))
    if args.dry_run:
        return
    tensors, meta = read_head_file(args.head)
    meta["stepscore.solution_threshold"] = f"{t:.6f}"
    write_head_file(args.head, tensors, meta)
    print(f"wrote stepscore.solution_threshold = {t:.6f} into {args.head}")


if __name__ == "__main__":
    main()
