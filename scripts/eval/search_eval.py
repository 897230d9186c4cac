#!/usr/bin/env python3
"""Search quality on held-out problems with known answers: accuracy of greedy
decoding, majority of N, PRM best-of-N, PRM-weighted vote, PRM beam search
and DVTS, each at the same token budget, with `stepscore search`.

Problems: data/prm_v2_test.jsonl.gz, the test split of the verifier's data,
whose 21 reasoning-gym / word-problem generators the default PRM's head never
saw in training or calibration (docs/TRAINING.md). `--per-generator K` takes
the first K distinct problems of each generator in file order (K=5: 105
problems), ordered round-robin over generators so a partial run covers all.
DVTS and best-of-8 run when asked (`--configs ... dvts-4x2 best-of-8`). Only the problem text and its reference answer are used.

Resumable: each configuration appends one JSON line per problem to
OUT/<config>.jsonl as it finishes (and the full `--keep-all` output, every
candidate with its answer checked, to OUT/<config>.candidates.jsonl); a rerun
skips the problems already there.
`--report` prints the table from what is there (and writes OUT/report.json).
`--split train|val` runs the same on the verifier's training or validation
generators instead: model-written solutions with checked answers to train
and calibrate on (issue 26), never to evaluate. `--split hard` runs it on
data/search-eval-hard/problems.jsonl (scripts/eval/hard_problems.py: reasoning-gym's
harder generators, held out like the test split).

    python3 scripts/eval/search_eval.py [--out data/search-eval] [--per-generator 5]
    python3 scripts/eval/search_eval.py --report
"""
import argparse
import gzip
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from auroc import auroc
from processbench_run import head_threshold

ROOT = Path(__file__).resolve().parents[2]

# name -> (N, `stepscore search` flags). A sampled configuration's per-problem
# budget is N x max_new_tokens, so the N = 4 ones compare at the same budget;
# greedy writes one solution. best-of-8 is issue 26's PRM-against-majority
# comparison on twice the candidates.
N = 4
MAX_NEW = 256  # the harder problems' solutions need more: --max-new-tokens
CONFIGS = {
    "greedy": (1, ["--method", "best-of-n", "--n", "1", "--temperature", "0"]),
    "best-of-4": (N, ["--method", "best-of-n", "--n", str(N)]),
    "beam-4x2": (N, ["--method", "beam", "--n", str(N), "--beam-width", "2"]),
    "dvts-4x2": (N, ["--method", "dvts", "--n", str(N), "--beam-width", "2"]),
    "best-of-8": (8, ["--method", "best-of-n", "--n", "8"]),
}


def problems(per_generator: int, split: str = "test") -> list[dict]:
    seen, count, out = set(), defaultdict(int), []
    source = (ROOT / "data/search-eval-hard/problems.jsonl" if split == "hard"
              else ROOT / f"data/prm_v2_{split}.jsonl.gz")
    with (open(source) if split == "hard" else gzip.open(source, "rt")) as f:
        for line in f:
            r = json.loads(line)
            g = r["generator"]
            if r["problem"] in seen or count[g] >= per_generator:
                continue
            seen.add(r["problem"])
            count[g] += 1
            out.append({"id": f"{g}/{count[g]}", "generator": g, "problem": r["problem"],
                        "reference_answer": r["reference_answer"], "k": count[g]})
    # Round-robin over generators, so a partial run covers every generator.
    out.sort(key=lambda r: r.pop("k"))
    return out


def done_ids(path: Path) -> set[str]:
    if not path.exists():
        return set()
    ids = set()
    for line in path.read_text().splitlines():
        try:
            ids.add(json.loads(line)["id"])
        except (json.JSONDecodeError, KeyError):
            pass  # a line cut by an interrupted run: that problem runs again
    return ids


def run(args, rows: list[dict]) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    # Every configuration gets through one round of generators before the
    # next round starts, so an interrupted run compares them on the same problems.
    rounds = 21
    for start in range(0, len(rows), rounds):
        for name in args.configs:
            run_config(args, name, rows[start:start + rounds])


def run_config(args, name: str, rows: list[dict]) -> None:
    path = args.out / f"{name}.jsonl"
    todo = [r for r in rows if r["id"] not in done_ids(path)]
    print(f"search_eval: {name}: {len(rows) - len(todo)} done, {len(todo)} to go", file=sys.stderr)
    if not todo:
        return
    cmd = [str(args.cli), "search", "--backend", "cpu", "--threads", str(args.threads),
           "--max-new-tokens", str(args.max_new_tokens), "--seed", "1", "--keep-all", *CONFIGS[name][1]]
    if name != "greedy":
        cmd += ["--token-budget", str(CONFIGS[name][0] * args.max_new_tokens)]
        if args.temperature is not None:
            cmd += ["--temperature", str(args.temperature)]
    if args.model:
        cmd += ["--model", args.model]
    if args.generator:
        cmd += ["--generator", args.generator]
    feed = "".join(json.dumps(r) + "\n" for r in todo)
    # Every candidate with its answer checked: data for training the verifier.
    with open(path, "a") as out, open(args.out / f"{name}.candidates.jsonl", "a") as full:
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        proc.stdin.write(feed)
        proc.stdin.close()
        for line in proc.stdout:
            row = json.loads(line)
            full.write(line)
            full.flush()
            # Keep what the table needs, not every candidate's text.
            keep = {k: row[k] for k in ("id", "reference", "answer", "correct", "choices",
                                        "tokens_generated", "tokens_scored", "budget_exhausted")}
            keep["finalist_correct"] = [c.get("correct") for c in row["candidates"] if c["finalist"]]
            out.write(json.dumps(keep) + "\n")
            out.flush()
        if proc.wait() != 0:
            sys.exit(f"search_eval: {name}: stepscore exited with {proc.returncode}")


def report(args, rows: list[dict]) -> None:
    gen_of = {r["id"]: r["generator"] for r in rows}
    # Compare the configurations on the problems every one of them has done.
    present = [args.out / f"{n}.jsonl" for n in CONFIGS if (args.out / f"{n}.jsonl").exists()]
    for path in present:
        gen_of = {i: g for i, g in gen_of.items() if i in done_ids(path)}
    table, by_gen = {}, defaultdict(dict)
    for name in CONFIGS:
        path = args.out / f"{name}.jsonl"
        if not path.exists():
            continue
        results = [json.loads(l) for l in path.read_text().splitlines() if l.strip()]
        results = [r for r in results if r["id"] in gen_of]
        if not results:
            continue
        choices = ["best"] if name == "greedy" else ["best", "majority", "weighted"]
        entry = {"problems": len(results),
                 "tokens_per_problem": sum(r["tokens_generated"] for r in results) / len(results)}
        for c in choices:
            ok = [bool((r["choices"].get(c) or {}).get("correct")) for r in results]
            entry[c] = sum(ok) / len(ok)
        entry["oracle"] = sum(any(r["finalist_correct"]) for r in results) / len(results)
        table[name] = entry
        kinds = defaultdict(list)
        for r in results:
            g = gen_of[r["id"]]
            kinds["gsm_symbolic" if g.startswith("gsm_symbolic") else g].append(r)
        for kind, rs in kinds.items():
            by_gen[kind][name] = {c: sum(bool((r["choices"].get(c) or {}).get("correct")) for r in rs) / len(rs)
                                  for c in choices}
            by_gen[kind][name]["n"] = len(rs)
    print(f"{'config':<10} {'problems':>8} {'tokens':>7} {'PRM best':>8} {'majority':>8} {'weighted':>8} {'oracle':>7}")
    for name, e in table.items():
        f = lambda k: f"{e[k]:.3f}" if k in e else "-"
        print(f"{name:<10} {e['problems']:>8} {e['tokens_per_problem']:>7.0f} {f('best'):>8} {f('majority'):>8} "
              f"{f('weighted'):>8} {f('oracle'):>7}")
    print()
    for kind in sorted(by_gen):
        cells = "  ".join(f"{n}: " + "/".join(f"{v:.2f}" for k, v in d.items() if k != "n") + f" (n={d['n']})"
                          for n, d in by_gen[kind].items())
        print(f"{kind:<18} {cells}")
    verifier = {name: verifier_figures(args.out / f"{name}.candidates.jsonl", gen_of, args.threshold)
                for name in CONFIGS if (args.out / f"{name}.candidates.jsonl").exists()}
    for name, v in verifier.items():
        if v:
            print(f"\n{name}: the verifier on every candidate solution ({v['solutions']}: {v['right']} right, "
                  f"{v['wrong']} wrong by the answer check): solution AUROC of the trace score "
                  f"{v['auroc']:.3f}; at threshold {args.threshold}: wrong flagged {v['wrong_flagged']} of "
                  f"{v['wrong']}, right flagged {v['right_flagged']} of {v['right']}; median trace score "
                  f"right {v['median_right']:.3f}, wrong {v['median_wrong']:.3f}")
    (args.out / "report.json").write_text(
        json.dumps({"overall": table, "by_kind": by_gen, "verifier": verifier}, indent=1))


def verifier_figures(path: Path, gen_of: dict, threshold: float) -> dict:
    """The verifier's trace scores (its aggregation, `score`) against the answer check, over every
    candidate of the problems in `gen_of`: a solution is flagged when its score is below the
    threshold (for min aggregation: some step is)."""
    right, wrong = [], []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        if r.get("id") not in gen_of:
            continue
        for c in r.get("candidates", []):
            if c.get("score") is None or c.get("correct") is None:
                continue
            (right if c["correct"] else wrong).append(c["score"])
    if not right and not wrong:
        return {}
    med = lambda v: sorted(v)[len(v) // 2] if v else float("nan")
    return {"solutions": len(right) + len(wrong), "right": len(right), "wrong": len(wrong),
            "auroc": auroc(right, wrong), "threshold": threshold,
            "wrong_flagged": sum(s < threshold for s in wrong),
            "right_flagged": sum(s < threshold for s in right),
            "median_right": med(right), "median_wrong": med(wrong)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "data/search-eval")
    ap.add_argument("--per-generator", type=int, default=5)
    ap.add_argument("--max-new-tokens", type=int, default=MAX_NEW,
                    help="per solution; a sampled configuration gets its N times it as its budget")
    ap.add_argument("--split", choices=["train", "val", "test", "hard"], default="test",
                    help="whose problems: test evaluates; train/val write model-written training and "
                         "calibration data (solutions with checked answers, --keep-all), never evaluation")
    ap.add_argument("--configs", nargs="+", default=["greedy", "best-of-4", "beam-4x2"], choices=list(CONFIGS))
    ap.add_argument("--cli", type=Path, default=ROOT / "target/release/stepscore")
    ap.add_argument("--model", help="the verifier (default: the default PRM)")
    ap.add_argument("--generator", help="the generator (default: the verifier's own model)")
    ap.add_argument("--temperature", type=float,
                    help="the sampled configurations' temperature (default: `stepscore search`'s, 0.8); "
                         "give each temperature its own --out")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--limit", type=int, help="only the first LIMIT problems (a quick look)")
    ap.add_argument("--report", action="store_true")
    ap.add_argument("--threshold", type=float,
                    default=head_threshold(ROOT / "models/qwen2.5-coder-1.5b-real-errors-head.safetensors"),
                    help="--report: the verifier's flag threshold (default: the one the default PRM's head "
                         "ships; 0.602855 for the arithmetic head it replaced)")
    args = ap.parse_args()
    rows = problems(args.per_generator, args.split)[: args.limit]
    if args.report:
        report(args, rows)
    else:
        run(args, rows)


if __name__ == "__main__":
    main()
