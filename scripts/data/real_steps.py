#!/usr/bin/env python3
"""Train/validation files from the real step-labelled sets (issue 40).

Reads ../shared/data/real-steps (or --data DIR; scripts/data/fetch_real_steps.py
lays out the same files from their pinned sources) and writes, under --out:

  train.jsonl  every training problem's rows, in a weighted random order of
               problems (a problem's rows stay together), so that the first
               N problems of the file are a sample of the whole mix: feature
               extraction can stop anywhere and has a usable training set;
  val.jsonl    the validation problems' rows, in the same kind of order.

Validation is split by problem, never by trace (several traces share a
problem): a problem is in validation when sha256 of its normalised text
(lower case, whitespace collapsed) falls in the first VAL_SHARE of the hash
range; PRM800K's own test file (53 problems) is validation as a whole.
ProcessBench, the test set, takes no part in the splits; with --processbench
DIR its four files are also written as processbench.jsonl in a fixed order
(sha256 of each id), so that a features pass stopped early covers all four
splits alike; that pass is scored, never fitted on.

Mr-Ben's rows as stored hold one line per entry: a step is a "Step k:" line with
the lines under it, and `label` counts those steps (label L is the line
"Step L+1" and what follows it, up to the next step). Its lines are joined into
those steps here (the closing "Solution:" line stays with the last step); a
row whose lines do not read "Step 1", "Step 2", ... from its first line, or
whose labelled step is missing, is left out and counted. A first-error row
with a blank step is left out and counted as well: the label would have to be
moved.

Row formats are the readers' own (stepscore reads them natively): first-error
rows {problem, steps, label} as they are, with `set` added; PRM800K rows
{problem, prefix, step, rating} with `set`, ordered so that the rows sharing a
prefix follow each other and the one the labellers continued (`preferred`)
comes last; the next prefix then extends what the KV cache holds. Rows with a
null rating (steps a labeller wrote) carry no label and are left out.
"""
import argparse
import gzip
import hashlib
import json
import math
import os
import re
import sys

VAL_SHARE = 0.15
# Sampling weight of each set's problems in the file order: the sets closest
# to ProcessBench's (maths solutions) come first more often. Chosen before any
# measurement, for the extraction budget; every problem is still in the file.
WEIGHTS = {
    "prm800k": 2.0,
    "mathdial": 2.0,
    "mr-ben-math": 1.0,
    "mr-ben-science": 0.6,
    "mr-ben-other": 0.3,
    "big-bench-mistake": 0.3,
    "big-bench-mistake-dyck": 0.1,
}
FILES = {
    "prm800k": "prm800k-phase1-train.jsonl.gz",
    "prm800k-test": "prm800k-phase1-test.jsonl.gz",
    "mr-ben": "mr-ben.jsonl.gz",
    "big-bench-mistake": "big-bench-mistake.jsonl.gz",
    "mathdial": "mathdial.jsonl.gz",
}


def norm(text):
    return re.sub(r"\s+", " ", text.strip().lower())


def unit(text, salt=""):
    """A number in [0, 1) from the problem's normalised text."""
    h = hashlib.sha256((salt + norm(text)).encode()).hexdigest()
    return int(h[:15], 16) / 16**15


def weight_class(name, row):
    if name == "mr-ben":
        d = row.get("domain", "")
        if "math" in d:
            return "mr-ben-math"
        if "physics" in d or "chemistry" in d:
            return "mr-ben-science"
        return "mr-ben-other"
    if name == "big-bench-mistake" and row.get("domain") == "dyck_languages":
        return "big-bench-mistake-dyck"
    return name


def read(path):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            try:
                yield json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"{path}:{n}: not JSON: {e}")


STEP_HEAD = re.compile(r"\s*Step\s*(\d+)")


def mr_ben_steps(row):
    """The row's lines grouped into its numbered steps, or None."""
    groups = []
    for line in row["steps"]:
        m = STEP_HEAD.match(line)
        if m and int(m.group(1)) == len(groups) + 1:
            groups.append([line])
        elif groups:
            groups[-1].append(line)
        else:
            return None
    steps = ["\n".join(l for l in g if l.strip()).strip() for g in groups]
    if not steps or row["label"] >= len(steps):
        return None
    return steps


def prm800k_order(rows):
    """Rows sharing a prefix together, shorter prefixes first along each
    path, the continued (preferred) alternative last in its group."""
    return sorted(rows, key=lambda r: (r["prefix"], bool(r.get("preferred")), r["step"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--data", default=os.path.join(here, "..", "..", "..", "shared", "data", "real-steps"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--processbench", help="ProcessBench's dir (gsm8k.jsonl, ...): also write processbench.jsonl")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.processbench:
        rows = []
        for split in ("gsm8k", "math", "olympiadbench", "omnimath"):
            with open(os.path.join(args.processbench, f"{split}.jsonl"), encoding="utf-8") as f:
                rows.extend(json.loads(line) for line in f)
        rows.sort(key=lambda r: hashlib.sha256(r["id"].encode()).hexdigest())
        with open(os.path.join(args.out, "processbench.jsonl"), "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")

    # problem key -> (split, order key, rows)
    groups = {}
    left_out = {}
    for name, file in FILES.items():
        path = os.path.join(args.data, file)
        if not os.path.exists(path):
            sys.exit(f"{path}: missing (run scripts/data/fetch_real_steps.py, or pass --data)")
        for row in read(path):
            if "prefix" in row and row.get("rating") is None:
                continue
            if name == "mr-ben":
                steps = mr_ben_steps(row)
                if steps is None:
                    left_out[name] = left_out.get(name, 0) + 1
                    continue
                row["steps"] = steps
            if "steps" in row and any(not s.strip() for s in row["steps"]):
                left_out[name] = left_out.get(name, 0) + 1
                continue
            set_name = "prm800k" if name.startswith("prm800k") else name
            row["set"] = set_name
            key = (set_name, norm(row["problem"]))
            if key not in groups:
                split = "val" if name == "prm800k-test" or unit(row["problem"]) < VAL_SHARE else "train"
                w = WEIGHTS[weight_class(set_name, row)]
                # Weighted random order (Efraimidis-Spirakis): larger first.
                u = max(unit(row["problem"], salt="order:"), 1e-12)
                groups[key] = (split, math.log(u) / w, [])
            groups[key][2].append(row)

    counts = {}
    for split in ("train", "val"):
        chosen = sorted((g for g in groups.values() if g[0] == split), key=lambda g: -g[1])
        with open(os.path.join(args.out, f"{split}.jsonl"), "w", encoding="utf-8") as f:
            for _, _, rows in chosen:
                if "prefix" in rows[0]:
                    rows = prm800k_order(rows)
                    # Stable ids, so an extraction resumes by id whatever
                    # part of the file it was given.
                    h = hashlib.sha256(norm(rows[0]["problem"]).encode()).hexdigest()[:12]
                    for k, r in enumerate(rows):
                        r["id"] = f"prm800k:{h}:{k}"
                for r in rows:
                    f.write(json.dumps(r, ensure_ascii=False) + "\n")
                    c = counts.setdefault((split, r["set"]), [set(), 0])
                    c[0].add(norm(r["problem"]))
                    c[1] += 1
    for (split, s), (problems, rows) in sorted(counts.items()):
        print(f"{split:5} {s:20} {len(problems):6} problems {rows:7} rows", file=sys.stderr)
    for name, n in sorted(left_out.items()):
        print(f"left out: {name}: {n} rows (steps not in the documented layout)", file=sys.stderr)


if __name__ == "__main__":
    main()
