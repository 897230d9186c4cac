"""Errors: each core error kind arrives as its own exception class with
its fields, wrong Python types raise TypeError, and a bad trace in a batch
does not stop the good ones."""

import pytest

import stepscore
from conftest import TINY


def test_every_error_is_a_stepscore_error():
    for cls in (stepscore.InputError, stepscore.FileError, stepscore.InvalidArgumentError, stepscore.ModelError,
                stepscore.TraceTooLongError, stepscore.TokenizerError, stepscore.GpuError, stepscore.InternalError):
        assert issubclass(cls, stepscore.StepscoreError)
        assert issubclass(stepscore.StepscoreError, Exception)


def test_missing_model_is_neither_a_path_nor_a_catalog_name():
    # A path-like argument that is no catalog name is a missing file.
    with pytest.raises(stepscore.FileError) as err:
        stepscore.Scorer("/nonexistent/prm.gguf")
    assert err.value.path == "/nonexistent/prm.gguf"
    # A bare word that is no catalog name lists the catalog.
    with pytest.raises(stepscore.InvalidArgumentError, match="catalog"):
        stepscore.Scorer("qwen-9000")


def test_not_a_model(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"this is not a GGUF file at all" * 10)
    with pytest.raises(stepscore.ModelError) as e:
        stepscore.Scorer(bad)
    assert "bad.gguf" in e.value.file


def test_checkpoint_directory_without_tokenizer(tmp_path):
    for name in ("config.json", "model.safetensors"):
        (tmp_path / name).write_bytes((TINY / name).read_bytes())
    with pytest.raises(stepscore.FileError) as e:
        stepscore.Scorer(tmp_path)
    assert e.value.path.endswith("tokenizer.json")


def test_bad_option_names():
    with pytest.raises(stepscore.InvalidArgumentError, match="family"):
        stepscore.Scorer(TINY, family="no-such-family")
    with pytest.raises(stepscore.InvalidArgumentError):
        stepscore.Scorer(TINY, backend="tpu")
    with pytest.raises(stepscore.InvalidArgumentError, match="quantize"):
        stepscore.Scorer(TINY, quantize="q3")
    with pytest.raises(stepscore.InvalidArgumentError):
        stepscore.aggregate([0.5], "median")
    with pytest.raises(stepscore.InvalidArgumentError):
        stepscore.segment("x", "no-such-segmenter")


def test_gpu_backend_without_a_usable_adapter_or_with_one():
    # On a machine without any adapter this is a GpuError; with one it loads.
    try:
        s = stepscore.Scorer(TINY, backend="gpu")
    except stepscore.GpuError:
        return
    assert "gpu" in s.backend


def test_bad_trace_rows(tiny):
    rows = [
        {"problem": "p", "steps": ["ok."]},
        {"problem": "p", "steps": "not a list"},
        {"nothing": "useful"},
        ("p", ["fine."]),
    ]
    with pytest.raises(stepscore.InputError) as e:
        tiny.score_batch(rows)
    assert e.value.index == 1 and e.value.line == 2 and e.value.field == "steps"
    assert e.value.source == "traces" and e.value.item is None
    out = tiny.score_batch(rows, errors="none")
    assert out[1] is None and out[2] is None
    assert out[0] is not None and out[3] is not None
    with pytest.raises(ValueError, match="errors"):
        tiny.score_batch(rows, errors="ignore")


def test_over_long_trace():
    scorer = stepscore.Scorer(TINY, max_tokens=45)
    steps = ["First compute 7 \\times 3 = 21.", "Then 12 + 21 = 33.", "The answer is \\boxed{33}."]
    with pytest.raises(stepscore.TraceTooLongError) as e:
        scorer.score("What is 12 + 7 \\times 3?", steps)
    assert e.value.limit == 45 and e.value.tokens > 45 and e.value.truncating is False
    with pytest.raises(stepscore.TraceTooLongError) as e:
        scorer.score_batch([("ok", ["1."]), ("What is 12 + 7 \\times 3?", steps)])
    assert e.value.index == 1
    truncating = stepscore.Scorer(TINY, max_tokens=45, truncation="drop-steps")
    r = truncating.score("What is 12 + 7 \\times 3?", steps)
    assert r.truncated_steps > 0 and r.step_scores[-1] is None
    assert all(s is not None for s in r.step_scores[: len(steps) - r.truncated_steps])
    assert r.tokens <= 45


def test_options_are_the_core_s():
    # One vocabulary and one set of messages with the CLI and npm: the core's
    # ScorerOptions reads them.
    for kwargs, word in [
        ({"family": "nope"}, "nope"),
        ({"backend": "cuda"}, "cuda"),
        ({"truncation": "cut"}, "cut"),
        ({"quantize": "q5_0"}, "q5_0"),
        ({"max_tokens": 0}, "at least 1"),
        ({"max_tokens": 10**6}, "context"),
    ]:
        with pytest.raises(stepscore.InvalidArgumentError, match=word):
            stepscore.Scorer(TINY, **kwargs)
    assert stepscore.Scorer(TINY, backend="CPU", family="skywork").family == "value-head"
    with pytest.warns(DeprecationWarning, match="truncation"):
        old = stepscore.Scorer(TINY, max_tokens=45, truncate=True)
    steps = ["First compute 7 \\times 3 = 21.", "Then 12 + 21 = 33.", "The answer is \\boxed{33}."]
    assert old.score("What is 12 + 7 \\times 3?", steps).truncated_steps > 0
    with pytest.raises(ValueError, match="not both"):
        stepscore.Scorer(TINY, truncate=True, truncation="error")


def test_session_over_the_limit_keeps_its_state():
    scorer = stepscore.Scorer(TINY, max_tokens=20)
    s = scorer.session("What is 2+3?")
    s.append("2+3 = 5.")
    with pytest.raises(stepscore.TraceTooLongError):
        s.append("The answer is \\boxed{5}, since 2 + 3 = 5 and that is all.")
    assert len(s) == 1


def test_wrong_python_types(tiny):
    with pytest.raises(TypeError):
        stepscore.Scorer(123)
    with pytest.raises(TypeError):
        tiny.score(1, ["a"])
    with pytest.raises(TypeError, match="not a single str"):
        tiny.score("p", "one string")
    with pytest.raises(TypeError):
        tiny.score("p", [1, 2])
    with pytest.raises(TypeError):
        tiny.score("p", None)
    with pytest.raises(TypeError, match="sequence of traces"):
        tiny.score_batch("p")
    with pytest.raises(TypeError, match="sequence of traces"):
        tiny.score_batch({"problem": "p", "steps": ["a"]})
    with pytest.raises(TypeError, match=r"traces\[0\]"):
        tiny.score_batch([42])
    with pytest.raises(TypeError, match=r"traces\[0\]\[0\]"):
        tiny.score_batch([(1, ["a"])])
    with pytest.raises(TypeError):
        tiny.score_candidates("p", "ab")
    with pytest.raises(TypeError):
        stepscore.aggregate("abc")
    with pytest.raises(TypeError, match=r"scores\[1\]"):
        stepscore.first_error([0.5, "x"])
    with pytest.raises(TypeError):
        stepscore.clip_rewards([0.5], "eta")
    with pytest.raises(TypeError):
        stepscore.segment(None)
    with pytest.raises(TypeError):
        tiny.session(3)


def test_json_unfriendly_row_values(tiny):
    with pytest.raises(TypeError, match="not JSON data"):
        tiny.score_batch([{"problem": "p", "steps": ["a"], "extra": object()}])
    assert tiny.score_batch([{"problem": "p", "steps": ["a"], "extra": object()}], errors="none") == [None]


def test_huge_row_is_refused_not_read(tiny):
    # The core reader's per-line bound (16 MiB) applies to rows from Python too.
    rows = [{"problem": "p", "steps": ["x" * (17 << 20)]}]
    with pytest.raises(stepscore.InputError):
        tiny.score_batch(rows)


