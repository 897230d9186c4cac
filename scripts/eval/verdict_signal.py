#!/usr/bin/env python3
"""The instruct model's own verdict on each step, as a signal (issue 26).

For step k of a solution the model (Qwen2.5-Coder-1.5B-Instruct, the default
PRM's backbone, same GGUF) reads the problem and steps 1..k in a user turn
that asks whether step k is correct, and the signal is
P(Yes) / (P(Yes) + P(No)) over the first token of its answer ("Yes"/"yes"
against "No"/"no"). The prompt's text before step 1 does not depend on k, so
one pass per solution suffices: the KV cache keeps the problem and the steps
and only the question after step k (~30 tokens) is evaluated and rolled back
for each k. The verdict for step k sees steps 1..k only, as a PRM's score does.

This is an experiment that measures the signal before the engine grows it:
it runs llama.cpp through llama-cpp-python (an independent implementation
of the same GGUF; LLAMA_VENV of scripts/bench/bench-vs-llama-cpp.sh), and caches
every verdict in OUT/verdicts.jsonl keyed by the solution's text, so a rerun
continues where it stopped.

Data (`--set`):
  synthetic-val / synthetic-test: the feature subsets of prm_v2 val/test
      (scripts/eval/prm_subsets.py), step labels from the generators;
  mw-train / mw-val: data/model-written/{train,val} whole solutions,
      answer labels only;
  mw-test: data/search-eval greedy + best-of-4 whole solutions (problems of
      the held-out test generators), answer labels only; `--per-generator K`
      keeps the first K problems of each generator;
  mw-hard: the same for data/search-eval-hard (reasoning-gym's harder
      generators, scripts/eval/hard_problems.py), held out as mw-test is;
  mw-test-0.5b: the same for data/search-eval-0.5b (mw-test's problems,
      solutions written by Qwen2.5-Coder-0.5B, another model than the PRM's).

`--report` prints, per set: step AUROC of the verdict where step labels
exist (steps up to and including the first wrong one), and the solution
AUROC (right above wrong) of the minimum verdict, of the default PRM's
minimum step score, and of their product.

usage: LLAMA_VENV/bin/python scripts/eval/verdict_signal.py --set mw-val [--limit N]
       python3 scripts/eval/verdict_signal.py --report
       LLAMA_VENV/bin/python scripts/eval/verdict_signal.py --reference GGUF > tests/fixtures/llama_cpp/verdict_NAME.json
           (the engine verdict test's reference: fixed cases, prompt tokenized whole)
"""
import argparse
import gzip
import hashlib
import json
import math
import sys
from pathlib import Path
from auroc import auroc

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "eval"))

MODEL = Path.home() / ".cache/stepscore/Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf"
SYSTEM = "You are a careful math teacher. You check students' solutions one step at a time."
HEAD = "Problem:\n{problem}\n\nThe student's solution so far:\n"
STEP = "\nStep {k}:\n{text}\n"
QUESTION = ("\nIs Step {k} correct, both its reasoning and its arithmetic, given the problem and the "
            "steps before it? Answer with Yes or No.")
APPENDED = ("<|im_end|>\n<|im_start|>user\nAbove is a problem and a solution to it. Is the solution correct, "
            "both its reasoning and its arithmetic? Answer with Yes or No.<|im_end|>\n<|im_start|>assistant\n")


def synthetic(split):
    """Feature-subset rows of prm_v2 (prm_subsets.py's selection) with step labels."""
    from prm_subsets import load, per_generator
    rows = per_generator(load(split), 6)
    for r in rows:
        label = r["label"]  # index of the first wrong step, -1 when none
        yield {"id": r["id"], "generator": r["generator"], "problem": r["problem"], "steps": r["steps"],
               "first_wrong": label, "correct": label == -1, "prm": None}


def model_written(paths, per_generator=None):
    seen = set()
    for path in paths:
        if not path.exists():
            continue
        config = path.name.split(".")[0]
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            if per_generator and int(str(row.get("id")).rsplit("/", 1)[-1]) > per_generator:
                continue
            for c in row.get("candidates", []):
                if c.get("pruned") or not c.get("finalist", True) or c.get("correct") is None:
                    continue
                if len(c["scores"]) != len(c["steps"]) or not c["steps"]:
                    continue
                key = (row["problem"], tuple(c["steps"]))
                if key in seen:
                    continue
                seen.add(key)
                yield {"id": f'{config}/{row.get("id")}/{c["index"]}', "generator": str(row.get("id")).split("/")[0],
                       "problem": row["problem"], "steps": c["steps"], "first_wrong": None,
                       "correct": bool(c["correct"]), "prm": c["scores"]}


# The held-out sets written by `search_eval.py` (greedy + best-of-4 solutions).
SEARCH_EVAL = {"mw-test": "data/search-eval", "mw-hard": "data/search-eval-hard",
               "mw-test-0.5b": "data/search-eval-0.5b"}


def candidates_files(name):
    """The candidates files a model-written set reads."""
    if name in SEARCH_EVAL:
        d = ROOT / SEARCH_EVAL[name]
        return [d / "greedy.candidates.jsonl", d / "best-of-4.candidates.jsonl"]
    return [ROOT / f"data/model-written/{name.split('-', 1)[1]}/best-of-4.candidates.jsonl"]


def load_set(name, per_generator=None):
    if name.startswith("synthetic-"):
        return list(synthetic(name.split("-", 1)[1]))
    return list(model_written(candidates_files(name), per_generator if name in SEARCH_EVAL else None))


def key(r):
    return hashlib.sha256(json.dumps([r["problem"], r["steps"]]).encode()).hexdigest()[:20]


# Fixed solutions for the engine's verdict test: right, wrong in the plan,
# wrong in the arithmetic, one step.
REFERENCE_CASES = [
    ("A lamp costs $40. During a sale everything is 20% off. How much do 5 of them cost during the sale?",
     ["The sale price of one lamp is 40 - 0.2 x 40 = 32 dollars.", "Five lamps cost 5 x 32 = 160 dollars.",
      "The answer is 160."]),
    ("A lamp costs $40. During a sale everything is 20% off. How much do 5 of them cost during the sale?",
     ["The discount on one lamp is 0.2 x 40 = 8 dollars.", "Five lamps cost 5 x 8 = 40 dollars.",
      "The answer is 40."]),
    ("Tom has 12 apples and gives away 5. How many are left?",
     ["12 - 5 = 8, so Tom has 8 apples left."]),
]


class Verdicts:
    def __init__(self, threads, model=MODEL):
        import numpy as np
        from llama_cpp import Llama
        self.np = np
        self.llm = Llama(model_path=str(model), n_ctx=4096, n_threads=threads, n_threads_batch=threads,
                         n_batch=512, logits_all=False, verbose=False)
        tok = lambda s: self.llm.tokenize(s.encode(), add_bos=False, special=True)
        self.tok = tok
        self.yes = [tok(w)[0] for w in ["Yes", "yes"]]
        self.no = [tok(w)[0] for w in ["No", "no"]]

    def logits(self):
        return self.np.ctypeslib.as_array(self.llm._ctx.get_logits(), shape=(self.llm._n_vocab,))

    def yes_share(self):
        z = self.logits().astype("float64")
        m = z.max()
        p_yes = sum(self.np.exp(z[i] - m) for i in self.yes)
        p_no = sum(self.np.exp(z[i] - m) for i in self.no)
        return float(p_yes / (p_yes + p_no))

    def appended(self, problem, steps):
        """One verdict on the whole solution, asked after the default PRM's
        own layout (value-head family: BOS + problem + "\n", each step + "\n"),
        so an engine could ask it on the scoring pass's KV cache (~40 tokens)."""
        llm, tok = self.llm, self.tok
        llm.reset()
        ids = tok(f"<|endoftext|>{problem}\n")
        for text in steps:
            ids += tok(text) + tok("\n")
        llm.eval(ids + tok(APPENDED))
        return [self.yes_share()]

    def whole(self, problem, steps):
        """The verdict on the last step with the prompt tokenized in one
        piece, as the engine does (`stepscore::prm::verdict`): the
        reference its tests compare with. Returns (P(Yes), tokens)."""
        user = HEAD.format(problem=problem)
        for k, text in enumerate(steps, start=1):
            user += STEP.format(k=k, text=text.strip())
        user += QUESTION.format(k=len(steps))
        text = (f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n"
                "<|im_start|>assistant\n")
        ids = self.tok(text)
        self.llm.reset()
        self.llm.eval(ids)
        return self.yes_share(), len(ids)

    def solution(self, problem, steps):
        llm, tok = self.llm, self.tok
        head = (f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n" + HEAD.format(problem=problem))
        llm.reset()
        llm.eval(tok(head))
        out = []
        for k, text in enumerate(steps, start=1):
            llm.eval(tok(STEP.format(k=k, text=text.strip())))
            mark = llm.n_tokens
            llm.eval(tok(QUESTION.format(k=k) + "<|im_end|>\n<|im_start|>assistant\n"))
            out.append(self.yes_share())
            llm.n_tokens = mark  # roll the question back; eval() drops the cache past n_tokens
        return out


def cache_path(out, prompt="per-step"):
    return Path(out) / ("verdicts.jsonl" if prompt == "per-step" else f"verdicts-{prompt}.jsonl")


def read_cache(out, prompt="per-step"):
    cache = {}
    p = cache_path(out, prompt)
    if p.exists():
        for line in p.read_text().splitlines():
            try:
                r = json.loads(line)
                cache[r["key"]] = r["verdicts"]
            except (json.JSONDecodeError, KeyError):
                pass  # a line cut by an interrupted run: recomputed
    return cache


def report(out):
    cache = read_cache(out)
    appended = read_cache(out, "appended")
    rows = {}
    for name in ["synthetic-val", "synthetic-test", "mw-train", "mw-val", "mw-test"]:
        recs = [(r, cache.get(key(r))) for r in load_set(name)]
        recs = [(r, v) for r, v in recs if v is not None]
        if not recs:
            continue
        res = {"solutions": len(recs), "right": sum(r["correct"] for r, _ in recs)}
        if recs[0][0]["first_wrong"] is not None:
            good, bad = [], []
            for r, v in recs:
                fw = r["first_wrong"]
                last = fw if fw >= 0 else len(v) - 1
                for k in range(last + 1):
                    (bad if k == fw else good).append(v[k])
            res["step_auroc"] = auroc(good, bad)
            res["steps"] = len(good) + len(bad)
        right = [min(v) for r, v in recs if r["correct"]]
        wrong = [min(v) for r, v in recs if not r["correct"]]
        res["solution_auroc_verdict"] = auroc(right, wrong)
        res["solution_auroc_last_verdict"] = auroc([v[-1] for r, v in recs if r["correct"]],
                                                   [v[-1] for r, v in recs if not r["correct"]])
        if recs[0][0]["prm"] is not None:
            res["solution_auroc_prm"] = auroc([min(r["prm"]) for r, v in recs if r["correct"]],
                                              [min(r["prm"]) for r, v in recs if not r["correct"]])
            comb = lambda r, v: min(p * q for p, q in zip(r["prm"], v))
            res["solution_auroc_product"] = auroc([comb(r, v) for r, v in recs if r["correct"]],
                                                  [comb(r, v) for r, v in recs if not r["correct"]])
            # The PRM's weakest step and the verdict on the last step (which
            # has read the whole solution), as equal-weight logits.
            lg = lambda p: math.log(max(p, 1e-9) / max(1 - p, 1e-9))
            both = lambda r, v: lg(min(r["prm"])) + lg(v[-1])
            res["solution_auroc_prm_plus_last"] = auroc([both(r, v) for r, v in recs if r["correct"]],
                                                        [both(r, v) for r, v in recs if not r["correct"]])
        both = [(r, v, appended[key(r)][0]) for r, v in recs if key(r) in appended]
        if both:
            res["appended_solutions"] = len(both)
            res["solution_auroc_appended"] = auroc([a for r, v, a in both if r["correct"]],
                                                   [a for r, v, a in both if not r["correct"]])
            res["solution_auroc_last_same_rows"] = auroc([v[-1] for r, v, a in both if r["correct"]],
                                                         [v[-1] for r, v, a in both if not r["correct"]])
        rows[name] = res
    print(json.dumps(rows, indent=1))
    (Path(out) / "report.json").write_text(json.dumps(rows, indent=1) + "\n")


def engine_report(path, sets, per_generator, threshold=None):
    """The engine's own figures: its step scores and verdict per solution,
    and with `threshold` the F1 of the solution score
    (`stepscore::prm::verdict::solution_score`) flagged below it."""
    got = {}
    for line in Path(path).read_text().splitlines():
        r = json.loads(line)
        info = r.get("metadata", {}).get("stepscore", {})
        if "verdict" in info:
            got[r["id"]] = (min(s["score"] for s in r["steps"]), info["verdict"]["p_yes"])
    lg = lambda p: math.log(max(p, 1e-9) / max(1 - p, 1e-9))
    for name in sets:
        recs = [(r, got[key(r)]) for r in load_set(name, per_generator) if key(r) in got]
        res = {"solutions": len(recs), "right": sum(r["correct"] for r, _ in recs)}
        for label, f in [("min step", lambda g: g[0]), ("verdict", lambda g: g[1]),
                         ("min step + verdict (logits)", lambda g: lg(g[0]) + lg(g[1]))]:
            res[label] = auroc([f(g) for r, g in recs if r["correct"]], [f(g) for r, g in recs if not r["correct"]])
        if threshold is not None:
            score = lambda g: lg(g[0]) + lg(g[1])
            acc_wrong = sum(score(g) < threshold for r, g in recs if not r["correct"]) / max(1, len(recs) - res["right"])
            acc_right = sum(score(g) >= threshold for r, g in recs if r["correct"]) / max(1, res["right"])
            res["at threshold"] = {"threshold": threshold, "acc_wrong": acc_wrong, "acc_right": acc_right,
                                   "f1": 2 * acc_wrong * acc_right / max(1e-12, acc_wrong + acc_right)}
        print(name, json.dumps(res))


def best_of_n(path, per_generator):
    """Best-of-4 on the search evaluation's problems from `stepscore score
    --verdict` output: the accuracy of each choice among a problem's
    finalists (needs the stepscore Python package for answer grouping)."""
    import collections
    import stepscore
    got = {}
    for line in Path(path).read_text().splitlines():
        r = json.loads(line)
        v = r.get("metadata", {}).get("stepscore", {}).get("verdict")
        if v is not None:
            got[r["id"]] = (min(s["score"] for s in r["steps"]), v["p_yes"])
    res, n = collections.Counter(), 0
    for line in (ROOT / "data/search-eval/best-of-4.candidates.jsonl").read_text().splitlines():
        row = json.loads(line)
        if per_generator and int(row["id"].rsplit("/", 1)[1]) > per_generator:
            continue
        cands = []
        for c in row["candidates"]:
            if c.get("pruned") or not c.get("finalist", True) or c.get("correct") is None or not c["steps"]:
                continue
            g = got.get(key({"problem": row["problem"], "steps": c["steps"]}))
            if g is not None:
                cands.append((bool(c["correct"]), g[0], g[1], stepscore.solution_score(*g),
                              stepscore.normalize_answer(str(c.get("answer")))))
        if not cands:
            continue
        n += 1
        res["oracle"] += any(c[0] for c in cands)
        for name, i in [("best lowest step", 1), ("best verdict", 2), ("best solution score", 3)]:
            res[name] += max(cands, key=lambda c: c[i])[0]
        # Votes: a tie goes to the answer met first in the file.
        for name, weight in [("majority", lambda c: 1.0), ("weighted by lowest step", lambda c: c[1]),
                             ("weighted by solution score", lambda c: 1 / (1 + math.exp(-c[3])))]:
            w = collections.defaultdict(float)
            for c in cands:
                w[c[4]] += weight(c)
            top = max(w.values())
            res[name] += next(c for c in cands if w[c[4]] == top)[0]
    print("best-of-4", json.dumps({"problems": n, **{k: round(v / n, 3) for k, v in res.items()}}))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--out", default=str(ROOT / "data/verdict-signal"))
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--per-generator", type=int, default=None,
                    help="mw-test: only the first K problems of each generator (all 5 by default)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--report", action="store_true")
    ap.add_argument("--write-input", metavar="FILE",
                    help="write the --set solutions as `stepscore score` input (ids = their keys) and stop")
    ap.add_argument("--engine", metavar="FILE",
                    help="with --set: solution AUROCs from `stepscore score --verdict` output on --write-input's file")
    ap.add_argument("--solution-threshold", type=float, default=None,
                    help="with --engine: also the F1 of the solution score flagged below this")
    ap.add_argument("--reference", metavar="GGUF",
                    help="write the engine test's reference (REFERENCE_CASES through GGUF) as JSON to stdout")
    ap.add_argument("--prompt", choices=["per-step", "appended"], default="per-step",
                    help="per-step: a verdict on every step in its own user turn (default); "
                         "appended: one verdict on the whole solution asked after the scoring layout")
    args = ap.parse_args()
    Path(args.out).mkdir(parents=True, exist_ok=True)
    if args.report:
        report(args.out)
        return
    if args.write_input:
        with open(args.write_input, "w") as f:
            for name in args.set:
                for r in load_set(name, args.per_generator):
                    f.write(json.dumps({"id": key(r), "problem": r["problem"], "steps": r["steps"]}) + "\n")
        return
    if args.engine:
        engine_report(args.engine, args.set, args.per_generator, args.solution_threshold)
        if "mw-test" in args.set:
            best_of_n(args.engine, args.per_generator)
        return
    if args.reference:
        model = Verdicts(args.threads, args.reference)
        cases = []
        for problem, steps in REFERENCE_CASES:
            p, n = model.whole(problem, steps)
            cases.append({"problem": problem, "steps": steps, "p_yes": p, "tokens": n})
        print(json.dumps({"model": Path(args.reference).name, "llama_cpp_python": "0.3.36", "cases": cases},
                         indent=1))
        return
    cache = read_cache(args.out, args.prompt)
    model = Verdicts(args.threads)
    ask = model.solution if args.prompt == "per-step" else model.appended
    with cache_path(args.out, args.prompt).open("a") as f:
        for name in args.set:
            recs = load_set(name, args.per_generator)[: args.limit]
            for i, r in enumerate(recs):
                k = key(r)
                if k in cache:
                    continue
                v = ask(r["problem"], r["steps"])
                cache[k] = v
                f.write(json.dumps({"key": k, "id": r["id"], "verdicts": v}) + "\n")
                f.flush()
                print(f"{name} {i + 1}/{len(recs)} {r['id']} correct={r['correct']} "
                      f"verdicts={[round(x, 3) for x in v]}", flush=True)


if __name__ == "__main__":
    main()
