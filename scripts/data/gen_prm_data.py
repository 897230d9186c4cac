#!/usr/bin/env python3
"""Generate the v2 step-labelled PRM data (data/prm_v2_*.jsonl.gz): errors of
eight kinds at varied steps, solutions from gsm_symbolic and other
reasoning-gym tasks plus this project's word problems, every solution
(correct or not) rendered in a randomly drawn surface style.

    python3 -m venv /work/gen-venv && /work/gen-venv/bin/pip install reasoning-gym==0.1.25
    /work/gen-venv/bin/python scripts/data/gen_prm_data.py --out data

Rows: {id, generator, source, split, problem, steps, response, layout, label,
final_answer, reference_answer, error_type} (+ group for best-of-8). Splits
are by generator; the gsm_symbolic split is scripts/data/gen_traces.py's (so the
15 test generators are the same as in the v1 files). Deterministic for a seed.
See data/README.md for the taxonomy and the checks this script makes.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import sys
from collections import Counter
from pathlib import Path
from random import Random

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gen_traces  # noqa: E402
from prmdata import check, style  # noqa: E402
from prmdata.calc import ERROR_KINDS  # noqa: E402
from prmdata.sources import Item, make_item  # noqa: E402

SEED = 20250607
# Generators beyond gsm_symbolic, split by hand so that every split has a
# generator for each error kind (sign: *_arithmetic, *_chain_sum,
# simple_equations, word_number_puzzle; off-by-one: calendar_weekday, word_fence_posts,
# word_pages, word_days_range; wrong formula: the other word_* templates).
SPLIT_OTHER = {
    "test": ["basic_arithmetic", "simple_equations", "leg_counting", "word_average", "word_fence_posts", "word_tile_cost"],
    "val": ["decimal_chain_sum", "word_speed", "word_pages", "word_discount"],
    "train": [
        "chain_sum", "complex_arithmetic", "calendar_weekday", "word_fence_cost", "word_average_needed",
        "word_unit_price", "word_rate_time", "word_percent_change", "word_days_range", "word_number_puzzle",
    ],
}


def generators(seed: int) -> dict[str, list[str]]:
    gsm = gen_traces.split_generators(seed)
    return {s: [f"gsm_symbolic_{g}" for g in gsm[s]] + SPLIT_OTHER[s] for s in ("train", "val", "test")}


def eligible(gens: list[str], seed: int) -> dict[str, list[str]]:
    """Per error kind, the generators where it applies to at least a quarter
    of the instances (error_row draws instances until one takes it)."""
    out: dict[str, list[str]] = {k: [] for k in ERROR_KINDS}
    for g in gens:
        rng = Random(f"{seed}/eligible/{g}")
        hits: Counter = Counter()
        items = [it for it in (make_item(g, rng.randrange(1 << 30)) for _ in range(12)) if it is not None]
        st = style.pick(Random(0))
        for it in items:
            for k in sorted(it.kinds):  # a set: sorted, for a fixed random stream
                hits[k] += it.faulty(k, Random(rng.random()), st) is not None
        for k in ERROR_KINDS:
            if items and hits[k] * 4 >= len(items):
                out[k].append(g)
    return out


def render_row(rid: str, split: str, item: Item, lines: list[str], label: int, answer: str, kind: str | None, seed: int) -> dict:
    st = style.pick(Random(f"{seed}/style/{rid}"))
    return compose_row(rid, split, item, lines, label, answer, kind, st, seed)


def compose_row(rid, split, item, lines, label, answer, kind, st, seed) -> dict:
    steps, response = style.compose(lines, answer, st, Random(f"{seed}/compose/{rid}"), item.question)
    return {
        "id": rid,
        "generator": item.generator,
        "source": item.source,
        "split": split,
        "problem": item.question,
        "steps": steps,
        "response": response,
        "layout": st.layout,
        "label": label,
        "final_answer": answer,
        "reference_answer": item.reference,
        "error_type": kind,
    }


def _decimals(lines: list[str]) -> bool:
    return any(re.search(r"\d\.\d", s) for s in lines)


class Maker:
    """Draws instances of a split's generators, each with its own style."""

    def __init__(self, split: str, gens: list[str], seed: int):
        self.split, self.seed = split, seed
        self.rng = Random(f"{seed}/v2/{split}")
        self.eligible = eligible(gens, seed)
        self.gens = gens
        self.seen: set[tuple[str, str]] = set()
        self.used: Counter = Counter()
        self.n = 0

    def _item(self, g: str) -> Item | None:
        it = make_item(g, self.rng.randrange(1 << 30))
        if it is None or (g, it.question) in self.seen:
            return None
        self.seen.add((g, it.question))
        return it

    def pick_generator(self, kind: str) -> str | None:
        gens = self.eligible[kind]
        if not gens:
            return None
        gsm = [g for g in gens if g.startswith("gsm_symbolic_")]
        other = [g for g in gens if not g.startswith("gsm_symbolic_")]
        # Half the rows from gsm_symbolic's varied text, half from the other
        # sources, wherever both have the error kind.
        fam = gsm if gsm and (not other or self.rng.random() < 0.5) else other
        # The least used of them, so that every generator is drawn and the
        # generators are about equally frequent.
        low = min(self.used[g] for g in fam)
        g = self.rng.choice([g for g in fam if self.used[g] == low])
        self.used[g] += 1
        return g

    def error_row(self, g: str, kind: str) -> dict | None:
        for tries in range(12):
            it = self._item(g)
            if it is None:
                continue
            rid = f"v2-{self.split}-{self.n}"
            st = style.pick(Random(f"{self.seed}/style/{rid}"))
            got = it.faulty(kind, Random(f"{self.seed}/fault/{rid}"), st)
            if got is None:
                continue
            lines, label, answer = got
            # Most correct solutions stay in whole numbers: keep only some
            # wrong ones that bring in decimals, so that decimals are not a
            # shortcut to the label.
            if _decimals(lines) and not _decimals(it.lines(st)) and Random(f"{self.seed}/keep/{rid}/{tries}").random() > 0.35:
                continue
            if kind != "dropped_step":
                assert lines[:label] == it.lines(st)[:label], f"{rid}: steps before the error changed"
            self.n += 1
            return compose_row(rid, self.split, it, lines, label, answer, kind, st, self.seed)
        return None

    def correct_row(self, g: str) -> dict | None:
        for _ in range(12):
            it = self._item(g)
            if it is None:
                continue
            rid = f"v2-{self.split}-{self.n}"
            st = style.pick(Random(f"{self.seed}/style/{rid}"))
            self.n += 1
            return compose_row(rid, self.split, it, it.lines(st), -1, it.reference, None, st, self.seed)
        return None


def gen_split(split: str, gens: list[str], total: int, seed: int) -> list[dict]:
    """`total` rows: half with an error, the error kinds equally often, and
    each erroneous row paired with a correct row of the same generator (so a
    generator says nothing about the label)."""
    mk = Maker(split, gens, seed)
    per_kind = total // 2 // len(ERROR_KINDS)
    jobs = [k for k in ERROR_KINDS for _ in range(per_kind)]
    mk.rng.shuffle(jobs)
    rows = []
    for kind in jobs:
        for _ in range(20):
            g = mk.pick_generator(kind)
            if g is None:
                raise SystemExit(f"{split}: no generator has error kind {kind}")
            bad = mk.error_row(g, kind)
            if bad is None:
                continue
            good = mk.correct_row(g)
            if good is None:
                continue
            rows += [bad, good]
            break
        else:
            raise SystemExit(f"{split}: could not make a {kind} row")
    return rows


def gen_bon(gens: list[str], per_gen: int, n: int, seed: int) -> list[dict]:
    """Best-of-n: per problem a pool of 2-4 erroneous variants, 0-4 correct
    candidates, the rest drawn from the pool with repetition (so wrong
    answers can agree and outvote the right one); every candidate in its
    own style, as independent samples of a model would be."""
    rows = []
    for g in gens:
        rng = Random(f"{seed}/bon/{g}")
        made, attempt = 0, 0
        while made < per_gen and attempt < per_gen * 10:
            attempt += 1
            it = make_item(g, rng.randrange(1 << 30))
            if it is None:
                continue
            probe = style.pick(Random(0))
            pool = []
            for _ in range(rng.choice([2, 3, 4])):
                kind = rng.choice(sorted(it.kinds))
                fseed = rng.randrange(1 << 30)
                if it.faulty(kind, Random(fseed), probe) is not None:
                    pool.append((kind, fseed))
            if not pool:
                continue
            n_correct = rng.choices([0, 1, 2, 3, 4], weights=[1, 3, 3, 2, 1])[0]
            kinds = ["correct"] * n_correct + ["error"] * (n - n_correct)
            rng.shuffle(kinds)
            group = f"bon-{g}-{made}"
            for c, which in enumerate(kinds):
                rid = f"{group}-{c}"
                st = style.pick(Random(f"{seed}/style/{rid}"))
                if which == "correct":
                    r = compose_row(rid, "test", it, it.lines(st), -1, it.reference, None, st, seed)
                else:
                    kind, fseed = rng.choice(pool)
                    lines, label, answer = it.faulty(kind, Random(fseed), st)
                    r = compose_row(rid, "test", it, lines, label, answer, kind, st, seed)
                r["group"] = group
                rows.append(r)
            made += 1
    return rows


def validate(rows: list[dict], name: str) -> Counter:
    """Every row's labels and answers agree, and its written arithmetic
    (read back by prmdata.check, independent of the generators) holds where
    the row says the steps are right."""
    stats: Counter = Counter()
    for r in rows:
        rid, label, steps = r["id"], r["label"], r["steps"]
        assert r["response"] in [j.join(steps) for j in JOINS[r["layout"]]], rid
        assert (label == -1) == (r["final_answer"] == r["reference_answer"]) == (r["error_type"] is None), rid
        assert -1 <= label < len(steps) and all(s.strip() for s in steps), rid
        a = r["final_answer"]
        assert a in steps[-1] or a.replace("%", "\\%") in steps[-1], f"{rid}: the last step does not state the answer"
        upto = len(steps) if label == -1 else label
        for s in steps[:upto]:
            found, ok = check.step_ok(s)
            stats["equations checked"] += found
            assert found == ok, f"{rid}: a step labelled correct has wrong arithmetic: {s!r} {check.equations(s)}"
        if label >= 0:
            found, ok = check.step_ok(steps[label])
            stats[f"{r['error_type']}: error step parsed"] += found > 0
            stats[f"{r['error_type']}: error step's arithmetic fails"] += ok < found
            if r["error_type"] == "arithmetic_slip":
                assert found == 0 or ok < found, f"{rid}: the slip does not show in {steps[label]!r}"
            elif r["error_type"] != "sign_error":
                # A wrong operand, operator, formula or count is still computed right.
                assert found == ok, f"{rid}: {r['error_type']} step miscomputed: {steps[label]!r}"
            # After the error its values are carried forward consistently.
            for s in steps[label + 1 :]:
                found, ok = check.step_ok(s)
                stats["later steps' equations"] += found
                assert found == ok, f"{rid}: a later step is inconsistent: {s!r}"
    return stats


# How each layout joins its steps in `response`.
JOINS = {"paragraphs": ["\n\n"], "bold_step": ["\n\n"], "heading": ["\n\n"], "lines": ["\n"], "numbered": ["\n"], "step_k": ["\n", "\n\n"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("data"))
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--train", type=int, default=2000)
    ap.add_argument("--val", type=int, default=400)
    ap.add_argument("--test", type=int, default=800)
    ap.add_argument("--bon-per-generator", type=int, default=5)
    a = ap.parse_args()
    version = importlib.metadata.version("reasoning-gym")
    if version != "0.1.25":
        print(f"warning: reasoning-gym {version}; the committed data was made with 0.1.25", file=sys.stderr)
    a.out.mkdir(parents=True, exist_ok=True)
    splits = generators(a.seed)
    sizes = {"train": a.train, "val": a.val, "test": a.test}
    for split in ("train", "val", "test"):
        rows = gen_split(split, splits[split], sizes[split], a.seed)
        stats = validate(rows, split)
        gen_traces.write_gz(a.out / f"prm_v2_{split}.jsonl.gz", rows)
        kinds = Counter(r["error_type"] or "correct" for r in rows)
        print(f"{split}: {len(rows)} rows, {dict(sorted(kinds.items()))}, {dict(stats)}", file=sys.stderr)
    bon = gen_bon(splits["test"], a.bon_per_generator, 8, a.seed)
    validate(bon, "bon8")
    gen_traces.write_gz(a.out / "prm_v2_test_bon8.jsonl.gz", bon)
    print(f"bon8: {len(bon)} rows, {len(bon) // 8} groups", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
