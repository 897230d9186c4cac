#!/usr/bin/env python3
"""Consistency of a step's numbers with the problem and earlier steps, as a
signal (issue 26): a step that uses a quantity found neither in the problem,
nor in an earlier step, nor among the step's own results is likely to have
misread the problem or invented a number. Model-free, text only.

For step k: its numbers are read (digits with an optional decimal part,
thousands commas removed; "$", "%" stripped); a number right after "=" (or
"is"/"are"/"gives" when the previous token closed an expression) is a
result of the step and is trusted; every other number is an input, and is
supported when it equals (as a rational, up to sign) a number of the
problem, of an earlier step or written earlier in this step, a small
constant that needs no source (0-10, 12, 24, 60, 100, 1000, 7, 30, 31, 365),
or (unless --direct) one operation (+ - x /) of two of those (a step may
compute in words: "5 items for each of 4 grandchildren, 20 items"). The signal is the count of
unsupported inputs.

`--report` prints, per set of scripts/eval/verdict_signal.py: step AUROC of
"-count" where step labels exist and the solution AUROC of "-max count".

usage: python3 scripts/eval/number_consistency.py [--set NAME ...]
"""
import argparse
import json
import re
import sys
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from verdict_signal import auroc, load_set  # noqa: E402

NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\w])")
FREE = {Fraction(n) for n in list(range(11)) + [12, 24, 30, 31, 60, 100, 1000, 7, 365]}
# What may stand between "=" and the number it introduces: spaces, signs,
# currency, LaTeX delimiters and line breaks.
RESULT_BEFORE = re.compile(r"(=|\\approx|≈)(\s|[-−$£€(){}\[\]\\]|\\\$)*$")


def numbers(text):
    """(value, is_result) of each number in the text, in order."""
    out = []
    for m in NUMBER.finditer(text):
        whole = m.group(1).replace(",", "")
        frac = m.group(2) or ""
        v = Fraction(whole + frac)
        before = text[max(0, m.start() - 16): m.start()]
        out.append((v, bool(RESULT_BEFORE.search(before))))
    return out


def derived(known):
    """Numbers one operation away from two known ones (or a known one and a
    free constant): a step may compute them in words, without an "="."""
    base = known | FREE
    out = set(base)
    for a in base:
        for b in base:
            out.update((a + b, a - b, b - a, a * b))
            if b:
                out.add(a / b)
    return out


def supported(v, reach):
    return v in reach or -v in reach


def step_counts(problem, steps, one_op=True):
    expand = derived if one_op else (lambda known: known | FREE)
    known = {v for v, _ in numbers(problem)}
    counts = []
    for step in steps:
        n = 0
        reach = expand(known)
        for v, is_result in numbers(step):
            if not is_result and v not in known and not supported(v, reach):
                n += 1
            if v not in known:
                known.add(v)
                reach = expand(known)
        counts.append(n)
    return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--direct", action="store_true",
                    help="support only numbers written before and the free constants, no one-operation closure")
    args = ap.parse_args()
    sets = args.set or ["synthetic-val", "synthetic-test", "mw-train", "mw-val", "mw-test"]
    res = {}
    for name in sets:
        recs = load_set(name)
        counts = [step_counts(r["problem"], r["steps"], not args.direct) for r in recs]
        row = {"solutions": len(recs)}
        if recs and recs[0]["first_wrong"] is not None:
            good, bad = [], []
            for r, c in zip(recs, counts):
                fw = r["first_wrong"]
                last = fw if fw >= 0 else len(c) - 1
                for k in range(last + 1):
                    (bad if k == fw else good).append(-c[k])
            row["step_auroc"] = auroc(good, bad)
            row["flag_rate_good"] = sum(x < 0 for x in good) / max(1, len(good))
            row["flag_rate_bad"] = sum(x < 0 for x in bad) / max(1, len(bad))
        right = [-max(c) for r, c in zip(recs, counts) if r["correct"]]
        wrong = [-max(c) for r, c in zip(recs, counts) if not r["correct"]]
        row["solution_auroc"] = auroc(right, wrong)
        row["flagged_right"] = sum(x < 0 for x in right)
        row["flagged_wrong"] = sum(x < 0 for x in wrong)
        row["right"], row["wrong"] = len(right), len(wrong)
        res[name] = row
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
