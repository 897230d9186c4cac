"""An independent check of written arithmetic: undoes the math styles, finds
every `expression = number` in a step's text and evaluates it exactly. It
shares no code with the generators, so it catches their bugs too."""

from __future__ import annotations

import ast
import re
from fractions import Fraction

LEFT = re.compile(r"((?:-\s*)?[(]*\s*-?\d[\d.]*%?\s*\)*(?:\s*(?:[-+*/]|mod)\s*[(]*\s*-?\d[\d.]*%?\s*\)*)+)\s*$")
RIGHT = re.compile(r"^\s*\(?(-?\d[\d.]*(?:/\d+(?![\d.]))?%?)\)?")


def normalize(text: str) -> str:
    s = text
    s = re.sub(r"\\boxed\{([^{}]*)\}", r"\1", s)
    for _ in range(3):
        s = re.sub(r"\\frac\{([^{}]*)\}\{([^{}]*)\}", r"(\1)/(\2)", s)
    s = s.replace("\\(", " ").replace("\\)", " ").replace("\\%", "%").replace("\\bmod", "mod")
    s = re.sub(r"÷\s*(\d+)\s*/\s*(\d+)", r"/ (\1/\2)", s)  # 10÷2/5 divides by the fraction 2/5
    s = s.replace("\\times", "*").replace("\\div", "/").replace("×", "*").replace("·", "*").replace("÷", "/")
    s = re.sub(r"\$(?=\s*-?\d)", "", s)  # currency signs before numbers
    s = s.replace("$", " ")  # math delimiters
    s = re.sub(r"(?<=\d),(?=\d{3}\b)", "", s)  # thousands separators
    s = re.sub(r"(?<=\d) x (?=[\d(])", " * ", s)
    s = s.replace("**", " ")  # markdown bold
    return s


def _eval(node) -> Fraction:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant):
        return Fraction(str(node.value))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand)
    if isinstance(node, ast.BinOp):
        a, b = _eval(node.left), _eval(node.right)
        t = type(node.op)
        if t is ast.Add:
            return a + b
        if t is ast.Sub:
            return a - b
        if t is ast.Mult:
            return a * b
        if t is ast.Div:
            return a / b
        if t is ast.Mod:
            return a % b
    raise ValueError("unsupported")


def equations(text: str) -> list[tuple[str, Fraction, str]]:
    """(expression, its exact value, the number written after `=`)."""
    s = normalize(text)
    found = []
    for m in re.finditer("=", s):
        left = LEFT.search(s[: m.start()])
        right = RIGHT.match(s[m.end() :])
        if not left or not right:
            continue
        expr = left.group(1).strip()
        if re.search(r"(?:[-+*/(]|\bx)\s*$", s[: left.start(1)]):
            continue  # the expression reaches past a unit word ("150 questions * 40 / 100"): not parsed
        # A list number or a sentence full stop right before ("1. 3 + 4") is not part of it.
        expr = re.sub(r"^\d+\.\s+(?=[-(\d])", "", expr)
        py = re.sub(r"(\d[\d.]*)%", r"(\1/100)", expr).replace("mod", "%")
        try:
            got = _eval(ast.parse(py, mode="eval"))
        except (SyntaxError, ValueError, ZeroDivisionError):
            continue
        if re.match(r"\s*(?:[-+*/]|mod\b)\s*[\d(]", s[m.end() + right.end() :]):
            continue  # "= 40 + 165 = 205": an expression on the right, checked at its own "="
        r = right.group(1).rstrip(".")
        try:
            Fraction(r.rstrip("%"))  # also reads "2/5"
        except ValueError:
            continue
        found.append((expr, got, r))
    return found


def holds(got: Fraction, written: str) -> bool:
    """Equal as written: a result rounded to its decimals counts as equal
    (an integer within 1/200, as gsm_symbolic's rounded results are)."""
    pct = written.endswith("%")
    written = written.rstrip("%")
    d = len(written.split(".")[1]) if "." in written and "/" not in written else 0
    tol = Fraction(1, 2 * 10**d) if d else Fraction(1, 200)
    w = Fraction(written)
    # "40% = 0.4" and "0.4 * 100 = 40%" both write the same number.
    return abs(got - w) <= tol or (pct and abs(got * 100 - w) <= tol)


def step_ok(text: str) -> tuple[int, int]:
    """(equations found, equations that hold)."""
    eqs = equations(text)
    return len(eqs), sum(holds(g, w) for _, g, w in eqs)
