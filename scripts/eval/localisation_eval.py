#!/usr/bin/env python3
"""Where the default PRM's first flag falls on model-written solutions.

Data: the candidates `scripts/eval/search_eval.py` wrote (`data/search-eval/
{greedy,best-of-4}.candidates.jsonl`): solutions the default PRM's own
backbone (Qwen2.5-Coder-1.5B-Instruct) wrote to problems of the held-out test
generators of `data/prm_v2_test.jsonl.gz`, each with its step scores from
the default PRM and `correct` from the reference answer. Only whole
solutions are read (finalists that were not pruned); beam search's are left
out because its steps were scored while the beams were cut.

There are no human step labels. The label this report can trust is the
exact arithmetic check (`stepscore.check_arithmetic`: an equation whose
sides differ in rational arithmetic is wrong with certainty), so for a wrong
solution with an arithmetic slip the first slipping step stands in for the
first error; a wrong solution without one has an error the checker cannot
see (a plan, reading or setup error). Reported:

- solution level: AUROC of the minimum step score for right against wrong
  solutions (the probability that a random right solution scores above a
  random wrong one, ties counting one half), and how many of each the
  shipped threshold flags (any step below it);
- localisation, wrong solutions with a slip: the PRM's first flag before,
  at or after the first slipping step, or no flag;
- wrong solutions without a slip: flagged or not;
- the PRM and the check together (flag when either does).

Another head is evaluated on the same solutions without a model run per
head: `--write-input F` writes them as `stepscore features` input (ids
`config/problem/candidate`), then `--features FEATURES --head HEAD` reads
that extraction (`stepscore features --confidence`) and applies the head
file's value head (scripts/eval/results_table.py's reader) in place of the stored
scores, with the head's shipped threshold unless `--threshold` is given.

Usage: python3 scripts/eval/localisation_eval.py [--threshold T] [--json]
         [--write-input F | --features F --head H]
(needs the `stepscore` Python package for the arithmetic check).
"""

import argparse
import json
from pathlib import Path

import stepscore
from results_table import read_head
from auroc import auroc

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = 0.602855  # stepscore.threshold of models/qwen2.5-coder-1.5b-digit-head.safetensors


def solutions(out_dir):
    """(config, problem id, steps, step scores, correct) of every whole solution."""
    for config in ["greedy", "best-of-4"]:
        path = Path(out_dir) / f"{config}.candidates.jsonl"
        if not path.exists():
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            for c in row.get("candidates", []):
                if c.get("pruned") or not c.get("finalist", True):
                    continue
                if c.get("correct") is None or len(c["scores"]) != len(c["steps"]):
                    continue
                yield config, f'{config}/{row.get("id")}/{c["index"]}', row["problem"], c["steps"], c["scores"], bool(c["correct"])


def head_scores(features_path, head_path):
    """Step scores of `head_path` from a features extraction, by id; and the head's threshold."""
    head, meta = read_head(head_path)
    out = {}
    for line in Path(features_path).read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        rows = r["features"]
        out[r["id"]] = [head(rows[k], r["confidence"][k], r["digit_confidence"][k]) for k in range(len(rows))]
    threshold = meta.get("stepscore.threshold")
    return out, float(threshold) if threshold is not None else None


def first_slip(steps):
    for k, step in enumerate(steps):
        if any(e["holds"] is False for e in stepscore.check_arithmetic(step)):
            return k
    return None


def first_flag(scores, threshold):
    return next((k for k, s in enumerate(scores) if s < threshold), None)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "data" / "search-eval"))
    ap.add_argument("--threshold", type=float, default=None)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--write-input", help="write the solutions as `stepscore features` input and stop")
    ap.add_argument("--features", help="a `stepscore features --confidence` extraction of --write-input's file")
    ap.add_argument("--head", help="the head file to apply to --features")
    args = ap.parse_args()
    if args.write_input:
        with open(args.write_input, "w", encoding="utf-8") as f:
            for config, sid, problem, steps, _, correct in solutions(args.out):
                f.write(json.dumps({"id": sid, "problem": problem, "steps": steps}) + "\n")
        return
    if bool(args.features) != bool(args.head):
        ap.error("--features and --head go together")
    rescored, head_threshold = head_scores(args.features, args.head) if args.head else (None, None)
    t = args.threshold if args.threshold is not None else head_threshold if args.head else SHIPPED
    if t is None:
        ap.error(f"{args.head} ships no threshold: give --threshold")
    right, wrong = [], []
    for config, sid, problem, steps, scores, correct in solutions(args.out):
        if rescored is not None:
            if sid not in rescored:
                raise SystemExit(f"{args.features}: no row for solution {sid} (extract --write-input's file whole)")
            scores = rescored[sid]
        (right if correct else wrong).append((steps, scores))
    loc = {"before": 0, "at": 0, "after": 0, "none": 0}
    plain = {"flagged": 0, "missed": 0}
    slips_in_right = 0
    for steps, scores in wrong:
        slip, flag = first_slip(steps), first_flag(scores, t)
        if slip is None:
            plain["flagged" if flag is not None else "missed"] += 1
        elif flag is None:
            loc["none"] += 1
        else:
            loc["before" if flag < slip else "at" if flag == slip else "after"] += 1
    for steps, _ in right:
        slips_in_right += first_slip(steps) is not None
    report = {
        "threshold": t,
        "right_solutions": len(right),
        "wrong_solutions": len(wrong),
        "solution_auroc_min_score": auroc([min(s) for _, s in right], [min(s) for _, s in wrong]),
        "right_flagged": sum(first_flag(s, t) is not None for _, s in right),
        "wrong_flagged": sum(first_flag(s, t) is not None for _, s in wrong),
        "right_with_a_slip": slips_in_right,
        "wrong_with_a_slip": sum(loc.values()),
        "first_flag_vs_first_slip": loc,
        "wrong_without_a_slip": plain,
        # The two signals together: a solution is flagged when a step scores
        # below the threshold or writes an equation that does not hold.
        "either_flags_wrong": sum(
            first_flag(sc, t) is not None or first_slip(st) is not None for st, sc in wrong
        ),
        "either_flags_right": sum(
            first_flag(sc, t) is not None or first_slip(st) is not None for st, sc in right
        ),
        "steps_per_solution": sum(len(s) for s, _ in right + wrong) / max(1, len(right) + len(wrong)),
    }
    if args.json:
        print(json.dumps(report, indent=1))
        return
    a = report["solution_auroc_min_score"]
    print(f"{len(right)} right and {len(wrong)} wrong whole solutions (greedy + best-of-4), "
          f"{report['steps_per_solution']:.1f} steps each; threshold {t}")
    print(f"solution AUROC of the minimum step score: {a:.3f}" if a is not None else "solution AUROC: n/a")
    print(f"flagged: {report['wrong_flagged']} of {len(wrong)} wrong, {report['right_flagged']} of {len(right)} right")
    print(f"wrong with an arithmetic slip: {report['wrong_with_a_slip']} (right with one: {slips_in_right})")
    print("  first flag vs first slip: " + ", ".join(f"{k} {v}" for k, v in loc.items()))
    print(f"wrong without a slip: {sum(plain.values())}: flagged {plain['flagged']}, missed {plain['missed']}")
    print(f"PRM or arithmetic check: flags {report['either_flags_wrong']} of {len(wrong)} wrong, "
          f"{report['either_flags_right']} of {len(right)} right")


if __name__ == "__main__":
    main()
