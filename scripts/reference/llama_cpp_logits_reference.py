#!/usr/bin/env python3
"""Golden logits for catalog GGUFs (Qwen2.5-Coder 0.5B and 1.5B, Gemma 3 270M)
from llama.cpp.

The counterpart of scripts/reference/llama_reference.py (same llama.cpp build, same two
runs per prompt: f32 KV cache as stepscore keeps K/V, and llama.cpp's default
f16 cache as the scale of llama.cpp's own numerics noise). Run by hand; the
output is committed under tests/fixtures/llama_cpp/NAME/.

A Qwen row is 151,936 logits (Gemma's 262,144), so the fixture keeps, for
each prompt's last position, every STRIDE-th logit (an unbiased sample of
the vocabulary for mean and max differences) and the top 64 (where the
probability mass is), plus the top-5 ids at every position. llama.cpp's own
f16-vs-f32 differences are recorded on the same ids, so the Rust test
compares like with like. Prompts are tokenized with BOS where the model
asks for one (Gemma), special tokens parsed.

    /work/llama-venv/bin/python scripts/reference/llama_cpp_logits_reference.py MODEL.gguf NAME

NAME is the catalog name (qwen2.5-coder-0.5b, qwen2.5-coder-1.5b,
gemma-3-270m). Writes prompts.json and last_strided.f32 (little-endian f32,
prompts in order, ids 0, STRIDE, 2*STRIDE, ...).
"""
import json
import os
import sys

import numpy as np
import llama_cpp

STRIDE = 37
TOP = 64
SYSTEM = "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"

PROMPTS = [
    # A chat-templated math step, as the confidence family scores one.
    SYSTEM + "<|im_start|>user\nA shop sells pens at $3 each. How many pens can Ana buy with $27?<|im_end|>\n"
    "<|im_start|>assistant\nStep 1: 27 / 3 = 9, so Ana can buy 9 pens.",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n",
    "Überprüfe: 2³ = 8, √16 = 4, π ≈ 3.14159 — 日本語と中文も大丈夫 🦙.",
    "1234567890 + 9876543210 = 11111111100; 0.125 * 64 = 8.000; 2^20 = 1048576",
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
    "How many clips did Natalia sell altogether in April and May?\n\n"
    "Step 1: In May she sold 48 / 2 = 24 clips.\n\n"
    "Step 2: Altogether she sold 48 + 24 = 72 clips in April and May.\n\n"
    "Step 3: The answer is 72.",
]


# Gemma's turn markers; the 270M in the catalog is the base model, so
# plain text too.
GEMMA_PROMPTS = [
    "<start_of_turn>user\nA shop sells pens at $3 each. How many pens can Ana buy with $27?<end_of_turn>\n"
    "<start_of_turn>model\nStep 1: 27 / 3 = 9, so Ana can buy 9 pens.",
] + PROMPTS[1:]


def main() -> None:
    model_path, name = sys.argv[1], sys.argv[2]
    out_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures", "llama_cpp", name)
    os.makedirs(out_dir, exist_ok=True)
    llm = llama_cpp.Llama(model_path, n_ctx=512, n_threads=2, n_batch=512, logits_all=True, verbose=False,
                          type_k=0, type_v=0)
    llm16 = llama_cpp.Llama(model_path, n_ctx=512, n_threads=2, n_batch=512, logits_all=True, verbose=False)
    vocab = int(llm.n_vocab())
    strided = np.arange(0, vocab, STRIDE)
    records = []
    rows = []
    add_bos = llm.metadata.get("tokenizer.ggml.add_bos_token", "false") == "true"
    for text in GEMMA_PROMPTS if name.startswith("gemma") else PROMPTS:
        tokens = llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=True)
        llm.reset()
        llm.eval(tokens)
        logits = np.array(llm.scores[: len(tokens)], dtype=np.float32)
        llm16.reset()
        llm16.eval(tokens)
        logits16 = np.array(llm16.scores[: len(tokens)], dtype=np.float32)
        top5 = np.argsort(-logits, axis=1, kind="stable")[:, :5]
        last = logits[-1]
        top = np.argsort(-last, kind="stable")[:TOP]
        diff = np.abs(logits16[-1] - last)
        records.append({
            "text": text,
            "add_bos": add_bos,
            # llama.cpp against itself (f16 vs f32 KV) at the last position:
            # on the committed ids (what the test measures us on) and on the
            # whole vocabulary (for the record).
            "kv_f16_strided_max_abs_diff": float(diff[strided].max()),
            "kv_f16_strided_mean_abs_diff": float(diff[strided].mean()),
            "kv_f16_top_max_abs_diff": float(diff[top].max()),
            "kv_f16_full_max_abs_diff": float(diff.max()),
            "kv_f16_full_mean_abs_diff": float(diff.mean()),
            "kv_f16_top1_agreement": float((logits16.argmax(1) == logits.argmax(1)).mean()),
            "tokens": tokens,
            "top5_ids": top5.tolist(),
            "top5_logits": np.take_along_axis(logits, top5, axis=1).tolist(),
            "last_top_ids": top.tolist(),
            "last_top_logits": last[top].tolist(),
        })
        rows.append(last[strided])
        print(f"{len(tokens):4d} tokens, f16-vs-f32 KV: max {diff.max():.3f} mean {diff.mean():.4f}", file=sys.stderr)
    meta = {
        "model": os.path.basename(model_path),
        "llama_cpp_python": llama_cpp.__version__,
        "n_vocab": vocab,
        "stride": STRIDE,
        "prompts": records,
    }
    with open(os.path.join(out_dir, "prompts.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f, ensure_ascii=False, separators=(",", ":"))
    np.stack(rows).astype("<f4").tofile(os.path.join(out_dir, "last_strided.f32"))
    print(f"wrote {len(records)} prompts to {out_dir}")


if __name__ == "__main__":
    main()
