#!/usr/bin/env python3
"""How sharply a PRM-weighted vote should trust the verifier, chosen on model-written
validation candidates and then read once on the held-out ones.

A weighted vote gives each distinct final answer the sum of its candidates' weights.
With weight = score (the core's `Selection::weighted`) the shipped head's
trace scores of 0.8-0.95 make it almost a majority vote; with weight = score^p a larger p
lets the verifier decide more (p = 0 is the majority vote, p -> infinity is best-of-N by
score). This script tallies, from the step scores a search run stored in its
`*.candidates.jsonl` (scripts/eval/search_eval.py), the accuracy of the vote for every
aggregation and every p of a fixed grid, over the finalists of each problem; each choice is
the core's own (`stepscore.select_best`, what `stepscore select` runs) on those weights.

The choice rule, fixed before any held-out figure is read: the (aggregation, p) with the
most right answers over all validation files pooled; ties go to min aggregation, then to
the p nearest 1 (the smallest change from the shipped vote). A second grid zeroes the score
of a step whose arithmetic the exact check finds false (the demo's verdict) before
aggregating; it is chosen only when it gets more right answers. The best variant replaces
the shipped vote only where it wins more problems than it loses from it by a one-sided sign
test at p < 0.1 (a margin of one or two problems in 80 is noise; this condition was added
after the first reading of the validation files, before any held-out one). `--apply AGG P ARITH`
prints only that variant and today's vote (min, p = 1) on other files: the held-out reading.

  vote_weights.py data/search-eval-val-real-head/t0.8/best-of-8.candidates.jsonl ...
  vote_weights.py --apply min 8 0 data/search-eval-real-head/best-of-8.candidates.jsonl
"""
import argparse
import gzip
import json
import math
from pathlib import Path

import stepscore

AGGREGATIONS = ["min", "prod", "last", "mean", "geomean"]
POWERS = [0, 1, 2, 4, 8, 16, 32, math.inf]  # 0: majority vote; inf: best-of-N by score


def problems(path: Path) -> list[list[dict]]:
    """Each problem's finalists: {answer, correct, scores}. Reads a search run's
    `*.candidates.jsonl`, or `stepscore score` output of candidates rescored by
    scripts/eval/rescore_search.py (gzipped or not; one row per candidate, grouped by `metadata.group`,
    right when its final answer equals the reference under the core's rule)."""
    out, groups = [], {}
    text = (gzip.decompress(path.read_bytes()).decode("utf-8") if path.suffix == ".gz"
            else path.read_text(encoding="utf-8"))
    for line in text.splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        if "candidates" in r:
            out.append([{"answer": c.get("answer"), "correct": bool(c.get("correct")), "scores": c.get("scores"),
                         "false_arith": false_arith(c.get("steps") or [])}
                        for c in r["candidates"] if c.get("finalist")])
            continue
        a, ref = r.get("final_answer"), r.get("reference_answer")
        groups.setdefault(r["metadata"]["group"], []).append(
            {"answer": a, "correct": a is not None and ref is not None and stepscore.answers_equal(a, ref),
             "scores": [s.get("score") for s in r["steps"]],
             "false_arith": false_arith([s.get("text", "") for s in r["steps"]])})
    return out + list(groups.values())


def false_arith(steps: list[str]) -> list[bool]:
    """Per step: whether it writes an equation that exact arithmetic finds false."""
    return [any(e["holds"] is False for e in stepscore.check_arithmetic(t)) for t in steps]


def score(c: dict, how: str, arith: bool = False):
    """The aggregate of a candidate's step scores, or None where the core gives it no usable one.
    `arith`: a step that writes an equation the exact check finds false (`stepscore.check_arithmetic`,
    the demo's "Wrong: exact arithmetic") scores 0."""
    s = c["scores"]
    if not s or any(x is None or not (0.0 <= x <= 1.0) for x in s):
        return None
    if arith:
        s = [0.0 if false else x for x, false in zip(s, c["false_arith"])]
    return stepscore.aggregate(s, how)


def choose(finalists: list[dict], how: str, p: float, arith: bool = False) -> bool:
    """Whether the vote with weight score^p (p = 0: majority, inf: best score) picks a right answer.
    The choice is the core's (`stepscore.select_best`), fed one weight per candidate: its best-of-N
    for p = inf, its majority (count ties broken by the plain scores) for p = 0, its weighted vote
    on score^p otherwise."""
    power = 1 if p in (0, math.inf) else p
    rows = []
    for c in finalists:
        s = score(c, how, arith)
        # One placeholder step carries the weight; no scores leaves the candidate unusable
        # (it still counts in the majority), as the core treats an unscored one.
        row = {"problem": "", "steps": ["weight"]}
        if s is not None:
            row["scores"] = [s ** power]
        if c["answer"] is not None:
            row["final_answer"] = c["answer"]
        rows.append(row)
    sel = stepscore.select_best(rows)
    if p == math.inf:
        return sel["best"] is not None and finalists[sel["best"]]["correct"]
    vote = sel["majority"] if p == 0 else sel["weighted"]
    return vote is not None and finalists[vote["members"][0]]["correct"]


def table(groups: list[list[dict]], variants) -> dict:
    """Right answers per variant (aggregation, p, arithmetic zeroes a step)."""
    return {v: sum(choose(f, *v) for f in groups) for v in variants}


def sign_test(groups: list[list[dict]], a, b) -> tuple[int, int, float]:
    """Problems variant `a` gets right and `b` wrong (won), the reverse (lost), and the one-sided
    sign test's p-value of so many wins among the problems where they differ."""
    won = lost = 0
    for f in groups:
        x, y = choose(f, *a), choose(f, *b)
        won += x and not y
        lost += y and not x
    n = won + lost
    return won, lost, sum(math.comb(n, k) for k in range(won, n + 1)) / 2 ** n if n else 1.0


def label(p: float) -> str:
    return "majority" if p == 0 else "best" if p == math.inf else f"p={p:g}"


def print_table(res: dict, arith: bool) -> None:
    print(f"  {'':8}" + "".join(f"{label(p):>9}" for p in POWERS)
          + ("   (a step whose arithmetic is false scores 0)" if arith else ""))
    for how in AGGREGATIONS:
        print(f"  {how:8}" + "".join(f"{res[(how, p, arith)]:>9}" for p in POWERS))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+", type=Path,
                    help="*.candidates.jsonl of search runs, or rescore_search.py's *.scored.jsonl")
    ap.add_argument("--apply", nargs=3, metavar=("AGG", "P", "ARITH"),
                    help="read only this variant (ARITH: 0 or 1) and today's vote")
    args = ap.parse_args()
    per_file = {f: problems(f) for f in args.files}
    if args.apply:
        chosen = (args.apply[0], float(args.apply[1]), args.apply[2] == "1")
        for f, groups in per_file.items():
            res = table(groups, [("min", 0, False), ("min", 1, False), chosen])
            n = len(groups)
            print(f"{f}: {n} problems: majority {res[('min', 0, False)]} ({res[('min', 0, False)] / n:.3f}), "
                  f"weighted (min, p=1) {res[('min', 1, False)]} ({res[('min', 1, False)] / n:.3f}), "
                  f"{chosen[0]} {label(chosen[1])}{' arithmetic' if chosen[2] else ''} {res[chosen]} "
                  f"({res[chosen] / n:.3f})")
        return
    variants = [(how, p, arith) for arith in (False, True) for how in AGGREGATIONS for p in POWERS]
    pooled = dict.fromkeys(variants, 0)
    total = 0
    for f, groups in per_file.items():
        res = table(groups, variants)
        total += len(groups)
        for k, v in res.items():
            pooled[k] += v
        print(f"{f}: {len(groups)} problems")
        for arith in (False, True):
            print_table(res, arith)
    print(f"pooled: {total} problems")
    for arith in (False, True):
        print_table(pooled, arith)
    # Voting variants only (p = 0 and inf are the majority and best-of-N themselves).
    votes = [v for v in variants if 0 < v[1] < math.inf]
    best = max(votes, key=lambda k: (pooled[k], not k[2], k[0] == "min", -abs(math.log(k[1]))))
    shipped = ("min", 1, False)
    won, lost, pval = sign_test([g for gs in per_file.values() for g in gs], best, shipped)
    print(f"best: {best[0]} {label(best[1])}{' arithmetic' if best[2] else ''}: {pooled[best]} of {total} "
          f"(weighted min p=1: {pooled[shipped]}, majority: {pooled[('min', 0, False)]}); against the "
          f"shipped vote {won} won, {lost} lost, one-sided sign test p = {pval:.3f}: "
          + ("replaces it" if best != shipped and pval < 0.1 else "the shipped vote stays"))


if __name__ == "__main__":
    main()
