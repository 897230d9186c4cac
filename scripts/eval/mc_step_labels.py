#!/usr/bin/env python3
"""Step labels for model-written solutions by Monte-Carlo completion
(issue 26; Math-Shepherd's hard estimate): a step is good when at least one
of N completions written from the solution up to and including it reaches
the reference answer, and bad otherwise.

Solutions cut at the token limit (`stop_reason` other than end-of-turn) are
left out: they are wrong for having no answer, with no error to find.
Only solutions with a wrong final answer need completions: for a right one
the solution itself is a completion that reaches the answer from every
prefix, so all its steps are good by this definition. For a wrong one the
last step is bad by the same definition (the only completion of the whole
solution is itself), and the first bad step is found by binary search over
prefixes, assuming (as OmegaPRM does) that once a prefix cannot reach the
answer no longer one can: a prefix of k steps is tried only between the
last good and the first bad one known, stopping at the first completion
that reaches the answer. The problem alone is tried first (once per problem,
shared by its solutions, 2N completions all run); its success rate sets how
many completions each later prefix gets (`per_prefix`: enough that a prefix
as good as the problem alone fails them all with probability <= 5%, between
N and 16), so a step is not called bad after a few failures on a problem the
completer rarely solves (mw-val's first run, with N for every prefix, did
that on 2 of 10 hand-read labels; its records have no `per_prefix`). When no
completion from it reaches the answer the solution gets no label
(`first_bad: null`, `unsolved: true`), since nothing can be said of its
steps. A one-step solution needs no completions: its only step holds the
wrong answer, so it is the first error (`one_step: true`; records of mw-val
and mw-test, written before this rule, probed those too, and left those of
unsolved problems unlabelled: the hand check labels them).

Completions are written by the same model that wrote the solutions
(Qwen2.5-Coder-1.5B-Instruct Q4_K_M through the stepscore Python package,
CPU engine), in its chat format: the problem in a user turn, then the
assistant's turn holding the prefix's steps joined by blank lines (the
steps came from cutting the text at blank lines), continued raw. Sampling:
temperature 0.8, top-k 40, top-p 0.95, min-p 0.05 (search's defaults), at
most 320 new tokens, seed = the completion's index. The answer check is
`stepscore.extract_answer` + `answers_equal`. Completions run in batches
of 4 (`Scorer.generate_many`); a prefix's probe stops after the first batch
with a hit, so `completions` counts whole batches (records written before
the batching count up to the first hit; the labels are the same either way,
completion i being the same text).

Resumable: one JSON line per solution in OUT/mc_labels.jsonl, keyed as
scripts/eval/verdict_signal.py keys them; a rerun skips the ones there.

Report (`--report`): step AUROC, step ECE and ProcessBench F1 of `stepscore
score [--verdict]` output, by the step threshold alone and with the
verdict's rule for the first error (`first_error_with_verdict`), per part
(gsm_symbolic generators, the others, multi-step solutions); `--hand`
replaces or adds the labels a person gave (OUT/mc_hand_check.jsonl: the
Monte-Carlo labels read, and solutions it left unlabelled, each with its
reason); `--curve` adds F1 against the step threshold. synthetic-val/test
report on their generators' labels. The engine's output for the sets
reported in docs/TRAINING.md is kept in OUT/engine/.

usage: target/pyenv/bin/python scripts/eval/mc_step_labels.py --set mw-val [--n 4] [--limit K]
       python3 scripts/eval/mc_step_labels.py --set mw-test --report data/verdict-signal/engine/mw-test.jsonl
           [--threshold T] [--solution-threshold S] [--hand] [--curve]
"""
import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from solution_calibration import logit  # noqa: E402
from verdict_signal import ROOT, candidates_files, key, load_set  # noqa: E402

MODEL = Path.home() / ".cache/stepscore/Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf"
BATCH = 4  # completions run together per generate_many call

# The template's default system message, as `stepscore search` renders it.
PROMPT = ("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
          "<|im_start|>user\n{problem}<|im_end|>\n<|im_start|>assistant\n")


def references(name):
    """problem -> reference answer, from the candidates files of `name`."""
    out = {}
    for p in candidates_files(name):
        for line in p.read_text().splitlines():
            row = json.loads(line)
            out[row["problem"]] = row["reference"]
    return out


def unfinished(name):
    """Keys of the solutions of `name` cut at the token limit: wrong for
    having no answer, with no error to label."""
    out = set()
    for p in candidates_files(name):
        for line in p.read_text().splitlines():
            row = json.loads(line)
            for c in row["candidates"]:
                if c.get("stop_reason") != "end-of-turn" and c["steps"]:
                    out.add(key({"problem": row["problem"], "steps": c["steps"]}))
    return out


def reaches(scorer, stepscore, problem, steps, k, reference, n, count=False):
    """(completions that reached the answer, completions tried) from the
    prefix of the first k steps; unless `count`, stops after the first batch
    of BATCH that reaches it. Completion i samples with seed i, in batches
    run together (`generate_many`: the prompt once, decode steps batched),
    so the completions are those of one-by-one `generate` with seed i."""
    prefix = "\n\n".join(s.strip() for s in steps[:k])
    prompt = PROMPT.format(problem=problem) + (prefix + "\n\n" if prefix else "")
    hits = tried = 0
    while tried < n:
        m = min(BATCH, n - tried)
        for g in scorer.generate_many(prompt, m, chat=False, max_new_tokens=320, temperature=0.8,
                                      top_k=40, top_p=0.95, min_p=0.05, seed=tried):
            text = prefix + "\n\n" + g["text"]
            answer = stepscore.extract_answer(text)
            if answer is not None and stepscore.answers_equal(answer, reference):
                hits += 1
        tried += m
        if hits and not count:
            break
    return hits, tried


def per_prefix(n, rate, miss=0.05, cap=16):
    """Completions per prefix so that a prefix as good as the problem alone
    (success rate `rate`) fails them all with probability <= `miss`: a hard
    problem needs more tries before a step is called bad; at least n, at
    most `cap`."""
    if rate >= 1.0:
        return n
    return max(n, min(cap, math.ceil(math.log(miss) / math.log(1.0 - rate))))


def label(scorer, stepscore, r, reference, n, solvable):
    """`solvable`: problem -> the problem-alone probe already made (shared by
    the problem's solutions)."""
    if len(r["steps"]) == 1:
        # Its only step holds the wrong answer: it is the first error whatever
        # completions could reach, so no completions are needed (and a problem
        # the completer never solves does not leave it unlabelled).
        return {"first_bad": 0, "unsolved": False, "one_step": True, "probes": []}
    probes = []

    tries = n

    def probe(k):
        if k == 0 and r["problem"] in solvable:
            probes.append(dict(solvable[r["problem"]], shared=True))
            return probes[-1]["reached"]
        # The problem alone: 2n completions, all run, to estimate how often
        # the completer solves it; later prefixes get per_prefix(n, rate).
        hits, tried = reaches(scorer, stepscore, r["problem"], r["steps"], k, reference,
                              2 * n if k == 0 else tries, count=k == 0)
        probes.append({"prefix_steps": k, "reached": hits > 0, "completions": tried, "hits": hits})
        if k == 0:
            solvable[r["problem"]] = probes[-1]
        return hits > 0

    if not probe(0):
        return {"first_bad": None, "unsolved": True, "probes": probes}
    base = probes[0]
    if "hits" in base:
        tries = per_prefix(n, base["hits"] / base["completions"])
    good, bad = 0, len(r["steps"])  # prefix lengths known to reach / not to reach the answer
    while bad - good > 1:
        mid = (good + bad) // 2
        if probe(mid):
            good = mid
        else:
            bad = mid
    # The first bad step is the one whose prefix (it included) is the first that cannot reach.
    return {"first_bad": bad - 1, "unsolved": False, "per_prefix": tries, "probes": probes}


def step_labels(out, name, hand):
    """key -> first bad step (0-based) of the labelled wrong solutions of
    `name`, and the keys the hand check (OUT/mc_hand_check.jsonl) found to be
    right solutions. With `hand`, the hand check's label replaces the
    Monte-Carlo one where it read the solution."""
    labels, right = {}, set()
    cut = unfinished(name)
    for line in (Path(out) / "mc_labels.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec["set"] == name and rec["first_bad"] is not None and rec["key"] not in cut:
            labels[rec["key"]] = rec["first_bad"]
    if hand:
        for line in (Path(out) / "mc_hand_check.jsonl").read_text().splitlines():
            rec = json.loads(line)
            if rec["set"] != name:
                continue
            if rec["hand_first_bad"] is None:
                labels.pop(rec["key"], None)
                right.add(rec["key"])
            else:
                labels[rec["key"]] = rec["hand_first_bad"]
    return labels, right


def first_flag(scores, threshold, solution=None):
    """The step a scorer marks as the first error: the first one below the
    step threshold. `solution` = (solution score, its threshold) adds the
    verdict's rule (`stepscore score --verdict`): a solution flagged by its
    score and by no step gets its lowest-scoring step marked."""
    flag = next((i for i, x in enumerate(scores) if x < threshold), None)
    if flag is None and solution is not None and solution[0] < solution[1]:
        flag = min(range(len(scores)), key=lambda i: (scores[i], i))
    return flag


def figures(rows, threshold, solution_threshold):
    """Step AUROC, step ECE and ProcessBench figures of `rows` (dicts with
    `scores`, `first_bad` (None when right) and `solution_score`)."""
    from verdict_signal import auroc
    good, bad = [], []
    for r in rows:
        fb = r["first_bad"]
        good.extend(r["scores"] if fb is None else r["scores"][:fb])
        if fb is not None:
            bad.append(r["scores"][fb])
    # ECE of the step score read as P(step correct): 10 equal-width bins,
    # |mean score - fraction correct| weighted by the bin's share of steps.
    bins = [[] for _ in range(10)]
    for x, ok in [(x, 1) for x in good] + [(x, 0) for x in bad]:
        bins[min(9, int(x * 10))].append((x, ok))
    n = len(good) + len(bad)
    ece = sum(len(b) / n * abs(sum(x for x, _ in b) / len(b) - sum(o for _, o in b) / len(b)) for b in bins if b)

    def processbench(solution):
        wrong = [r for r in rows if r["first_bad"] is not None]
        right = [r for r in rows if r["first_bad"] is None]
        where = {"before": 0, "at": 0, "after": 0, "none": 0}
        for r in wrong:
            f = first_flag(r["scores"], threshold, (r["solution_score"], solution_threshold) if solution else None)
            where["none" if f is None else "before" if f < r["first_bad"] else "at" if f == r["first_bad"]
                  else "after"] += 1
        ok_right = sum(first_flag(r["scores"], threshold,
                                  (r["solution_score"], solution_threshold) if solution else None) is None
                       for r in right)
        acc_w, acc_r = where["at"] / max(1, len(wrong)), ok_right / max(1, len(right))
        return {"acc_wrong": round(acc_w, 3), "acc_right": round(acc_r, 3),
                "f1": round(2 * acc_w * acc_r / max(1e-12, acc_w + acc_r), 3), "first_flag_vs_first_bad": where}

    res = {"wrong": len(bad), "right": len(rows) - len(bad), "steps": n,
           "step_auroc": None if not bad or not good else round(auroc(good, bad), 3), "step_ece": round(ece, 3),
           "steps_only": processbench(False)}
    if solution_threshold is not None and all(r["solution_score"] is not None for r in rows):
        res["with_verdict"] = processbench(True)
    return res


def labelled(out, name, hand, per_generator=None):
    """The solutions of `name` that have a step label, each with its first
    bad step (None for a right one): the generators' labels for
    synthetic-*, else the Monte-Carlo ones (with `hand`, the hand check's
    where it read the solution); solutions cut at the token limit are left
    out."""
    if name.startswith("synthetic-"):
        # The generators' own step labels; no solution is cut.
        rows = load_set(name)
        labels, right, cut = {key(r): r["first_wrong"] for r in rows if not r["correct"]}, set(), set()
    else:
        labels, right = step_labels(out, name, hand)
        cut = unfinished(name)
    for r in load_set(name, per_generator):
        k = key(r)
        correct = r["correct"] or k in right
        if k in cut or (not correct and k not in labels):
            continue
        yield r, None if correct else labels[k]


def report(out, name, scored_path, threshold, solution_threshold, hand, curve):
    """Step-level figures on `name` where labels exist: right solutions (all
    steps good) and labelled wrong ones (steps before the first bad one good,
    it bad, later ones left out, as ProcessBench counts), over all of them,
    the gsm_symbolic generators, the other generators and the multi-step
    solutions. Scores are `stepscore score [--verdict]` output on the file
    verdict_signal.py --write-input wrote for `name`."""
    scored = {}
    for line in Path(scored_path).read_text().splitlines():
        r = json.loads(line)
        scores = [s["score"] for s in r["steps"]]
        v = r["metadata"]["stepscore"].get("verdict")
        # The solution score as `stepscore::prm::verdict::solution_score`
        # computes it (older output carries only P(Yes)).
        scored[r["id"]] = (scores, None if v is None else logit(min(scores)) + logit(v["p_yes"]))
    rows = []
    for r, first_bad in labelled(out, name, hand):
        if key(r) not in scored:
            continue
        scores, solution = scored[key(r)]
        rows.append({"generator": r["generator"], "scores": scores, "solution_score": solution,
                     "first_bad": first_bad})
    parts = {"all": rows,
             "gsm_symbolic": [r for r in rows if r["generator"].startswith("gsm_symbolic")],
             "other generators": [r for r in rows if not r["generator"].startswith("gsm_symbolic")],
             "multi-step": [r for r in rows if len(r["scores"]) > 1]}
    res = {"set": name, "labels": "hand-checked" if hand else "monte-carlo", "threshold": threshold,
           "solution_threshold": solution_threshold,
           "parts": {p: figures(rs, threshold, solution_threshold) for p, rs in parts.items() if rs}}
    if curve:
        res["f1_vs_threshold"] = {f"{t:.2f}": figures(rows, t, None)["steps_only"]["f1"]
                                  for t in [0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.92, 0.93, 0.94]}
    print(json.dumps(res))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", required=True, choices=["mw-train", "mw-val", "mw-test", "mw-hard", "mw-test-0.5b", "synthetic-val", "synthetic-test"],
                    help="with --report, synthetic-val/test report on the generators' step labels")
    ap.add_argument("--per-generator", type=int, default=None)
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "data/verdict-signal"))
    ap.add_argument("--report", metavar="SCORED",
                    help="step-level figures from `stepscore score` output on --set's solutions, and stop")
    ap.add_argument("--threshold", type=float, default=0.602855, help="with --report: the step threshold")
    ap.add_argument("--solution-threshold", type=float, default=4.217337,
                    help="with --report: the solution score's threshold (the default head's shipped one)")
    ap.add_argument("--hand", action="store_true",
                    help="with --report: the hand check's labels where it read a solution (OUT/mc_hand_check.jsonl)")
    ap.add_argument("--curve", action="store_true", help="with --report: also ProcessBench F1 against the step threshold")
    args = ap.parse_args()
    if args.report:
        report(args.out, args.set, args.report, args.threshold, args.solution_threshold, args.hand, args.curve)
        return
    import stepscore
    Path(args.out).mkdir(parents=True, exist_ok=True)
    path = Path(args.out) / "mc_labels.jsonl"
    done, solvable = set(), {}
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                rec = json.loads(line)
                done.add(rec["key"])
                first = rec["probes"][0] if rec["probes"] else {}
                if first.get("prefix_steps") == 0 and not first.get("shared"):
                    solvable[rec["problem"]] = first
            except (json.JSONDecodeError, KeyError, IndexError):
                pass  # a line cut by an interrupted run: labelled again
    refs = references(args.set)
    cut = unfinished(args.set)
    wrong = [r for r in load_set(args.set, args.per_generator) if not r["correct"] and key(r) not in cut]
    wrong = wrong[: args.limit]
    # One-step solutions need no completions: label them first, so a short run leaves most labels.
    wrong.sort(key=lambda r: len(r["steps"]) > 1)
    scorer = stepscore.Scorer(str(MODEL), threads=args.threads, backend="cpu")
    with path.open("a") as f:
        for i, r in enumerate(wrong):
            k = key(r)
            if k in done:
                continue
            out = {"key": k, "id": r["id"], "set": args.set, "problem": r["problem"], "steps": len(r["steps"]),
                   "n": args.n, **label(scorer, stepscore, r, refs[r["problem"]], args.n, solvable)}
            f.write(json.dumps(out) + "\n")
            f.flush()
            print(f"{args.set} {i + 1}/{len(wrong)} {r['id']} steps={len(r['steps'])} first_bad={out['first_bad']} "
                  f"probes={[(p['prefix_steps'], p['reached']) for p in out['probes']]}", flush=True)


if __name__ == "__main__":
    main()
