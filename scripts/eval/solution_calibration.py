#!/usr/bin/env python3
"""Calibration off the generators (issue 26): thresholds and probabilities
fitted on model-written validation solutions, measured on the held-out ones.

Data: scripts/eval/verdict_signal.py's sets: mw-val (Qwen2.5-Coder-1.5B's
solutions to the validation generators' problems: the fitting set) and
mw-test (its solutions to the held-out test generators' problems, the search
evaluation's greedy and best-of-4 finalists: never fitted on). Labels: the
answer check only (no step labels yet), so everything here is per solution:
a solution is "flagged" when its score is below the threshold.

Scores (each a logit, higher = more likely right):
  prm       logit of the default PRM's weakest step score (as shipped);
  verdict   logit of the instruct model's verdict on the last step, which
            has read the whole solution (verdict_signal.py, per-step prompt);
  prm+verdict  their sum (equal weights, chosen before looking at mw-test).

Reported per score and set: solution AUROC; F1 = the harmonic mean of the
accuracy on wrong solutions (flagged) and on right ones (not flagged), which
is ProcessBench's F1 without its first-error position (an upper bound of it);
at the shipped threshold (prm only) and at the threshold that maximises F1
on mw-val; ECE of a Platt fit on mw-val (10 equal-width bins of P(right),
|mean P - accuracy| weighted by bin size); and the F1-vs-threshold curve on
both sets (--curve).

usage: python3 scripts/eval/solution_calibration.py [--curve] [--json OUT]
"""
import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from verdict_signal import ROOT, auroc, key, load_set, read_cache  # noqa: E402

SHIPPED = 0.602855  # the default head's stepscore.threshold, on step scores


def logit(p):
    p = min(max(p, 1e-9), 1 - 1e-9)
    return math.log(p / (1 - p))


def scored(name, cache):
    """(right, {score name: logit}) of each solution of `name` with a verdict."""
    out = []
    for r in load_set(name):
        v = cache.get(key(r))
        if v is None:
            continue
        s = {"prm": logit(min(r["prm"])), "verdict": logit(v[-1])}
        s["prm+verdict"] = s["prm"] + s["verdict"]
        out.append((r["correct"], s))
    return out


def f1_at(rows, name, t):
    right = [s[name] for ok, s in rows if ok]
    wrong = [s[name] for ok, s in rows if not ok]
    acc_wrong = sum(x < t for x in wrong) / len(wrong)
    acc_right = sum(x >= t for x in right) / len(right)
    f1 = 0.0 if acc_wrong + acc_right == 0 else 2 * acc_wrong * acc_right / (acc_wrong + acc_right)
    return f1, acc_wrong, acc_right


def best_threshold(rows, name):
    cands = sorted({s[name] for _, s in rows})
    mids = [(a + b) / 2 for a, b in zip(cands, cands[1:])] or cands
    return max(mids, key=lambda t: (f1_at(rows, name, t)[0], -abs(t)))


def sigmoid(z):
    return 1 / (1 + math.exp(-z)) if z >= 0 else math.exp(z) / (1 + math.exp(z))


def platt(rows, name, iters=50):
    """a, b of P(right) = sigmoid(a x + b), Newton steps on the log likelihood."""
    a, b = 0.0, 0.0  # from the flat model: saturated starts stall Newton's steps
    for _ in range(iters):
        ga = gb = haa = hab = hbb = 0.0
        for ok, s in rows:
            x = s[name]
            p = sigmoid(a * x + b)
            e = p - (1.0 if ok else 0.0)
            w = p * (1 - p)
            ga += e * x
            gb += e
            haa += w * x * x + 1e-6
            hab += w * x
            hbb += w + 1e-6
        det = haa * hbb - hab * hab
        da, db = (hbb * ga - hab * gb) / det, (haa * gb - hab * ga) / det
        step = min(1.0, 2.0 / max(abs(da), abs(db), 1e-12))  # damped: no overshoot on separable tails
        a, b = a - step * da, b - step * db
    return a, b


def ece(rows, name, a, b, bins=10):
    total, err = len(rows), 0.0
    buckets = [[] for _ in range(bins)]
    for ok, s in rows:
        p = sigmoid(a * s[name] + b)
        buckets[min(bins - 1, int(p * bins))].append((p, ok))
    for bk in buckets:
        if bk:
            err += len(bk) / total * abs(sum(p for p, _ in bk) / len(bk) - sum(ok for _, ok in bk) / len(bk))
    return err


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "data/verdict-signal"))
    ap.add_argument("--curve", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    cache = read_cache(args.out)
    sets = {n: scored(n, cache) for n in ["mw-val", "mw-test"]}
    fit = sets["mw-val"]
    res = {n: {"solutions": len(rows), "right": sum(ok for ok, _ in rows)} for n, rows in sets.items()}
    for name in ["prm", "verdict", "prm+verdict"]:
        t = best_threshold(fit, name)
        a, b = platt(fit, name)
        for n, rows in sets.items():
            row = {"auroc": auroc([s[name] for ok, s in rows if ok], [s[name] for ok, s in rows if not ok]),
                   "val_threshold": t, "f1_val_threshold": f1_at(rows, name, t),
                   "ece_platt_val": ece(rows, name, a, b)}
            if name == "prm":
                row["f1_shipped"] = f1_at(rows, name, logit(SHIPPED))
            if args.curve:
                row["curve"] = [(round(x, 2), round(f1_at(rows, name, x)[0], 3)) for x in
                                [i / 4 for i in range(-8, 17)]]
            res[n][name] = row
    text = json.dumps(res, indent=1)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")


if __name__ == "__main__":
    main()
