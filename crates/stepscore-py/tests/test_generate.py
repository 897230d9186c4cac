"""Scorer.generate: a Python generator of tokens over the core's generation,
the same tokens as `stepscore generate` (same model, options, engine), its
stop reasons, cancel, and bad options as typed errors."""

import json
import subprocess

import pytest

import stepscore


@pytest.fixture(scope="module")
def smol(smollm2):
    return stepscore.Scorer(smollm2, threads=2, backend="cpu")


def test_greedy_tokens_equal_the_cli(smol, smollm2, cli):
    prompt = "What is 15% of 80?"
    g = smol.generate(prompt, max_new_tokens=24, temperature=0)
    pieces = [t["text"] for t in g]
    assert "".join(pieces) == g.text
    assert g.stop_reason in ("end-of-turn", "max-tokens")
    out = subprocess.run(
        [str(cli), "generate", "--model", str(smollm2), "--backend", "cpu", "--threads", "2",
         "--max-new-tokens", "24", "--temperature", "0"],
        input=json.dumps({"problem": prompt}), capture_output=True, text=True, check=True)
    row = json.loads(out.stdout)
    assert row["tokens"] == g.tokens
    assert row["text"] == g.text


def test_the_same_seed_samples_the_same_text(smol):
    a = smol.generate("Name a colour.", max_new_tokens=12, seed=5).finish()
    b = smol.generate("Name a colour.", max_new_tokens=12, seed=5).finish()
    assert a == b


def test_stop_reasons_and_cancel(smol):
    g = smol.generate("The capital of France is", chat=False, temperature=0, stop_at_step=True,
                      max_new_tokens=64)
    assert g.finish() == " Paris.\n\n"
    assert g.stop_reason == "step-end"
    g = smol.generate("The capital of France is", chat=False, temperature=0, max_new_tokens=64)
    first = next(g)
    g.cancel()
    assert list(g) == []
    assert g.stop_reason == "cancelled" and len(g.tokens) == 1 and first["text"]


def test_bad_options_are_typed_errors(smol):
    with pytest.raises(stepscore.InvalidArgumentError, match="top_p"):
        smol.generate("hi", top_p=1.5)
    with pytest.raises(stepscore.InvalidArgumentError, match="max_new_tokens"):
        smol.generate("hi", max_new_tokens=0)
    with pytest.raises(stepscore.TraceTooLongError):
        smol.generate("word " * 9000, max_new_tokens=4)
    with pytest.raises(stepscore.InvalidArgumentError, match=r"generate\(temperature=...\)"):
        smol.generate("hi", temperature="hot")
    with pytest.raises(TypeError, match="'temprature'.*temperature"):
        smol.generate("hi", temprature=0)
    with pytest.raises(TypeError, match="stop_at_step"):
        smol.search("hi", stop_at_step=True)


def test_keywords_are_the_core_s_options_with_its_defaults(smol, smollm2, cli):
    # None keeps the core's default: the same tokens as leaving it out.
    a = smol.generate("Name a colour.", max_new_tokens=8, temperature=None, seed=3).finish()
    b = smol.generate("Name a colour.", max_new_tokens=8, seed=3).finish()
    assert a == b
    # penalty_last_n, the core's option the keyword list once lacked, means what the CLI's flag does.
    kw = dict(max_new_tokens=16, temperature=0, repetition_penalty=1.5, penalty_last_n=4)
    g = smol.generate("Count: one, two", chat=False, **kw)
    g.finish()
    out = subprocess.run(
        [str(cli), "generate", "--model", str(smollm2), "--backend", "cpu", "--threads", "2",
         "--raw", "--max-new-tokens", "16", "--temperature", "0", "--repetition-penalty", "1.5",
         "--penalty-last-n", "4"],
        input=json.dumps({"problem": "Count: one, two"}), capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)["tokens"] == g.tokens


def test_generate_many_equals_generate_with_consecutive_seeds(smol):
    many = smol.generate_many("Name a colour.", 3, max_new_tokens=12, seed=5, temperature=0.8)
    assert len(many) == 3
    for i, row in enumerate(many):
        g = smol.generate("Name a colour.", max_new_tokens=12, seed=5 + i, temperature=0.8)
        assert row["text"] == g.finish()
        assert row["tokens"] == g.tokens and row["stop_reason"] == g.stop_reason
    assert smol.generate_many("hi", 0) == []
    with pytest.raises(stepscore.InvalidArgumentError, match="top_p"):
        smol.generate_many("hi", 2, top_p=1.5)
