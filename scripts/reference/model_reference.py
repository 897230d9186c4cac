#!/usr/bin/env python3
"""Tiny decoder checkpoints and their reference outputs, for the Rust model tests.

Dependencies: Python 3.9+, numpy, safetensors (the PyPI package), e.g.
    python3 -m venv /work/ref-venv && /work/ref-venv/bin/pip install numpy safetensors
    /work/ref-venv/bin/python scripts/reference/model_reference.py

For each fixture this writes tests/fixtures/models/<name>/:
  config.json                      an HF config with the real keys and `architectures`
  *.safetensors (+ index json)     random weights with the real HF tensor names
  reference.json                   final-normed hidden states and logits for fixed
                                   token sequences, computed below in float64 numpy

The forward pass here is written from the published math of the HF Llama /
Qwen2 / Qwen3 / Mistral modelling code (RMSNorm, Qwen3's per-head q/k
RMSNorm, rotate_half RoPE, repeat_kv GQA, causal softmax attention, SwiGLU),
batched over the whole sequence with an explicit mask. It shares no code with the Rust implementation.

Weights are generated in float32, float16 or bfloat16; the reference computes
with exactly the stored values (upcast to float64), so only the Rust side's
float32 arithmetic separates the two results.
"""

import json
import os
import struct
import sys

import numpy as np
from safetensors.numpy import save_file

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures", "models")


# ---------------------------------------------------------------- storage


def to_bf16_bits(x):
    """Round float32 values to bfloat16 (round-to-nearest-even), as uint16 bits."""
    b = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (b + 0x7FFF + ((b >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def bf16_bits_to_f64(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def write_bf16_safetensors(path, tensors):
    """safetensors writer for BF16 (numpy has no bfloat16 dtype).

    Layout: u64 little-endian header length, JSON header, raw data; each
    header entry gives dtype, shape and [begin, end) offsets into the data.
    """
    header = {}
    blobs = []
    offset = 0
    for name, bits in tensors.items():
        raw = bits.astype("<u2").tobytes()
        header[name] = {"dtype": "BF16", "shape": list(bits.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)


# ---------------------------------------------------------------- weights


def make_weights(rng, cfg, arch):
    h = cfg["hidden_size"]
    nh = cfg["num_attention_heads"]
    nkv = cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or h // nh
    ff = cfg["intermediate_size"]
    v = cfg["vocab_size"]

    def mat(rows, cols, scale):
        return (rng.standard_normal((rows, cols)) * scale).astype(np.float32)

    def gain(n):
        # Gemma stores each norm's gain less 1 (its RMSNorm multiplies by 1 + w).
        offset = 0.0 if arch == "gemma3" else 1.0
        return (offset + 0.1 * rng.standard_normal(n)).astype(np.float32)

    w = {"model.embed_tokens.weight": mat(v, h, 1.0)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = gain(h)
        w[p + "self_attn.q_proj.weight"] = mat(nh * hd, h, 0.25)
        w[p + "self_attn.k_proj.weight"] = mat(nkv * hd, h, 0.25)
        w[p + "self_attn.v_proj.weight"] = mat(nkv * hd, h, 0.15)
        w[p + "self_attn.o_proj.weight"] = mat(h, nh * hd, 0.15)
        if arch == "qwen2":
            w[p + "self_attn.q_proj.bias"] = (0.2 * rng.standard_normal(nh * hd)).astype(np.float32)
            w[p + "self_attn.k_proj.bias"] = (0.2 * rng.standard_normal(nkv * hd)).astype(np.float32)
            w[p + "self_attn.v_proj.bias"] = (0.2 * rng.standard_normal(nkv * hd)).astype(np.float32)
        if arch in ("qwen3", "gemma3"):
            w[p + "self_attn.q_norm.weight"] = gain(hd)
            w[p + "self_attn.k_norm.weight"] = gain(hd)
        w[p + "post_attention_layernorm.weight"] = gain(h)
        if arch == "gemma3":
            w[p + "pre_feedforward_layernorm.weight"] = gain(h)
            w[p + "post_feedforward_layernorm.weight"] = gain(h)
        w[p + "mlp.gate_proj.weight"] = mat(ff, h, 0.15)
        w[p + "mlp.up_proj.weight"] = mat(ff, h, 0.15)
        w[p + "mlp.down_proj.weight"] = mat(h, ff, 0.1)
    w["model.norm.weight"] = gain(h)
    if not cfg["tie_word_embeddings"]:
        w["lm_head.weight"] = mat(v, h, 0.1)
    return w


# ---------------------------------------------------------------- the math


def inv_frequencies(cfg, head_dim, local=False):
    if local:  # Gemma 3's local layers: their own base, never scaled
        theta = cfg["rope_local_base_freq"]
        return 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    theta = cfg.get("rope_theta", 10000.0)
    inv = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    rs = cfg.get("rope_scaling")
    if rs is None:
        return inv
    assert rs["rope_type"] == "llama3"
    factor, lo, hi = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
    old = rs["original_max_position_embeddings"]
    wavelen = 2 * np.pi / inv
    # Long wavelengths slowed by `factor`, short kept, the band between blended.
    scaled = np.where(wavelen > old / lo, inv / factor, inv)
    smooth = (old / wavelen - lo) / (hi - lo)
    blended = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= old / hi) & (wavelen <= old / lo)
    return np.where(medium, blended, scaled)


def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def rotate_half(x):
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def apply_rope(x, cos, sin):
    # x: [heads, T, hd]; cos/sin: [T, hd]
    return x * cos[None] + rotate_half(x) * sin[None]


def softmax(s):
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=-1, keepdims=True)


def reference_forward(cfg, w, tokens):
    """Final-normed hidden states [T, h] and logits [T, vocab], float64."""
    h = cfg["hidden_size"]
    nh = cfg["num_attention_heads"]
    nkv = cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or h // nh
    eps = cfg["rms_norm_eps"]
    T = len(tokens)
    W = {k: v.astype(np.float64) for k, v in w.items()}
    gemma = cfg["model_type"] == "gemma3_text"

    def norm(v, name):
        # Gemma's RMSNorm multiplies by 1 + weight.
        return rms_norm(v, W[name] + (1.0 if gemma else 0.0), eps)

    x = W["model.embed_tokens.weight"][np.array(tokens)]
    if gemma:
        x = x * np.sqrt(h)
    pos = np.arange(T, dtype=np.float64)

    def rope_tables(local):
        freqs = np.outer(pos, inv_frequencies(cfg, hd, local))
        emb = np.concatenate([freqs, freqs], axis=-1)
        return np.cos(emb), np.sin(emb)

    i = np.arange(T)[:, None]
    j = np.arange(T)[None, :]

    def causal_mask(window):
        allowed = j <= i
        if window is not None:
            allowed &= (i - j) < window
        return np.where(allowed, 0.0, -np.inf)

    # Scores are divided by sqrt(query_pre_attn_scalar) (Gemma) or sqrt(head_dim).
    denom = np.sqrt(cfg["query_pre_attn_scalar"] if gemma else hd)

    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        local = gemma and cfg["layer_types"][layer] == "sliding_attention"
        if cfg["model_type"] == "mistral" or local:
            mask = causal_mask(cfg.get("sliding_window"))
        else:
            mask = causal_mask(None)
        cos, sin = rope_tables(local)
        a = norm(x, p + "input_layernorm.weight")
        q = a @ W[p + "self_attn.q_proj.weight"].T
        k = a @ W[p + "self_attn.k_proj.weight"].T
        v = a @ W[p + "self_attn.v_proj.weight"].T
        if p + "self_attn.q_proj.bias" in W:
            q = q + W[p + "self_attn.q_proj.bias"]
            k = k + W[p + "self_attn.k_proj.bias"]
            v = v + W[p + "self_attn.v_proj.bias"]
        q = q.reshape(T, nh, hd).transpose(1, 0, 2)
        k = k.reshape(T, nkv, hd).transpose(1, 0, 2)
        v = v.reshape(T, nkv, hd).transpose(1, 0, 2)
        if p + "self_attn.q_norm.weight" in W:
            # Qwen3: each head's query and key RMS-normed before RoPE.
            q = norm(q, p + "self_attn.q_norm.weight")
            k = norm(k, p + "self_attn.k_norm.weight")
        q = apply_rope(q, cos, sin)
        k = apply_rope(k, cos, sin)
        k = np.repeat(k, nh // nkv, axis=0)  # repeat_kv: head h reads kv head h // group
        v = np.repeat(v, nh // nkv, axis=0)
        scores = q @ k.transpose(0, 2, 1) / denom + mask[None]
        o = softmax(scores) @ v  # [nh, T, hd]
        o = o.transpose(1, 0, 2).reshape(T, nh * hd)
        o = o @ W[p + "self_attn.o_proj.weight"].T
        if gemma:
            # Gemma's post_attention_layernorm follows attention; its
            # pre_feedforward_layernorm is the norm before the MLP.
            x = x + norm(o, p + "post_attention_layernorm.weight")
            m = norm(x, p + "pre_feedforward_layernorm.weight")
        else:
            x = x + o
            m = norm(x, p + "post_attention_layernorm.weight")
        g = m @ W[p + "mlp.gate_proj.weight"].T
        u = m @ W[p + "mlp.up_proj.weight"].T
        act = gelu_tanh(g) if gemma else g / (1 + np.exp(-g))
        f = (act * u) @ W[p + "mlp.down_proj.weight"].T
        if gemma:
            f = norm(f, p + "post_feedforward_layernorm.weight")
        x = x + f

    hidden = norm(x, "model.norm.weight")
    head = W["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else W["lm_head.weight"]
    return hidden, hidden @ head.T


# ---------------------------------------------------------------- fixtures


def base_config(model_type, arch_class, vocab, **extra):
    cfg = {
        "architectures": [arch_class],
        "model_type": model_type,
        "hidden_act": "silu",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": vocab,
        "max_position_embeddings": 64,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "rope_scaling": None,
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
    }
    cfg.update(extra)
    return cfg


def sequences(vocab):
    return [
        [1, 2, 3, 4, 5],
        [vocab - 1, 0, 17, 17, 42, 250, 9, 128, 77, 3, 200, 11],
        [7],
        [5, 60, 61, 62, 63, 64, 65, 66, 150, 151, 152, 299, 298, 1, 0, 100, 33, 44, 55, 66],
    ]


def write_fixture(name, cfg, weights_f64, write_weights, extra_note):
    d = os.path.join(ROOT, name)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        os.remove(os.path.join(d, f))
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    write_weights(d)
    cases = []
    for toks in sequences(cfg["vocab_size"]):
        hidden, logits = reference_forward(cfg, weights_f64, toks)
        cases.append({
            "tokens": toks,
            "hidden": [round(float(v), 8) for v in hidden.ravel()],
            "logits": [round(float(v), 8) for v in logits.ravel()],
        })
    ref = {
        "generator": "scripts/reference/model_reference.py (float64 numpy forward)",
        "note": extra_note,
        "hidden_size": cfg["hidden_size"],
        "vocab_size": cfg["vocab_size"],
        "cases": cases,
    }
    with open(os.path.join(d, "reference.json"), "w") as f:
        json.dump(ref, f, separators=(",", ":"))


def write_bf16_fixture(name, cfg, w32, note):
    """A single-file BF16 checkpoint of `w32`; the reference runs on the rounded values."""
    bits = {n: to_bf16_bits(a) for n, a in w32.items()}
    exact = {n: bf16_bits_to_f64(b) for n, b in bits.items()}
    write_fixture(name, cfg, exact,
                  lambda d: write_bf16_safetensors(os.path.join(d, "model.safetensors"), bits), note)


def qwen2_fixture(rng):
    # Qwen2: q/k/v biases, untied lm_head, float32, sharded in two files, plus
    # an extra PRM-style value head tensor the decoder must ignore.
    cfg = base_config("qwen2", "Qwen2ForCausalLM", 300, rope_theta=1000000.0,
                      use_sliding_window=False, sliding_window=4096, max_window_layers=2)
    w = make_weights(rng, cfg, "qwen2")
    w["v_head.summary.weight"] = (0.1 * rng.standard_normal((1, 64))).astype(np.float32)
    names = list(w)
    half = len(names) // 2
    files = {"model-00001-of-00002.safetensors": names[:half], "model-00002-of-00002.safetensors": names[half:]}

    def write(d):
        weight_map = {}
        for fname, group in files.items():
            save_file({n: w[n] for n in group}, os.path.join(d, fname))
            weight_map.update({n: fname for n in group})
        total = sum(a.nbytes for a in w.values())
        with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)

    write_fixture("qwen2-tiny-f32-sharded", cfg, w, write, "Qwen2, qkv biases, untied lm_head, F32, 2 shards")


def llama_fixture(rng):
    # Llama: tied embeddings, BF16 storage, llama3 rope scaling whose three
    # frequency bands (kept, blended, slowed) are all populated at head_dim 16.
    cfg = base_config("llama", "LlamaForCausalLM", 300, tie_word_embeddings=True, attention_bias=False,
                      mlp_bias=False, torch_dtype="bfloat16",
                      rope_scaling={"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0,
                                    "high_freq_factor": 4.0, "original_max_position_embeddings": 32})
    write_bf16_fixture("llama-tiny-bf16", cfg, make_weights(rng, cfg, "llama"),
                       "Llama, tied embeddings, BF16, llama3 rope scaling, single file")


def mistral_fixture(rng):
    # Mistral: no biases, untied, float16 storage, a sliding window of 4 so
    # sequences longer than that exercise the window mask.
    cfg = base_config("mistral", "MistralForCausalLM", 300, sliding_window=4, torch_dtype="float16")
    w32 = make_weights(rng, cfg, "mistral")
    w16 = {n: a.astype(np.float16) for n, a in w32.items()}
    exact = {n: a.astype(np.float64) for n, a in w16.items()}
    write_fixture("mistral-tiny-f16", cfg, exact,
                  lambda d: save_file(w16, os.path.join(d, "model.safetensors")),
                  "Mistral, untied, F16, sliding_window 4, single file")


def qwen3_fixture(rng):
    # Qwen3: per-head q/k RMSNorm, no biases, tied embeddings, BF16, and a
    # head width (20) apart from hidden / heads (16), as Qwen3's own
    # checkpoints have (128 vs 64 for Qwen3-0.6B), with a tail past the
    # last multiple of 8 for the norm's lane sums.
    cfg = base_config("qwen3", "Qwen3ForCausalLM", 300, head_dim=20, attention_bias=False,
                      tie_word_embeddings=True, rope_theta=1000000.0, torch_dtype="bfloat16",
                      use_sliding_window=False, sliding_window=None, max_window_layers=2,
                      max_position_embeddings=256)  # the GPU test runs 151 positions
    write_bf16_fixture("qwen3-tiny-bf16", cfg, make_weights(rng, cfg, "qwen3"),
                       "Qwen3, q/k norms, head_dim 20 != hidden/heads, tied embeddings, BF16, single file")


def gemma3_fixture(rng):
    # Gemma 3's text decoder as transformers writes it: norms stored as
    # gain - 1, post-attention and post-MLP norms, q/k norms, GELU (tanh),
    # embeddings scaled by sqrt(hidden), local layers (window 4, RoPE base
    # 10000) around a global one (base 1e6), scores scaled by
    # query_pre_attn_scalar (20) apart from the head width (24), one KV head
    # for four query heads (as the 270M), tied, BF16.
    cfg = base_config("gemma3_text", "Gemma3ForCausalLM", 300, num_hidden_layers=3, num_key_value_heads=1,
                      head_dim=24, query_pre_attn_scalar=20, sliding_window=4,
                      layer_types=["sliding_attention", "full_attention", "sliding_attention"],
                      rope_theta=1000000.0, rope_local_base_freq=10000.0, tie_word_embeddings=True,
                      attention_bias=False, final_logit_softcapping=None, attn_logit_softcapping=None,
                      hidden_activation="gelu_pytorch_tanh", torch_dtype="bfloat16",
                      max_position_embeddings=256, bos_token_id=2, eos_token_id=1, pad_token_id=0)
    del cfg["hidden_act"]
    write_bf16_fixture("gemma3-tiny-bf16", cfg, make_weights(rng, cfg, "gemma3"),
                       "Gemma 3 text decoder, local/global layers, post norms, GELU, BF16, tied, single file")


def main():
    rng = np.random.default_rng(20240611)
    qwen2_fixture(rng)
    llama_fixture(rng)
    mistral_fixture(rng)
    # Appended last: the fixtures above keep their random draws and bytes.
    qwen3_fixture(rng)
    gemma3_fixture(rng)
    for name in sorted(os.listdir(ROOT)):
        d = os.path.join(ROOT, name)
        size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
        print(f"{name}: {size} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
