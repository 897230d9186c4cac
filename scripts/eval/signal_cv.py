#!/usr/bin/env python3
"""Step signals measured alone and together, leave-one-generator-out.

Reads `stepscore features --confidence` extractions of labelled traces (the
train and validation splits: never test) and, for each set of step
statistics named on the command line, fits a class-balanced logistic
regression (numpy, standardized inputs, Newton steps, L2 1e-3) on every
generator but one and scores the held-out generator's steps. Reported over
the pooled held-out predictions:

- step AUROC: labelled steps (ProcessBench's convention: the steps up to and
  including the first wrong one), P(a random correct step scores above a
  random wrong one), ties one half;
- ProcessBench F1: each trace's predicted first error is its first step
  scored below a threshold (none: predicted correct); F1 is the harmonic mean
  of the accuracy on erroneous traces (the predicted index is the labelled
  one) and on correct traces (no step flagged). The threshold of each fold
  is the one that maximizes F1 on that fold's training generators.

usage: signal_cv.py FEATURES.jsonl... --sets "a,b;a,b,c;..."
  each set is a comma-separated list of statistic names (StepStat names,
  scripts/eval/results_table.py's STAT_VALUE).
"""
import argparse

import numpy as np

from results_table import STAT_VALUE, labelled_traces
from auroc import auroc_labelled as auroc


def read(paths, stats):
    """Per labelled trace: (generator, label, [stat rows of its labelled steps])."""
    traces = []
    for path in paths:
        for r, label, n in labelled_traces(path):
            rows = [[STAT_VALUE[s](r["confidence"][k], r["digit_confidence"][k]) for s in stats] for k in range(n)]
            traces.append((r["generator"], label, rows))
    return traces


def fit(x, y, l2=1e-3, iters=25):
    """Class-balanced logistic regression on standardized x; returns a predictor."""
    mu, sd = x.mean(0), x.std(0)
    sd[sd == 0] = 1
    z = np.hstack([(x - mu) / sd, np.ones((len(x), 1))])
    w_pos, w_neg = 0.5 / max(y.mean(), 1e-9), 0.5 / max(1 - y.mean(), 1e-9)
    sw = np.where(y > 0.5, w_pos, w_neg)
    beta = np.zeros(z.shape[1])
    for _ in range(iters):
        p = 1 / (1 + np.exp(-z @ beta))
        g = z.T @ (sw * (p - y)) + l2 * len(x) * np.r_[beta[:-1], 0]
        h = (z * (sw * p * (1 - p))[:, None]).T @ z + l2 * len(x) * np.diag(np.r_[np.ones(len(beta) - 1), 0])
        beta -= np.linalg.solve(h + 1e-9 * np.eye(len(beta)), g)
    return lambda xs: 1 / (1 + np.exp(-np.hstack([(xs - mu) / sd, np.ones((len(xs), 1))]) @ beta))


def processbench_f1(traces_scores, threshold):
    """traces_scores: [(label, step scores)]."""
    err = [(lab, sc) for lab, sc in traces_scores if lab >= 0]
    cor = [(lab, sc) for lab, sc in traces_scores if lab < 0]
    first = lambda sc: next((k for k, v in enumerate(sc) if v < threshold), -1)
    a = np.mean([first(sc) == lab for lab, sc in err]) if err else 0.0
    b = np.mean([first(sc) == -1 for _, sc in cor]) if cor else 0.0
    return 0.0 if a + b == 0 else 2 * a * b / (a + b)


def best_threshold(traces_scores):
    cands = np.unique(np.concatenate([sc for _, sc in traces_scores if len(sc)]))
    cands = np.quantile(cands, np.linspace(0, 1, 201)) if len(cands) > 201 else cands
    return max(cands, key=lambda t: processbench_f1(traces_scores, t + 1e-12))


def cross_validate(traces):
    gens = sorted({g for g, _, _ in traces})
    pooled, labels, per_trace = [], [], []
    for g in gens:
        train = [t for t in traces if t[0] != g and t[2]]
        test = [t for t in traces if t[0] == g and t[2]]
        if not test:
            continue
        x = np.array([row for _, _, rows in train for row in rows], dtype=float)
        y = np.array([float(lab < 0 or k < lab) for _, lab, rows in train for k in range(len(rows))])
        predict = fit(x, y)
        thr = best_threshold([(lab, predict(np.array(rows, dtype=float))) for _, lab, rows in train])
        for _, lab, rows in test:
            p = predict(np.array(rows, dtype=float))
            pooled.extend(p)
            labels.extend(float(lab < 0 or k < lab) for k in range(len(rows)))
            per_trace.append((lab, p, thr))
    f1_traces = [(lab, p - thr) for lab, p, thr in per_trace]  # each fold's own threshold
    return auroc(pooled, labels), processbench_f1(f1_traces, 1e-12), len(labels), int(len(labels) - sum(labels)), len(gens)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("features", nargs="+")
    ap.add_argument("--sets", required=True)
    args = ap.parse_args()
    for spec in args.sets.split(";"):
        stats = [s.strip() for s in spec.split(",") if s.strip()]
        auc, f1, steps, wrong, gens = cross_validate(read(args.features, stats))
        print(f"{auc:.3f}  F1 {f1:.3f}  ({steps} steps, {wrong} wrong, {gens} generators)  {'+'.join(stats)}")


if __name__ == "__main__":
    main()
