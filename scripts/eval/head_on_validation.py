#!/usr/bin/env python3
"""A head file on whole validation traces: step AUROC and ProcessBench's F1
at the head's own threshold, overall and per source set (validation only; the
rows from scripts/data/assemble_trajectories.py). A guarded head (the default
PRM's) is scored as the engine scores it, with its guard.

  head_on_validation.py HEAD.safetensors VAL_WHOLE.jsonl [--feature-layers 12,18]

Needs numpy and the stepscore package (auroc.py): target/pyenv/bin/python.
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from guard_choice import load  # noqa: E402
from real_steps_probe import first_error_f1, step_auroc  # noqa: E402
from score_from_features import head_scorer  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("head")
    ap.add_argument("whole")
    ap.add_argument("--feature-layers", help="layers the rows hold when they do not say")
    args = ap.parse_args()
    layers = [int(x) for x in args.feature_layers.split(",")] if args.feature_layers else None
    score, meta = head_scorer(args.head, layers)
    t = float(meta.get("stepscore.threshold", 0.5))
    (s,), whole = load(args.whole, [score])
    sets = sorted({w[2] for w in whole})
    counts = ", ".join(f"{x} {sum(w[2] == x for w in whole)}" for x in sets)
    print(f"{len(whole)} whole traces ({counts}); the head's threshold {t:.3f}")
    print(f"step AUROC {step_auroc(s, whole):.3f}")
    for name, chosen in [("all", set(sets))] + [(x, {x}) for x in sets]:
        f1, err, cor, n_err, n_cor = first_error_f1(s, whole, chosen, t)
        print(f"F1 {name}: {f1:.3f} (acc erroneous {err:.3f} of {n_err}, correct {cor:.3f} of {n_cor})")


if __name__ == "__main__":
    main()
