"""Surface styles for worked solutions. A style is drawn per row from its own
random stream, before and independently of whether the row gets an error, so
the wording, layout, math notation and ending carry no label signal."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from random import Random

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import gen_traces  # noqa: E402  (the gsm_symbolic tokenizer and equation finder)


@dataclass(frozen=True)
class Style:
    layout: str  # paragraphs | lines | step_k | bold_step | numbered | heading
    join: str  # what separates steps in `response`
    mul: str  # * x × · \times
    div: str  # / ÷ \frac \div
    wrap: str  # "" | "$" | "\\(": how an equation is set off as math
    voice: str  # plain | connectives | verbose
    intro: str  # "" or an opening sentence joined to the first step
    ending: str  # the final-answer sentence, with {a}

    @property
    def latex(self) -> bool:
        return self.mul == "\\times" or self.div in ("\\frac", "\\div") or self.wrap != ""


INTROS_PLAIN = ["", "", "Let's solve this step by step.", "We solve it step by step."]
INTROS_VERBOSE = [
    "Let's break this problem down step by step.",
    "Okay, let's work through this carefully.",
    "To solve this, I'll go through the information one piece at a time.",
    "Let me think about this step by step.",
    "Alright, let's figure this out.",
    "First, let's understand what the problem is asking.",
]
ENDINGS_SENTENCE = [
    "The final answer is {a}.",
    "The answer is {a}.",
    "So the answer is {a}.",
    "Therefore, the final answer is $\\boxed{{{a}}}$.",
    "Thus, the answer is {a}.",
    "Answer: {a}",
]
ENDINGS_BLOCK = ["#### {a}", "\\boxed{{{a}}}", "**Answer:** {a}", "**Final Answer:** $\\boxed{{{a}}}$", "**Final answer:** {a}"]
CONNECT_MID = ["Next, ", "Then, ", "Now, ", "After that, ", "", ""]
CONNECT_LAST = ["Finally, ", "So, ", "Therefore, ", "", "Lastly, "]
VERBOSE_MID = ["Next, ", "Now, ", "Now we can work out the next part. ", "With that, ", "Moving on, ", "Then, ", "Great, now ", "Okay, so "]
VERBOSE_LAST = ["Finally, ", "Putting it all together, ", "So, ", "Now for the last part. ", "Therefore, "]
# Sentence openers that may be lowercased after a connective ("Next, the ...").
LOWER_OK = {
    "The", "This", "That", "These", "There", "In", "If", "Since", "So", "We", "It", "Its", "A", "An", "On", "At", "For",
    "Each", "Every", "All", "After", "Before", "When", "Then", "To", "Adding", "Subtracting", "Multiplying", "Dividing",
    "Now", "Together", "Combined", "Altogether", "Add", "Subtract", "Multiply", "Divide", "Next", "Thus", "Therefore",
}
STARTS_CONNECTED = re.compile(r"^(First|Then|Next|Finally|So|Now|Thus|Therefore|After|Lastly|Altogether|Together|In total|Overall)\b")


MARKED = ("step_k", "bold_step", "numbered", "heading")  # layouts with step markers


def pick(rng: Random) -> Style:
    layout = rng.choices(["paragraphs", "lines", "step_k", "bold_step", "numbered", "heading"], weights=[4, 2, 4, 1, 2, 1])[0]
    join = {"paragraphs": "\n\n", "lines": "\n", "step_k": rng.choice(["\n", "\n\n"]), "bold_step": "\n\n", "numbered": "\n", "heading": "\n\n"}[layout]
    math = rng.choices(["ascii", "unicode", "latex"], weights=[4, 3, 3])[0]
    if math == "ascii":
        mul, div, wrap = rng.choice(["*", "*", "x"]), "/", ""
    elif math == "unicode":
        mul, div, wrap = rng.choice(["×", "×", "·"]), rng.choice(["÷", "/"]), ""
    else:
        mul, div, wrap = "\\times", rng.choice(["\\frac", "\\frac", "\\div"]), rng.choice(["$", "$", "\\("])
    voice = rng.choices(["plain", "connectives", "verbose"], weights=[4, 3, 3])[0]
    intro = rng.choice(INTROS_VERBOSE if voice == "verbose" else INTROS_PLAIN)
    endings = ENDINGS_SENTENCE if layout == "lines" else ENDINGS_SENTENCE + ENDINGS_BLOCK
    return Style(layout, join, mul, div, wrap, voice, intro, rng.choice(endings))


def wrap_math(s: str, style: Style) -> str:
    if style.wrap == "$":
        return f"${s}$"
    if style.wrap == "\\(":
        return f"\\({s}\\)"
    return s


def restyle_text(line: str, style: Style) -> str:
    """Restyles the math of a gsm_symbolic solution line: its operators, and
    for LaTeX styles each equation `a op b = r` set off as math (only those
    without unit words, which would not be math)."""
    toks = gen_traces.tokenize(line)
    out = [t.text for t in toks]
    for eq in gen_traces.equations(toks):
        lo, hi = eq.operands[0], eq.result
        math = style.wrap != "" and not any(t.kind in ("word", "other") for t in toks[lo : hi + 1])
        for o in eq.ops:
            sym = gen_traces.OPS[toks[o].text]
            if sym == "*":
                out[o] = style.mul if math or style.mul != "\\times" else "×"
            elif sym == "/":
                out[o] = style.div if math or style.div not in ("\\frac", "\\div") else ("÷" if style.div == "\\div" else "/")
            out[o] = f" {out[o].strip()} "
        if math:
            span = re.sub(r" +", " ", "".join(out[lo : hi + 1]))
            span = re.sub(r"(\d+(?:\.\d+)?) \\frac (\d+(?:\.\d+)?)", r"\\frac{\1}{\2}", span)
            span = span.replace("\\frac", "/") if "\\frac " in span else span
            out[lo] = wrap_math(span.replace("%", "\\%").replace("$", "\\$"), style)
            for i in range(lo + 1, hi + 1):
                out[i] = ""
    return re.sub(r"(?<=\S) {2,}(?=\S)", " ", "".join(out))


def _lower_first(s: str) -> str:
    word = s.split(" ", 1)[0].rstrip(",")
    return s[0].lower() + s[1:] if word in LOWER_OK else s


def _connect(s: str, prefix: str, problem: str) -> str:
    """`prefix` + the step, where that reads right: the first word is a
    common opener (lowercased) or a name the problem uses mid-sentence."""
    if not prefix or STARTS_CONNECTED.match(s):
        return s
    if prefix.endswith(". "):
        return prefix + s
    word = s.split(" ", 1)[0]
    if word.rstrip(",") in LOWER_OK:
        return prefix + _lower_first(s)
    if word.isalpha() and word[:1].isupper() and re.search(rf"[a-z,] {re.escape(word)}\b", problem):
        return prefix + s
    return s


def compose(lines: list[str], answer: str, style: Style, rng: Random, problem: str = "") -> tuple[list[str], str]:
    """Final steps (with markers, connectives, intro and ending) and the
    response text they join into."""
    n = len(lines)
    steps = []
    for k, line in enumerate(lines):
        s = line.strip()
        if style.layout == "lines":
            s = re.sub(r"\s*\n\s*", " ", s)
        elif style.layout in MARKED:
            # A solution's own list numbers inside a step would read as new
            # step markers: the style's markers replace them.
            s = re.sub(r"(?m)^(\s*)\d+\.\s+", r"\1", s)
        if style.voice != "plain" and k > 0:
            mid, last = (VERBOSE_MID, VERBOSE_LAST) if style.voice == "verbose" else (CONNECT_MID, CONNECT_LAST)
            s = _connect(s, rng.choice(last if k == n - 1 else mid), problem)
        elif style.voice != "plain" and k == 0 and n > 1 and not style.intro:
            s = _connect(s, rng.choice(["First, ", "", "To start, "]) if style.voice == "connectives" else rng.choice(["First, ", "Let's start here. ", ""]), problem)
        if k == 0 and style.intro and not s.startswith("Let's"):
            s = style.intro + ("\n" if style.layout not in ("lines",) and rng.random() < 0.5 else " ") + s
        if k == n - 1:
            # Inside math (\\boxed, $...$) a percent sign is \\%.
            end = style.ending.format(a=answer.replace("%", "\\%") if "$" in style.ending or "boxed" in style.ending else answer)
            if style.layout == "lines" or (not end.startswith(("#", "\\boxed", "**")) and rng.random() < 0.5):
                s = s.rstrip() + ("" if s.rstrip().endswith((".", "!", "?")) else ".") + " " + end
            else:
                s = s.rstrip() + "\n" + end
        steps.append(_mark(s, k, style))
    return steps, style.join.join(steps)


def _mark(s: str, k: int, style: Style) -> str:
    if style.layout == "step_k":
        return f"Step {k + 1}: {s}"
    if style.layout == "bold_step":
        return f"**Step {k + 1}:** {s}"
    if style.layout == "numbered":
        return f"{k + 1}. {s}"
    if style.layout == "heading":
        return f"### Step {k + 1}:\n{s}"
    return s
