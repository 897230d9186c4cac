#!/usr/bin/env python3
"""Generate step-labelled GSM8K-style traces from reasoning-gym's gsm_symbolic
generators, with errors injected at a chosen step (ProcessBench labels).

    python3 -m venv /work/gen-venv && /work/gen-venv/bin/pip install reasoning-gym==0.1.25
    /work/gen-venv/bin/python scripts/data/gen_traces.py --out data

Every row: {id, generator, split, problem, steps, label, final_answer,
reference_answer, error_type}; `label` is the index of the first wrong step,
-1 for a correct trace. Splits are by generator: a generator id belongs to
exactly one of train / val / test. Output is deterministic for a given seed
(Python's `random.Random` with explicit seeds, gzip with mtime 0).

How errors are made: each solution line is parsed into number tokens and
"equations" (a run `n1 op n2 op ... = r` whose evaluation equals r). An
error rewrites one equation of the chosen step (or removes the step), and
the changed values are then carried forward: later equations are re-evaluated
with the new operands and their results replaced, and stray mentions of a
changed value are rewritten. A candidate is kept only if the injected step
really changed and the final answer ends up different from the reference.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.metadata
import io
import json
import re
import sys
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from random import Random

from reasoning_gym.arithmetic.gsm_symbolic import generators_00_49, generators_50_99
from reasoning_gym.arithmetic.gsm_symbolic.gsm_symbolic import tasks_ok

SEED = 20250607
ERROR_TYPES = ["arithmetic_slip", "wrong_operand", "wrong_operation", "dropped_step", "percent_unit"]
# Conversion constants a "unit mistake" swaps for a plausible wrong one.
UNIT_SWAPS = {60: 100, 100: 60, 12: 10, 24: 12, 7: 5, 52: 48, 1000: 100, 365: 360, 30: 31}

TOKEN = re.compile(
    r"(?P<num>[$€£¥]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?%?)"  # a number, with optional $ and %
    r"|(?P<op>[+\-*/×÷]|(?<=\s)x(?=\s))"  # an operator (a lone x multiplies)
    r"|(?P<eq>=)"
    r"|(?P<word>[A-Za-z]+(?:/[A-Za-z]+)*)"  # words and units such as shrimp/minute
    r"|(?P<space>\s+)"
    r"|(?P<other>.)",
    re.S,
)


@dataclass
class Tok:
    kind: str
    text: str
    start: int
    end: int


def tokenize(s: str) -> list[Tok]:
    return [Tok(m.lastgroup, m.group(), m.start(), m.end()) for m in TOKEN.finditer(s)]


def num_value(text: str) -> Fraction | None:
    t = text.lstrip("$€£¥").replace(",", "")
    pct = t.endswith("%")
    t = t.rstrip("%")
    try:
        v = Fraction(t)
    except ValueError:
        return None
    return v / 100 if pct else v


def fmt(v: Fraction) -> str:
    """A value as the solutions write it: an integer, or up to 2 decimals."""
    if v.denominator == 1:
        return str(v.numerator)
    s = f"{float(v):.2f}".rstrip("0").rstrip(".")
    return s


def fmt_like(v: Fraction, like: str) -> str:
    """`v` written the way `like` was (keeps $, %, thousands commas)."""
    pct = like.endswith("%")
    body = fmt(v * 100 if pct else v)
    if "," in like and "." not in body and abs(v) >= 1000:
        body = f"{int(body):,}"
    currency = like[0] if like[:1] in ("$", "€", "£", "¥") else ""
    return currency + body + ("%" if pct else "")


OPS = {"+": "+", "-": "-", "*": "*", "x": "*", "×": "*", "/": "/", "÷": "/"}


def evaluate(vals: list[Fraction], ops: list[str]) -> Fraction | None:
    """Evaluates n0 op0 n1 op1 ... with the usual precedence, exactly."""
    terms: list[Fraction] = [vals[0]]
    signs: list[int] = [1]
    for op, v in zip(ops, vals[1:]):
        o = OPS[op]
        if o == "*":
            terms[-1] = terms[-1] * v
        elif o == "/":
            if v == 0:
                return None
            terms[-1] = terms[-1] / v
        else:
            terms.append(v)
            signs.append(1 if o == "+" else -1)
    return sum((s * t for s, t in zip(signs, terms)), Fraction(0))


@dataclass
class Equation:
    operands: list[int]  # token indices of the operands
    ops: list[int]  # token indices of the operators
    result: int  # token index of the result


def equations(toks: list[Tok]) -> list[Equation]:
    """Equations `n (unit) op n (unit) ... = r` whose arithmetic checks out."""
    found = []
    for i, t in enumerate(toks):
        if t.kind != "eq":
            continue
        j = i + 1
        while j < len(toks) and toks[j].kind == "space":
            j += 1
        if j >= len(toks) or toks[j].kind != "num":
            continue
        result = j
        # Walk left from "=": operand, then (operator, operand)* with units and spaces skipped.
        k = i - 1
        operands, ops = [], []
        while True:
            while k >= 0 and toks[k].kind in ("space", "word"):
                k -= 1
            if k < 0 or toks[k].kind != "num":
                break
            operands.insert(0, k)
            k -= 1
            while k >= 0 and toks[k].kind == "space":
                k -= 1
            if k >= 0 and toks[k].kind == "op":
                ops.insert(0, k)
                k -= 1
            else:
                break
        if len(operands) != len(ops) + 1 or not ops:
            # A dangling operator was read (e.g. "- 3" with nothing before): drop it.
            if len(operands) == len(ops) and ops:
                ops = ops[1:]
            if not ops or len(operands) != len(ops) + 1:
                continue
        vals = [num_value(toks[o].text) for o in operands]
        r = num_value(toks[result].text)
        if r is None or any(v is None for v in vals):
            continue
        got = evaluate(vals, [toks[o].text for o in ops])
        # Results rounded to 2 decimals still count as equations.
        if got is not None and abs(got - r) <= Fraction(1, 200):
            found.append(Equation(operands, ops, result))
    return found


class Step:
    """A solution line as tokens, so values can be rewritten in place."""

    def __init__(self, text: str):
        self.toks = tokenize(text)
        self.eqs = equations(self.toks)

    def text(self) -> str:
        return "".join(t.text for t in self.toks)

    def value(self, i: int) -> Fraction:
        v = num_value(self.toks[i].text)
        assert v is not None
        return v

    def set_value(self, i: int, v: Fraction) -> None:
        self.toks[i].text = fmt_like(v, self.toks[i].text)

    def recompute(self, eq: Equation) -> Fraction | None:
        return evaluate([self.value(o) for o in eq.operands], [self.toks[o].text for o in eq.ops])


def propagate(steps: list[Step], start: int, changed: dict[Fraction, Fraction], strict: bool = False, after: int = -1) -> None:
    """Carries changed values through steps[start:]: operands are replaced,
    equations re-evaluated, and their changed results added to `changed`.
    `strict` leaves an equation whose operands did not change as it is, even
    if its result happens to equal a changed value (320 / 2 = 160 must not
    become 320 / 2 = 4 because another 160 changed); the v1 files were made
    without it. `after` limits it to the tokens past that index (the rest of
    the step an error was put in)."""
    for s in steps[start:]:
        in_eq = set(range(after + 1))
        for eq in s.eqs:
            if eq.result <= after:
                continue
            old = s.value(eq.result)
            for o in eq.operands:
                in_eq.add(o)
                if s.value(o) in changed:
                    s.set_value(o, changed[s.value(o)])
            new = s.recompute(eq)
            in_eq.add(eq.result)
            if new is not None and new != old:
                s.set_value(eq.result, new)
                changed.setdefault(old, new)
            elif old in changed and not strict:
                s.set_value(eq.result, changed[old])
        for i, t in enumerate(s.toks):
            if t.kind == "num" and i not in in_eq and s.value(i) in changed:
                s.set_value(i, changed[s.value(i)])


def problem_numbers(question: str) -> list[Fraction]:
    return [v for t in tokenize(question) if t.kind == "num" and (v := num_value(t.text)) is not None]


def slip(v: Fraction, rng: Random) -> Fraction:
    """A plausible wrong result: off by a little, by a digit, or by 10x."""
    kind = rng.random()
    if kind < 0.6 or v == 0:
        d = rng.choice([1, 2, 3, 5, 10, 20]) * rng.choice([-1, 1])
        out = v + d
    elif kind < 0.8:
        out = v * 10 if rng.random() < 0.5 or abs(v) < 10 else Fraction(round(v / 10))
    else:
        out = v + rng.choice([-1, 1]) * (10 if abs(v) >= 10 else 1) * rng.randint(1, 3)
    if v > 0 and out <= 0:
        out = v + rng.randint(1, 9)
    return out


def plausible(final: Fraction, answer: Fraction, changed: dict[Fraction, Fraction]) -> bool:
    """A wrong final answer a solver could write: no negative quantities,
    not absurdly far from the right one."""
    # Compared as written: a value that rounds to the reference is not wrong.
    if fmt(final) == fmt(answer) or final < 0 or any(v < 0 for v in changed.values()):
        return False
    return abs(final) <= 100 * max(abs(answer), 1)


@dataclass
class Injected:
    steps: list[str]
    label: int
    final: Fraction


def inject(lines: list[str], answer: Fraction, question: str, kind: str, rng: Random, careful: bool = False) -> Injected | None:
    """One attempt at error `kind` on a random eligible step; None if it does
    not apply. `careful` (v2 data; the v1 files were made without it) also
    rewrites the error step's other mentions of the result it changed ("184
    minutes because 46 x 4 = 187" would read as two results), propagates
    strictly, and leaves alone a step whose result is also a number of the
    problem."""
    steps = [Step(line) for line in lines]
    pnums = problem_numbers(question)
    changed: dict[Fraction, Fraction] = {}
    results = {s.value(e.result) for s in steps for e in s.eqs}

    def percent_or_unit(s: Step, o: int) -> bool:
        v = s.value(o)
        if s.toks[o].text.endswith("%") or 0 < v < 1:
            return True
        # A conversion constant the solution brings in (7 days/week, 60 minutes/hour).
        return v in UNIT_SWAPS and v not in pnums and v not in results

    candidates = []
    for k, s in enumerate(steps):
        for e in s.eqs:
            if kind == "wrong_operand" and any(s.value(o) in pnums for o in e.operands):
                candidates.append((k, e))
            elif kind == "wrong_operation":
                candidates.append((k, e))
            elif kind == "percent_unit" and any(percent_or_unit(s, o) for o in e.operands):
                candidates.append((k, e))
            elif kind in ("arithmetic_slip",):
                candidates.append((k, e))
            elif kind == "dropped_step" and k < len(steps) - 1:
                candidates.append((k, e))
    if not candidates:
        return None
    k, eq = rng.choice(candidates)
    s = steps[k]
    before = s.text()
    old_result = s.value(eq.result)
    if careful and old_result in pnums:
        # Later mentions of this value could be the problem's own number
        # (7 x 2 = 14 and "14 boys"): carrying it forward would be a guess.
        return None
    if kind == "arithmetic_slip":
        new = slip(old_result, rng)
        s.set_value(eq.result, new)
    elif kind == "wrong_operand":
        o = rng.choice([o for o in eq.operands if s.value(o) in pnums])
        others = sorted({v for v in pnums if v != s.value(o) and v > 0})
        s.set_value(o, rng.choice(others) if others and rng.random() < 0.7 else slip(s.value(o), rng))
        new = s.recompute(eq)
        if new is None:
            return None
        s.set_value(eq.result, new)
    elif kind == "wrong_operation":
        o = rng.choice(eq.ops)
        cur = OPS[s.toks[o].text]
        swap = {"+": ["-", "*"], "-": ["+"], "*": ["+", "/"], "/": ["*", "-"]}[cur]
        s.toks[o].text = rng.choice(swap)
        new = s.recompute(eq)
        if new is None or new < 0:
            return None
        s.set_value(eq.result, new)
    elif kind == "percent_unit":
        opts = [o for o in eq.operands if percent_or_unit(s, o)]
        o = rng.choice(opts)
        v = s.value(o)
        if s.toks[o].text.endswith("%"):
            s.toks[o].text = s.toks[o].text[:-1]  # forgot that it was a percentage
        elif 0 < v < 1:
            s.set_value(o, v * rng.choice([10, 100]))  # 0.25 read as 25 or 2.5
        else:
            s.set_value(o, Fraction(UNIT_SWAPS[int(v)]))
        new = s.recompute(eq)
        if new is None:
            return None
        s.set_value(eq.result, new)
    elif kind == "dropped_step":
        # The step is skipped and its input is used where its output should be.
        first = s.value(eq.operands[0])
        if first == old_result:
            return None
        changed[old_result] = first
        originals = [st.text() for st in steps]
        del steps[k]
        propagate(steps, k, changed, careful)
        texts = [st.text() for st in steps]
        later = originals[k + 1 :]
        diff = [i for i, (a, b) in enumerate(zip(later, texts[k:])) if a != b]
        if not diff:
            return None
        final = changed.get(answer, answer)
        if not plausible(final, answer, changed):
            return None
        return Injected(texts, k + diff[0], final)
    if s.text() == before:
        return None
    new_result = s.value(eq.result)
    if new_result == old_result:
        return None
    changed[old_result] = new_result
    if careful:
        in_eq = set(eq.operands) | {eq.result}
        for i, t in enumerate(s.toks):
            if t.kind == "num" and i not in in_eq and s.value(i) == old_result:
                s.set_value(i, new_result)
        # Later equations of the same step (one paragraph can hold several) use it too.
        propagate([s], 0, changed, True, after=eq.result)
    propagate(steps, k + 1, changed, careful)
    final = changed.get(answer, answer)
    if not plausible(final, answer, changed):
        return None
    return Injected([st.text() for st in steps], k, final)


GENERATORS = {}
for mod in (generators_00_49, generators_50_99):
    for name in dir(mod):
        if name.startswith("generate_"):
            GENERATORS[int(name.removeprefix("generate_"))] = getattr(mod, name)


def instance(gid: int, seed: int) -> tuple[str, list[str], Fraction] | None:
    ex = GENERATORS[gid](Random(seed), 1.0)
    cot = ex["metadata"]["answer_cot"]
    cot = "\n".join(l for l in cot.split("\n") if not l.strip().startswith("####"))
    if "\n\n" in cot.strip():
        # Numbered solutions with sub-bullets: one step per paragraph, an
        # introduction without numbers joined to the first one.
        lines = [p.strip() for p in cot.split("\n\n") if p.strip()]
        if len(lines) > 1 and not re.search(r"\d", lines[0]):
            lines = [lines[0] + "\n" + lines[1]] + lines[2:]
    else:
        lines = [l.strip() for l in cot.split("\n") if l.strip()]
    answer = num_value(str(ex["answer"]))
    if answer is None or len(lines) < 2:
        return None
    return ex["question"], lines, answer


def with_answer(steps: list[str], final: Fraction) -> list[str]:
    """The last step states the final answer, as graded solutions do."""
    return steps[:-1] + [f"{steps[-1]}\nThe final answer is {fmt(final)}."]


def row(rid: str, gid: int, split: str, q: str, steps: list[str], label: int, final: Fraction, ref: Fraction, et: str | None) -> dict:
    return {
        "id": rid,
        "generator": f"gsm_symbolic_{gid}",
        "split": split,
        "problem": q,
        "steps": with_answer(steps, final),
        "label": label,
        "final_answer": fmt(final),
        "reference_answer": fmt(ref),
        "error_type": et,
    }


def make_error(q: str, lines: list[str], ans: Fraction, rng: Random, prefer: str | None = None) -> tuple[Injected, str] | None:
    kinds = ERROR_TYPES[:]
    rng.shuffle(kinds)
    if prefer:
        kinds.remove(prefer)
        kinds.insert(0, prefer)
    for kind in kinds:
        for _ in range(4):
            got = inject(lines, ans, q, kind, rng)
            if got is not None:
                return got, kind
    return None


def usable(gid: int, seed: int) -> bool:
    """Whether errors can be injected into most of a generator's solutions
    (some write steps the equation parser cannot follow)."""
    rng = Random(f"{seed}/usable/{gid}")
    ok = 0
    for i in range(10):
        inst = instance(gid, rng.randrange(1 << 30))
        if inst is not None and make_error(*inst, rng) is not None:
            ok += 1
    return ok >= 6


def split_generators(seed: int) -> dict[str, list[int]]:
    ids = [gid for gid in sorted(tasks_ok) if usable(gid, seed)]
    Random(seed).shuffle(ids)
    return {"test": sorted(ids[:15]), "val": sorted(ids[15:25]), "train": sorted(ids[25:])}


def gen_split(split: str, gids: list[int], per_gen: int, seed: int) -> list[dict]:
    rows = []
    for gid in gids:
        rng = Random(f"{seed}/{split}/{gid}")
        made, attempt = 0, 0
        while made < per_gen and attempt < per_gen * 6:
            attempt += 1
            inst = instance(gid, rng.randrange(1 << 30))
            if inst is None:
                continue
            q, lines, ans = inst
            rid = f"{split}-{gid}-{made}"
            # Alternate correct / erroneous, rotating the preferred error type.
            if made % 2 == 0:
                rows.append(row(rid, gid, split, q, lines, -1, ans, ans, None))
                made += 1
                continue
            got = make_error(q, lines, ans, rng, prefer=ERROR_TYPES[(made // 2) % len(ERROR_TYPES)])
            if got is None:
                continue
            inj, kind = got
            rows.append(row(rid, gid, split, q, inj.steps, inj.label, inj.final, ans, kind))
            made += 1
    return rows


def gen_bon(gids: list[int], per_gen: int, n: int, seed: int) -> list[dict]:
    """Best-of-n candidates: a few correct, the rest drawn from a small pool
    of erroneous variants so that wrong answers can agree with each other."""
    rows = []
    for gid in gids:
        rng = Random(f"{seed}/bon/{gid}")
        made, attempt = 0, 0
        while made < per_gen and attempt < per_gen * 6:
            attempt += 1
            inst = instance(gid, rng.randrange(1 << 30))
            if inst is None:
                continue
            q, lines, ans = inst
            pool = [g for g in (make_error(q, lines, ans, rng) for _ in range(rng.choice([2, 3, 4]))) if g is not None]
            if not pool:
                continue
            n_correct = rng.choices([0, 1, 2, 3, 4], weights=[1, 3, 3, 2, 1])[0]
            kinds = ["correct"] * n_correct + ["error"] * (n - n_correct)
            rng.shuffle(kinds)
            group = f"bon-{gid}-{made}"
            for c, kind in enumerate(kinds):
                rid = f"{group}-{c}"
                if kind == "correct":
                    r = row(rid, gid, "test", q, lines, -1, ans, ans, None)
                else:
                    inj, et = rng.choice(pool)
                    r = row(rid, gid, "test", q, inj.steps, inj.label, inj.final, ans, et)
                r["group"] = group
                rows.append(r)
            made += 1
    return rows


def write_gz(path: Path, rows: list[dict]) -> None:
    buf = io.BytesIO()
    # mtime=0 and no file name: byte-identical output for identical rows.
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as gz:
        for r in rows:
            gz.write((json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n").encode())
    path.write_bytes(buf.getvalue())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("data"))
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--train-per-generator", type=int, default=77)
    ap.add_argument("--val-per-generator", type=int, default=50)
    ap.add_argument("--test-per-generator", type=int, default=54)
    ap.add_argument("--bon-per-generator", type=int, default=8)
    a = ap.parse_args()
    version = importlib.metadata.version("reasoning-gym")
    if version != "0.1.25":
        print(f"warning: reasoning-gym {version}; the committed data was made with 0.1.25", file=sys.stderr)
    a.out.mkdir(parents=True, exist_ok=True)
    splits = split_generators(a.seed)
    per = {"train": a.train_per_generator, "val": a.val_per_generator, "test": a.test_per_generator}
    for split in ("train", "val", "test"):
        rows = gen_split(split, splits[split], per[split], a.seed)
        write_gz(a.out / f"gsm_symbolic_{split}.jsonl.gz", rows)
        print(f"{split}: {len(rows)} rows from generators {splits[split]}", file=sys.stderr)
    bon = gen_bon(splits["test"], a.bon_per_generator, 8, a.seed)
    write_gz(a.out / "gsm_symbolic_test_bon8.jsonl.gz", bon)
    print(f"bon8: {len(bon)} rows", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
