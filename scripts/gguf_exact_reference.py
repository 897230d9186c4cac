#!/usr/bin/env python3
"""Exact-arithmetic logits for SmolLM2-135M-Instruct (GGUF Q4_1).

llama.cpp quantizes activations to 8 bits before every product, and on this
model (large activation outliers) that noise moves logits by tenths. To check
the engine's forward pass itself, this script computes the same prompts in
float64 numpy from weights dequantized by llama.cpp's own gguf-py package,
with no activation quantization; the Rust test runs the engine's f32 path on
the same dequantized weights and compares.

The forward pass below is written from the Llama math (RMSNorm, adjacent-pair
RoPE as GGUF stores q/k, grouped-query causal attention, SwiGLU); it shares no
code with the Rust engine.

Setup: numpy, pyyaml, and gguf-py from the llama-cpp-python 0.3.36 sdist
(vendor/llama.cpp/gguf-py), e.g.
    PYTHONPATH=<sdist>/vendor/llama.cpp/gguf-py python3 scripts/gguf_exact_reference.py MODEL.gguf
Writes tests/fixtures/llama_cpp/smollm2_q4_1/exact_last_logits.f32 (the last
position of the first three prompts of prompts.json).
"""
import json
import os
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

N_PROMPTS = 3


def main() -> None:
    model = sys.argv[1]
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "llama_cpp", "smollm2_q4_1")
    prompts = json.load(open(os.path.join(here, "prompts.json"), encoding="utf-8"))["prompts"][:N_PROMPTS]
    reader = GGUFReader(model)
    tensors = {t.name: t for t in reader.tensors}
    field = lambda k: reader.fields[k].parts[reader.fields[k].data[0]][0]
    hidden = int(field("llama.embedding_length"))
    n_head = int(field("llama.attention.head_count"))
    n_kv = int(field("llama.attention.head_count_kv"))
    n_layer = int(field("llama.block_count"))
    eps = float(field("llama.attention.layer_norm_rms_epsilon"))
    base = float(field("llama.rope.freq_base"))
    hd = hidden // n_head

    cache = {}

    def weight(name):
        if name not in cache:
            t = tensors[name]
            a = dequantize(t.data, t.tensor_type).astype(np.float64)
            cache[name] = a.reshape([int(x) for x in reversed(t.shape)]) if len(t.shape) > 1 else a.reshape(-1)
        return cache[name]

    def rms(x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w

    rows = []
    for p in prompts:
        toks = p["tokens"]
        n = len(toks)
        inv = 1.0 / (base ** (np.arange(0, hd, 2) / hd))
        ang = np.arange(n)[:, None] * inv[None, :]
        cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]

        def rope(v):
            out = np.empty_like(v)
            a, b = v[..., 0::2], v[..., 1::2]
            out[..., 0::2] = a * cos - b * sin
            out[..., 1::2] = a * sin + b * cos
            return out

        x = weight("token_embd.weight")[toks]
        mask = np.triu(np.full((n, n), -np.inf), 1)
        for i in range(n_layer):
            pre = f"blk.{i}."
            h = rms(x, weight(pre + "attn_norm.weight"))
            q = rope((h @ weight(pre + "attn_q.weight").T).reshape(n, n_head, hd))
            k = rope((h @ weight(pre + "attn_k.weight").T).reshape(n, n_kv, hd))
            v = (h @ weight(pre + "attn_v.weight").T).reshape(n, n_kv, hd)
            att = np.zeros((n, n_head, hd))
            for head in range(n_head):
                kv = head // (n_head // n_kv)
                s = q[:, head] @ k[:, kv].T / np.sqrt(hd) + mask
                s = np.exp(s - s.max(-1, keepdims=True))
                att[:, head] = (s / s.sum(-1, keepdims=True)) @ v[:, kv]
            x = x + att.reshape(n, hidden) @ weight(pre + "attn_output.weight").T
            h = rms(x, weight(pre + "ffn_norm.weight"))
            g = h @ weight(pre + "ffn_gate.weight").T
            u = h @ weight(pre + "ffn_up.weight").T
            x = x + (g / (1.0 + np.exp(-g)) * u) @ weight(pre + "ffn_down.weight").T
        x = rms(x, weight("output_norm.weight"))
        rows.append(x[-1] @ weight("token_embd.weight").T)
    np.stack(rows).astype("<f4").tofile(os.path.join(here, "exact_last_logits.f32"))
    print(f"wrote exact last-position logits for {len(rows)} prompts")


if __name__ == "__main__":
    main()
