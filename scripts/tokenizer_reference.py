#!/usr/bin/env python3
"""Reference token ids from llama.cpp (via llama-cpp-python, vocab only) for a
fixed set of strings, written as JSON fixtures the Rust tokenizer tests
compare against.

    python scripts/tokenizer_reference.py [--smollm2 PATH] [--test-data DIR]

SmolLM2: PATH, else $STEPSCORE_SMOLLM2_GGUF, else the stepscore cache dir
($XDG_CACHE_HOME/stepscore or ~/.cache/stepscore). The qwen2 and llama-bpe
vocabularies come from scripts/fetch-test-data.sh's directory. Ids are what
llama.cpp's tokenize gives with add_bos=False and special=True (special
tokens written in the text are parsed).
"""
import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

import llama_cpp

ROOT = Path(__file__).resolve().parent.parent
OUT_DIR = ROOT / "tests" / "fixtures" / "tokenizer"

TEXTS = [
    "Hello world",
    " Hello world",
    "Step 1: 12 + 7 = 19, so the answer is 19.",
    "Step 2: 3.14159 * 2^10 = 3216.99",
    "x = (-b ± √(b² - 4ac)) / 2a",
    "The total is $1,234,567.89 after 15% tax.",
    "1234567890 0.5 -42 1e-9 1/3",
    "∫₀¹ x² dx = 1/3 and ∑_{i=1}^n i = n(n+1)/2",
    "\\frac{a}{b} + \\sqrt{x^2 + y^2} \\leq \\pi",
    "def f(x):\n    return x ** 2  # square\n",
    "for (int i = 0; i < n; ++i) { sum += a[i]; }",
    "   leading and trailing spaces   ",
    "tabs\tand\t\tnewlines\n\n\nend",
    "\n\n",
    " ",
    "    ",
    "",
    "naïve café — déjà vu",
    "日本語のテキストと中文文本",
    "Привет, мир! Γειά σου κόσμε",
    "emoji 🦙🚀 and 👩‍👩‍👧 family",
    "don't won't I'm we've they'll she'd IT'S",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>",
    "<|endoftext|>text after end",
    "<|im_start|><|im_start|>",
    "a<|im_end|>b",
    "<|im_start|>user missing end",
    "Step 3: Therefore, x = 5.\n\nStep 4: Check: 2(5) + 3 = 13. ✓",
    "ÅÄÖ åäö ß ẞ ﬁ",
    "\u00a0non-breaking\u2009thin\u3000ideographic spaces",
    "zero\u200bwidth\u200cjoiners\u200d",
    "mixed123abc456 ABC123",
]


def default_smollm2():
    env = os.environ.get("STEPSCORE_SMOLLM2_GGUF")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    cache = Path(xdg) / "stepscore" if xdg else Path.home() / ".cache" / "stepscore"
    return cache / "SmolLM2-135M-Instruct.Q4_1.gguf"


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def reference(gguf, out_name):
    llm = llama_cpp.Llama(model_path=str(gguf), vocab_only=True, verbose=False)
    cases = [
        {"text": t, "ids": llm.tokenize(t.encode("utf-8"), add_bos=False, special=True)}
        for t in TEXTS
    ]
    doc = {
        "generator": f"scripts/tokenizer_reference.py, llama-cpp-python {llama_cpp.__version__}",
        "model_file": gguf.name,
        "model_sha256": sha256(gguf),
        "add_bos": False,
        "parse_special": True,
        "cases": cases,
    }
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    out = OUT_DIR / out_name
    # One case per line keeps the fixture small and its diffs readable.
    head = {k: v for k, v in doc.items() if k != "cases"}
    lines = [json.dumps(head, ensure_ascii=False)[:-1] + ', "cases": [']
    lines += ["  " + json.dumps(c, ensure_ascii=False) + "," for c in cases]
    lines[-1] = lines[-1].rstrip(",")
    lines.append("]}")
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {out} ({len(cases)} cases)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--smollm2", type=Path, default=default_smollm2())
    ap.add_argument("--test-data", type=Path,
                    default=Path(os.environ.get("STEPSCORE_TEST_DATA", ROOT / ".cache" / "test-data")))
    args = ap.parse_args()
    jobs = [(args.smollm2, "smollm2.json")]
    models = args.test_data / "llama.cpp-models"
    jobs += [(models / "ggml-vocab-qwen2.gguf", "qwen2.json"),
             (models / "ggml-vocab-llama-bpe.gguf", "llama-bpe.json")]
    missing = [str(p) for p, _ in jobs if not p.is_file()]
    if missing:
        sys.exit(f"missing model files: {', '.join(missing)}")
    for path, name in jobs:
        reference(path, name)


if __name__ == "__main__":
    main()
