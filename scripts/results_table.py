#!/usr/bin/env python3
"""The default PRM's results table (issue 7): trained head vs the confidence
family vs random scores, on the held-out test generators.

Step scores come from `stepscore features` output (the engine's own hidden
states and confidence statistics; the trained head applied to a feature row
equals the scorer's step score, see crates/stepscore/tests/features_parity.rs).
Every metric is computed by the stepscore CLI itself (`eval`, `select`), so
this script only joins files and formats the table. Thresholds for F1 are
calibrated on the validation split and applied to the test split.

usage: results_table.py --features DIR --head HEAD.safetensors --stepscore BIN
  DIR holds val.jsonl, test.jsonl (with --confidence) and bon8.jsonl
  (with --confidence), made by scripts/train_default_head.sh.
"""
import argparse
import gzip
import json
import math
import random
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def read_head(path):
    """w, b of a value head from safetensors (f32)."""
    blob = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + n])
    data = blob[8 + n :]

    def tensor(name):
        info = header[name]
        assert info["dtype"] == "F32", info
        s, e = info["data_offsets"]
        return list(struct.unpack(f"<{(e - s) // 4}f", data[s:e]))

    return tensor("v_head.summary.weight"), tensor("v_head.summary.bias")[0], header.get("__metadata__", {})


def sigmoid(z):
    return 1 / (1 + math.exp(-z)) if z >= 0 else math.exp(z) / (1 + math.exp(z))


def read_jsonl(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def scorers(w, b, seed):
    rng = random.Random(seed)
    return {
        "trained head": lambda f, c: sigmoid(sum(x * y for x, y in zip(w, f)) + b),
        "confidence": lambda f, c: math.exp(c["mean_logprob"]),
        "random": lambda f, c: rng.random(),
    }


def scored_rows(data, features, score):
    """ProcessBench rows with `scores`, for the traces that have features."""
    by_id = {r["id"]: r for r in data}
    out = []
    for feat in features:
        row = dict(by_id[feat["id"]])
        n = len(feat["features"])
        conf = feat.get("confidence") or [None] * n
        row["steps"] = row["steps"][:n]
        row["scores"] = [score(f, c) for f, c in zip(feat["features"], conf)]
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
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--aggregation", default="min")
    a = ap.parse_args()
    fdir = Path(a.features)
    w, b, meta = read_head(a.head)
    data = {s: read_jsonl(ROOT / f"data/gsm_symbolic_{s}.jsonl.gz") for s in ["val", "test", "test_bon8"]}
    feats = {s: read_jsonl(fdir / f"{s}.jsonl") for s in ["val", "test", "bon8"]}
    results = []
    for name, score in scorers(w, b, a.seed).items():
        val = scored_rows(data["val"], feats["val"], score)
        test = scored_rows(data["test"], feats["test"], score)
        bon = scored_rows(data["test_bon8"], feats["bon8"], score)
        threshold = run(a.stepscore, ["eval", "--calibrate"], val)[-1]["processbench"]["threshold"]
        ev = run(a.stepscore, ["eval", "--threshold", str(threshold)], test)[-1]
        summary = run(a.stepscore, ["select", "--aggregation", a.aggregation], bon)[-1]
        results.append((name, threshold, ev, summary))
    n_steps = sum(len(f["features"]) for f in feats["test"])
    print(f"Test: {len(feats['test'])} traces ({n_steps} scored steps) from the held-out generators; "
          f"best-of-8: {results[0][3]['groups']} groups. Head: {Path(a.head).name} "
          f"(validation step AUROC {meta.get('stepscore.val_step_auroc', 'n/a')}). "
          f"F1 threshold calibrated on {len(feats['val'])} validation traces.\n")
    print(f"| scores | step AUROC | ProcessBench F1 (threshold) | acc. erroneous | acc. correct "
          f"| best-of-8 ({a.aggregation}) | PRM-weighted vote | majority vote | oracle |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, threshold, ev, s in results:
        pb = ev["processbench"]["overall"]
        g = s["with_reference"]
        print(f"| {name} | {ev['step_auroc']:.3f} | {pb['f1']:.3f} ({threshold:.3f}) | {pb['acc_erroneous']:.3f} "
              f"| {pb['acc_correct']:.3f} | {s['best_of_n_correct']}/{g} | {s['weighted_correct']}/{g} "
              f"| {s['majority_correct']}/{g} | {s['oracle_correct']}/{g} |")


if __name__ == "__main__":
    main()
