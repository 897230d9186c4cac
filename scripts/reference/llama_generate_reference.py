#!/usr/bin/env python3
"""Greedy generations from llama.cpp, the reference `stepscore generate`'s
greedy decoding is compared with (crates/stepscore/tests/generate.rs).

Run by hand (not in CI), with llama-cpp-python built from its sdist as
scripts/reference/llama_reference.py describes; the output is committed:

    /work/llama-venv/bin/python scripts/reference/llama_generate_reference.py \
        ~/.cache/stepscore/SmolLM2-135M-Instruct.Q4_1.gguf tests/fixtures/llama_cpp/generate_smollm2.json

(likewise generate_qwen2.5-coder-0.5b.json and generate_gemma-3-270m.json;
Gemma's prompts use its turn markers).

Each prompt is tokenized by llama.cpp (BOS as the model says, special
tokens parsed), then 64 tokens are decoded greedily (top-k 1, no penalty),
stopping early at the end-of-generation token, which is not recorded.
"""
import json
import sys

import llama_cpp

PROMPTS = [
    "The capital of France is",
    "Question: Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
    "How many clips did Natalia sell altogether in April and May?\nAnswer: Let's think step by step.",
    "<|im_start|>user\nWhat is 15% of 80?<|im_end|>\n<|im_start|>assistant\n",
    "def fibonacci(n):\n",
    "Step 1: 3 boxes x 4 apples = 12 apples.\nStep 2:",
]
# Gemma has its own turn markers.
GEMMA_PROMPTS = [p.replace("<|im_start|>user\n", "<start_of_turn>user\n")
                 .replace("<|im_end|>\n<|im_start|>assistant\n", "<end_of_turn>\n<start_of_turn>model\n")
                 for p in PROMPTS]
N = 64


def main(model, out):
    # llama.cpp's defaults: an f16 KV cache. (With an f32 one, as stepscore
    # keeps, llama.cpp's own greedy text leaves its f16 text within a few
    # tokens on these prompts: near-ties decide, see tests/generate.rs.)
    llm = llama_cpp.Llama(model_path=model, n_ctx=512, n_threads=2, verbose=False, seed=0)
    rows = []
    for prompt in GEMMA_PROMPTS if "gemma" in model.rsplit("/", 1)[-1].lower() else PROMPTS:
        tokens = llm.tokenize(prompt.encode(), add_bos=llm.metadata.get("tokenizer.ggml.add_bos_token", "true") != "false", special=True)
        llm.reset()
        got = []
        for t in llm.generate(tokens, top_k=1, top_p=1.0, min_p=0.0, temp=0.0, repeat_penalty=1.0):
            if llama_cpp.llama_token_is_eog(llm._model.vocab, t) or len(got) == N:
                break
            got.append(int(t))
        rows.append({"prompt": prompt, "prompt_tokens": [int(t) for t in tokens], "tokens": got})
        print(repr(llm.detokenize(got).decode("utf-8", "replace"))[:120], file=sys.stderr)
    with open(out, "w") as f:
        json.dump({"model": model.rsplit("/", 1)[-1], "llama_cpp_python": llama_cpp.__version__,
                   "max_new_tokens": N, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
