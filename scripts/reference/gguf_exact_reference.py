#!/usr/bin/env python3
"""Exact-arithmetic logits for a quantized GGUF (SmolLM2-135M Q4_1, Qwen2.5-Coder-0.5B).

llama.cpp quantizes activations to 8 bits before every product, and on these
models (large activation outliers) that noise moves logits by tenths. To check
the engine's forward pass itself, this script computes the same prompts in
float64 numpy from weights dequantized by llama.cpp's own gguf-py package,
with no activation quantization; the Rust test runs the engine's f32 path on
the same dequantized weights and compares.

The forward pass below is written from the Llama / Qwen2 math (RMSNorm, RoPE
on adjacent pairs as llama GGUFs store q/k, or on halves (NeoX) for qwen2,
q/k/v biases for qwen2, grouped-query causal attention, SwiGLU, a tied or
separate output matrix); it shares no code with the Rust engine.

Setup: numpy, pyyaml, and gguf-py from the llama-cpp-python 0.3.36 sdist
(vendor/llama.cpp/gguf-py), e.g.
    PYTHONPATH=<sdist>/vendor/llama.cpp/gguf-py python3 scripts/reference/gguf_exact_reference.py MODEL.gguf [FIXTURE_DIR]
FIXTURE_DIR (default tests/fixtures/llama_cpp/smollm2_q4_1) holds the
prompts.json of scripts/reference/llama_reference.py or scripts/reference/llama_cpp_logits_reference.py;
the last position of its first three prompts is computed. With a full-row
fixture (no "stride" in prompts.json) this writes exact_last_logits.f32 (the
full rows); with a strided one, exact.json (per prompt the top-64 ids and
logits) and exact_last_strided.f32 (every stride-th logit), as the llama.cpp
fixture next to it.
"""
import json
import os
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

N_PROMPTS = 3
TOP = 64


def main() -> None:
    model = sys.argv[1]
    here = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures", "llama_cpp", "smollm2_q4_1")
    meta = json.load(open(os.path.join(here, "prompts.json"), encoding="utf-8"))
    prompts = meta["prompts"][:N_PROMPTS]
    stride = meta.get("stride")
    reader = GGUFReader(model)
    tensors = {t.name: t for t in reader.tensors}
    field = lambda k: reader.fields[k].parts[reader.fields[k].data[0]]
    arch = bytes(field("general.architecture")).decode()
    if arch not in ("llama", "qwen2"):
        sys.exit(f"architecture {arch} is not handled here")
    num = lambda k: field(f"{arch}.{k}")[0]
    hidden = int(num("embedding_length"))
    n_head = int(num("attention.head_count"))
    n_kv = int(num("attention.head_count_kv"))
    n_layer = int(num("block_count"))
    eps = float(num("attention.layer_norm_rms_epsilon"))
    base = float(num("rope.freq_base"))
    hd = hidden // n_head
    neox = arch == "qwen2"

    def weight(name):
        t = tensors[name]
        a = dequantize(t.data, t.tensor_type).astype(np.float64)
        return a.reshape([int(x) for x in reversed(t.shape)]) if len(t.shape) > 1 else a.reshape(-1)

    def linear(h, pre, name):
        y = h @ weight(pre + name + ".weight").T
        if pre + name + ".bias" in tensors:
            y = y + weight(pre + name + ".bias")
        return y

    def rms(x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w

    def rope(v):
        n = v.shape[0]
        inv = 1.0 / (base ** (np.arange(0, hd, 2) / hd))
        ang = np.arange(n)[:, None] * inv[None, :]
        cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        out = np.empty_like(v)
        if neox:
            a, b = v[..., : hd // 2], v[..., hd // 2:]
            out[..., : hd // 2] = a * cos - b * sin
            out[..., hd // 2:] = a * sin + b * cos
        else:
            a, b = v[..., 0::2], v[..., 1::2]
            out[..., 0::2] = a * cos - b * sin
            out[..., 1::2] = a * sin + b * cos
        return out

    # Layer by layer over all prompts, so each weight is dequantized once
    # and not kept (the 0.5B in float64 would hold 4 GB).
    embd = weight("token_embd.weight")
    xs = [embd[p["tokens"]] for p in prompts]
    for i in range(n_layer):
        pre = f"blk.{i}."
        for j, x in enumerate(xs):
            n = x.shape[0]
            mask = np.triu(np.full((n, n), -np.inf), 1)
            h = rms(x, weight(pre + "attn_norm.weight"))
            q = rope(linear(h, pre, "attn_q").reshape(n, n_head, hd))
            k = rope(linear(h, pre, "attn_k").reshape(n, n_kv, hd))
            v = linear(h, pre, "attn_v").reshape(n, n_kv, hd)
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
            xs[j] = x + (g / (1.0 + np.exp(-g)) * u) @ weight(pre + "ffn_down.weight").T
        print(f"layer {i + 1}/{n_layer}", file=sys.stderr)
    out_w = weight("output.weight") if "output.weight" in tensors else embd
    rows = [rms(x, weight("output_norm.weight"))[-1] @ out_w.T for x in xs]
    if stride is None:
        np.stack(rows).astype("<f4").tofile(os.path.join(here, "exact_last_logits.f32"))
    else:
        tops = []
        for r in rows:
            top = np.argsort(-r, kind="stable")[:TOP]
            tops.append({"top_ids": top.tolist(), "top_logits": r[top].tolist()})
        with open(os.path.join(here, "exact.json"), "w", encoding="utf-8") as f:
            json.dump({"generator": "scripts/reference/gguf_exact_reference.py (float64)", "stride": stride,
                       "prompts": tops}, f, separators=(",", ":"))
        np.stack([r[::stride] for r in rows]).astype("<f4").tofile(os.path.join(here, "exact_last_strided.f32"))
    print(f"wrote exact last-position logits for {len(rows)} prompts")


if __name__ == "__main__":
    main()
