"""Problems with worked solutions, one function per generator.

Two families:
- `gsm_symbolic_<id>`: reasoning-gym's GSM8K-style templates with their own
  step-by-step solutions (answer_cot); errors go in through the text parser
  of scripts/data/gen_traces.py.
- every other generator builds a `calc.Solution` (expression steps) for a
  problem: the reasoning-gym tasks below give the problem and the answer
  (checked against the solution's own), and the `word_*` templates are this
  project's own grade-school problems for the error kinds those tasks lack
  (wrong formula, off-by-one).
An `Item` hides the difference: the correct step lines, the reference
answer, and `faulty(kind)` for an erroneous variant.
"""

from __future__ import annotations

import ast
import calendar
import datetime as dt
import sys
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from random import Random
from typing import Callable

import reasoning_gym
from reasoning_gym.arithmetic.leg_counting import ANIMALS

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import gen_traces  # noqa: E402

from .calc import ERROR_KINDS, Math, Num, Op, Solution, Step, candidates, fmt_num, inject, last, n, op, ref  # noqa: E402
from .check import step_ok as check_step  # noqa: E402
from .style import Style, restyle_text  # noqa: E402

GSM_KINDS = set(gen_traces.ERROR_TYPES)


@dataclass
class Item:
    generator: str
    source: str  # reasoning-gym dataset name, or "stepscore" for the word_* templates
    question: str
    reference: str
    kinds: set[str]
    _lines: Callable[[Style], list[str]]
    _faulty: Callable[[str, Random, Style], tuple[list[str], int, str] | None]

    def lines(self, style: Style) -> list[str]:
        return self._lines(style)

    def faulty(self, kind: str, rng: Random, style: Style) -> tuple[list[str], int, str] | None:
        return self._faulty(kind, rng, style) if kind in self.kinds else None


def gsm_item(gid: int, seed: int) -> Item | None:
    inst = gen_traces.instance(gid, seed)
    if inst is None:
        return None
    q, lines, ans = inst
    if any(found != ok for found, ok in map(check_step, lines)):
        return None  # the template's own solution writes an equation that does not hold

    def faulty(kind: str, rng: Random, style: Style):
        for _ in range(4):
            got = gen_traces.inject(lines, ans, q, kind, rng, careful=True)
            if got is not None:
                return [restyle_text(s, style) for s in got.steps], got.label, gen_traces.fmt(got.final)
        return None

    return Item(f"gsm_symbolic_{gid}", "gsm_symbolic", q, gen_traces.fmt(ans), GSM_KINDS, lambda st: [restyle_text(s, st) for s in lines], faulty)


def solution_item(generator: str, source: str, make: Callable[[Math], Solution]) -> Item | None:
    """An Item over a Solution builder (the style's math notation goes in).
    A wrong operand is drawn from the numbers the problem states."""

    def build(m: Math) -> Solution:
        sol = make(m)
        return replace(sol, pnums=tuple(sorted({abs(v) for v in gen_traces.problem_numbers(sol.question) if v})))

    base = build(Math())
    got = base.run()
    if got is None:
        return None
    texts, results, inexact = got
    if inexact:
        return None  # a correct solution must be exact as written
    reference = base.answer(results)
    kinds = {k for k in ERROR_KINDS if candidates(base, k)}

    def math_of(st: Style) -> Math:
        return Math(st.mul, st.div, st.wrap)

    def lines(st: Style) -> list[str]:
        return build(math_of(st)).run()[0]

    def faulty(kind: str, rng: Random, st: Style):
        f = inject(build(math_of(st)), kind, rng)
        return None if f is None else (f.steps, f.label, f.answer)

    return Item(generator, source, base.question, reference, kinds, lines, faulty)


# ---------------------------------------------------------------- reasoning-gym tasks

def rg_example(name: str, seed: int, **config) -> dict:
    return reasoning_gym.create_dataset(name, seed=seed, size=1, **config)[0]


LEG_ALTS = {0: (2, 4), 1: (2,), 2: (4,), 4: (2, 6), 5: (4, 6), 6: (4, 8), 8: (6, 10), 10: (8, 6), 14: (10, 12, 16)}


def plural(name: str, count: int) -> str:
    if count == 1 or name in ("sheep", "deer", "shrimp", "woodlouse", "fish"):
        return name if count == 1 or name != "woodlouse" else "woodlice"
    if name.endswith(("s", "sh", "ch", "x")):
        return name + "es"
    if name.endswith("y") and name[-2] not in "aeiou":
        return name[:-1] + "ies"
    if name.endswith("fish"):
        return name
    return name + "s"


def legs_item(seed: int) -> Item | None:
    ex = rg_example("leg_counting", seed, min_animals=3, max_animals=6, max_instances=12)
    animals = list(ex["metadata"]["animals"].items())
    pr = Random(f"phrase/{seed}")
    each = pr.random() < 0.5

    def build(m: Math) -> Solution:
        steps = []
        for name, count in animals:
            legs = ANIMALS[name]
            pl = plural(name, count)
            if each:
                say = lambda c, name=name, count=count, pl=pl: f"Each {name} has {c.val(1)} legs, so {count} {pl} have {c.eq} legs."
            else:
                say = lambda c, count=count, pl=pl: f"{count} {pl}: {c.eq} legs."
            steps.append(Step(op("*", n(count), n(legs, "fact", LEG_ALTS[legs])), say, drop="omit"))
        total = op("+", *[ref(k) for k in range(len(animals))])
        word = pr.choice(["Adding them up", "In total", "Total"])
        steps.append(Step(total, lambda c, word=word: f"{word}: {c.eq} legs.", drop=None))
        q = ex["question"]
        return Solution(q, steps, lambda r: fmt_num(last(r)), pnums=tuple(Fraction(c) for _, c in animals), math=m)

    item = solution_item("leg_counting", "leg_counting", build)
    return item if item and item.reference == str(ex["answer"]) else None


def parse_expr(text: str):
    """A reasoning-gym arithmetic expression as nested (op, a, b) over Fractions."""
    tree = ast.parse(text.strip().rstrip("=").strip(), mode="eval").body

    def conv(t):
        if isinstance(t, ast.Constant):
            return Fraction(str(t.value))
        if isinstance(t, ast.UnaryOp) and isinstance(t.op, ast.USub):
            inner = conv(t.operand)
            return -inner if isinstance(inner, Fraction) else ("neg", inner, None)
        if isinstance(t, ast.BinOp):
            o = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}[type(t.op)]
            return (o, conv(t.left), conv(t.right))
        raise ValueError(ast.dump(t))

    return conv(tree)


def expression_steps(tree, pr: Random) -> list[Step]:
    """One step per binary operation, innermost and leftmost first."""
    steps: list[Step] = []

    def leaf(t):
        if isinstance(t, Fraction):
            return n(t)
        if t[0] == "neg":
            return Op("neg", leaf(t[1]))
        return walk(t)

    def walk(t) -> Num:
        o, a, b = t
        left, right = leaf(a), leaf(b)
        k = len(steps)
        form = pr.choice(["{eq}", "{eq}.", "Compute {eq}.", "{e} gives {r}.", "We get {eq}."])
        steps.append(Step(Op(o, left, right), lambda c, form=form: form.format(eq=c.eq, e=c.e, r=c.r)))
        return ref(k)

    root = leaf(tree)
    if not steps or not isinstance(root, Num) or root.kind != "ref":
        return []
    return steps


def expression_item(generator: str, source: str, ex: dict, places: int, seed: int) -> Item | None:
    text = ex["metadata"]["expression"]
    try:
        tree = parse_expr(text)
    except (ValueError, SyntaxError, KeyError):
        return None
    probe = expression_steps(tree, Random(0))
    if len(probe) < 2:
        return None
    pnums = tuple(sorted({abs(x) for x in _numbers(tree)}))

    def build(m: Math) -> Solution:
        steps = expression_steps(tree, Random(f"phrase/{generator}/{seed}"))
        return Solution(ex["question"], steps, lambda r: fmt_num(last(r), places), places=places, nonneg=False, pnums=pnums, math=m)

    item = solution_item(generator, source, build)
    if item is None:
        return None
    try:
        if Fraction(str(ex["answer"])) != Fraction(item.reference):
            return None
    except ValueError:
        return None
    return item


def _numbers(t):
    if isinstance(t, Fraction):
        return [t]
    return _numbers(t[1]) + ([] if t[2] is None else _numbers(t[2]))


def chain_item(seed: int) -> Item | None:
    ex = rg_example("chain_sum", seed, min_terms=3, max_terms=6, min_digits=1, max_digits=3, allow_negation=True)
    return expression_item("chain_sum", "chain_sum", ex, 0, seed)


def decimal_chain_item(seed: int) -> Item | None:
    ex = rg_example("decimal_chain_sum", seed, min_terms=3, max_terms=5, min_digits=1, max_digits=3, min_decimal_places=1, max_decimal_places=3)
    places = max((len(t.split(".")[1]) for t in ex["metadata"]["expression"].split() if "." in t), default=0)
    return expression_item("decimal_chain_sum", "decimal_chain_sum", ex, places, seed)


def basic_item(seed: int) -> Item | None:
    ex = rg_example("basic_arithmetic", seed, min_terms=3, max_terms=5, min_digits=1, max_digits=3)
    return expression_item("basic_arithmetic", "basic_arithmetic", ex, 2, seed)


def equation_item(seed: int) -> Item | None:
    import sympy

    ex = rg_example("simple_equations", seed, min_terms=2, max_terms=3)
    eq, var = ex["metadata"]["equation"], ex["metadata"]["variable"]
    lhs_s, rhs_s = eq.split("=")
    x = sympy.Symbol(var)
    lhs, rhs = sympy.sympify(lhs_s), sympy.sympify(rhs_s)
    if rhs.free_symbols or not lhs.free_symbols:
        return None
    poly = sympy.Poly(lhs, x)
    if poly.degree() != 1:
        return None
    a, b = (Fraction(str(c)) for c in poly.all_coeffs())
    c = Fraction(str(rhs))
    if b == 0 or a == 0:
        return None
    pr = Random(f"phrase/eq/{seed}")
    av = fmt_num(a)
    coef = {1: var, -1: f"-{var}"}.get(a) or (f"{av}{var}" if pr.random() < 0.5 else f"{av}*{var}")
    v1 = pr.randrange(3)

    def build(m: Math) -> Solution:
        if b > 0:
            e0, alt = op("-", n(c), n(b)), op("+", n(c), n(b))
            verb = f"Subtract {fmt_num(b)} from both sides"
        else:
            e0, alt = op("+", n(c), n(-b)), op("-", n(c), n(-b))
            verb = f"Add {fmt_num(-b)} to both sides"
        say0 = [
            lambda cx: f"{verb}: {coef} = {cx.eq}.",
            lambda cx: f"{verb} of the equation to isolate the {var} term: {coef} = {cx.eq}.",
            lambda cx: f"First move the constant to the right-hand side: {coef} = {cx.eq}.",
        ][v1]
        say1 = [
            lambda cx: f"Divide both sides by {av}: {var} = {cx.eq}.",
            lambda cx: f"Now divide by the coefficient {av}: {var} = {cx.eq}.",
            lambda cx: f"So {var} = {cx.eq}.",
        ][v1]
        steps = [
            Step(e0, say0, alts={"sign_error": alt}, drop=None),
            Step(op("/", ref(0), n(a)), say1, drop=None),
        ]
        return Solution(ex["question"], steps, lambda r: fmt_num(last(r)), nonneg=False, pnums=(abs(a), abs(b), abs(c)), math=m)

    item = solution_item("simple_equations", "simple_equations", build)
    return item if item and Fraction(str(ex["answer"])) == Fraction(item.reference) else None


def complex_item(seed: int) -> Item | None:
    ex = rg_example("complex_arithmetic", seed, operations=("+", "-", "*"), operations_weights=[0.3, 0.3, 0.4])
    md = ex["metadata"]
    (a, b), (c, d) = [tuple(Fraction(str(v)) for v in z) for z in (md["num1"], md["num2"])]
    o = md["operation"]
    pr = Random(f"phrase/cx/{seed}")

    def cnum(re_: str, im: str) -> str:
        return f"{re_} - {im[1:]}i" if im.startswith("-") else f"{re_} + {im}i"

    def build(m: Math) -> Solution:
        if o in "+-":
            steps = [
                Step(op(o, n(a), n(c)), lambda cx: f"Real parts: {cx.eq}.", drop=None),
                Step(op(o, n(b), n(d)), lambda cx: f"Imaginary parts: {cx.eq}.", drop=None),
                Step(None, lambda cx: f"So the result is {cnum(cx.res(0), cx.res(1))}."),
            ]
            re_k, im_k = 0, 1
        else:
            steps = [
                Step(op("*", n(a), n(c)), lambda cx: f"First terms: {cx.eq}.", drop=None),
                Step(op("*", n(b), n(d)), lambda cx: f"Product of the imaginary parts: {cx.eq}, and since i^2 = -1 this contributes {cx.num(-cx.rv)} to the real part.", drop=None),
                Step(op("+", op("*", n(a), n(d)), op("*", n(b), n(c))), lambda cx: f"Cross terms: {cx.eq}, the imaginary part.", drop=None),
                Step(op("-", ref(0), ref(1)), lambda cx: f"Real part: {cx.eq}.", alts={"sign_error": op("+", ref(0), ref(1))}, drop=None),
                Step(None, lambda cx: f"So the product is {cnum(cx.res(3), cx.res(2))}."),
            ]
            re_k, im_k = 3, 2
        return Solution(ex["question"], steps, lambda r: cnum(fmt_num(r[re_k]), fmt_num(r[im_k])), nonneg=False, pnums=tuple({abs(v) for v in (a, b, c, d)}), math=m)

    item = solution_item("complex_arithmetic", "complex_arithmetic", build)
    if item is None:
        return None
    want = complex(*md["result"])
    re_s, _, im_s = item.reference.replace(" - ", " + -").partition(" + ")
    got = complex(float(re_s), float(im_s.rstrip("i")))
    return item if abs(got - want) < 1e-9 else None


WEEKDAYS = list(calendar.day_name)


def days(k) -> str:
    return "day" if k == 1 else "days"


def weekday_item(seed: int) -> Item | None:
    ex = rg_example("calendar_arithmetic", seed, tasks=["weekday_of_date_from_first_date"])
    md = ex["metadata"]
    target = dt.date.fromisoformat(md["target_date"])
    if target.month < 3:
        return None
    first = md["first_day"]
    lengths = [calendar.monthrange(md["year"], mth)[1] for mth in range(1, target.month)]
    mname = calendar.month_name[target.month]
    pr = Random(f"phrase/wd/{seed}")
    v = pr.randrange(2)

    def build(m: Math) -> Solution:
        month_alts = {31: (30,), 30: (31,), 28: (29, 30), 29: (28, 30)}
        before = op("+", *[n(L, "fact", month_alts[L]) for L in lengths])
        steps = [
            Step(before, [lambda c: f"The months before {mname} have {c.eq} days.", lambda c: f"January through {calendar.month_name[target.month - 1]} have {c.eq} days in total."][v]),
            Step(op("-", op("+", ref(0), n(target.day)), n(1, "const")), lambda c: f"{mname} {target.day} is {c.eq} days after January 1.", alts={"off_by_one": op("+", ref(0), n(target.day))}),
            Step(op("mod", ref(1), n(7, "const")), lambda c: f"Since a week has 7 days, {c.eq}, so the weekday moves {c.r} {days(c.rv)} forward from {first}.", drop=None),
            Step(None, lambda c: f"{c.res(2)} {days(c.results[2])} after {first} is {WEEKDAYS[(WEEKDAYS.index(first) + int(c.results[2])) % 7]}."),
        ]
        return Solution(ex["question"], steps, lambda r: WEEKDAYS[(WEEKDAYS.index(first) + int(last(r))) % 7], pnums=(Fraction(target.day),), math=m)

    item = solution_item("calendar_weekday", "calendar_arithmetic", build)
    return item if item and item.reference == ex["answer"] else None


def word_item(name: str, seed: int) -> Item | None:
    from .words import TEMPLATES

    # Fresh streams on every build: the numbers and phrasing are the same
    # for the correct solution and for each erroneous variant.
    def build(m: Math) -> Solution | None:
        return TEMPLATES[name](Random(f"{name}/{seed}"), Random(f"phrase/{name}/{seed}"), m)

    if build(Math()) is None:
        return None
    return solution_item(name, "stepscore", build)


# Generators other than gsm_symbolic: name -> make(seed) -> Item | None.
def other_generators() -> dict[str, Callable[[int], Item | None]]:
    from .words import TEMPLATES

    gens: dict[str, Callable[[int], Item | None]] = {
        "leg_counting": legs_item,
        "chain_sum": chain_item,
        "decimal_chain_sum": decimal_chain_item,
        "basic_arithmetic": basic_item,
        "simple_equations": equation_item,
        "complex_arithmetic": complex_item,
        "calendar_weekday": weekday_item,
    }
    for name in TEMPLATES:
        gens[name] = lambda seed, name=name: word_item(name, seed)
    return gens


def make_item(generator: str, seed: int) -> Item | None:
    if generator.startswith("gsm_symbolic_"):
        return gsm_item(int(generator.removeprefix("gsm_symbolic_")), seed)
    return other_generators()[generator](seed)
