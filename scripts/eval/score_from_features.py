#!/usr/bin/env python3
"""Scores traces with a value-head file from cached `stepscore features` output.

A forward pass of the 1.5B costs ~10 hours over ProcessBench on 2 cores; the
features of every layer a head might read are extracted once
(scripts/data/extract_features.py), and each head is then applied here the
way the engine applies it (prm/head.rs): the rows of the head's layers
(`stepscore.layer`) joined with its step statistics (`stepscore.step_stats`,
StepStat::value's definitions), f64 dot products, sigmoid; with a guard
(`stepscore.min_with`, a built-in stats-only head from crates/stepscore/models/,
and `stepscore.min_power` p) the score is min(guard's, own ** p). The output is the
input rows with `scores`, for `stepscore eval --threshold T` (T: the head's
`stepscore.threshold`, printed on stderr). `--check` compares the scores with
a `stepscore score` output of the same rows (they agree within 1e-6: both
read the same f32 rows and sum in f64).

  score_from_features.py --head H.safetensors --features 'DIR/*.jsonl' --rows PB.jsonl > scored.jsonl
"""
import argparse
import base64
import glob
import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "train"))
from head_file import read_head_file  # noqa: E402


def read_head(path):
    """A head file's tensors (f64 arrays) and metadata."""
    tensors, meta = read_head_file(path)
    return {k: v.astype(np.float64) for k, v in tensors.items()}, meta


MODELS = Path(__file__).resolve().parents[2] / "crates" / "stepscore" / "models"


def stat_value(name, c, d):
    """StepStat::value (crates/stepscore/src/prm/head.rs), as f32."""
    a = d.get("arithmetic") or {}
    v = {
        "log1p_tokens": lambda: math.log1p(c["tokens"]),
        "mean_logprob": lambda: c["mean_logprob"],
        "min_logprob": lambda: c["min_logprob"],
        "mean_entropy": lambda: c["mean_entropy"],
        "digit_log1p_tokens": lambda: math.log1p(d["tokens"]),
        "digit_min_logprob": lambda: d["min_logprob"],
        "digit_mean_logprob": lambda: d["mean_logprob"],
        "plus_minus_min_logprob": lambda: d["plus_minus_min_logprob"],
        "result_min_logprob": lambda: a.get("result_min_logprob", 0.0),
        "operand_min_logprob": lambda: a.get("operand_min_logprob", 0.0),
        "times_divide_min_logprob": lambda: a.get("times_divide_min_logprob", 0.0),
        "operation_min_logprob": lambda: d.get("operation_min_logprob") or 0.0,
        "false_equation": lambda: 1.0 if (d.get("false_equations") or 0) > 0 else 0.0,
    }[name]()
    return float(np.float32(v))


def head_scorer(path, file_layers=None):
    """The head file at `path` as the engine applies it: (score(record, k), metadata).

    score(record, k) is step k's probability from a `stepscore features` record
    (base64 or JSON rows; `file_layers` for records that do not name their layers)."""
    t, meta = read_head(path)
    layers = [int(x) for x in meta["stepscore.layer"].split(",")] if "stepscore.layer" in meta else None
    stats = [s for s in meta.get("stepscore.step_stats", "").split(",") if s]
    stats_only = meta.get("stepscore.stats_only") == "true"
    if "v_head.summary.weight" in t:
        w0, b0, out = t["v_head.summary.weight"], t["v_head.summary.bias"], None
    else:
        w0, b0 = t["v_head.summary.0.weight"], t["v_head.summary.0.bias"]
        out = (t["v_head.summary.2.weight"][0], t["v_head.summary.2.bias"][0])
    guard = None
    if "stepscore.min_with" in meta:
        gt, gmeta = read_head(MODELS / meta["stepscore.min_with"])
        if gmeta.get("stepscore.stats_only") != "true" or "v_head.summary.weight" not in gt:
            sys.exit(f"guard {meta['stepscore.min_with']}: not a linear head over statistics alone")
        gstats = [x for x in gmeta["stepscore.step_stats"].split(",") if x]
        guard = (gt["v_head.summary.weight"][0], gt["v_head.summary.bias"][0], gstats,
                 float(meta["stepscore.min_power"]))

    def score(r, k):
        x = []
        if not stats_only:
            held = r.get("layers") or file_layers
            if held is None:
                sys.exit(f"record {r.get('id')} names no `layers`; give --feature-layers")
            # `--encoding base64` rows or JSON ones
            b = r["features_b64"][k] if "features_b64" in r else r["features"][k]
            v = (np.frombuffer(base64.b64decode(b), dtype="<f4") if isinstance(b, str)
                 else np.array(b, dtype=np.float32)).astype(np.float64)
            h = v.size // len(held)
            for l in (layers or [held[-1]]):
                i = held.index(l)
                x.extend(v[i * h:(i + 1) * h])
        x.extend(stat_value(s, r["confidence"][k], r["digit_confidence"][k]) for s in stats)
        x = np.array(x)
        if out is None:
            z = float(w0[0] @ x + b0[0])
        else:
            z = float(np.maximum(w0 @ x + b0, 0.0) @ out[0] + out[1])
        p = 1 / (1 + math.exp(-z))
        if guard is not None:
            gw, gb, gstats, power = guard
            gx = np.array([stat_value(s, r["confidence"][k], r["digit_confidence"][k]) for s in gstats])
            p = min(1 / (1 + math.exp(-float(gw @ gx + gb))), p ** power)
        return p

    return score, meta


def steps_of(r):
    """How many steps a features record holds."""
    return len(r["features_b64"] if "features_b64" in r else r["features"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--head", required=True)
    ap.add_argument("--features", required=True, help="glob of features files")
    ap.add_argument("--rows", required=True, help="the traces the features were extracted from (JSONL)")
    ap.add_argument("--check", help="a `stepscore score` JSONL of the same rows to compare with")
    ap.add_argument("--feature-layers", help="the layers the rows hold, L,... (records written before "
                                             "they named their `layers`)")
    args = ap.parse_args()
    file_layers = [int(x) for x in args.feature_layers.split(",")] if args.feature_layers else None
    score, meta = head_scorer(args.head, file_layers)
    scores = {}
    for path in sorted(glob.glob(args.features)):
        if path.endswith(".in.jsonl"):
            continue
        for line in open(path, encoding="utf-8"):
            r = json.loads(line)
            rows = [score(r, k) for k in range(steps_of(r))]
            scores[r.get("id") or r["index"]] = (r["first_step"], rows)
    missing = 0
    for i, line in enumerate(open(args.rows, encoding="utf-8")):
        row = json.loads(line)
        key = row.get("id", i)
        if key not in scores:
            missing += 1
            continue
        first, s = scores[key]
        if first != 0 or len(s) != len(row["steps"]):
            sys.exit(f"{args.rows}:{i + 1}: the features cover steps {first}..{first + len(s)}, the row has {len(row['steps'])}")
        row["scores"] = s
        print(json.dumps(row, ensure_ascii=False))
    print(f"scored {len(scores)} traces; {missing} rows without features (not extracted yet); "
          f"the head's threshold: {meta.get('stepscore.threshold', 'none (0.5)')}", file=sys.stderr)
    if args.check:
        worst, n = 0.0, 0
        for line in open(args.check, encoding="utf-8"):
            r = json.loads(line)
            key = r.get("id")
            if key in scores:
                got = scores[key][1]
                want = [s["score"] for s in r["steps"]]
                for a, b in zip(got, want):
                    worst = max(worst, abs(a - b))
                    n += 1
        print(f"check: {n} step scores compared, max |difference| {worst:.2e}", file=sys.stderr)


if __name__ == "__main__":
    main()
