#!/usr/bin/env python3
"""Adds the exact arithmetic check to a trained linear head without moving
anything else it learned.

The check (`false_equation`: the step writes an equation that exact rational
arithmetic finds false) is joined as one more input of the head with its own
weight, fitted on the training split's labelled steps with the head's logit
as a fixed offset: class-balanced logistic regression in that one weight,
L2 `--l2` times the step count (Newton steps). Every step the check does not
flag keeps the input head's score bit for bit (its input is 0), so the
head's threshold and calibration stay as they were; a flagged step's logit
moves by the fitted weight. Where every flagged training step is wrong (the
check's precision is 1 on the synthetic data) the data is separable and
the L2 term alone sets the weight's size: the script says so.

usage: add_check_weight.py --head IN.safetensors --train TRAIN.jsonl --out OUT.safetensors [--l2 1e-3]
  TRAIN.jsonl: `stepscore features --confidence` of the training split (labelled).
"""
import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "eval"))  # results_table
from results_table import labelled_traces, read_head  # noqa: E402
from head_file import read_head_file, write_head_file  # noqa: E402

STAT = "false_equation"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--head", required=True)
    ap.add_argument("--train", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--l2", type=float, default=1e-3)
    args = ap.parse_args()
    tensors, meta = read_head_file(args.head)
    stats = [s for s in meta.get("stepscore.step_stats", "").split(",") if s]
    if "v_head.summary.weight" not in tensors or meta.get("stepscore.stats_only") != "true" or STAT in stats:
        raise SystemExit(f"{args.head}: needs a linear stats-only head that does not read {STAT} yet")
    head, _ = read_head(args.head)
    z, flag, y = [], [], []
    for r, label, n in labelled_traces(args.train):
        for k in range(n):
            d = r["digit_confidence"][k]
            if "false_equations" not in d:
                raise SystemExit(f"{args.train}: {r.get('id')} step {k} has no false_equations (extract again)")
            p = head(r["features"][k], r["confidence"][k], d)
            z.append(math.log(p) - math.log1p(-p))
            flag.append(float(d["false_equations"] > 0))
            y.append(float(label < 0 or k < label))
    z, flag, y = map(np.array, (z, flag, y))
    sw = np.where(y > 0, 0.5 / y.mean(), 0.5 / (1 - y.mean()))
    lam = args.l2 * len(y)
    w = 0.0
    for _ in range(100):
        p = 1 / (1 + np.exp(-(z + w * flag)))
        step = (np.sum(sw * (p - y) * flag) + lam * w) / (np.sum(sw * p * (1 - p) * flag) + lam)
        w -= step
        if abs(step) < 1e-10:
            break
    flagged, flagged_right = int(flag.sum()), int(((flag > 0) & (y > 0)).sum())
    separable = flagged > 0 and flagged_right == 0
    weights = tensors["v_head.summary.weight"]
    width = weights.shape[1] + 1
    tensors["v_head.summary.weight"] = np.append(weights, np.float32(w)).reshape(1, width)
    meta = dict(meta)
    meta["stepscore.step_stats"] = ",".join(stats + [STAT])
    meta["stepscore.width"] = str(width)
    meta["stepscore.check_weight"] = (
        f"{w:.4f}, fitted by scripts/train/add_check_weight.py on {len(y)} train steps "
        f"({flagged} flagged, {flagged_right} of them right; L2 {args.l2} x steps)"
    )
    write_head_file(args.out, tensors, meta)
    print(f"{STAT} weight {w:.4f}: {len(y)} labelled train steps, {flagged} flagged by the check, "
          f"{flagged_right} of them right" + (" (separable: the L2 term sets the size)" if separable else ""))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
