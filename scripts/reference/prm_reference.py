#!/usr/bin/env python3
"""Tiny PRM checkpoints of each family, with reference step scores.

Dependencies: Python 3.9+, numpy, safetensors, tokenizers (HF, the library
transformers tokenizes with), jinja2 (what transformers renders chat
templates with), e.g.
    python3 -m venv /work/ref-venv
    /work/ref-venv/bin/pip install numpy safetensors tokenizers jinja2
    /work/ref-venv/bin/python scripts/reference/prm_reference.py
(tested with numpy 2.4, safetensors 0.8, tokenizers 0.23.3, jinja2 3.1).

Writes tests/fixtures/prm/<name>/ with config.json, model.safetensors,
tokenizer.json, tokenizer_config.json and reference.json; see
tests/fixtures/prm/README.md for the protocol of each family and where its
facts come from. Everything is deterministic: tokenizers are trained on the
corpus below (BPE training is deterministic), weights come from fixed seeds.

The decoder forward is scripts/reference/model_reference.py's float64 numpy forward
(imported, not copied); this file adds only the PRM prompt building,
tokenization and heads, each written from the family's public reference code.
"""

import json
import math
import os
import struct
import sys

import numpy as np
from jinja2.sandbox import ImmutableSandboxedEnvironment
from safetensors.numpy import save_file
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
from tokenizers import processors, trainers

sys.dont_write_bytecode = True  # importing model_reference must not leave scripts/reference/__pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model_reference as mr  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures", "prm")

# ---------------------------------------------------------------- corpus

QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")

BASE_LINES = [
    "Please reason step by step, and put your final answer within \\boxed{}.",
    "First, we compute the sum of the two numbers.",
    "Then we multiply the result by 3 to get the total.",
    "The answer is \\boxed{42}.",
    "Let $x$ be the number of apples. Then $2x + 3 = 11$, so $x = 4$.",
    "We factor the quadratic: $x^2 - 5x + 6 = (x - 2)(x - 3)$.",
    "So the roots are $x = 2$ and $x = 3$.",
    "The area of the triangle is $\\frac{1}{2} \\cdot 6 \\cdot 4 = 12$.",
    "Since $\\sqrt{16} = 4$, the side length is 4.",
    "Therefore the probability is $\\frac{3}{8}$.",
    "Subtract 7 from both sides to get $y = 5$.",
    "Each box holds 12 pens, so 5 boxes hold 60 pens.",
    "The total cost is $3 \\times 15 = 45$ dollars.",
    "Divide both sides by 2: $x = 9$.",
    "Now add the remaining terms together.",
    "Thus the final answer is 7.",
]


def corpus(extra=()):
    """Math text, with the markers of every family frequent enough to merge
    (and `extra` lines for one fixture's own vocabulary)."""
    lines = list(BASE_LINES) + list(extra)
    rng = np.random.default_rng(7)
    for k in range(60):
        a, b = (int(v) for v in rng.integers(1, 60, size=2))
        op = ["+", "-", "\\times"][k % 3]
        val = a + b if op == "+" else a - b if op == "-" else a * b
        lines.append(f"Step {k % 5 + 1}: {a} {op} {b} = {val} ки")
        lines.append(f"The answer is {val} + 0 - 0 ки")
    # Paragraph breaks, as the chat templates and the confidence protocol use them.
    text = "\n\n".join(lines)
    return [text[i:i + 400] for i in range(0, len(text), 400)]


# ---------------------------------------------------------------- tokenizers


def byte_level_tokenizer(pattern, specials, vocab_size, nfc, bos=None, ignore_merges=False, extra=()):
    """A GPT-2 style byte-level BPE laid out like Qwen2's / Llama 3's tokenizer.json."""
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    if nfc:
        tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    # Qwen2's tokenizer.json turns every ByteLevel option off; Llama 3's keeps the defaults.
    opts = {} if bos is not None else {"add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False, special_tokens=[])
    tok.train_from_iterator(corpus(extra), trainer)
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    byte_level = processors.ByteLevel(**dict({"trim_offsets": False}, **opts))
    if bos is None:
        tok.post_processor = byte_level
    else:
        bos_id = tok.token_to_id(bos)
        tok.post_processor = processors.Sequence([
            byte_level,
            processors.TemplateProcessing(single=f"{bos}:0 $A:0", pair=f"{bos}:0 $A:0 {bos}:1 $B:1",
                                          special_tokens=[(bos, bos_id)]),
        ])
    if opts:  # the Python decoders.ByteLevel constructor takes no options; set them in the JSON
        spec = json.loads(tok.to_str())
        spec["decoder"] = dict({"type": "ByteLevel"}, **opts)
        tok = Tokenizer.from_str(json.dumps(spec))
    return tok


def metaspace_tokenizer(vocab_size):
    """Llama-2 / Mistral-7B-v0.1 layout: <unk> <s> </s>, 256 <0xNN> byte tokens,
    normalizer Prepend("▁") + Replace(" ", "▁"), no pre-tokenizer, byte_fallback,
    and a TemplateProcessing post-processor that adds <s>."""
    byte_tokens = [f"<0x{b:02X}>" for b in range(256)]
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    # Training splits words at "▁" so no merge crosses a word; encoding then
    # runs on the whole normalized string as the real tokenizer.json does.
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False,
                                  special_tokens=["<unk>", "<s>", "</s>"] + byte_tokens)
    # "\n" stays out of the alphabet (it reaches the model as <0x0A>, as in Mistral).
    lines = [line for chunk in corpus() for line in chunk.split("\n") if line]
    tok.train_from_iterator(lines, trainer)

    spec = json.loads(tok.to_str())
    spec["added_tokens"] = [t for t in spec["added_tokens"] if t["content"] in ("<unk>", "<s>", "</s>")]
    spec["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "▁"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
    ]}
    spec["pre_tokenizer"] = None
    spec["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
        {"type": "ByteFallback"},
        {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0},
    ]}
    tok = Tokenizer.from_str(json.dumps(spec))
    tok.post_processor = processors.TemplateProcessing(
        single="<s>:0 $A:0", pair="<s>:0 $A:0 <s>:1 $B:1", special_tokens=[("<s>", tok.token_to_id("<s>"))])
    return tok


def gemma_tokenizer(vocab_size):
    """Gemma's layout: <pad> <eos> <bos> <unk> as ids 0-3, then its turn
    markers, 256 <0xNN> byte tokens, normalizer Replace(" ", "▁") with no
    prepended "▁" (add_space_prefix false), byte_fallback, and a post-processor
    that adds <bos>."""
    specials = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]
    byte_tokens = [f"<0x{b:02X}>" for b in range(256)]
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never", split=True)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False, special_tokens=specials + byte_tokens)
    lines = [line for chunk in corpus() for line in chunk.split("\n") if line]
    tok.train_from_iterator(lines, trainer)

    spec = json.loads(tok.to_str())
    spec["added_tokens"] = [t for t in spec["added_tokens"] if t["content"] in specials]
    spec["normalizer"] = {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}
    spec["pre_tokenizer"] = None
    spec["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
        {"type": "ByteFallback"},
        {"type": "Fuse"},
    ]}
    tok = Tokenizer.from_str(json.dumps(spec))
    tok.post_processor = processors.TemplateProcessing(
        single="<bos>:0 $A:0", pair="<bos>:0 $A:0 <bos>:1 $B:1", special_tokens=[("<bos>", tok.token_to_id("<bos>"))])
    return tok


def render(template, **kwargs):
    """Chat template rendering as transformers does it (sandboxed jinja2, trim/lstrip blocks)."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(template).render(**kwargs)


QWEN25_TEMPLATE = r"""{%- if messages[0]['role'] == 'system' %}
{{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
{%- else %}
{{- '<|im_start|>system\nPlease reason step by step, and put your final answer within \\boxed{}.<|im_end|>\n' }}
{%- endif %}
{%- for message in messages %}
{%- if not (message['role'] == 'system' and loop.first) %}
{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|im_start|>assistant\n' }}
{%- endif %}
"""

LLAMA31_TEMPLATE = r"""{{- bos_token }}
{%- if not date_string is defined %}
{%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if messages[0]['role'] == 'system' %}
{%- set system_message = messages[0]['content']|trim %}
{%- set messages = messages[1:] %}
{%- else %}
{%- set system_message = "" %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{{- "Cutting Knowledge Date: December 2023\n" }}
{{- "Today Date: " + date_string + "\n\n" }}
{{- system_message }}
{{- "<|eot_id|>" }}
{%- for message in messages %}
{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
"""

QWEN_SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."

# ---------------------------------------------------------------- cases

CASES = [
    {"problem": "What is 12 + 7 \\times 3?",
     "steps": ["First compute 7 \\times 3 = 21.", "Then 12 + 21 = 33.", "The answer is \\boxed{33}."]},
    {"problem": "Solve $x^2 - 5x + 6 = 0$.",
     "steps": ["We factor: $(x - 2)(x - 3) = 0$.", "So $x = 2$ or $x = 3$, and the sum is $\\frac{10}{2}$."]},
    {"problem": "Une boîte contient 3 pommes et 4 poires. Combien de fruits ? 答案是多少？",
     "steps": ["3 + 4 = 7 fruits — c'est simple.", "Réponse : 7 ✓ (π ≈ 3.14 n'intervient pas)",
               "Итак, ответ 7."]},
    {"problem": "Compute $2^{10}$.", "steps": ["$2^{10} = 1024$, so the answer is \\boxed{1024}."]},
]

# ---------------------------------------------------------------- model helpers


def small_config(model_type, arch, vocab, hidden, **extra):
    cfg = mr.base_config(model_type, arch, vocab, **extra)
    cfg.update({"hidden_size": hidden, "intermediate_size": 2 * hidden, "max_position_embeddings": 512})
    cfg.update(extra)
    return cfg


def padded(n, multiple=16):
    return (n + multiple - 1) // multiple * multiple


def hidden_states(cfg, w, ids):
    """Final-normed hidden states; the lm_head is irrelevant (and may be absent)."""
    tied = dict(cfg, tie_word_embeddings=True)
    h, _ = mr.reference_forward(tied, w, ids)
    return h


def logits_of(cfg, w, ids):
    return mr.reference_forward(cfg, w, ids)[1]


def f64(w):
    return {k: v.astype(np.float64) for k, v in w.items()}


def log_softmax(x):
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def check_spread(name, scores):
    flat = [s for case in scores for s in case]
    assert all(0.03 < s < 0.97 for s in flat), (name, flat)
    assert np.std(flat) > 0.08, (name, flat)


def r(x):
    return float(x)  # json writes the shortest repr that round-trips


# ---------------------------------------------------------------- writing


def write_fixture(name, cfg, tok, tok_config, write_weights, reference):
    d = os.path.join(ROOT, name)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        os.remove(os.path.join(d, f))
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    tok.save(os.path.join(d, "tokenizer.json"))
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump(tok_config, f, indent=2, ensure_ascii=False)
    write_weights(os.path.join(d, "model.safetensors"))
    reference["generator"] = "scripts/reference/prm_reference.py (float64 numpy)"
    with open(os.path.join(d, "reference.json"), "w") as f:
        json.dump(reference, f, indent=1, ensure_ascii=False)


def added_tokens_decoder(tok):
    """The tokenizer_config.json view of tokenizer.json's added tokens."""
    out = {}
    spec = json.loads(tok.to_str())
    for t in spec["added_tokens"]:
        out[str(t["id"])] = {k: t[k] for k in ("content", "lstrip", "normalized", "rstrip", "single_word",
                                                  "special")}
    return out


# ---------------------------------------------------------------- 1. score head


def qwen2_prm(rng):
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<extra_0>"]
    tok = byte_level_tokenizer(QWEN2_PATTERN, specials, 420, nfc=True)
    n = tok.get_vocab_size()
    cfg = small_config("qwen2", "Qwen2ForProcessRewardModel", padded(n), 64, rope_theta=1000000.0,
                       use_sliding_window=False, sliding_window=4096, max_window_layers=2,
                       bos_token_id=tok.token_to_id("<|endoftext|>"), eos_token_id=tok.token_to_id("<|im_end|>"),
                       torch_dtype="bfloat16")
    w32 = mr.make_weights(rng, cfg, "qwen2")
    del w32["lm_head.weight"]  # Qwen2ForProcessRewardModel has no vocabulary projection
    h = cfg["hidden_size"]
    w32["score.0.weight"] = (rng.standard_normal((h, h)) / math.sqrt(h)).astype(np.float32)
    w32["score.0.bias"] = (0.1 * rng.standard_normal(h)).astype(np.float32)

    sep = tok.token_to_id("<extra_0>")
    prompts = []
    for c in CASES:
        messages = [{"role": "system", "content": QWEN_SYSTEM}, {"role": "user", "content": c["problem"]},
                    {"role": "assistant", "content": "<extra_0>".join(c["steps"]) + "<extra_0>"}]
        text = render(QWEN25_TEMPLATE, messages=messages, add_generation_prompt=False)
        ids = tok.encode(text, add_special_tokens=False).ids
        markers = [i for i, t in enumerate(ids) if t == sep]
        assert len(markers) == len(c["steps"])
        prompts.append((text, ids, markers))

    # All markers are the same token: centre and scale the class-1 minus
    # class-0 direction on these features so the scores spread out.
    w = {k: mr.bf16_bits_to_f64(mr.to_bf16_bits(v)) for k, v in w32.items()}
    feats = np.concatenate([
        np.maximum(hidden_states(cfg, w, ids)[m] @ w["score.0.weight"].T + w["score.0.bias"], 0.0)
        for _, ids, m in prompts])
    row0 = 0.2 * rng.standard_normal(h)
    diff = rng.standard_normal(h)
    raw = feats @ diff
    scale = 1.3 / raw.std()
    w32["score.2.weight"] = np.stack([row0, row0 + scale * diff]).astype(np.float32)
    w32["score.2.bias"] = np.array([0.1, 0.1 - scale * raw.mean()], dtype=np.float32)
    bits = {k: mr.to_bf16_bits(v) for k, v in w32.items()}
    w = {k: mr.bf16_bits_to_f64(b) for k, b in bits.items()}

    cases, all_scores = [], []
    for c, (text, ids, markers) in zip(CASES, prompts):
        hid = hidden_states(cfg, w, ids)
        z = np.maximum(hid[markers] @ w["score.0.weight"].T + w["score.0.bias"], 0.0)
        logits2 = z @ w["score.2.weight"].T + w["score.2.bias"]
        probs = np.exp(log_softmax(logits2))[:, 1]
        all_scores.append(list(probs))
        cases.append({"problem": c["problem"], "steps": c["steps"], "prompt_text": text, "input_ids": ids,
                      "marker_positions": markers, "step_scores": [r(p) for p in probs],
                      "head_logits": [[r(a), r(b)] for a, b in logits2]})
    check_spread("qwen2-prm-tiny", all_scores)
    tok_config = {
        "tokenizer_class": "Qwen2Tokenizer", "bos_token": None, "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>", "unk_token": None, "model_max_length": 4096, "errors": "replace",
        "clean_up_tokenization_spaces": False, "split_special_tokens": False,
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>", "<extra_0>"],
        "added_tokens_decoder": added_tokens_decoder(tok), "chat_template": QWEN25_TEMPLATE,
    }
    ref = {"family": "score-head", "step_token": "<extra_0>", "step_token_id": sep, "positive_class": 1,
           "system": QWEN_SYSTEM, "cases": cases}
    write_fixture("qwen2-prm-tiny", cfg, tok, tok_config,
                  lambda p: mr.write_bf16_safetensors(p, bits), ref)


# ---------------------------------------------------------------- 2. value head


def skywork_prm(rng):
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = byte_level_tokenizer(QWEN2_PATTERN, specials, 400, nfc=True)
    n = tok.get_vocab_size()
    cfg = small_config("qwen2", "Qwen2ForPrmModel", n, 32, rope_theta=1000000.0, use_sliding_window=False,
                       sliding_window=4096, max_window_layers=2, tie_word_embeddings=True,
                       bos_token_id=tok.token_to_id("<|endoftext|>"), eos_token_id=tok.token_to_id("<|endoftext|>"))
    w32 = mr.make_weights(rng, cfg, "qwen2")
    h = cfg["hidden_size"]
    bos = "<|endoftext|>"
    nl = tok.encode("\n", add_special_tokens=False).ids[-1]
    prompts = []
    for c in CASES:
        ids = tok.encode(bos + c["problem"] + "\n", add_special_tokens=False).ids
        markers = []
        for step in c["steps"]:
            ids = ids + tok.encode(step, add_special_tokens=False).ids + [nl]
            markers.append(len(ids) - 1)
        prompts.append((ids, markers))

    # Every marker is the same "\n" token, so a random head gives near-equal
    # values; centre and scale it on these hidden states so scores spread out.
    w = f64(w32)
    raw_w = rng.standard_normal(h)
    raw = np.concatenate([hidden_states(cfg, w, ids)[m] @ raw_w for ids, m in prompts])
    scale = 1.3 / raw.std()
    w32["v_head.summary.weight"] = (scale * raw_w).astype(np.float32)[None, :]
    w32["v_head.summary.bias"] = np.array([-scale * raw.mean() + 0.2], dtype=np.float32)
    w = f64(w32)

    cases, all_scores = [], []
    for c, (ids, markers) in zip(CASES, prompts):
        hid = hidden_states(cfg, w, ids)
        value = hid[markers] @ w["v_head.summary.weight"][0] + w["v_head.summary.bias"][0]
        scores = sigmoid(value)
        all_scores.append(list(scores))
        cases.append({"problem": c["problem"], "steps": c["steps"], "input_ids": ids, "marker_positions": markers,
                      "step_scores": [r(s) for s in scores], "values": [r(v) for v in value]})
    check_spread("skywork-prm-tiny", all_scores)
    tok_config = {
        "tokenizer_class": "Qwen2Tokenizer", "bos_token": bos, "eos_token": "<|endoftext|>",
        "pad_token": "<|endoftext|>", "unk_token": None, "model_max_length": 4096, "errors": "replace",
        "clean_up_tokenization_spaces": False, "split_special_tokens": False,
        "added_tokens_decoder": added_tokens_decoder(tok),
    }
    ref = {"family": "value-head", "bos_token": bos, "step_token": "\n", "step_token_id": nl, "cases": cases}
    write_fixture("skywork-prm-tiny", cfg, tok, tok_config, lambda p: save_file(w32, p), ref)


# ---------------------------------------------------------------- 3. Math-Shepherd


def math_shepherd(rng):
    tok = metaspace_tokenizer(480)
    n = tok.get_vocab_size()
    cfg = small_config("mistral", "MistralForCausalLM", n, 32, sliding_window=4096, bos_token_id=1,
                       eos_token_id=2)
    w32 = mr.make_weights(rng, cfg, "mistral")
    w32["lm_head.weight"] *= 4.0  # spreads P(+) over (0, 1) for these random weights
    w = f64(w32)

    good, bad, tag = "+", "-", "ки"
    candidates = tok.encode(f"{good} {bad}").ids[1:]
    tag_id = tok.encode(tag).ids[-1]
    assert len(candidates) == 2 and tok.id_to_token(tag_id) == "▁ки", (candidates, tok.id_to_token(tag_id))
    cases, all_scores = [], []
    for c in CASES:
        output = "\n".join(f"{step} {tag}" for step in c["steps"])
        text = f"{c['problem']} {output}"
        ids = tok.encode(text).ids
        markers = [i for i, t in enumerate(ids) if t == tag_id]
        assert len(markers) == len(c["steps"]), (text, tok.encode(text).tokens)
        logits = logits_of(cfg, w, ids)
        pair = logits[markers][:, candidates]
        scores = np.exp(log_softmax(pair))[:, 0]
        all_scores.append(list(scores))
        cases.append({"problem": c["problem"], "steps": c["steps"], "prompt_text": text, "input_ids": ids,
                      "marker_positions": markers, "step_scores": [r(s) for s in scores],
                      "candidate_logits": [[r(a), r(b)] for a, b in pair]})
    check_spread("math-shepherd-tiny", all_scores)
    tok_config = {
        "tokenizer_class": "LlamaTokenizer", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
        "pad_token": None, "add_bos_token": True, "add_eos_token": False, "legacy": True,
        "model_max_length": 4096, "clean_up_tokenization_spaces": False, "sp_model_kwargs": {},
        "added_tokens_decoder": added_tokens_decoder(tok),
    }
    ref = {"family": "math-shepherd", "step_tag": tag, "step_tag_id": tag_id, "good_token": good,
           "bad_token": bad, "candidate_token_ids": candidates, "cases": cases}
    write_fixture("math-shepherd-tiny", cfg, tok, tok_config, lambda p: save_file(w32, p), ref)


# ---------------------------------------------------------------- 4. RLHFlow

LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                   "<|eot_id|>"]


def llama3_tokenizer(vocab_size):
    tok = byte_level_tokenizer(LLAMA3_PATTERN, LLAMA3_SPECIALS, vocab_size, nfc=False, bos="<|begin_of_text|>",
                               ignore_merges=True)
    nn = tok.encode("\n\n", add_special_tokens=False).ids
    assert len(nn) == 1, "\\n\\n must be one token, as in Llama 3"
    return tok


def llama3_tok_config(tok, template):
    cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<|begin_of_text|>",
           "eos_token": "<|eot_id|>", "model_max_length": 131072, "clean_up_tokenization_spaces": True,
           "model_input_names": ["input_ids", "attention_mask"], "added_tokens_decoder": added_tokens_decoder(tok)}
    if template is not None:
        cfg["chat_template"] = template
    return cfg


def rlhflow(rng):
    tok = llama3_tokenizer(430)
    n = tok.get_vocab_size()
    bos = tok.token_to_id("<|begin_of_text|>")
    cfg = small_config("llama", "LlamaForCausalLM", n, 32, rope_theta=500000.0, attention_bias=False,
                       mlp_bias=False, bos_token_id=bos,
                       eos_token_id=[tok.token_to_id("<|end_of_text|>"), tok.token_to_id("<|eot_id|>")],
                       rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                     "high_freq_factor": 4.0, "original_max_position_embeddings": 64})
    w32 = mr.make_weights(rng, cfg, "llama")
    w32["lm_head.weight"] *= 4.0
    w = f64(w32)

    plus = tok.encode("+").ids[-1]
    minus = tok.encode("-").ids[-1]
    cands = [plus, minus]
    cases, all_scores = [], []
    for c in CASES:
        conversation = []
        for k, step in enumerate(c["steps"]):
            text = c["problem"] + " " + step if k == 0 else step
            conversation.append({"content": text, "role": "user"})
            conversation.append({"content": "+", "role": "assistant"})
        full_text = render(LLAMA31_TEMPLATE, messages=conversation, bos_token="<|begin_of_text|>",
                           add_generation_prompt=False)
        full = tok.encode(full_text, add_special_tokens=False).ids
        full_logits = logits_of(cfg, w, full)
        markers, scores = [], []
        for i in range(len(c["steps"])):
            text_i = render(LLAMA31_TEMPLATE, messages=conversation[:2 * i + 2], bos_token="<|begin_of_text|>",
                            add_generation_prompt=False)
            ids_i = tok.encode(text_i, add_special_tokens=False).ids
            assert full[:len(ids_i)] == ids_i, "each prefix conversation must tokenize to a prefix"
            assert ids_i[-2] == plus and ids_i[-1] == tok.token_to_id("<|eot_id|>")
            pair = logits_of(cfg, w, ids_i)[-3][cands]
            assert np.allclose(pair, full_logits[len(ids_i) - 3][cands], atol=1e-9)
            markers.append(len(ids_i) - 3)
            scores.append(float(np.exp(log_softmax(pair))[0]))
        all_scores.append(scores)
        cases.append({"problem": c["problem"], "steps": c["steps"], "prompt_text": full_text, "input_ids": full,
                      "marker_positions": markers, "step_scores": [r(s) for s in scores],
                      "candidate_logits": [[r(full_logits[m][plus]), r(full_logits[m][minus])] for m in markers]})
    check_spread("rlhflow-tiny", all_scores)
    ref = {"family": "rlhflow", "good_token": "+", "bad_token": "-", "candidate_token_ids": cands,
           "date_string": "26 Jul 2024", "cases": cases}
    write_fixture("rlhflow-tiny", cfg, tok, llama3_tok_config(tok, LLAMA31_TEMPLATE),
                  lambda p: save_file(w32, p), ref)


# ---------------------------------------------------------------- 5. confidence


def confidence(rng):
    tok = llama3_tokenizer(430)
    n = tok.get_vocab_size()
    cfg = small_config("llama", "LlamaForCausalLM", n, 32, rope_theta=10000.0, attention_bias=False,
                       mlp_bias=False, tie_word_embeddings=True, bos_token_id=tok.token_to_id("<|begin_of_text|>"),
                       eos_token_id=tok.token_to_id("<|eot_id|>"))
    w32 = mr.make_weights(rng, cfg, "llama")
    w32["model.norm.weight"] *= 0.3  # tied logits of random weights are too peaked otherwise
    w = f64(w32)

    sep = tok.encode("\n\n", add_special_tokens=False).ids
    cases = confidence_cases(tok, cfg, w, sep)
    ref = {"family": "confidence", "separator": "\n\n", "separator_ids": sep, "cases": cases}
    write_fixture("confidence-tiny", cfg, tok, llama3_tok_config(tok, None), lambda p: save_file(w32, p), ref)


def confidence_cases(tok, cfg, w, sep):
    """Each case's ids (problem, separator, steps each followed by it) and
    its steps' mean/min token log-probabilities and entropies."""
    cases = []
    for c in CASES:
        ids = tok.encode(c["problem"] + "\n\n").ids  # the post-processor adds BOS
        spans = []
        for step in c["steps"]:
            step_ids = tok.encode(step, add_special_tokens=False).ids
            spans.append((len(ids), len(ids) + len(step_ids)))
            ids = ids + step_ids + sep
        logp = log_softmax(logits_of(cfg, w, ids))
        p = np.exp(logp)
        entropy = -(p * logp).sum(axis=-1)
        per_step = []
        for lo, hi in spans:
            lps = np.array([logp[j - 1][ids[j]] for j in range(lo, hi)])
            ents = np.array([entropy[j - 1] for j in range(lo, hi)])
            per_step.append((lps.mean(), lps.min(), ents.mean()))
        cases.append({"problem": c["problem"], "steps": c["steps"], "input_ids": ids,
                      "marker_positions": [hi - 1 for _, hi in spans],
                      "step_token_spans": [[lo, hi] for lo, hi in spans],
                      "step_scores": [r(math.exp(m)) for m, _, _ in per_step],
                      "mean_logprob": [r(m) for m, _, _ in per_step],
                      "min_logprob": [r(m) for _, m, _ in per_step],
                      "mean_entropy": [r(e) for _, _, e in per_step]})
    return cases


def gemma3_confidence(rng):
    """The confidence family on a Gemma 3 decoder (scaled embeddings, post
    norms, GELU, local and global layers) behind a Gemma-layout tokenizer."""
    tok = gemma_tokenizer(430)
    n = tok.get_vocab_size()
    cfg = small_config("gemma3_text", "Gemma3ForCausalLM", n, 32, num_hidden_layers=3, num_key_value_heads=1,
                       head_dim=16, query_pre_attn_scalar=16, sliding_window=8,
                       layer_types=["sliding_attention", "full_attention", "sliding_attention"],
                       rope_theta=1000000.0, rope_local_base_freq=10000.0, tie_word_embeddings=True,
                       attention_bias=False, hidden_activation="gelu_pytorch_tanh",
                       final_logit_softcapping=None, attn_logit_softcapping=None,
                       bos_token_id=tok.token_to_id("<bos>"), eos_token_id=tok.token_to_id("<eos>"),
                       pad_token_id=tok.token_to_id("<pad>"))
    del cfg["hidden_act"]
    w32 = mr.make_weights(rng, cfg, "gemma3")
    w32["model.norm.weight"] -= 0.7  # gain 0.3 (stored as gain - 1): tied logits less peaked
    w = f64(w32)
    sep = tok.encode("\n\n", add_special_tokens=False).ids
    cases = confidence_cases(tok, cfg, w, sep)
    ref = {"family": "confidence", "separator": "\n\n", "separator_ids": sep, "cases": cases}
    tok_config = {"add_bos_token": True, "add_eos_token": False, "bos_token": "<bos>", "eos_token": "<eos>",
                  "pad_token": "<pad>", "unk_token": "<unk>", "added_tokens_decoder": added_tokens_decoder(tok),
                  "tokenizer_class": "GemmaTokenizer"}
    write_fixture("gemma3-confidence-tiny", cfg, tok, tok_config, lambda p: save_file(w32, p), ref)


# ---------------------------------------------------------------- 7. outcome reward model

CHATML_TEMPLATE = r"""{%- for message in messages %}
{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|im_start|>assistant\n' }}
{%- endif %}
"""


def qwen3_template():
    """Qwen3's own chat template, as tests/fixtures/chat/qwen3.json records it (its last
    assistant turn opens with an empty `<think>` block)."""
    path = os.path.join(os.path.dirname(ROOT), "chat", "qwen3.json")
    with open(path, encoding="utf-8") as f:
        return json.load(f)["template"]


def outcome(rng):
    """A sequence-classification reward model (Qwen3ForSequenceClassification,
    num_labels 1, as Skywork-Reward-V2-Qwen3 is laid out, with Qwen3's chat
    template): the conversation through the chat template, `score.weight` on
    the last token's final state. One score per solution, on its last step;
    the steps are joined by blank lines in the assistant's turn."""
    template = qwen3_template()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]
    tok = byte_level_tokenizer(QWEN2_PATTERN, specials, 410, nfc=True)
    n = tok.get_vocab_size()
    cfg = small_config("qwen3", "Qwen3ForSequenceClassification", padded(n), 64, head_dim=20,
                       attention_bias=False, rope_theta=1000000.0, tie_word_embeddings=True,
                       bos_token_id=tok.token_to_id("<|endoftext|>"), eos_token_id=tok.token_to_id("<|im_end|>"),
                       pad_token_id=tok.token_to_id("<|endoftext|>"),
                       id2label={"0": "LABEL_0"}, label2id={"LABEL_0": 0})
    w32 = mr.make_weights(rng, cfg, "qwen3")
    w32.pop("lm_head.weight", None)  # a sequence classifier has no vocabulary projection
    h = cfg["hidden_size"]
    prompts = []
    for c in CASES:
        messages = [{"role": "user", "content": c["problem"]},
                    {"role": "assistant", "content": "\n\n".join(c["steps"])}]
        text = render(template, messages=messages, add_generation_prompt=False)
        ids = tok.encode(text, add_special_tokens=False).ids
        prompts.append((text, ids))

    # Every conversation ends with the same tokens: centre and scale a random
    # direction on these last states so the scores spread out.
    w = f64(w32)
    raw_w = rng.standard_normal(h)
    raw = np.array([hidden_states(cfg, w, ids)[-1] @ raw_w for _, ids in prompts])
    scale = 1.5 / raw.std()
    w32["score.weight"] = (scale * raw_w).astype(np.float32)[None, :]
    # A bias is written too (TRL's RewardTrainer heads have none; a checkpoint
    # with one must still load it).
    w32["score.bias"] = np.array([-scale * raw.mean() + 0.1], dtype=np.float32)
    w = f64(w32)
    b = w["score.bias"][0]
    cases, all_scores = [], []
    for c, (text, ids) in zip(CASES, prompts):
        logit = hidden_states(cfg, w, ids)[-1] @ w["score.weight"][0] + b
        p = float(sigmoid(logit))
        all_scores.append([p])
        # Each step's own last token marks it; the last step's is the
        # conversation's last token, where the score is read.
        offsets = tok.encode(text, add_special_tokens=False).offsets
        at = text.rfind("\n\n".join(c["steps"]))
        markers = []
        for step in c["steps"]:
            end = at + len(step)  # str offsets, as `tokenizers` gives them
            markers.append(max(i for i, (a, e) in enumerate(offsets) if a < end and e > a))
            at = end + 2
        markers[-1] = len(ids) - 1
        cases.append({"problem": c["problem"], "steps": c["steps"], "prompt_text": text, "input_ids": ids,
                      "marker_positions": markers,
                      "step_scores": [None] * (len(c["steps"]) - 1) + [r(p)], "logit": r(logit)})
    check_spread("outcome-tiny", [[x for s in all_scores for x in s]])
    tok_config = {
        "tokenizer_class": "Qwen2Tokenizer", "bos_token": None, "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>", "unk_token": None, "model_max_length": 4096, "errors": "replace",
        "clean_up_tokenization_spaces": False, "split_special_tokens": False,
        "added_tokens_decoder": added_tokens_decoder(tok), "chat_template": template,
    }
    ref = {"family": "outcome", "step_join": "\n\n", "cases": cases}
    write_fixture("outcome-tiny", cfg, tok, tok_config, lambda p: save_file(w32, p), ref)


# ---------------------------------------------------------------- 7. generative verifier

# ThinkPRM's prompt (mukhal/ThinkPRM, utils/helper.py, format_verification_cot_for_thinkprm,
# inference branch) and stop rule (prm/thinkprm_api.py), written from that code.
THINKPRM_INSTRUCTION = ("Review and critique each step in the proposed solution to determine whether each "
                        "step is correct. If the solution is incomplete, only verify the provided steps.")
THINKPRM_TEMPLATE = """You are given a math problem and a proposed step-by-step solution:

[Math Problem]

{problem}

[Solution]

{solution}

{_instruction}
""".strip()

GEN_CASES = [
    {"problem": "What is 12 + 7 \\times 3?", "steps": ["First compute 7 \\times 3 = 21."]},
    {"problem": "Compute $2^{10}$.", "steps": ["$2^{10} = 1024$.", "So the answer is \\boxed{1000}."]},
    {"problem": "Solve $x^2 - 5x + 6 = 0$.",
     "steps": ["Step 1: We factor: $(x - 2)(x - 3) = 0$.", "So $x = 2$ or $x = 3$.", "The sum is 6."]},
]
# What the fixture's model is arranged to write after each case's prompt (greedy), and the
# P(correct) - P(incorrect) logit gap it is arranged to have at each verdict.
GEN_WRITES = [
    ("\nStep 1: fine \\boxed{correct}\nStep 2:", [1.3]),
    ("\nStep 1: fine \\boxed{correct}\nStep 2: wrong \\boxed{incorrect}.<|im_end|>", [2.1, -1.6]),
    ("\nStep 1: fine \\boxed{correct}\nStep 2: wrong \\boxed{incorrect}.<|im_end|>", [0.7, -0.9]),
]
# A critique given to be read (not written by the model): case 1 judged the other way round.
GEN_GIVEN = (1, "\nStep 1: wrong \\boxed{incorrect}\nStep 2: fine \\boxed{correct}")


def thinkprm_prompt(problem, steps):
    import re
    shown = [f"Step {i + 1}: " + re.sub(r"Step \d+:", "", s).strip() for i, s in enumerate(steps)]
    user = (THINKPRM_TEMPLATE.replace("{problem}", problem).replace("{solution}", "\n".join(shown))
            .replace("{_instruction}", THINKPRM_INSTRUCTION))
    return render(CHATML_TEMPLATE, messages=[{"role": "user", "content": user}],
                  add_generation_prompt=True) + "\nLet's verify step by step:"


def thinkprm_stops(n):
    return ["Is the solution correct?", "</think>", f"Step {n + 1}:"]


def greedy_critique(tok, cfg, w, prompt, n_steps, eos, budget=40):
    """Greedy decoding in float64 (a full forward per token), stopped as ThinkPRM stops."""
    ids = tok.encode(prompt, add_special_tokens=True).ids
    start = len(ids)
    for _ in range(budget):
        nxt = int(np.argmax(logits_of(cfg, w, ids)[-1]))
        if nxt == eos:
            return tok.decode(ids[start:], skip_special_tokens=True), "end-of-turn"
        ids.append(nxt)
        text = tok.decode(ids[start:], skip_special_tokens=True)
        cut = [text.find(s) for s in thinkprm_stops(n_steps) if s in text]
        if cut:
            return text[:min(cut)], "stop-string"
    raise AssertionError("the arranged critique did not stop")


def read_verdicts(tok, cfg, w, prompt, critique, pair):
    """P(correct) at each `\\boxed{` verdict, teacher-forced over prompt + critique: softmax over the
    two verdict tokens' logits at the token before the verdict token."""
    import re
    text = prompt + critique
    enc = tok.encode(text, add_special_tokens=True)
    logits = logits_of(cfg, w, enc.ids)
    out, markers = [], []
    for m in re.finditer(r"\\boxed\{(correct|incorrect)\}", critique):
        at = len(prompt) + m.start(1)
        i = next(k for k, (a, e) in enumerate(enc.offsets) if a <= at < e)
        assert enc.ids[i] == pair[0 if m.group(1) == "correct" else 1], (critique, enc.ids[i])
        out.append(float(np.exp(log_softmax(logits[i - 1][list(pair)]))[0]))
        markers.append(i - 1)
    return out, markers, enc.ids


def generative(rng):
    """A generative verifier (ThinkPRM's protocol) on a Qwen2 CausalLM whose vocabulary
    projection is arranged so that greedy decoding writes GEN_WRITES after each case's prompt:
    the rows are fitted (ridge least squares) to the float64 final hidden states at the
    positions that write the critique. The step scores are P(correct) at the verdicts."""
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    extra = ["This step is \\boxed{correct}", "This step is \\boxed{incorrect}.", "\\boxed{correct}"] * 25
    tok = byte_level_tokenizer(QWEN2_PATTERN, specials, 440, nfc=True, extra=extra)
    # Headings and judgements as single tokens, so each token that writes the critique has one
    # successor (the verdict tokens themselves come from BPE, as in a real vocabulary).
    tok.add_tokens([AddedToken(t, normalized=False) for t in
                    ["\nStep 1:", "\nStep 2:", " fine \\boxed", " wrong \\boxed"]])
    pair = tuple(tok.encode("\\boxed{" + v + "}", add_special_tokens=False).ids[1] for v in ("correct", "incorrect"))
    assert [tok.id_to_token(t) for t in pair] == ["{correct", "{incorrect"], [tok.id_to_token(t) for t in pair]
    n = tok.get_vocab_size()
    eos = tok.token_to_id("<|im_end|>")
    cfg = small_config("qwen2", "Qwen2ForCausalLM", padded(n), 64, rope_theta=1000000.0,
                       use_sliding_window=False, sliding_window=4096, max_window_layers=2,
                       bos_token_id=tok.token_to_id("<|endoftext|>"), eos_token_id=eos)
    cfg["max_position_embeddings"] = 1024
    w32 = mr.make_weights(rng, cfg, "qwen2")
    w = f64(w32)
    # The positions that write each case's critique, and the logits wanted there.
    rows, wants = [], []
    for c, (write, gaps) in zip(GEN_CASES, GEN_WRITES):
        prompt = thinkprm_prompt(c["problem"], c["steps"])
        ids = tok.encode(prompt + write, add_special_tokens=True).ids
        start = len(tok.encode(prompt, add_special_tokens=True).ids)
        h = hidden_states(cfg, w, ids)
        gaps = list(gaps)
        for p in range(start - 1, len(ids) - 1):
            want = np.zeros(cfg["vocab_size"])
            want[ids[p + 1]] = 12.0
            if ids[p + 1] in pair:
                g = gaps.pop(0)
                want[pair[0]], want[pair[1]] = 10.0 + g / 2, 10.0 - g / 2
            rows.append(h[p])
            wants.append(want)
    H, D = np.array(rows), np.array(wants)
    base = w["lm_head.weight"]
    # lm_head = base + correction, the correction fitted so that H @ lm_head.T ~ D.
    resid = D - H @ base.T
    corr = np.linalg.solve(H.T @ H + 1e-3 * np.eye(H.shape[1]), H.T @ resid)
    w32["lm_head.weight"] = (base + corr.T).astype(np.float32)
    w = f64(w32)

    cases = []
    for c, (write, _) in zip(GEN_CASES, GEN_WRITES):
        prompt = thinkprm_prompt(c["problem"], c["steps"])
        critique, stop = greedy_critique(tok, cfg, w, prompt, len(c["steps"]), eos)
        assert critique == write.replace("<|im_end|>", "").replace("\nStep 2:", "\n") if stop == "stop-string" \
            else critique == write.replace("<|im_end|>", ""), (critique, write)
        scores, markers, ids = read_verdicts(tok, cfg, w, prompt, critique, pair)
        verdicts = ["correct" if s > 0.5 else "incorrect" for s in scores]
        steps_n = len(c["steps"])
        cases.append({"problem": c["problem"], "steps": c["steps"], "prompt_text": prompt, "critique": critique,
                      "stop_reason": stop, "input_ids": ids, "marker_positions": markers,
                      "verdicts": verdicts + [None] * (steps_n - len(verdicts)),
                      "step_scores": [r(x) for x in scores] + [None] * (steps_n - len(scores))})
    k, given = GEN_GIVEN
    c = GEN_CASES[k]
    prompt = thinkprm_prompt(c["problem"], c["steps"])
    scores, markers, ids = read_verdicts(tok, cfg, w, prompt, given, pair)
    given_case = {"problem": c["problem"], "steps": c["steps"], "critique": given, "input_ids": ids,
                  "marker_positions": markers, "verdicts": ["incorrect", "correct"],
                  "step_scores": [r(x) for x in scores]}
    check_spread("generative-tiny", [[s for case in cases for s in case["step_scores"] if s is not None]])
    tok_config = {
        "tokenizer_class": "Qwen2Tokenizer", "bos_token": None, "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>", "unk_token": None, "model_max_length": 1024, "errors": "replace",
        "clean_up_tokenization_spaces": False, "split_special_tokens": False,
        "added_tokens_decoder": added_tokens_decoder(tok), "chat_template": CHATML_TEMPLATE,
    }
    ref = {"family": "generative", "verdict_token_ids": list(pair), "cases": cases, "given": given_case}
    write_fixture("generative-tiny", cfg, tok, tok_config, lambda p: save_file(w32, p), ref)


# ---------------------------------------------------------------- read-back check


def read_safetensors_f64(path):
    """Any F32/BF16 safetensors file as float64 arrays, parsed by hand."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        lo, hi = e["data_offsets"]
        raw = data[lo:hi]
        if e["dtype"] == "F32":
            a = np.frombuffer(raw, dtype="<f4").astype(np.float64)
        elif e["dtype"] == "BF16":
            a = mr.bf16_bits_to_f64(np.frombuffer(raw, dtype="<u2"))
        else:
            raise ValueError(f"{path}: {name} has dtype {e['dtype']}")
        out[name] = a.reshape(e["shape"])
    return out


def verify(name):
    """Re-derive each case's ids from the files on disk, and re-score one case
    from the reloaded weights, so the fixture is self-consistent."""
    d = os.path.join(ROOT, name)
    tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    with open(os.path.join(d, "reference.json")) as f:
        ref = json.load(f)
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    w = read_safetensors_f64(os.path.join(d, "model.safetensors"))
    if ref["family"] == "generative":
        pair = ref["verdict_token_ids"]
        for case in ref["cases"] + [ref["given"]]:
            prompt = thinkprm_prompt(case["problem"], case["steps"])
            got, markers, ids = read_verdicts(tok, cfg, w, prompt, case["critique"], pair)
            assert ids == case["input_ids"] and markers == case["marker_positions"], name
            assert np.allclose(got, [x for x in case["step_scores"] if x is not None], rtol=1e-12), name
        return
    assert ("lm_head.weight" in w) == (not cfg["tie_word_embeddings"] and ref["family"] != "score-head"), name
    for case in ref["cases"]:
        if "prompt_text" in case:
            specials = ref["family"] == "math-shepherd"
            assert tok.encode(case["prompt_text"], add_special_tokens=specials).ids == case["input_ids"], name
        else:  # ids built piece by piece: value head and confidence
            enc = lambda text, sp=False: tok.encode(text, add_special_tokens=sp).ids  # noqa: E731
            if ref["family"] == "value-head":
                ids = enc(ref["bos_token"] + case["problem"] + "\n")
                ids += [t for step in case["steps"] for t in enc(step) + [enc("\n")[-1]]]
            else:
                ids = enc(case["problem"] + "\n\n", True)
                ids += [t for step in case["steps"] for t in enc(step) + enc("\n\n")]
            assert ids == case["input_ids"], name
        assert len(case["marker_positions"]) == len(case["steps"]) == len(case["step_scores"]), name
    case = ref["cases"][0]
    ids, m = case["input_ids"], case["marker_positions"]
    fam = ref["family"]
    if fam == "score-head":
        z = np.maximum(hidden_states(cfg, w, ids)[m] @ w["score.0.weight"].T + w["score.0.bias"], 0.0)
        got = np.exp(log_softmax(z @ w["score.2.weight"].T + w["score.2.bias"]))[:, 1]
    elif fam == "value-head":
        got = sigmoid(hidden_states(cfg, w, ids)[m] @ w["v_head.summary.weight"][0] + w["v_head.summary.bias"][0])
    elif fam == "outcome":
        z = hidden_states(cfg, w, ids)[-1] @ w["score.weight"][0] + w["score.bias"][0]
        got, case = [sigmoid(z)], dict(case, step_scores=case["step_scores"][-1:])
    elif fam in ("math-shepherd", "rlhflow"):
        got = np.exp(log_softmax(logits_of(cfg, w, ids)[m][:, ref["candidate_token_ids"]]))[:, 0]
    else:
        logp = log_softmax(logits_of(cfg, w, ids))
        got = [math.exp(np.mean([logp[j - 1][ids[j]] for j in range(lo, hi)])) for lo, hi in case["step_token_spans"]]
    assert np.allclose(got, case["step_scores"], rtol=1e-12, atol=1e-15), (name, got, case["step_scores"])


def main():
    qwen2_prm(np.random.default_rng(101))
    skywork_prm(np.random.default_rng(202))
    math_shepherd(np.random.default_rng(303))
    rlhflow(np.random.default_rng(404))
    confidence(np.random.default_rng(505))
    gemma3_confidence(np.random.default_rng(606))
    outcome(np.random.default_rng(707))
    generative(np.random.default_rng(808))
    for name in ["qwen2-prm-tiny", "skywork-prm-tiny", "math-shepherd-tiny", "rlhflow-tiny", "confidence-tiny",
                 "gemma3-confidence-tiny", "outcome-tiny", "generative-tiny"]:
        verify(name)
    for name in sorted(os.listdir(ROOT)):
        d = os.path.join(ROOT, name)
        if os.path.isdir(d):
            size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
            print(f"{name}: {size} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
