"""Worked solutions as small expression trees, so that an error can be put
into one step and its wrong value carried exactly through every later step.

A solution is a list of `Step`s. A step computes one value from numbers of
the problem, constants and earlier steps' results (`Num(kind="ref")`), and a
`say` function turns the rendered expression and result into its sentence.
Errors are made on the tree (a wrong result, operator, operand or formula),
then the whole solution is re-evaluated and re-rendered, so later steps use
the wrong value and stay arithmetically consistent with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from fractions import Fraction
from random import Random
from typing import Callable

# Operator precedence for evaluation and for placing parentheses.
PREC = {"+": 1, "-": 1, "*": 2, "/": 2, "mod": 2, "neg": 3}


@dataclass(frozen=True)
class Num:
    value: Fraction
    # given: a number of the problem; fact: world knowledge (legs, month
    # lengths); unit: a conversion constant; pct: a percentage (value 0.25,
    # written 25%); const: a constant of the formula; ref: an earlier result.
    kind: str = "given"
    ref: int | None = None
    alts: tuple[Fraction, ...] = ()  # plausible wrong values (a wrong fact)


@dataclass(frozen=True)
class Op:
    op: str  # + - * / mod neg
    left: "Expr"
    right: "Expr | None" = None


Expr = Num | Op


def last(results: dict[int, Fraction]) -> Fraction:
    """The final step's result (indices shift when a step is dropped)."""
    return results[max(results)]


def ref(k: int) -> Num:
    return Num(Fraction(0), "ref", k)


def n(v, kind: str = "given", alts=()) -> Num:
    return Num(Fraction(v), kind, None, tuple(Fraction(a) for a in alts))


def op(o: str, *args: Expr) -> Op:
    """Left-associated chain: op('+', a, b, c) is (a + b) + c."""
    e = args[0]
    for a in args[1:]:
        e = Op(o, e, a)
    return e


@dataclass
class Ctx:
    """What a step's sentence may use: its expression and result as text,
    and the (possibly wrong) results of all steps."""

    e: str
    r: str
    rv: Fraction | None
    results: dict[int, Fraction]
    fmt: Callable[[Fraction], str]
    m: "Math"
    vals: list[str] = field(default_factory=list)  # the expression's numbers as written

    def val(self, i: int) -> str:
        return self.vals[i]

    @property
    def eq(self) -> str:
        """`expression = result`, set off as math in LaTeX styles."""
        return self.m.eq(self.e, self.r)

    def num(self, v) -> str:
        """A number written as this solution writes numbers."""
        return self.fmt(Fraction(v))

    def res(self, k: int) -> str:
        return self.fmt(self.results[k])


@dataclass
class Step:
    expr: Expr | None  # None: a sentence without arithmetic
    say: Callable[[Ctx], str]
    # Wrong expressions a solver plausibly writes here instead, by error kind
    # (wrong_formula, off_by_one, sign_error, percent_unit).
    alts: dict[str, Expr] = field(default_factory=dict)
    # How later steps see this step when it is skipped: "input" (its first
    # number stands in for its result), "omit" (dropped from later sums), None.
    drop: str | None = "input"
    override: Fraction | None = None  # a slipped result


def fmt_num(v: Fraction, places: int = 2) -> str:
    if v.denominator == 1:
        return str(v.numerator)
    s = f"{float(v):.{places}f}".rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


def rounded(v: Fraction, places: int) -> Fraction:
    """`v` as it is written with `places` decimals (a solver carries what it wrote)."""
    q = Fraction(10) ** places
    if (v * q).denominator == 1:
        return v
    return Fraction(round(v * q), q)


def leaf_value(x: Num, results: dict[int, Fraction]) -> Fraction:
    return results[x.ref] if x.kind == "ref" else x.value


def evaluate(e: Expr, results: dict[int, Fraction]) -> Fraction | None:
    if isinstance(e, Num):
        return leaf_value(e, results)
    a = evaluate(e.left, results)
    if e.op == "neg":
        return None if a is None else -a
    b = evaluate(e.right, results)
    if a is None or b is None:
        return None
    if e.op == "+":
        return a + b
    if e.op == "-":
        return a - b
    if e.op == "*":
        return a * b
    if e.op == "/":
        return None if b == 0 else a / b
    if e.op == "mod":
        if b == 0 or a.denominator != 1 or b.denominator != 1:
            return None
        return Fraction(a.numerator % b.numerator)
    raise ValueError(e.op)


@dataclass(frozen=True)
class Math:
    """How operators are written: `mul` (* x × · \\times), `div` (/ ÷ \\div
    \\frac), and `wrap` ("", "$", "\\(") around an equation."""

    mul: str = "*"
    div: str = "/"
    wrap: str = ""

    def eq(self, e: str, r: str) -> str:
        s = f"{e} = {r}"
        if self.wrap == "$":
            return f"${s}$"
        if self.wrap == "\\(":
            return f"\\({s}\\)"
        return s


ASCII = Math()


def render(e: Expr, results: dict[int, Fraction], fmt: Callable[[Fraction], str], m: Math = ASCII, parent: int = 0, right: bool = False) -> str:
    """The expression as written in style `m`. Negative numbers inside an
    expression are parenthesised, as people write 5 - (-3)."""
    if isinstance(e, Num):
        v = leaf_value(e, results)
        s = fmt(v * 100) + ("\\%" if m.wrap else "%") if e.kind == "pct" else fmt(v)
        return f"({s})" if v < 0 and parent else s
    if e.op == "neg":
        inner = render(e.left, results, fmt, m, PREC["neg"])
        if isinstance(e.left, Num) and not inner.startswith("("):
            return f"(-{inner})" if parent else f"-{inner}"  # -624, or (-624) inside
        return f"-{inner}" if inner.startswith("(") else f"-({inner})"
    p = PREC[e.op]
    if e.op == "/" and m.div == "\\frac":
        # A fraction bar groups its own operands.
        return f"\\frac{{{render(e.left, results, fmt, m)}}}{{{render(e.right, results, fmt, m)}}}"
    sym = {"+": "+", "-": "-", "*": m.mul, "/": m.div, "mod": "\\bmod" if m.wrap else "mod"}[e.op]
    s = f"{render(e.left, results, fmt, m, p)} {sym} {render(e.right, results, fmt, m, p, True)}"
    # Parenthesise a lower-precedence child, or an equal one on the right of - or /.
    if p < parent or (p == parent and right):
        s = f"({s})"
    return s


def leaves(e: Expr) -> list[Num]:
    if isinstance(e, Num):
        return [e]
    return leaves(e.left) + (leaves(e.right) if e.right is not None else [])


def ops(e: Expr) -> list[Op]:
    if isinstance(e, Num):
        return []
    return [e] + ops(e.left) + (ops(e.right) if e.right is not None else [])


def replace_node(e: Expr, old, new: Expr) -> Expr:
    if e is old:
        return new
    if isinstance(e, Num):
        return e
    return Op(e.op, replace_node(e.left, old, new), None if e.right is None else replace_node(e.right, old, new))


def remap_refs(e: Expr, mapping: Callable[[Num], Expr | None]) -> Expr | None:
    """Rewrites each ref leaf with `mapping` (None drops it from a sum)."""
    if isinstance(e, Num):
        return mapping(e) if e.kind == "ref" else e
    left = remap_refs(e.left, mapping)
    right = None if e.right is None else remap_refs(e.right, mapping)
    if e.op in ("+",) and (left is None or right is None):
        return left if right is None else right
    if left is None or (e.right is not None and right is None):
        return None
    return Op(e.op, left, right)


@dataclass
class Solution:
    question: str
    steps: list[Step]
    answer: Callable[[dict[int, Fraction]], str]  # the final answer as written
    places: int = 2
    nonneg: bool = True  # a negative intermediate is implausible (counts, prices)
    pnums: tuple[Fraction, ...] = ()  # numbers of the problem, for wrong operands
    math: Math = ASCII

    def fmt(self, v: Fraction) -> str:
        return fmt_num(v, self.places)

    def run(self) -> tuple[list[str], dict[int, Fraction], bool] | None:
        """Step texts, results, and whether any result had to be rounded."""
        results: dict[int, Fraction] = {}
        texts = []
        inexact = False
        for k, s in enumerate(self.steps):
            rv = None
            e = ""
            if s.expr is not None:
                v = evaluate(s.expr, results)
                if v is None:
                    return None
                if s.override is not None:
                    v = s.override
                rv = rounded(v, self.places)
                inexact |= rv != v
                results[k] = rv
                e = render(s.expr, results, self.fmt, self.math)
            vals = [] if s.expr is None else [self.fmt(leaf_value(x, results) * (100 if x.kind == "pct" else 1)) + ("%" if x.kind == "pct" else "") for x in leaves(s.expr)]
            texts.append(s.say(Ctx(e, "" if rv is None else self.fmt(rv), rv, results, self.fmt, self.math, vals)))
        return texts, results, inexact


ERROR_KINDS = [
    "arithmetic_slip",
    "wrong_operand",
    "wrong_operation",
    "dropped_step",
    "percent_unit",
    "sign_error",
    "off_by_one",
    "wrong_formula",
]
UNIT_SWAPS = {60: 100, 100: 60, 12: 10, 24: 12, 7: 5, 52: 48, 1000: 100, 365: 360, 30: 31, 31: 30, 3600: 360, 10: 100}
SWAP_OPS = {"+": ["-", "*"], "-": ["+"], "*": ["+", "/"], "/": ["*", "-"]}


def slip(v: Fraction, rng: Random, places: int) -> Fraction:
    """A plausible wrong result: off by a little, by a digit, or by 10x."""
    unit = Fraction(1) if v.denominator == 1 else Fraction(1, 10 ** min(places, 2))
    r = rng.random()
    if r < 0.6 or v == 0:
        out = v + unit * rng.choice([1, 2, 3, 5, 10, 20]) * rng.choice([-1, 1])
    elif r < 0.8:
        out = v * 10 if rng.random() < 0.5 or abs(v) < 10 else rounded(v / 10, 0 if v.denominator == 1 else places)
    else:
        out = v + rng.choice([-1, 1]) * (10 if abs(v) >= 10 else 1) * rng.randint(1, 3) * unit
    return out


@dataclass
class Faulty:
    steps: list[str]
    label: int
    answer: str


def candidates(sol: Solution, kind: str) -> list[tuple[int, object]]:
    """(step, target) pairs where error `kind` applies."""
    out: list[tuple[int, object]] = []
    last = len(sol.steps) - 1
    for k, s in enumerate(sol.steps):
        if s.expr is None:
            continue
        if kind in s.alts:
            out.append((k, None))
        if kind == "arithmetic_slip":
            if ops(s.expr):
                out.append((k, None))
        elif kind == "wrong_operation":
            out += [(k, o) for o in ops(s.expr) if o.op in SWAP_OPS]
        elif kind == "wrong_operand":
            out += [(k, x) for x in leaves(s.expr) if (x.kind == "given" and len(sol.pnums) > 1) or x.alts]
        elif kind == "percent_unit":
            out += [(k, x) for x in leaves(s.expr) if x.kind == "pct" or (x.kind == "unit" and int(x.value) in UNIT_SWAPS)]
        elif kind == "sign_error" and "sign_error" not in s.alts:
            # Only where a sign is there to lose: a subtraction or a negative number.
            if any(o.op in ("-", "neg") for o in ops(s.expr)) or any(x.value < 0 for x in leaves(s.expr) if x.kind != "ref"):
                out.append((k, "negate"))
        elif kind == "dropped_step" and s.drop and k < last:
            out.append((k, "drop"))
    return out


def apply(sol: Solution, kind: str, k: int, target, rng: Random) -> Solution | None:
    steps = list(sol.steps)
    s = steps[k]
    if target is None and kind in s.alts:
        steps[k] = replace(s, expr=s.alts[kind])
    elif kind == "arithmetic_slip":
        true = evaluate(s.expr, results_of(sol, k))
        if true is None:
            return None
        steps[k] = replace(s, override=slip(rounded(true, sol.places), rng, sol.places))
    elif kind == "wrong_operation":
        steps[k] = replace(s, expr=replace_node(s.expr, target, Op(rng.choice(SWAP_OPS[target.op]), target.left, target.right)))
    elif kind == "wrong_operand":
        if target.alts:
            v = rng.choice(target.alts)
        else:
            others = sorted({p for p in sol.pnums if p != target.value and p > 0})
            if not others:
                return None
            v = rng.choice(others)
        steps[k] = replace(s, expr=replace_node(s.expr, target, replace(target, value=v)))
    elif kind == "percent_unit":
        if target.kind == "pct":
            # 25% used as 25, or misread as 2.5%
            wrong = replace(target, kind="given", value=target.value * 100) if rng.random() < 0.5 else replace(target, value=target.value / 10)
        else:
            wrong = replace(target, value=Fraction(UNIT_SWAPS[int(target.value)]))
        steps[k] = replace(s, expr=replace_node(s.expr, target, wrong))
    elif kind == "sign_error":
        true = evaluate(s.expr, results_of(sol, k))
        if not true:
            return None
        steps[k] = replace(s, override=-true)
    elif kind == "dropped_step":
        return drop(sol, k)
    else:
        return None
    return replace(sol, steps=steps)


def results_of(sol: Solution, upto: int) -> dict[int, Fraction]:
    got = replace(sol, steps=sol.steps[:upto]).run()
    return {} if got is None else got[1]


def drop(sol: Solution, k: int) -> Solution | None:
    """Removes step k; later steps see its input (or lose it from their sums)."""
    s = sol.steps[k]
    first = leaves(s.expr)[0]
    stand_in: Expr | None = None if s.drop == "omit" else first

    def remap(x: Num) -> Expr | None:
        if x.ref == k:
            return stand_in
        if x.ref is not None and x.ref > k:
            return replace(x, ref=x.ref - 1)
        return x

    steps = []
    for j, t in enumerate(sol.steps):
        if j == k:
            continue
        if j < k or t.expr is None:
            steps.append(t)
            continue
        e = remap_refs(t.expr, remap)
        if e is None:
            return None
        steps.append(replace(t, expr=e, alts={}))
    shifted = replace(sol, steps=steps)
    # Sentences that quote results by index must see the shifted indices.
    return replace(shifted, steps=[_shift_say(t, k) if j >= k else t for j, t in enumerate(steps)])


def _shift_say(t: Step, k: int) -> Step:
    say = t.say

    def shifted(c: Ctx) -> str:
        view = {(i + 1 if i >= k else i): v for i, v in c.results.items()}
        view.setdefault(k, c.results.get(k - 1, Fraction(0)))
        return say(Ctx(c.e, c.r, c.rv, view, c.fmt, c.m, c.vals))

    return replace(t, say=shifted)


def inject(sol: Solution, kind: str, rng: Random, tries: int = 6) -> Faulty | None:
    """Error `kind` at a random eligible step, carried forward; None when it
    does not apply or every attempt leaves the answer right or implausible."""
    base = sol.run()
    if base is None:
        return None
    good_texts, good_results, _ = base
    good_answer = sol.answer(good_results)
    cands = candidates(sol, kind)
    if not cands:
        return None
    for _ in range(tries):
        k, target = rng.choice(cands)
        bad = apply(sol, kind, k, target, rng)
        if bad is None:
            continue
        got = bad.run()
        if got is None:
            continue
        texts, results, _ = got
        if sol.nonneg and any(v < 0 for v in results.values()):
            continue
        try:
            answer = bad.answer(results)
        except (KeyError, ValueError, ZeroDivisionError):
            continue
        if answer == good_answer:
            continue
        fin = results.get(max(results)) if results else None
        ref_fin = good_results.get(max(good_results)) if good_results else None
        # Absurdly far from the right answer reads as noise, not as a solver's slip
        # (an inverted rate legitimately lands further off).
        limit = 1000 if kind == "wrong_formula" else 100
        if fin is not None and ref_fin is not None and abs(fin) > limit * max(abs(ref_fin), 1):
            continue
        diff = [i for i, (a, b) in enumerate(zip(good_texts[k:] if kind != "dropped_step" else good_texts[k + 1 :], texts[k:])) if a != b]
        if not diff:
            continue
        label = k + diff[0]
        if kind != "dropped_step" and diff[0] != 0:
            continue  # the injected step itself must read differently
        return Faulty(texts, label, answer)
    return None
