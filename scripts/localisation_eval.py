#!/usr/bin/env python3
"""Where the default PRM's first flag falls on model-written solutions.

Data: the candidates `scripts/search_eval.py` wrote (`data/search-eval/
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

Usage: python3 scripts/localisation_eval.py [--threshold T] [--json]
(needs the `stepscore` Python package for the arithmetic check).
"""

import argparse
import json
from pathlib import Path

import stepscore

ROOT = Path(__file__).resolve().parent.parent
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
                yield config, row.get("id"), c["steps"], c["scores"], bool(c["correct"])


def first_slip(steps):
    for k, step in enumerate(steps):
        if any(e["holds"] is False for e in stepscore.check_arithmetic(step)):
            return k
    return None


def first_flag(scores, threshold):
    return next((k for k, s in enumerate(scores) if s < threshold), None)


def auroc(pos, neg):
    if not pos or not neg:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "data" / "search-eval"))
    ap.add_argument("--threshold", type=float, default=SHIPPED)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    t = args.threshold
    right, wrong = [], []
    for config, pid, steps, scores, correct in solutions(args.out):
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
