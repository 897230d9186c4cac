#!/usr/bin/env python3
"""Trace-style offsets on the default PRM's step logit (issue 26, session 21).

On the model's own text the shipped head's F1 peaks at a step threshold near
0.93, on synthetic traces near 0.6 (docs/TRAINING.md), and the two kinds
differ in how predictable their tokens are. Session 19 added c x (mean token
log-prob of the steps so far) + b to the logit and gained F1 on model-written
text, but lost step AUROC everywhere. This script asks whether any robust
reading of the trace's style does better: statistics of the token log-probs
of the steps so far (or before the step) that one surprising number cannot
move, such as the median or the share of near-certain tokens.

For each statistic s, the step logit becomes z + c * s + b. (c, b) is chosen
on the validation sets (synthetic-val, mw-val with hand labels): the highest
mean ProcessBench F1 at the shipped threshold among the (c, b) whose step
AUROC falls by at most 0.02 on each validation set (the issue's allowance);
c = 0 (a shift of the threshold only) is always a candidate. The test sets
are scored once with the chosen (c, b). `--frontier` also prints, for each c,
the best b's validation AUROC change and F1.

Inputs, per set S (names as scripts/eval/head_variants.py writes them):
  python scripts/eval/head_variants.py --write-inputs DIR
  stepscore score --token-logprobs --output jsonl DIR/S.in.jsonl > DIR/S.score.jsonl
usage: python scripts/eval/style_offsets.py DIR [--frontier]   (needs numpy)
"""
import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from head_variants import read_linear_head  # noqa: E402
from mc_step_labels import labelled  # noqa: E402
from verdict_signal import key  # noqa: E402
from auroc import auroc  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
LABELS = ROOT / "data/verdict-signal"
VAL = ["synthetic-val", "mw-val"]
TEST = ["synthetic-test", "mw-test", "mw-hard", "mw-test-0.5b"]
PER_GENERATOR = {"mw-test": 2}
THRESHOLD = read_linear_head()[3]  # the default PRM's shipped step threshold
AUROC_ALLOWANCE = 0.02


def so_far(f):
    return lambda lps: np.array([f(np.concatenate(lps[: k + 1])) for k in range(len(lps))])


def before(f):
    # The steps before step k; the first step reads itself.
    return lambda lps: np.array([f(np.concatenate(lps[: max(k, 1)])) for k in range(len(lps))])


STYLES = {
    "mean log-prob so far (session 19)": so_far(np.mean),
    "median log-prob so far": so_far(np.median),
    "mean of log-probs clipped at -2, so far": so_far(lambda a: np.mean(np.maximum(a, -2.0))),
    "25% quantile of log-probs so far": so_far(lambda a: np.quantile(a, 0.25)),
    "share of tokens with p > 0.9 so far": so_far(lambda a: np.mean(a > np.log(0.9))),
    "share of tokens with p > 0.5 so far": so_far(lambda a: np.mean(a > np.log(0.5))),
    "median log-prob before the step": before(np.median),
    "share of tokens with p > 0.9 before the step": before(lambda a: np.mean(a > np.log(0.9))),
}


def read_set(directory, name):
    """Labelled solutions of `name` with the shipped logits and per-step token log-probs."""
    path = directory / f"{name}.score.jsonl"
    if not path.exists():
        print(f"{path} not found: {name} left out", file=sys.stderr)
        return None
    scored = {}
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            s = np.array([st["score"] for st in r["steps"]])
            lps = [np.array([t["logprob"] for t in st]) for st in r["metadata"]["stepscore"]["token_logprobs"]]
            scored[r["id"]] = (np.log(s) - np.log1p(-s), lps)
    rows = []
    for r, first_bad in labelled(LABELS, name, hand=True, per_generator=PER_GENERATOR.get(name)):
        if key(r) in scored:
            z, lps = scored[key(r)]
            rows.append({"first_bad": first_bad, "z": z, "lps": lps})
    return rows


# figures counts as mc_step_labels.figures does, vectorised: the grid below
# evaluates ~9,000 (c, b) pairs (the AUROC is the core's, O(n log n)).
def figures(rows, logits):
    """(step AUROC, ProcessBench F1) at the shipped threshold, as mc_step_labels.figures counts them."""
    zt = np.log(THRESHOLD) - np.log1p(-THRESHOLD)
    good, bad, at, passed, wrong, right = [], [], 0, 0, 0, 0
    for r, z in zip(rows, logits):
        flags = np.nonzero(z < zt)[0]
        first = flags[0] if len(flags) else None
        if r["first_bad"] is None:
            good.append(z)
            right += 1
            passed += first is None
        else:
            fb = r["first_bad"]
            good.append(z[:fb])
            bad.append(z[fb:fb + 1])
            wrong += 1
            at += first == fb
    aw, ar = at / max(1, wrong), passed / max(1, right)
    return auroc(np.concatenate(good), np.concatenate(bad)), 2 * aw * ar / max(1e-12, aw + ar)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", type=Path)
    ap.add_argument("--frontier", action="store_true")
    args = ap.parse_args()
    data = {n: read_set(args.dir, n) for n in VAL + TEST}
    data = {n: rows for n, rows in data.items() if rows}
    if not all(n in data for n in VAL):
        raise SystemExit("both validation sets are needed to choose (c, b)")
    shipped = {n: figures(rows, [r["z"] for r in rows]) for n, rows in data.items()}
    print("step AUROC / F1 at the shipped threshold; shipped head: "
          + ", ".join(f"{n} {a:.3f} / {f:.3f}" for n, (a, f) in shipped.items()))
    bs = np.linspace(-4, 4, 33)
    for name, style in STYLES.items():
        s = {n: [style(r["lps"]) for r in rows] for n, rows in data.items()}
        spread = np.subtract(*np.quantile(np.concatenate([np.concatenate(v) for n, v in s.items() if n in VAL]),
                                          [0.95, 0.05]))
        shifted = lambda n, c, b: figures(data[n], [r["z"] + c * x + b for r, x in zip(data[n], s[n])])
        best, frontier = None, []
        # c in units of the statistic's 5-95% spread on validation: -4 .. 4 logits across it.
        for cs in np.linspace(-4, 4, 17):
            c = cs / spread
            best_b = None
            for b in bs:
                val = [shifted(n, c, b) for n in VAL]
                mean_f1 = float(np.mean([f for _, f in val]))
                if best_b is None or mean_f1 > best_b[0]:
                    best_b = (mean_f1, b, val)
                if all(a >= shipped[n][0] - AUROC_ALLOWANCE for (a, _), n in zip(val, VAL)) \
                        and (best is None or mean_f1 > best[0]):
                    best = (mean_f1, c, b)
            frontier.append((cs, best_b))
        _, c, b = best
        print(f"\n{name}: chosen c = {c:.3f} ({c * spread:+.1f} logits over its spread), b = {b:+.2f}")
        for n in data:
            a, f = shifted(n, c, b)
            print(f"  {n:15s} AUROC {shipped[n][0]:.3f} -> {a:.3f}   F1 {shipped[n][1]:.3f} -> {f:.3f}")
        if args.frontier:
            for cs, (mean_f1, b, val) in frontier:
                cells = "  ".join(f"{n} {a - shipped[n][0]:+.3f} / {f:.3f}" for n, (a, f) in zip(VAL, val))
                print(f"    c {cs:+.1f} logits, b {b:+.2f}: {cells}")


if __name__ == "__main__":
    main()
