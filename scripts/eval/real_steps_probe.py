#!/usr/bin/env python3
"""Which head to train on real step labels: candidates measured on validation.

Reads `stepscore features --layers ... --confidence --encoding base64` output
(scripts/data/extract_features.py's chunks: DIR/train/*.jsonl, DIR/val/*.jsonl),
fits class-balanced L2 logistic regressions on the training rows and reports,
on the validation rows only (split by problem; ProcessBench is never read):

  step AUROC       over labelled steps, pooled and per set;
  first-error F1   ProcessBench's metric on validation's whole traces, reported
                   twice: over the first-error sets (Mr-Ben, BIG-Bench Mistake,
                   MathDial) and over PRM800K trajectories rebuilt from their
                   rows (--whole: scripts/data/assemble_trajectories.py). A trace's predicted first error is its
                   first step scored below the threshold; F1 = harmonic mean of
                   the accuracy on erroneous traces (the predicted first error is
                   the label) and on correct ones (no step flagged); the
                   threshold is the validation-optimal one, so the figure
                   compares candidates, it is no test score.

Exploration only (numpy + scikit-learn): the shipped head is trained by
`stepscore train` / stepscore-train with burn; this script picks its inputs.
"""
import argparse
import base64
import glob
import json
import os
import sys

import numpy as np

from score_from_features import read_head
from auroc import auroc_labelled as auroc

STATS = ["result_min_logprob", "operand_min_logprob", "plus_minus_min_logprob",
         "operation_min_logprob", "false_equation", "log1p_tokens", "mean_logprob",
         "min_logprob", "mean_entropy"]


def stat_row(c, d):
    a = d.get("arithmetic") or {}
    return [a.get("result_min_logprob", 0.0), a.get("operand_min_logprob", 0.0),
            d["plus_minus_min_logprob"], d.get("operation_min_logprob") or 0.0,
            1.0 if (d.get("false_equations") or 0) > 0 else 0.0,
            float(np.log1p(c["tokens"])), c["mean_logprob"], c["min_logprob"], c["mean_entropy"]]


def load(paths, layers_in_file, keep_layers):
    """Rows: X [n, len(keep) * h] f32, stats [n, 9], y (1 good, 0 bad, -1 unlabelled),
    trace index per row, step index, and per trace (set, label, rating)."""
    pick = [layers_in_file.index(l) for l in keep_layers]
    xs, st, y, tr, si, traces = [], [], [], [], [], []
    for p in paths:
        with open(p, encoding="utf-8") as f:
            for line in f:
                if not line.endswith("\n"):
                    break
                r = json.loads(line)
                meta = r.get("metadata", {})
                t = len(traces)
                traces.append({"set": meta.get("set"), "label": r.get("label"),
                               "rating": meta.get("rating"), "first": r["first_step"],
                               "id": r.get("id"), "n": len(r["features_b64"])})
                for k, (b, lab) in enumerate(zip(r["features_b64"], r["labels"])):
                    v = np.frombuffer(base64.b64decode(b), dtype="<f4")
                    h = v.size // len(layers_in_file)
                    v = v.reshape(len(layers_in_file), h)[pick].reshape(-1)
                    xs.append(v)
                    st.append(stat_row(r["confidence"][k], r["digit_confidence"][k]))
                    y.append(-1 if lab is None else int(lab))
                    tr.append(t)
                    si.append(r["first_step"] + k)
    return (np.array(xs, dtype=np.float32), np.array(st, dtype=np.float64), np.array(y),
            np.array(tr), np.array(si), traces)


def whole_traces(tr, si, traces, _y):
    """(rows in step order, first error, set) per record of an assembled whole-trace file."""
    rows_of = {}
    for k, t in enumerate(tr):
        rows_of.setdefault(t, []).append(k)
    return [(sorted(rows_of[t], key=lambda k: si[k]), traces[t]["label"], traces[t]["set"])
            for t in sorted(rows_of)]


def first_error_f1(scores, whole, sets, threshold):
    """ProcessBench's F1 over the whole traces of `sets`."""
    ok_err = n_err = ok_cor = n_cor = 0
    for rows, label, st in whole:
        if st not in sets:
            continue
        pred = next((j for j, k in enumerate(rows) if scores[k] < threshold), -1)
        if label == -1:
            n_cor += 1
            ok_cor += pred == -1
        else:
            n_err += 1
            ok_err += pred == label
    a = ok_err / n_err if n_err else 0.0
    b = ok_cor / n_cor if n_cor else 0.0
    return (2 * a * b / (a + b) if a + b else 0.0), a, b, n_err, n_cor


def step_auroc(scores, whole):
    """Step AUROC over whole traces: each trace's steps through its first error
    (the labelled step wrong, those before it right); the issue-40 arithmetic bar's."""
    ys, ss = [], []
    for rows, label, _ in whole:
        for j, i in enumerate(rows):
            if 0 <= label < j:
                break
            ys.append(0 if j == label else 1)
            ss.append(scores[i])
    return auroc(np.array(ss), np.array(ys))


def best_f1(scores, whole, sets):
    best = (0.0, 0.5)
    for t in np.quantile(scores, np.linspace(0.005, 0.995, 120)):
        f = first_error_f1(scores, whole, sets, t)[0]
        if f > best[0]:
            best = (f, t)
    return best


def default_head_scores(stats, head_path):
    """Today's default head (the five arithmetic inputs), from its file."""
    t, meta = read_head(head_path)
    cols = [STATS.index(s) for s in meta["stepscore.step_stats"].split(",")]
    z = stats[:, cols] @ t["v_head.summary.weight"][0] + t["v_head.summary.bias"][0]
    return 1 / (1 + np.exp(-z))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--features", required=True, help="DIR with train/ and val/ chunk outputs")
    ap.add_argument("--layers-in-file", default="8,12,16,20,24,28")
    ap.add_argument("--default-head", default=os.path.join(os.path.dirname(__file__), "..", "..", "models",
                                                            "qwen2.5-coder-1.5b-digit-head.safetensors"))
    ap.add_argument("--candidates", default="28;20;24;16;12;16,20,24;8,12,16,20,24,28")
    ap.add_argument("--C", default="0.001,0.01,0.1")
    ap.add_argument("--neutral", default="good", choices=["good", "bad", "drop"])
    ap.add_argument("--whole", required=True, help="validation's whole traces (scripts/data/assemble_trajectories.py) "
                                    "for first-error F1")
    ap.add_argument("--chunks", type=int, default=None,
                    help="only each split's first N chunks (backbones compared on the same rows)")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    from sklearn.linear_model import LogisticRegression

    in_file = [int(x) for x in args.layers_in_file.split(",")]
    done = lambda split: sorted(p for p in glob.glob(os.path.join(args.features, split, "chunk_*.jsonl"))
                                if not p.endswith(".in.jsonl"))[:args.chunks]
    Xtr, Str, ytr, trtr, sitr, Ttr = load(done("train"), in_file, in_file)
    Xva, Sva, yva, trva, siva, Tva = load(done("val"), in_file, in_file)

    def neutral(y, tr, T):
        y = y.copy()
        rating0 = np.array([T[t]["rating"] == 0 for t in tr])
        if args.neutral == "bad":
            y[rating0 & (y == 1)] = 0
        elif args.neutral == "drop":
            y[rating0] = -1
        return y
    ytr_n = neutral(ytr, trtr, Ttr)
    lab_tr, lab_va = ytr_n >= 0, yva >= 0
    fe_sets = {"mr-ben", "big-bench-mistake", "mathdial"}
    Xwh, Swh, ywh, trwh, siwh, Twh = load([args.whole], in_file, in_file)
    whole = whole_traces(trwh, siwh, Twh, ywh)
    print("whole validation traces (errors, correct): " + ", ".join(
        f"{st} {sum(1 for _, l, x in whole if x == st and l >= 0)}/{sum(1 for _, l, x in whole if x == st and l < 0)}"
        for st in sorted({x for _, _, x in whole})))
    sets = sorted({T["set"] for T in Tva})
    print(f"train rows {lab_tr.sum()} labelled ({(ytr_n[lab_tr] == 0).sum()} bad) from {len(Ttr)} traces; "
          f"val {lab_va.sum()} ({(yva[lab_va] == 0).sum()} bad) from {len(Tva)} traces; neutral={args.neutral}")
    results = []

    def report(name, s, sw):
        row = {"name": name, "auroc": auroc(s[lab_va], yva[lab_va])}
        for st in sets:
            m = lab_va & np.array([Tva[t]["set"] == st for t in trva])
            row[f"auroc_{st}"] = auroc(s[m], yva[m])
        f, t = best_f1(sw, whole, fe_sets)
        _, a, b, ne, nc = first_error_f1(sw, whole, fe_sets, t)
        row.update({"f1": f, "threshold": t, "acc_err": a, "acc_cor": b, "n_err": ne, "n_cor": nc})
        f8, t8 = best_f1(sw, whole, {"prm800k"})
        _, a8, b8, ne8, nc8 = first_error_f1(sw, whole, {"prm800k"}, t8)
        row.update({"f1_prm800k": f8, "threshold_prm800k": t8, "acc_err_prm800k": a8,
                    "acc_cor_prm800k": b8, "n_err_prm800k": ne8, "n_cor_prm800k": nc8})
        results.append(row)
        per = " ".join(f"{st}={row['auroc_' + st]:.3f}" for st in sets)
        print(f"{name:42} AUROC {row['auroc']:.3f} ({per})  F1 first-error sets {f:.3f} (err {a:.2f} cor {b:.2f}, "
              f"t {t:.3f})  F1 PRM800K {f8:.3f} (err {a8:.2f} cor {b8:.2f}, t {t8:.3f})", flush=True)

    if args.default_head:
        report("today's default head (5 arithmetic inputs)", default_head_scores(Sva, args.default_head),
               default_head_scores(Swh, args.default_head))
    rng = np.random.default_rng(0)
    report("random", rng.random(len(yva)), rng.random(len(ywh)))
    h = Xtr.shape[1] // len(in_file)
    for cand in args.candidates.split(";"):
        ls = [int(x) for x in cand.split(",")]
        cols = np.concatenate([np.arange(in_file.index(l) * h, (in_file.index(l) + 1) * h) for l in ls])
        for with_stats in (False, True):
            A = Xtr[lab_tr][:, cols].astype(np.float64)
            B = Xva[:, cols].astype(np.float64)
            W = Xwh[:, cols].astype(np.float64)
            if with_stats:
                A = np.hstack([A, Str[lab_tr]])
                B = np.hstack([B, Sva])
                W = np.hstack([W, Swh])
            mu, sd = A.mean(0), A.std(0) + 1e-6
            A, B, W = (A - mu) / sd, (B - mu) / sd, (W - mu) / sd
            for C in [float(c) for c in args.C.split(",")]:
                m = LogisticRegression(C=C, class_weight="balanced", max_iter=300)
                m.fit(A, ytr_n[lab_tr])
                report(f"layers {cand}{' + stats' if with_stats else ''} C={C}", m.predict_proba(B)[:, 1],
                       m.predict_proba(W)[:, 1])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
