#!/usr/bin/env python3
"""Best-of-N again with another verifier, on the candidates a search run already wrote.

Best-of-N's candidates do not depend on the verifier (they are sampled before it
scores them), so a new head is compared on the same candidates by scoring them
again: `stepscore score` (the default PRM unless --model/--head say otherwise)
and `stepscore select` (best score, majority and PRM-weighted vote; min
aggregation, as `search_eval.py` runs them). Input: a `*.candidates.jsonl` of
scripts/eval/search_eval.py. `--stored` selects with the scores stored in that file
instead, which must reproduce the run's own choices (a check of this script).
Beam search and DVTS prune by the verifier during generation and need a new run.

  rescore_search.py --candidates data/search-eval/best-of-8.candidates.jsonl --stepscore target/release/stepscore --work DIR
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path


def rows(candidates_path, stored):
    for line in open(candidates_path, encoding="utf-8"):
        r = json.loads(line)
        for c in r["candidates"]:
            steps = ([{"text": t, "score": s} for t, s in zip(c["steps"], c["scores"])] if stored
                     else c["steps"])
            yield {"id": f"{r['id']}#{c['index']}", "group": r["id"], "problem": r["problem"],
                   "final_answer": c["answer"], "reference_answer": r["reference"], "steps": steps}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--candidates", required=True)
    ap.add_argument("--stepscore", default="stepscore")
    ap.add_argument("--work", required=True, help="directory for the rows and the scored output")
    ap.add_argument("--model")
    ap.add_argument("--head")
    ap.add_argument("--threads", type=int, help="the engine's threads (default: stepscore's)")
    ap.add_argument("--stored", action="store_true", help="select with the stored scores (a check)")
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    name = Path(args.candidates).name.replace(".candidates.jsonl", "")
    src = work / f"{name}.rows.jsonl"
    with open(src, "w", encoding="utf-8") as f:
        for r in rows(args.candidates, args.stored):
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    scored = src
    if not args.stored:
        scored = work / f"{name}.scored.jsonl"
        extra = ((["--model", args.model] if args.model else []) + (["--head", args.head] if args.head else [])
                 + (["--threads", str(args.threads)] if args.threads else []))
        with open(scored, "w", encoding="utf-8") as out:
            subprocess.run([args.stepscore, "score", str(src), "--output", "jsonl", *extra], stdout=out, check=True)
    res = subprocess.run([args.stepscore, "select", str(scored), "--output", "jsonl"],
                         capture_output=True, text=True, check=True)
    groups = [json.loads(line) for line in res.stdout.splitlines() if line.strip()]
    groups = [g for g in groups if g.get("kind") == "group"]
    if not groups:
        sys.exit("stepscore select wrote no group")
    n = len(groups)
    for key in ("best_of_n", "majority", "weighted"):
        hits = sum(bool(g["correct"][key]) for g in groups)
        print(f"{name}: {key} {hits}/{n} = {hits / n:.3f}")
    stored = {json.loads(line)["id"]: json.loads(line) for line in open(args.candidates, encoding="utf-8")}
    oracle = sum(any(c["correct"] for c in stored[g["group"]]["candidates"]) for g in groups)
    print(f"{name}: oracle {oracle}/{n} = {oracle / n:.3f}")


if __name__ == "__main__":
    main()
