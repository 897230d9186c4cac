#!/usr/bin/env python3
"""The exact-arithmetic signal alone (stepscore.check_arithmetic: a step is
flagged when an equation it writes is false in exact rational arithmetic),
measured without any model:

1. On labelled traces (data/prm_v2_*.jsonl.gz; `label` = index of the first
   wrong step, -1 when every step is right; its generators per split are in
   data/README.md): per step up to and including the first wrong one,
   precision = P(the step is the first wrong one | flagged), recall =
   P(flagged | first wrong step), the flag rate on right steps; by error type.
   ProcessBench-style trace accuracy: the first flagged step is the label
   (-1 when nothing is flagged), on erroneous and on correct traces.
2. On model-written solutions with checked answers (the search evaluation's
   `--keep-all` output, data/search-eval/*.candidates.jsonl, written by the
   default PRM's Qwen2.5-Coder-1.5B): how often a flagged solution's answer
   is wrong, and how many wrong answers carry a flag.

Nothing is fitted: the signal has no parameters.

    python3 scripts/eval/recompute_eval.py [--json out.json]
"""
import argparse
import glob
import gzip
import json
from collections import defaultdict
from pathlib import Path

import stepscore

ROOT = Path(__file__).resolve().parents[2]


def flagged(step: str) -> bool:
    return any(not e["holds"] for e in stepscore.check_arithmetic(step))


def labelled(split: str) -> dict:
    counts = defaultdict(lambda: defaultdict(int))
    with gzip.open(ROOT / f"data/prm_v2_{split}.jsonl.gz", "rt") as f:
        for line in f:
            r = json.loads(line)
            label, steps = r["label"], r["steps"]
            kind = r.get("error_type") or "correct"
            flags = [flagged(s) for s in steps]
            first = next((i for i, x in enumerate(flags) if x), -1)
            c = counts["all"]
            for k in (c, counts[kind]):
                k["traces"] += 1
                k["trace_right"] += first == label
                k["erroneous"] += label >= 0
                k["erroneous_right"] += label >= 0 and first == label
                k["correct_right"] += label < 0 and first == -1
                for i, x in enumerate(flags[: (label + 1) if label >= 0 else len(steps)]):
                    bad = i == label
                    k["bad_steps"] += bad
                    k["good_steps"] += not bad
                    k["flag_bad"] += x and bad
                    k["flag_good"] += x and not bad
    out = {}
    for kind, k in counts.items():
        flags = k["flag_bad"] + k["flag_good"]
        correct = k["traces"] - k["erroneous"]
        out[kind] = {
            "traces": k["traces"],
            "precision": k["flag_bad"] / flags if flags else None,
            "recall": k["flag_bad"] / k["bad_steps"] if k["bad_steps"] else None,
            "flag_rate_on_right_steps": k["flag_good"] / k["good_steps"] if k["good_steps"] else None,
            "acc_erroneous": k["erroneous_right"] / k["erroneous"] if k["erroneous"] else None,
            "acc_correct": k["correct_right"] / correct if correct else None,
        }
    return out


def model_written() -> dict:
    seen, rows = set(), []
    for path in sorted(glob.glob(str(ROOT / "data/search-eval/*.candidates.jsonl"))):
        for line in open(path):
            r = json.loads(line)
            for c in r["candidates"]:
                key = (r["id"], c["text"])
                if c.get("correct") is None or key in seen or c.get("stop_reason") not in ("end-of-turn", "max-tokens", "step-end", "stop-string"):
                    continue
                seen.add(key)
                rows.append((bool(c["correct"]), any(flagged(s) for s in c["steps"])))
    wrong = [f for ok, f in rows if not ok]
    right = [f for ok, f in rows if ok]
    flagged_rows = [ok for ok, f in rows if f]
    return {
        "solutions": len(rows),
        "wrong_answers": len(wrong),
        "flagged": len(flagged_rows),
        "flagged_and_wrong": sum(not ok for ok in flagged_rows),
        "precision_wrong_answer": (sum(not ok for ok in flagged_rows) / len(flagged_rows)) if flagged_rows else None,
        "wrong_answers_flagged": (sum(wrong) / len(wrong)) if wrong else None,
        "right_answers_flagged": (sum(right) / len(right)) if right else None,
    }


def fmt(v):
    return "-" if v is None else f"{v:.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    report = {"labelled": {s: labelled(s) for s in ("train", "val", "test")}, "model_written": model_written()}
    for split, table in report["labelled"].items():
        print(f"prm_v2 {split}:")
        print(f"  {'kind':<22} {'traces':>6} {'prec':>6} {'recall':>6} {'flag@ok':>7} {'acc err':>7} {'acc ok':>6}")
        for kind, m in sorted(table.items(), key=lambda kv: (kv[0] != "all", kv[0])):
            print(f"  {kind:<22} {m['traces']:>6} {fmt(m['precision']):>6} {fmt(m['recall']):>6} "
                  f"{fmt(m['flag_rate_on_right_steps']):>7} {fmt(m['acc_erroneous']):>7} {fmt(m['acc_correct']):>6}")
    m = report["model_written"]
    print(f"model-written (search-eval candidates): {m['solutions']} solutions, {m['wrong_answers']} wrong answers; "
          f"{m['flagged']} flagged, of them {m['flagged_and_wrong']} wrong (precision {fmt(m['precision_wrong_answer'])}); "
          f"wrong answers flagged {fmt(m['wrong_answers_flagged'])}, right answers flagged {fmt(m['right_answers_flagged'])}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
