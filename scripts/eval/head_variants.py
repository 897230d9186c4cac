#!/usr/bin/env python3
"""Variants of the default PRM's head measured against the shipped one on
synthetic and model-written step labels (issue 26, session 19): would
model-written training labels, a trace-level fluency input or the hidden
state make the step scores spread on model-written text without losing the
synthetic ranking?

Every variant starts from the shipped head's inputs, as `stepscore features
--confidence` writes them per step (its five statistics, the step's token
log-probs and the final layer's hidden state at the step's marker), and is
fitted on the train sets only: synthetic-train (prm_v2 train, 6 traces per
generator, the generators' labels) and mw-train (data/model-written/train,
the Monte-Carlo labels of data/verdict-signal/mc_labels.jsonl). Each train
set weighs the same, and within it the two classes (class-balanced). The
threshold a variant is reported at is its own, chosen on the two
validation sets (synthetic-val; mw-val with the hand labels): the one
maximising the mean of their ProcessBench F1s. Figures (step AUROC, F1,
first flags at the labelled step) are `mc_step_labels.figures`'; mw-val,
mw-test, mw-hard and mw-test-0.5b use the hand labels, as docs/TRAINING.md's tables do.

Variants:
  shipped       the head as shipped (threshold 0.603), and at the threshold
                fitted on both validation kinds;
  refit         the five weights and the bias refitted (logistic regression)
                on both train sets, then Platt-scaled on both validation sets;
  fluency       the shipped logit plus c * (mean token log-prob of the steps
                so far) + b, (c, b) on a grid maximising the train sets'
                mean F1 at the shipped threshold;
  hidden        the shipped logit plus a logistic probe over the first 32
                principal components of the hidden states (fitted on train).

usage (needs numpy; target/pyenv/bin/python has it):
  python scripts/eval/head_variants.py --write-inputs DIR
  for S in synthetic-train mw-train synthetic-val mw-val synthetic-test mw-test mw-hard mw-test-0.5b; do
    stepscore features --model qwen2.5-coder-1.5b --family value-head --confidence
      --out DIR/$S.feat.jsonl DIR/$S.in.jsonl; done
  (resumable: --out skips traces already written; ~40 min on 2 cores)
  python scripts/eval/head_variants.py --features DIR
"""
import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "train"))  # head_file
from head_file import read_head_file  # noqa: E402
from mc_step_labels import figures, labelled  # noqa: E402
from results_table import STAT_VALUE  # noqa: E402
from verdict_signal import key, load_set  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
HEAD = ROOT / "models/qwen2.5-coder-1.5b-digit-head.safetensors"
LABELS = ROOT / "data/verdict-signal"
TRAIN = ["synthetic-train", "mw-train"]
VAL = ["synthetic-val", "mw-val"]
TEST = ["synthetic-test", "mw-test", "mw-hard", "mw-test-0.5b"]
SETS = TRAIN + VAL + TEST
# mw-test as docs/TRAINING.md reports it: the first 2 problems of each generator.
PER_GENERATOR = {"mw-test": 2}
THRESHOLDS = np.round(np.arange(0.30, 0.951, 0.01), 2)


def write_inputs(out):
    out.mkdir(parents=True, exist_ok=True)
    for name in SETS:
        with open(out / f"{name}.in.jsonl", "w") as f:
            for r in load_set(name, PER_GENERATOR.get(name)):
                f.write(json.dumps({"id": key(r), "problem": r["problem"], "steps": r["steps"]}) + "\n")
        print(f"wrote {out / (name + '.in.jsonl')}")


def labelled_rows(name, features):
    """Solutions of `name` with a label (right, or wrong with a first bad
    step), each with its per-step inputs: `stats` (statistic name -> values),
    `lp` (mean token log-prob of the steps so far) and `hidden`."""
    feats = {}
    with open(features / f"{name}.feat.jsonl") as f:
        for line in f:
            r = json.loads(line)
            feats[r["id"]] = r
    out, missing = [], 0
    for r, first_bad in labelled(LABELS, name, hand=name != "mw-train", per_generator=PER_GENERATOR.get(name)):
        k = key(r)
        if k not in feats:
            missing += 1
            continue
        f = feats[k]
        tokens = np.cumsum([c["tokens"] for c in f["confidence"]])
        lp_sum = np.cumsum([c["mean_logprob"] * c["tokens"] for c in f["confidence"]])
        out.append({
            "generator": r["generator"], "first_bad": first_bad,
            "stats": {s: np.array([v(c, d) for c, d in zip(f["confidence"], f["digit_confidence"])])
                      for s, v in STAT_VALUE.items()},
            "lp": lp_sum / tokens, "hidden": np.array(f["features"], dtype=np.float64),
        })
    if not out:
        raise SystemExit(f"{features / (name + '.feat.jsonl')}: no labelled solution of {name}")
    if missing:
        # An interrupted extraction: the figures are over fewer solutions than the set has.
        print(f"{features / (name + '.feat.jsonl')}: {missing} labelled solutions of {name} have no "
              f"features (extract again to finish it); measured without them", file=sys.stderr)
    return out


def logistic(x, y, weight, offset=None, l2=1e-2):
    """Weighted logistic regression with an intercept (last column of x) and
    an optional fixed offset; Newton steps, L2 on all but the intercept."""
    offset = np.zeros(len(y)) if offset is None else offset
    w = np.zeros(x.shape[1])
    reg = np.r_[np.full(x.shape[1] - 1, l2), 0.0]
    for _ in range(200):
        p = 1 / (1 + np.exp(-np.clip(offset + x @ w, -50, 50)))
        grad = x.T @ (weight * (p - y)) + reg * w
        hess = (x * (weight * p * (1 - p))[:, None]).T @ x + np.diag(reg) + 1e-9 * np.eye(len(w))
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-10:
            break
    return w


def steps_of(rows):
    """Per labelled step (ProcessBench's: up to and including the first bad
    one), the row index, step index and label (1 = good)."""
    out = []
    for i, r in enumerate(rows):
        n = len(r["lp"]) if r["first_bad"] is None else r["first_bad"] + 1
        out += [(i, k, 0.0 if k == r["first_bad"] else 1.0) for k in range(n)]
    return out


def balanced(y):
    return np.where(y > 0, 0.5 / y.mean(), 0.5 / (1 - y.mean())) / len(y)


def head_logit(weights, bias, stats):
    """Per-step logits of a linear head over `stats`, for each row."""
    def logits(rows):
        return [sum(w * r["stats"][s] for s, w in zip(stats, weights)) + bias for r in rows]
    return logits


def scored(rows, logits):
    return [{"generator": r["generator"], "first_bad": r["first_bad"], "solution_score": None,
             "scores": list(1 / (1 + np.exp(-np.clip(z, -50, 50))))} for r, z in zip(rows, logits)]


def f1(rows, logits, t):
    return figures(scored(rows, logits), t, None)["steps_only"]["f1"]


def val_threshold(data, logits):
    """The threshold maximising the mean F1 of the validation sets."""
    means = [np.mean([f1(data[n], logits(data[n]), t) for n in VAL]) for t in THRESHOLDS]
    return float(THRESHOLDS[int(np.argmax(means))])


def read_linear_head():
    """The shipped head's weights, bias, statistics and threshold."""
    tensors, meta = read_head_file(HEAD)
    weights = tensors["v_head.summary.weight"].ravel().astype(np.float64)
    bias = float(tensors["v_head.summary.bias"][0])
    return weights, bias, meta["stepscore.step_stats"].split(","), float(meta["stepscore.threshold"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write-inputs", metavar="DIR", type=Path)
    ap.add_argument("--features", metavar="DIR", type=Path)
    args = ap.parse_args()
    if args.write_inputs:
        write_inputs(args.write_inputs)
        return
    if not args.features:
        ap.error("--write-inputs DIR or --features DIR")
    missing = [n for n in TEST if not (args.features / f"{n}.feat.jsonl").exists()]
    for n in missing:
        print(f"{args.features / (n + '.feat.jsonl')} not found: {n} left out", file=sys.stderr)
    sets = [n for n in SETS if n not in missing]
    data = {n: labelled_rows(n, args.features) for n in sets}
    weights, bias, stats, shipped_t = read_linear_head()
    base = head_logit(weights, bias, stats)
    variants = [("shipped", base, shipped_t)]
    variants.append(("shipped, threshold on both validation kinds", base, val_threshold(data, base)))

    # refit: the same statistics, weights from both train sets, Platt on both validation sets.
    def design(rows):
        return np.array([[rows[i]["stats"][s][k] for s in stats] + [1.0] for i, k, _ in steps_of(rows)])
    xs, ys, ws = [], [], []
    for n in TRAIN:
        st = steps_of(data[n])
        y = np.array([l for _, _, l in st])
        xs.append(design(data[n])), ys.append(y), ws.append(balanced(y))
    x, y_train, w_train = map(np.concatenate, (xs, ys, ws))
    mu, sd = x[:, :-1].mean(0), x[:, :-1].std(0) + 1e-9
    xz = np.hstack([(x[:, :-1] - mu) / sd, x[:, -1:]])
    w = logistic(xz, y_train, w_train)
    coef, b = w[:-1] / sd, w[-1] - (mu / sd) @ w[:-1]
    z_val = np.concatenate([design(data[n])[:, :-1] @ coef + b for n in VAL])
    y_val = np.concatenate([[l for _, _, l in steps_of(data[n])] for n in VAL])
    a, c = logistic(np.stack([z_val, np.ones_like(z_val)], 1), y_val, np.ones_like(y_val), l2=0.0)
    refit = head_logit(a * coef, a * b + c, stats)
    weights_text = ", ".join(f"{s} {w:.3f}" for s, w in zip(stats, a * coef))
    variants.append((f"refit on synthetic + model-written train ({weights_text}, bias {a * b + c:.3f})",
                     refit, val_threshold(data, refit)))

    # fluency: grid over (c, b) for the train sets' mean F1 at the shipped threshold.
    def fluency(c, b):
        return lambda rows: [z + c * r["lp"] + b for z, r in zip(base(rows), rows)]
    grid = [(np.mean([f1(data[n], fluency(c, b)(data[n]), shipped_t) for n in TRAIN]), c, b)
            for c in np.arange(-3.0, 0.01, 0.25) for b in np.arange(-4.0, 1.01, 0.25)]
    _, c_best, b_best = max(grid)
    variants.append((f"fluency offset c={c_best:.2f}, b={b_best:.2f}", fluency(c_best, b_best), shipped_t))

    # hidden: PCA-32 of the train steps' hidden states, the shipped logit as a fixed offset.
    h_train = np.concatenate([np.array([data[n][i]["hidden"][k] for i, k, _ in steps_of(data[n])]) for n in TRAIN])
    h_mu, h_sd = h_train.mean(0), h_train.std(0) + 1e-6
    basis = np.linalg.svd((h_train - h_mu) / h_sd, full_matrices=False)[2][:32].T
    def proj(h):
        return np.hstack([((h - h_mu) / h_sd) @ basis, np.ones((len(h), 1))])
    offset = np.concatenate([np.array([base([data[n][i]])[0][k] for i, k, _ in steps_of(data[n])]) for n in TRAIN])
    wh = logistic(proj(h_train), y_train, w_train, offset=offset, l2=1.0)
    hidden = lambda rows: [z + proj(r["hidden"]) @ wh for z, r in zip(base(rows), rows)]
    variants.append(("hidden-state probe (PCA-32) beside the statistics", hidden, val_threshold(data, hidden)))

    for name, logits, t in variants:
        print(f"\n{name} (threshold {t:.3f})")
        for n in sets:
            rows = data[n]
            parts = {"all": rows, "one-step": [r for r in rows if len(r["lp"]) == 1],
                     "multi-step": [r for r in rows if len(r["lp"]) > 1]}
            out = []
            for part, rs in parts.items():
                if not any(r["first_bad"] is not None for r in rs):
                    continue
                f = figures(scored(rs, logits(rs)), t, None)
                pb = f["steps_only"]
                out.append(f"{part} {f['step_auroc']}/{pb['f1']} (at {pb['first_flag_vs_first_bad']['at']}/{f['wrong']},"
                           f" right passed {pb['acc_right']})")
            print(f"  {n:16s} " + " | ".join(out))


if __name__ == "__main__":
    main()
