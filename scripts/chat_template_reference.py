#!/usr/bin/env python3
"""Expected chat renderings: each GGUF's own `tokenizer.chat_template`, rendered
by Jinja2 the way transformers' apply_chat_template renders it (sandboxed
environment, trim_blocks and lstrip_blocks, no generation prompt), for the
message lists stepscore lays out. The Rust test (tests/chat_template.rs)
renders the same lists with stepscore's chat formats and compares strings
exactly. Run by hand; the output is committed under tests/fixtures/chat/.

    PYTHONPATH=<llama-cpp-python sdist>/vendor/llama.cpp/gguf-py \
      python3 scripts/chat_template_reference.py NAME=MODEL.gguf ...

e.g. qwen2.5-coder-0.5b=~/.cache/stepscore/Qwen2.5-Coder-0.5B-Instruct.gguf.
Needs jinja2 (3.1.6) and gguf-py.
"""
import hashlib
import json
import sys
from pathlib import Path

from gguf import GGUFReader
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment
import jinja2

OUT_DIR = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "chat"

S, U, A = "system", "user", "assistant"
CONVERSATIONS = [
    # Qwen2.5-Math-PRM's layout (the score-head family).
    [(S, "Please reason step by step, and put your final answer within \\boxed{}."),
     (U, "What is 15% of 80?"),
     (A, "15% is 0.15.<extra_0>0.15 x 80 = 12.<extra_0>The answer is \\boxed{12}.<extra_0>")],
    # No system message: the template's own default system prompt appears.
    [(U, "What is 2+2?"), (A, "2 + 2 = 4.")],
    [(U, "Only a question, no answer yet.")],
    # RLHFlow's layout: one user turn per step, each answered "+".
    [(U, "Ana has 3 apples and buys 4 more. Step 1: 3 + 4 = 7."), (A, "+"),
     (U, "Step 2: She has 7 apples."), (A, "+")],
    [(S, "You are terse."), (U, "Hi"), (A, "Hello."), (U, "Bye"), (A, "Goodbye.")],
    # Whitespace is kept as written (these templates do not trim).
    [(S, "  padded system  \n"), (U, "\n\nleading newlines"), (A, "trailing spaces   ")],
    [(U, "Überprüfe: 2³ = 8, √16 = 4, π ≈ 3.14 — 日本語 🦙"), (A, "")],
    # Special-token text inside content is rendered verbatim.
    [(U, "literal <|im_start|> and <|im_end|> in text"), (A, "{{ not jinja }} {% raw %}")],
    # A system message that is not first is an ordinary turn.
    [(U, "first"), (S, "late system"), (A, "ok")],
    [(S, ""), (U, "empty system")],
]


def render(template: str, messages) -> str:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])

    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)

    env.globals["raise_exception"] = raise_exception
    return env.from_string(template).render(messages=messages, add_generation_prompt=False, tools=None)


def main() -> None:
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    for arg in sys.argv[1:]:
        name, path = arg.split("=", 1)
        reader = GGUFReader(path)
        f = reader.fields["tokenizer.chat_template"]
        template = bytes(f.parts[f.data[0]]).decode("utf-8")
        cases = []
        for conv in CONVERSATIONS:
            messages = [{"role": r, "content": c} for r, c in conv]
            cases.append({"messages": messages, "rendered": render(template, messages)})
        doc = {
            "generator": f"scripts/chat_template_reference.py, jinja2 {jinja2.__version__}",
            "model_file": Path(path).name,
            "template_sha256": hashlib.sha256(template.encode("utf-8")).hexdigest(),
            "template": template,
            "cases": cases,
        }
        out = OUT_DIR / f"{name}.json"
        out.write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {out} ({len(cases)} cases)")


if __name__ == "__main__":
    main()
