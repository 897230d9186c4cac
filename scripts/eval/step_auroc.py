#!/usr/bin/env python3
"""Step AUROC and first-error F1 of head files on a `stepscore features` extraction with labels.

Each head is applied as the engine applies it (score_from_features.head_scorer, guards
included). Step AUROC counts each trace's steps through its first error (the labelled
step is the wrong one, the steps before it right), the issue-40 arithmetic bar's
definition; F1 is ProcessBench's (accuracy on erroneous and on correct traces) at the
threshold each head ships.

  step_auroc.py --features arith/test.jsonl HEAD.safetensors [HEAD ...]
"""
import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_steps_probe import first_error_f1, step_auroc  # noqa: E402
from score_from_features import MODELS, head_scorer, steps_of  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--features", required=True, help="features JSONL whose records carry `label`")
    ap.add_argument("--feature-layers", help="layers the rows hold when they do not say")
    ap.add_argument("heads", nargs="+", help="head files (a bare name is one of crates/stepscore/models/)")
    args = ap.parse_args()
    file_layers = [int(x) for x in args.feature_layers.split(",")] if args.feature_layers else None
    records = [json.loads(line) for line in open(args.features, encoding="utf-8")]
    for path in args.heads:
        full = path if Path(path).exists() else MODELS / path
        score, meta = head_scorer(full, file_layers)
        scores, whole = [], []
        for r in records:
            s = [score(r, k) for k in range(steps_of(r))]
            whole.append((list(range(len(scores), len(scores) + len(s))), r["label"], "all"))
            scores.extend(s)
        scores = np.array(scores)
        t = float(meta.get("stepscore.threshold", 0.5))
        f, a, b, ne, nc = first_error_f1(scores, whole, {"all"}, t)
        print(f"{Path(path).name}: {len(records)} traces; step AUROC "
              f"{step_auroc(scores, whole):.3f}; F1 {f:.3f} at {t:.3f} "
              f"(erroneous {a:.2f} of {ne}, correct {b:.2f} of {nc})")


if __name__ == "__main__":
    main()
