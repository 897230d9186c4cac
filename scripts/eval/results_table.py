#!/usr/bin/env python3
"""A PRM's results table: trained head vs the confidence family vs random
scores, on the held-out test generators.

Step scores come from `stepscore features` output (the engine's own hidden
states and step statistics; the trained head applied to a feature row
equals the scorer's step score, see crates/stepscore/tests/features_parity.rs
and head_kinds.rs). Every metric is computed by the stepscore CLI itself
(`eval`, `select`), so this script only applies the head, joins files and
formats the table. The trained head's F1 uses the threshold shipped in the
head file (`stepscore.threshold`, chosen on validation); the other scorers'
thresholds are calibrated on the validation split. Nothing is fitted on test.

usage: results_table.py --features DIR --head HEAD.safetensors --stepscore BIN
         [--data data/prm_v2_] [--backbone NAME]
  DIR holds val.jsonl, test.jsonl and bon8.jsonl (`stepscore features
  --confidence`, and `--layer L` when the head reads layer L).
"""
import argparse
import gzip
import json
import math
import random
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "train"))
from head_file import read_head_file  # noqa: E402


# Each step statistic by its head-file name, from a features row's
# `confidence` (c) and `digit_confidence` (d) entries (StepStat::value).
STAT_VALUE = {
    "log1p_tokens": lambda c, d: math.log1p(c["tokens"]),
    "mean_logprob": lambda c, d: c["mean_logprob"],
    "min_logprob": lambda c, d: c["min_logprob"],
    "mean_entropy": lambda c, d: c["mean_entropy"],
    "digit_log1p_tokens": lambda c, d: math.log1p(d["tokens"]),
    "digit_min_logprob": lambda c, d: d["min_logprob"],
    "digit_mean_logprob": lambda c, d: d["mean_logprob"],
    "plus_minus_min_logprob": lambda c, d: d.get("plus_minus_min_logprob", 0.0),
    "result_min_logprob": lambda c, d: d["arithmetic"]["result_min_logprob"],
    "operand_min_logprob": lambda c, d: d["arithmetic"]["operand_min_logprob"],
    "times_divide_min_logprob": lambda c, d: d["arithmetic"]["times_divide_min_logprob"],
    "operation_min_logprob": lambda c, d: d["operation_min_logprob"],
    "false_equation": lambda c, d: float(d["false_equations"] > 0),
}


def read_head(path):
    """The value head of a head file as a function of (hidden row, confidence,
    digit confidence) -> P(step correct), and the file's metadata."""
    tensors, meta = read_head_file(path)

    def tensor(name):
        return [float(x) for x in tensors[name].ravel()]

    stats = [x for x in meta.get("stepscore.step_stats", "").split(",") if x]
    if not stats and meta.get("stepscore.confidence_features") == "true":
        stats = ["log1p_tokens", "mean_logprob", "min_logprob", "mean_entropy"]
    stats_only = meta.get("stepscore.stats_only") == "true"
    def row(h, c, d):
        return ([] if stats_only else list(h)) + [STAT_VALUE[s](c, d) for s in stats]

    dot = lambda w, x: sum(a * b for a, b in zip(w, x))
    if "v_head.summary.weight" in tensors:
        w, b = tensor("v_head.summary.weight"), tensor("v_head.summary.bias")[0]
        head = lambda h, c, d: sigmoid(dot(w, row(h, c, d)) + b)
    else:
        w0, b0 = tensor("v_head.summary.0.weight"), tensor("v_head.summary.0.bias")
        w2, b2 = tensor("v_head.summary.2.weight"), tensor("v_head.summary.2.bias")[0]
        width = len(w0) // len(b0)

        def head(h, c, d):
            x = row(h, c, d)
            units = [max(0.0, dot(w0[k * width : (k + 1) * width], x) + b0[k]) for k in range(len(b0))]
            return sigmoid(dot(w2, units) + b2)

    return head, meta


def sigmoid(z):
    return 1 / (1 + math.exp(-z)) if z >= 0 else math.exp(z) / (1 + math.exp(z))


def read_jsonl(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def labelled_traces(path):
    """Each labelled trace of a features file, its label, and how many of its
    steps are labelled (ProcessBench's cut: through the first wrong one)."""
    for r in read_jsonl(path):
        label = r.get("label")
        if label is None:
            continue
        yield r, label, len(r["features"]) if label < 0 else min(len(r["features"]), label + 1)


def scorers(head, seed):
    rng = random.Random(seed)
    return {
        "trained head": head,
        "confidence": lambda h, c, d: math.exp(c["mean_logprob"]),
        "random": lambda h, c, d: rng.random(),
    }


def scored_rows(data, features, score):
    """ProcessBench rows with `scores`, for the traces that have features."""
    by_id = {r["id"]: r for r in data}
    out = []
    for feat in features:
        row = dict(by_id[feat["id"]])
        n = len(feat["features"])
        conf = feat.get("confidence") or [None] * n
        digits = feat.get("digit_confidence") or [None] * n
        row["steps"] = row["steps"][:n]
        row["scores"] = [score(h, c, d) for h, c, d in zip(feat["features"], conf, digits)]
        out.append(row)
    return out


def run(bin_, args, rows):
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
        name = f.name
    res = subprocess.run([bin_, *args, name, "--output", "jsonl"], capture_output=True, text=True)
    Path(name).unlink()
    if res.returncode != 0:
        sys.exit(f"stepscore {' '.join(args)} failed: {res.stderr}")
    return [json.loads(line) for line in res.stdout.splitlines() if line.strip()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--features", required=True)
    ap.add_argument("--head", required=True)
    ap.add_argument("--stepscore", required=True)
    ap.add_argument("--data", default="data/prm_v2_", help="path prefix of the val/test/test_bon8 splits")
    ap.add_argument("--backbone", default="", help="label for the table's rows")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--aggregation", default="min")
    a = ap.parse_args()
    fdir = Path(a.features)
    head, meta = read_head(a.head)
    data = {s: read_jsonl(ROOT / f"{a.data}{s}.jsonl.gz") for s in ["val", "test", "test_bon8"]}
    feats = {s: read_jsonl(fdir / f"{s}.jsonl") for s in ["val", "test", "bon8"]}
    shipped = meta.get("stepscore.threshold")
    results = []
    for name, score in scorers(head, a.seed).items():
        val = scored_rows(data["val"], feats["val"], score)
        test = scored_rows(data["test"], feats["test"], score)
        bon = scored_rows(data["test_bon8"], feats["bon8"], score)
        if name == "trained head" and shipped is not None:
            threshold, how = float(shipped), "shipped"
        else:
            threshold = run(a.stepscore, ["eval", "--calibrate"], val)[-1]["processbench"]["threshold"]
            how = "val"
        ev = run(a.stepscore, ["eval", "--threshold", str(threshold)], test)[-1]
        summary = run(a.stepscore, ["select", "--aggregation", a.aggregation], bon)[-1]
        results.append((name, threshold, how, ev, summary))
    n_steps = sum(len(f["features"]) for f in feats["test"])
    gens = len({f.get("generator") for f in feats["test"]})
    print(f"Test: {len(feats['test'])} traces ({n_steps} scored steps) from {gens} held-out generators; "
          f"best-of-8: {results[0][4]['groups']} groups. Head: {Path(a.head).name} "
          f"(validation step AUROC {meta.get('stepscore.val_step_auroc', 'n/a')}, validation ECE "
          f"{meta.get('stepscore.val_ece_before', 'n/a')} before / {meta.get('stepscore.val_ece_after', 'n/a')} "
          f"after calibration). Validation: {len(feats['val'])} traces.\n")
    print(f"| backbone | scores | step AUROC | ProcessBench F1 (threshold) | acc. erroneous | acc. correct "
          f"| ECE | best-of-8 ({a.aggregation}) | PRM-weighted vote | majority vote | oracle |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, threshold, how, ev, s in results:
        pb = ev["processbench"]["overall"]
        g = s["with_reference"]
        ece = ev.get("calibration") or {}
        ece = f"{ece['ece']:.3f}" if "ece" in ece else "n/a"
        print(f"| {a.backbone} | {name} | {ev['step_auroc']:.3f} | {pb['f1']:.3f} ({threshold:.3f} {how}) "
              f"| {pb['acc_erroneous']:.3f} | {pb['acc_correct']:.3f} | {ece} | {s['best_of_n_correct']}/{g} "
              f"| {s['weighted_correct']}/{g} | {s['majority_correct']}/{g} | {s['oracle_correct']}/{g} |")


if __name__ == "__main__":
    main()
