#!/usr/bin/env python3
"""Expected chat renderings: a checkpoint's own chat template, rendered by
Jinja2 the way transformers' apply_chat_template renders it (sandboxed
environment, trim_blocks and lstrip_blocks, loop controls, raise_exception,
tojson as json.dumps with non-ASCII kept, bos_token/eos_token, tools and
documents None), for the message lists stepscore lays out, with and without
the generation prompt. The Rust test (tests/chat_template.rs) renders the same
lists with stepscore's minijinja rendering and compares strings exactly; a
conversation the template refuses records the error message. Run by hand; the
output is committed under tests/fixtures/chat/.

    python3 scripts/reference/chat_template_reference.py NAME=MODEL.gguf ...
    python3 scripts/reference/chat_template_reference.py NAME=TEMPLATE.jinja,BOS,EOS,SOURCE ...

A GGUF gives its `tokenizer.chat_template` and its BOS/EOS token texts; a
.jinja file is a template copied from a checkpoint's tokenizer_config.json,
with the BOS and EOS texts that checkpoint defines and a note of where it was
read (SOURCE). Needs jinja2 (3.1.6) and gguf (pip install gguf).
"""
import hashlib
import json
import sys
from pathlib import Path

from gguf import GGUFReader
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment
import jinja2

OUT_DIR = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "chat"

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
    # The generative verifier's one user turn (ThinkPRM's, for "What is 2+3?" and two steps;
    # src/prm/family/generative.rs checks its prompt against this rendering), and an
    # outcome model's pair.
    [(U, "You are given a math problem and a proposed step-by-step solution:\n\n[Math Problem]\n\n"
         "What is 2+3?\n\n[Solution]\n\nStep 1: 2 + 3 = 5.\nStep 2: The answer is \\boxed{5}.\n\n"
         "Review and critique each step in the proposed solution to determine whether each step is correct. "
         "If the solution is incomplete, only verify the provided steps.")],
    [(U, "What is 2+3?"), (A, "2 + 3 = 5.\n\nThe answer is \\boxed{5}.")],
    # A thinking model's trace: templates that cut `<think>` blocks do so here.
    [(U, "Solve x+1=2."), (A, "<think>\nx is 1\n</think>\n\nx = 1.")],
]


def tokenizer_json_dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def render(template: str, messages, add_generation_prompt: bool, bos: str, eos: str) -> dict:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])

    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)

    env.filters["tojson"] = tokenizer_json_dumps
    env.globals["raise_exception"] = raise_exception
    try:
        return {"text": env.from_string(template).render(
            messages=messages, add_generation_prompt=add_generation_prompt, tools=None, documents=None,
            bos_token=bos, eos_token=eos)}
    except jinja2.exceptions.TemplateError as e:
        return {"error": str(e)}


def source(arg: str):
    """(name, template, bos, eos, where it was read) for one argument."""
    name, rest = arg.split("=", 1)
    if rest.endswith(".gguf"):
        reader = GGUFReader(rest)

        def field(key):
            f = reader.fields[key]
            return f.parts[f.data[0]]

        tokens = reader.fields["tokenizer.ggml.tokens"]

        def token(key):
            return bytes(tokens.parts[tokens.data[int(field(key)[0])]]).decode("utf-8")

        template = bytes(field("tokenizer.chat_template")).decode("utf-8")
        return name, template, token("tokenizer.ggml.bos_token_id"), token("tokenizer.ggml.eos_token_id"), Path(rest).name
    path, bos, eos, where = rest.split(",", 3)
    return name, Path(path).read_text(encoding="utf-8"), bos, eos, where


def main() -> None:
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    for arg in sys.argv[1:]:
        name, template, bos, eos, where = source(arg)
        cases = []
        for conv in CONVERSATIONS:
            messages = [{"role": r, "content": c} for r, c in conv]
            plain = render(template, messages, False, bos, eos)
            prompted = render(template, messages, True, bos, eos)
            case = {"messages": messages}
            case.update({k if k == "error" else "rendered": v for k, v in plain.items()})
            if "text" in prompted:
                case["with_generation_prompt"] = prompted["text"]
            cases.append(case)
        doc = {
            "generator": f"scripts/reference/chat_template_reference.py, jinja2 {jinja2.__version__}",
            "source": where,
            "bos_token": bos,
            "eos_token": eos,
            "template_sha256": hashlib.sha256(template.encode("utf-8")).hexdigest(),
            "template": template,
            "cases": cases,
        }
        out = OUT_DIR / f"{name}.json"
        out.write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {out} ({len(cases)} cases)")


if __name__ == "__main__":
    main()
