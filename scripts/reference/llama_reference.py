#!/usr/bin/env python3
"""Golden logits for SmolLM2-135M-Instruct (GGUF Q4_1) from llama.cpp.

llama.cpp is the independent reference the CPU engine is compared with. This
script is run by hand (not in CI); its output is committed under
tests/fixtures/llama_cpp/.

Setup (llama.cpp built from the llama-cpp-python sdist; native CPU detection
picks AMX kernels that crash on some VMs, hence the explicit flags):

    python3 -m venv /tmp/llama-venv
    /tmp/llama-venv/bin/pip install numpy scikit-build-core cmake ninja
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX2=ON \
      -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AMX_INT8=OFF -DGGML_AMX_TILE=OFF" \
      /tmp/llama-venv/bin/pip install --no-build-isolation --no-binary llama-cpp-python \
      llama-cpp-python==0.3.36
    /tmp/llama-venv/bin/python scripts/reference/llama_reference.py path/to/SmolLM2-135M-Instruct.Q4_1.gguf

Output: prompts.json (token ids, per-position top-5 ids and logits) and
last_logits.f32 (little-endian f32, the full vocabulary row at each prompt's
last position, prompts in order).
"""
import json
import os
import sys

import numpy as np
import llama_cpp

PROMPTS = [
    "The capital of France is",
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
    "How many clips did Natalia sell altogether in April and May?\n\nIn April she sold 48 clips.",
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "<|im_start|>user\nWhat is 15% of 80?<|im_end|>\n<|im_start|>assistant\n15% of 80 is 0.15 x 80 = 12.",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n",
    "Step 1: 3 boxes x 4 apples = 12 apples.\nStep 2: 12 - 5 = 7 apples remain.\nStep 3: The answer is 7.",
    "Überprüfe: 2³ = 8, √16 = 4, and π ≈ 3.14159 — so 8 + 4 + 3.14159 ≈ 15.14.",
]


def main() -> None:
    model_path = sys.argv[1]
    out_dir = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        os.path.dirname(__file__), "..", "..", "tests", "fixtures", "llama_cpp", "smollm2_q4_1")
    os.makedirs(out_dir, exist_ok=True)
    # F32 KV cache: the default F16 cache rounds keys and values to half
    # precision, a choice of the runtime rather than of the model (it moves
    # SmolLM2 logits by up to ~0.5); stepscore keeps K/V in f32.
    llm = llama_cpp.Llama(model_path, n_ctx=1024, n_threads=2, n_batch=512, logits_all=True, verbose=False,
                          type_k=0, type_v=0)
    # The same runtime with its default F16 KV cache: how far llama.cpp moves
    # from itself under a numerics choice is the scale any other engine's
    # distance to it is judged on.
    llm16 = llama_cpp.Llama(model_path, n_ctx=1024, n_threads=2, n_batch=512, logits_all=True, verbose=False)
    records = []
    last_rows = []
    for text in PROMPTS:
        tokens = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        llm.reset()
        llm.eval(tokens)
        logits = np.array(llm.scores[: len(tokens)], dtype=np.float32)
        top5 = np.argsort(-logits, axis=1, kind="stable")[:, :5]
        llm16.reset()
        llm16.eval(tokens)
        logits16 = np.array(llm16.scores[: len(tokens)], dtype=np.float32)
        diff = np.abs(logits16[-1] - logits[-1])
        records.append({
            "text": text,
            "kv_f16_last_max_abs_diff": float(diff.max()),
            "kv_f16_last_mean_abs_diff": float(diff.mean()),
            "kv_f16_top1_agreement": float((logits16.argmax(1) == logits.argmax(1)).mean()),
            "tokens": tokens,
            "top5_ids": top5.tolist(),
            "top5_logits": np.take_along_axis(logits, top5, axis=1).tolist(),
        })
        last_rows.append(logits[-1])
    meta = {
        "model": os.path.basename(model_path),
        "llama_cpp_python": llama_cpp.__version__,
        "n_vocab": int(llm.n_vocab()),
        "prompts": records,
    }
    with open(os.path.join(out_dir, "prompts.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f, ensure_ascii=False, indent=1)
    np.stack(last_rows).astype("<f4").tofile(os.path.join(out_dir, "last_logits.f32"))
    print(f"wrote {len(records)} prompts to {out_dir}")


if __name__ == "__main__":
    main()
