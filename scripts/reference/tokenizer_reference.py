#!/usr/bin/env python3
"""Reference token ids from llama.cpp (via llama-cpp-python, vocab only) for a
fixed set of strings, written as JSON fixtures the Rust tokenizer tests
compare against.

    python scripts/reference/tokenizer_reference.py [--smollm2 PATH] [--qwen25 PATH] [--test-data DIR]

SmolLM2: PATH, else $STEPSCORE_SMOLLM2_GGUF, else the stepscore cache dir
($XDG_CACHE_HOME/stepscore or ~/.cache/stepscore). Qwen2.5: the real
Qwen2.5-Coder-0.5B-Instruct vocabulary (`stepscore fetch qwen2.5-coder-0.5b`),
on TEXTS plus QWEN_EXTRA (a few hundred strings: digit runs, whitespace runs,
code, scripts, chat and FIM special tokens). The qwen2 and llama-bpe
vocabularies come from scripts/test/fetch-test-data.sh's directory. Ids are what
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

ROOT = Path(__file__).resolve().parents[2]
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



def qwen_extra():
    """Strings aimed at the Qwen2 pre-tokenizer's rules (digits split one by
    one, whitespace runs, contractions, letters vs marks vs punctuation) and
    its special tokens."""
    out = []
    digits = "31415926535897932384626433832795"
    out += [digits[:n] for n in range(1, 25)]
    out += [" " + digits[:n] for n in (1, 2, 3, 7)]
    out += ["x" + digits[:n] + "y" for n in (1, 4, 9)]
    out += ["1,000,000", "$1,234.56", "50%", "3/4", "-0.001", "1e10", "2^31-1", "0x7fffffff", "v1.2.3",
            "12:30:45", "2026-12-01", "+1 (555) 010-9999", "１２３４５", "٠١٢٣٤٥٦٧٨٩", "१२३", "x²+y³=z⁴",
            "½ ¼ ¾", "Ⅻ ⅻ", "① ② ③", "3.14159265358979", "100000000000000000000"]
    for n in range(1, 9):
        out += [" " * n, "a" + " " * n + "b", "\n" * n, "a" + " " * n]
    out += ["\t", "\t\t", " \t", "\t ", " \n", "\n ", " \n ", "\r\n", "a\r\nb", "\n\n\n\n a",
            "  \n  \n", "\u00a0", "a\u3000b", "\u2028", "\f\v", "word \n\n  word", "end.  ", "  start"]
    code = [
        "def main():\n    print('hello')\n\nif __name__ == '__main__':\n    main()\n",
        "        return self._cache[key]",
        "\t\tif (x != NULL) {\n\t\t\tfree(x);\n\t\t}",
        "fn add(a: i32, b: i32) -> i32 { a + b }",
        "let v: Vec<u8> = (0..=255).collect();",
        "const f = async (x) => { await g(x?.y ?? 0); };",
        "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;",
        "<div class=\"row\"><span>1 &amp; 2</span></div>",
        "{\"key\": [1, 2.5, null, true], \"nested\": {\"a\": \"b\"}}",
        "re.compile(r'^\\d{3}-\\d{4}$')",
        "#include <stdio.h>\nint main(void) { return 0; }",
        "x += 1; y -= 2; z *= 3; w /= 4; v %= 5; u **= 6",
        "a<=b>=c==d!=e&&f||g",
        "__init__ __name__ _private CONSTANT_VALUE camelCase PascalCase snake_case",
        "    # TODO: fix this\n    pass",
        "git commit -m \"fix: handle empty input\" && git push origin main",
        "$ echo $HOME | sed 's/a/b/g' > /dev/null 2>&1",
        "import numpy as np\nnp.zeros((3, 4), dtype=np.float32)",
        "@decorator\nclass Foo(Base, metaclass=Meta):\n    ...",
        "std::vector<std::string> names{\"a\", \"b\"};",
        "\\begin{align} x &= 1 \\\\ y &= 2 \\end{align}",
        "```python\nprint(1)\n```",
        "// comment\n/* block */\n/** doc */",
        "if err != nil {\n\treturn nil, err\n}",
        "    \n    \n",
    ]
    out += code
    out += ["中华人民共和国", "今天天气很好，我们去公园吧。", "東京都は日本の首都です。", "カタカナとひらがな",
            "한국어 텍스트입니다", "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "สวัสดีชาวโลก",
            "Ελληνικά κείμενα", "Україна", "ქართული", "Հայերեն", "e\u0301 vs é", "a\u0308o\u0308",
            "👍🏽 👨‍💻 🇩🇪 🏳️‍🌈", "🙂🙂🙂", "∀x∈ℝ: x²≥0", "≤ ≥ ≠ ≈ ∞ ∑ ∏ ∫ ∂ ∇", "→ ← ↔ ⇒ ⇔",
            "«quoted» „German“ ‚single‘ “curly”", "…", "—–-", "¿Qué? ¡Sí!", "İstanbul ıi", "ǅ ǈ ǋ",
            "\U0001d400\U0001d401 math bold", "\ufeffBOM", "tab\u200bzero", "Ａｂｃ fullwidth"]
    out += ["'s 's 'S 'll 'LL 've 're 'm 'd 't", "it's", "IT'S", "we'RE", "o'clock", "rock'n'roll", "'quoted'",
            "don''t", "'", "''", "\"\"", "can't've", "y'all'd've"]
    specials = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>",
                "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", "<tool_call>", "</tool_call>",
                "<|object_ref_start|>", "<|box_start|>", "<|quad_end|>", "<|vision_start|>", "<|image_pad|>"]
    out += specials
    out += ["x" + t + "y" for t in specials[:6]]
    out += [" " + t + " " for t in specials[:4]]
    out += ["<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nWhat is 7*8?<|im_end|>\n<|im_start|>assistant\n7*8 = 56.<|im_end|>\n",
            "<|fim_prefix|>def add(a, b):\n    <|fim_suffix|>\n<|fim_middle|>return a + b",
            "<|repo_name|>stepscore\n<|file_sep|>src/lib.rs\npub mod x;",
            "<|im_start", "im_start|>", "<|im_end|", "<|IM_START|>", "< |im_start| >", "<|im_start|><|im_end|>",
            "<|endoftext|><|endoftext|>", "\n<|im_end|>\n", "text<|im_end|>\n\n<|im_start|>user",
            "<extra_0>", "step<extra_0>step<extra_0>", "<tool_call>\n{\"name\": \"f\"}\n</tool_call>",
            "<|box_start|>(1,2),(3,4)<|box_end|>"]
    steps = ["Step 1: 48 / 2 = 24.", "Step 2: 48 + 24 = 72.", "1. First, compute 3 x 4 = 12.",
             "2) Then 12 - 5 = 7.", "**Step 3:** The answer is $\\boxed{7}$.", "So, 16+8=240.", "Thus x=5.",
             "Therefore the total cost is $12.50 + $7.25 = $19.75.", "25% of 80 = 0.25 × 80 = 20",
             "The area is πr² = 3.14 × 5² = 78.5 cm².", "Answer: -17", "(a+b)(a-b) = a²-b²",
             "He walks 3 km/h for 2.5 h → 7.5 km.", "Q: 9*9? A: 81", "10 / 4 = 2.5 remainder 0",
             "1/2 + 1/3 = 5/6", "√2 ≈ 1.41421356", "n! = n·(n-1)!", "x ≥ 0 ∧ y ≤ 1", "7 mod 3 = 1"]
    out += steps
    out += [s.upper() for s in steps[:10]] + [s.lower() for s in steps[:10]]
    out += ["a" * n for n in (1, 2, 5, 16, 64)] + ["ab" * 40, "the " * 30, "!!!???...", "~~~~", "====",
            "----", "____", "****", "####", "$$$$", "@@@@", "%%%%", "^^^^", "&&&&", "||||", "\\\\"]
    return out


QWEN_TEXTS = list(dict.fromkeys(TEXTS + qwen_extra()))  # first occurrence kept


def default_qwen25():
    xdg = os.environ.get("XDG_CACHE_HOME")
    cache = Path(xdg) / "stepscore" if xdg else Path.home() / ".cache" / "stepscore"
    return cache / "Qwen2.5-Coder-0.5B-Instruct.gguf"


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


def reference(gguf, out_name, texts=TEXTS):
    llm = llama_cpp.Llama(model_path=str(gguf), vocab_only=True, verbose=False)
    assert len(set(texts)) == len(texts), "duplicate test strings"
    cases = [
        {"text": t, "ids": llm.tokenize(t.encode("utf-8"), add_bos=False, special=True)}
        for t in texts
    ]
    doc = {
        "generator": f"scripts/reference/tokenizer_reference.py, llama-cpp-python {llama_cpp.__version__}",
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
    ap.add_argument("--qwen25", type=Path, default=default_qwen25())
    ap.add_argument("--test-data", type=Path,
                    default=Path(os.environ.get("STEPSCORE_TEST_DATA", ROOT / ".cache" / "test-data")))
    args = ap.parse_args()
    jobs = [(args.smollm2, "smollm2.json")]
    models = args.test_data / "llama.cpp-models"
    jobs += [(models / "ggml-vocab-qwen2.gguf", "qwen2.json"),
             (models / "ggml-vocab-llama-bpe.gguf", "llama-bpe.json")]
    missing = [str(p) for p, _ in jobs if not p.is_file()]
    if not args.qwen25.is_file():
        missing.append(str(args.qwen25))
    if missing:
        sys.exit(f"missing model files: {', '.join(missing)}")
    for path, name in jobs:
        reference(path, name)
    reference(args.qwen25, "qwen2.5-coder.json", QWEN_TEXTS)


if __name__ == "__main__":
    main()
