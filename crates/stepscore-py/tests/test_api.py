"""The Python API against independent references: the tiny PRMs' float64
numpy scores (tests/fixtures/prm/*/reference.json), hand-worked values for
the model-free helpers, and numpy re-implementations of the shaping."""

import json
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import stepscore
from conftest import FAMILIES, PRM, make_traces


@pytest.mark.parametrize("family", FAMILIES)
def test_scores_match_the_float64_reference(family):
    ref = json.loads((PRM / family / "reference.json").read_text(encoding="utf-8"))
    # RLHFlow checkpoints look like plain causal LMs: the family is named.
    scorer = stepscore.Scorer(PRM / family, family=ref["family"], threads=1)
    assert scorer.family == ref["family"]
    for case in ref["cases"]:
        got = scorer.score(case["problem"], case["steps"])
        assert len(got) == len(case["steps"])
        assert got.truncated_steps == 0
        assert got.tokens == len(case["input_ids"])
        np.testing.assert_allclose(got.step_scores, case["step_scores"], atol=1e-4)


def test_result_object(tiny):
    r = tiny.score("What is 2+3?", ["2+3 = 5.", "The answer is 5."])
    assert isinstance(r, stepscore.TraceScore)
    assert r.confidence is None
    s = r.step_scores
    assert r.aggregate("min") == min(s)
    assert r.aggregate("last") == s[-1]
    assert r.aggregate("mean") == pytest.approx(sum(s) / 2)
    assert r.first_error(threshold=2.0) == 0
    assert r.first_error(threshold=-1.0) is None
    assert "TraceScore(" in repr(r)


def test_confidence_family_reports_statistics():
    scorer = stepscore.Scorer(PRM / "confidence-tiny", threads=1)
    r = scorer.score("Compute $2^{10}$.", ["$2^{10} = 1024$.", "So 1024."])
    assert r.confidence is not None and len(r.confidence) == 2
    for c, s in zip(r.confidence, r.step_scores):
        assert set(c) == {"tokens", "mean_logprob", "min_logprob", "mean_entropy"}
        assert s == pytest.approx(np.exp(c["mean_logprob"]), rel=1e-9)


def test_score_batch_accepts_every_row_format(tiny):
    problem, steps = "What is 12 + 21?", ["12 + 21 = 33.", "The answer is 33."]
    want = tiny.score(problem, steps).step_scores
    rows = [
        (problem, steps),
        [problem, steps],
        {"problem": problem, "steps": steps, "label": -1},
        {"prompt": problem, "completions": steps, "labels": [True, True]},
        {"problem": problem, "response": "\n\n".join(steps)},
        {"problem": problem, "steps": [{"text": s} for s in steps]},
        {"messages": [{"role": "user", "content": problem}, {"role": "assistant", "content": steps[0]},
                      {"role": "assistant", "content": steps[1]}]},
    ]
    results = tiny.score_batch(rows)
    for i, r in enumerate(results[:-1]):
        assert r.step_scores == want, i
    # Chat turns carry a role prefix in the step text: same step count, own scores.
    assert len(results[-1]) == 2


def test_score_batch_numpy_values(tiny):
    # Ray Data batches hold numpy arrays and scalars.
    row = {"problem": np.str_("What is 1+1?"), "steps": np.array(["1+1 = 2.", "So 2."]), "label": np.int64(-1)}
    assert tiny.score_batch([row])[0].step_scores == tiny.score("What is 1+1?", ["1+1 = 2.", "So 2."]).step_scores


def test_score_batch_equals_score(tiny):
    rows = make_traces(30)
    batch = tiny.score_batch(rows)
    for row, r in zip(rows, batch):
        assert r.step_scores == tiny.score(row["problem"], row["steps"]).step_scores


def test_score_batch_releases_the_interpreter(tiny):
    # A thread woken just before the call can run Python code during it only
    # if the call releases the interpreter: it records when it ran.
    rows = make_traces(400)
    go, ran = threading.Event(), []

    def other():
        go.wait()
        ran.append(time.perf_counter())

    t = threading.Thread(target=other)
    t.start()
    go.set()
    tiny.score_batch(rows)
    ended = time.perf_counter()
    t.join()
    assert ran and ran[0] < ended


def test_session_matches_whole_trace_scoring(tiny):
    problem, steps = "What is 12 + 7 \\times 3?", ["First compute 7 \\times 3 = 21.", "Then 12 + 21 = 33.", "So 33."]
    whole = tiny.score(problem, steps).step_scores
    s = tiny.session(problem)
    got = [s.append(step) for step in steps]
    np.testing.assert_allclose(got, whole, atol=1e-5)
    assert s.scores == got and s.steps == steps and len(s) == 3
    assert s.cached_tokens > 0 and s.computed_tokens >= s.cached_tokens
    fork = s.fork()
    fork.append("Check: 33.")
    assert len(fork) == 4 and len(s) == 3


def test_score_candidates_match_individual_scores(tiny):
    problem = "Solve $x^2 - 5x + 6 = 0$."
    cands = [["We factor: $(x - 2)(x - 3) = 0$.", "So $x = 2$ or $x = 3$."], ["Guess x = 7."]]
    got = tiny.score_candidates(problem, cands)
    for c, g in zip(cands, got):
        np.testing.assert_allclose(g, tiny.score(problem, c).step_scores, atol=1e-5)


def test_segment_spans_are_str_indices():
    text = "Réponse : 7 ✓\n\nИтак, ответ 7.\n\n  π ≈ 3.14  "
    steps = stepscore.segment(text)
    assert [s["text"] for s in steps] == ["Réponse : 7 ✓", "Итак, ответ 7.", "π ≈ 3.14"]
    for s in steps:
        assert text[s["start"]:s["end"]] == s["text"]
    assert [s["text"] for s in stepscore.segment("a\nb\n\nc", "newline")] == ["a", "b", "c"]
    marked = stepscore.segment("Step 1: x\nStep 2: y", "step-marker")
    assert [s["text"] for s in marked] == ["Step 1: x", "Step 2: y"]
    assert [s["text"] for s in stepscore.segment("a;b;c", "regex:;")] == ["a", "b", "c"]


def test_aggregate_and_first_error_hand_values():
    assert stepscore.aggregate([0.9, 0.4, 0.7]) == 0.4
    assert stepscore.aggregate([0.5, 0.5], "prod") == 0.25
    assert stepscore.aggregate([0.25, 1.0], "geo_mean") == pytest.approx(0.5)
    assert stepscore.aggregate([]) is None
    assert np.isnan(stepscore.aggregate([0.9, None]))
    assert stepscore.first_error([0.9, 0.3, 0.8]) == 1
    assert stepscore.first_error([0.9, None]) == 1
    assert stepscore.first_error([0.9, 0.8], threshold=0.85) == 1
    assert stepscore.first_error(np.array([0.9, 0.8])) is None
    # With the verdict: a flagged solution with no step below the threshold
    # gets its lowest step; an unflagged one none; a low step wins either way.
    s = [0.94, 0.91, 0.93, 0.91]
    assert stepscore.first_error(s, 0.6, solution_score=2.0, solution_threshold=4.2) == 1
    assert stepscore.first_error(s, 0.6, solution_score=5.0, solution_threshold=4.2) is None
    assert stepscore.first_error([0.9, 0.5], 0.6, solution_score=9.0, solution_threshold=4.2) == 1
    with pytest.raises(ValueError, match="solution_threshold"):
        stepscore.first_error(s, 0.6, solution_score=2.0)


def test_answers():
    assert stepscore.extract_answer("so the total is \\boxed{12}.") == "12"
    assert stepscore.extract_answer("#### 1,000") is not None
    assert stepscore.extract_answer("no answer here") is None
    assert stepscore.answers_equal("1/2", "0.5")
    assert not stepscore.answers_equal("2", "3")
    assert stepscore.normalize_answer("1,000") == stepscore.normalize_answer("1000")


def test_select_best():
    cands = [
        {"problem": "p", "steps": ["x", "The answer is 5."], "scores": [0.9, 0.2]},
        {"problem": "p", "steps": ["y", "The answer is 4."], "scores": [0.6, 0.7]},
        {"problem": "p", "steps": ["z", "The answer is 5."], "scores": [0.3, 0.35]},
    ]
    sel = stepscore.select_best(cands, "min")
    assert sel["best"] == 1  # min scores 0.2, 0.6, 0.3
    assert sel["majority"]["answer"] == "5" and sel["majority"]["count"] == 2
    assert sel["weighted"]["answer"] == "4"  # 0.6 against 0.2 + 0.3
    assert sel["aggregation"] == "min"


def test_shaping_against_numpy():
    rng = np.random.default_rng(3)
    r = rng.uniform(-1, 1, 9)
    np.testing.assert_allclose(stepscore.progress_rewards(r, 0.25), np.diff(np.concatenate([[0.25], r])))
    np.testing.assert_allclose(stepscore.clip_rewards(r, 0.3), np.minimum(r - 0.3, 0.0))
    want = np.append(r[:-1] - r[1:], r[-1])
    np.testing.assert_allclose(stepscore.delta_rewards(list(r)), want)
    out = stepscore.delta_rewards(r)
    assert isinstance(out, np.ndarray) and out.dtype == np.float64


def test_papo_against_numpy():
    correct = [True, False, True, True, False]
    process = np.array([0.9, 0.1, 0.5, 0.7, np.nan])
    adv = stepscore.papo_advantages(correct, process, lam=0.5)
    o = np.array(correct, float)
    np.testing.assert_allclose(adv["outcome"], (o - o.mean()) / o.std())
    c = process[[0, 2, 3]]
    z = np.zeros(5)
    z[[0, 2, 3]] = (c - c.mean()) / c.std()
    np.testing.assert_allclose(adv["process"], z, atol=1e-12)
    np.testing.assert_allclose(adv["total"], adv["outcome"] + 0.5 * z, atol=1e-12)


def test_dense_token_rewards():
    r = stepscore.dense_token_rewards([0.9, 0.5, 0.3], [3, 4, 7], 8)
    np.testing.assert_array_equal(r, [0, 0, 0.9, 0.5, 0, 0, 0.3, 0])
    r = stepscore.dense_token_rewards([0.9, 0.5, 0.3], [3, 4, 7], 8, mode="spread")
    np.testing.assert_allclose(r, [0.3, 0.3, 0.3, 0.5, 0.1, 0.1, 0.1, 0])


def test_version():
    assert stepscore.__version__


def test_catalog():
    models = {m["name"]: m for m in stepscore.catalog_models()}
    assert models["stepscore-prm-smollm2"]["kind"] == "prm"
    assert models["stepscore-prm-qwen1.5b"]["kind"] == "prm"
    assert models["smollm2-135m"]["kind"] == "backbone"
    assert all(len(m["sha256"]) == 64 and m["size"] > 0 for m in models.values())
    with pytest.raises(stepscore.InvalidArgumentError, match="catalog"):
        stepscore.fetch("no-such-model")


def test_cache_dir_is_the_core_rule(monkeypatch, tmp_path):
    # STEPSCORE_CACHE, else XDG_CACHE_HOME/stepscore, else HOME/.cache/stepscore; empty counts as unset.
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("STEPSCORE_CACHE", str(tmp_path / "mine"))
    assert Path(stepscore.cache_dir()) == tmp_path / "mine"
    monkeypatch.setenv("STEPSCORE_CACHE", "")
    assert Path(stepscore.cache_dir()) == tmp_path / "xdg" / "stepscore"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert Path(stepscore.cache_dir()) == tmp_path / "home" / ".cache" / "stepscore"
    monkeypatch.delenv("HOME")
    assert stepscore.cache_dir() is None


def test_default_scorer_is_the_catalog_prm(qwen15b):
    scorer = stepscore.Scorer(threads=1)
    assert scorer.family == "value-head" and scorer.model == qwen15b
    assert 0 < scorer.threshold < 1  # shipped with the head (stepscore.threshold)


def test_check_arithmetic_reads_the_equations_a_step_writes():
    got = stepscore.check_arithmetic("Weng earns 0.2 x 50 = 12 dollars, and 3 + 4 = 7.")
    assert [(e["left"], e["right"], e["holds"]) for e in got] == [("0.2 x 50", "12", False), ("3 + 4", "7", True)]
    assert got[0]["left_value"] == "10" and got[0]["right_value"] is None
    text = "é 2 + 2 = 5"
    (e,) = stepscore.check_arithmetic(text)
    assert text[e["start"] : e["end"]] == "2 + 2 = 5"  # str indices, not bytes
    assert stepscore.check_arithmetic("20% of 50 = 10") == []


def test_first_error_defaults_to_the_threshold_the_head_ships(smollm2):
    # SmolLM2's PRM ships 0.607; the README's slip-1 trace scores 0.614,
    # 0.583, 0.810: flagged at step 1 (its wrong step) by the shipped
    # threshold, by nothing at 0.5, and the CLI and npm use the shipped one too.
    scorer = stepscore.Scorer("stepscore-prm-smollm2", threads=1)
    row = json.loads((Path(__file__).parents[3] / "examples" / "traces.jsonl").read_text().splitlines()[1])
    assert row["id"] == "slip-1"
    r = scorer.score(row["problem"], [s["text"] for s in stepscore.segment(row["response"])])
    assert 0.6 < scorer.threshold < 0.61
    assert r.first_error(threshold=0.5) is None
    assert r.first_error() == 1
    assert r.first_error() == r.first_error(threshold=scorer.threshold)


def test_a_generative_verifier_writes_and_reads_its_critique():
    ref = json.loads((PRM / "generative-tiny" / "reference.json").read_text(encoding="utf-8"))
    scorer = stepscore.Scorer(PRM / "generative-tiny", family="generative", threads=1)
    assert scorer.family == "generative"
    for case in ref["cases"]:
        r = scorer.score(case["problem"], case["steps"])
        assert r.critique["text"] == case["critique"]
        assert r.critique["verdicts"] == case["verdicts"]
        assert r.critique["stop_reason"] == case["stop_reason"]
        assert r.step_scores == [None if w is None else pytest.approx(w, abs=1e-4) for w in case["step_scores"]]
    given = ref["given"]
    assert scorer.critique_prompt(given["problem"], given["steps"]) == ref["cases"][1]["prompt_text"]
    r = scorer.score_critique(given["problem"], given["steps"], given["critique"])
    assert r.step_scores == [pytest.approx(w, abs=1e-4) for w in given["step_scores"]]
    assert "stop_reason" not in r.critique and r.tokens == len(given["input_ids"])
    with pytest.raises(stepscore.InvalidArgumentError, match="gives no step a verdict"):
        scorer.score_critique(given["problem"], given["steps"], "Step 1: fine.")


def test_an_outcome_reward_model_scores_the_solution_on_its_last_step():
    ref = json.loads((PRM / "outcome-tiny" / "reference.json").read_text(encoding="utf-8"))
    scorer = stepscore.Scorer(PRM / "outcome-tiny", threads=1)
    assert scorer.family == "outcome"
    case = ref["cases"][0]
    r = scorer.score(case["problem"], case["steps"])
    last = case["step_scores"][-1]
    assert r.step_scores[:-1] == [None, None]
    assert r.step_scores[-1] == pytest.approx(last, abs=1e-4)
    assert r.outcome_logit == pytest.approx(case["logit"], abs=1e-4)
    assert r.scored_from == 2
    assert r.aggregate("min") == r.step_scores[-1]
    assert r.first_error(threshold=1.0) == 2 and r.first_error(threshold=0.0) is None
    # Dense rewards: the solution's one score on the last step's last token.
    response = "\n\n".join(case["steps"])
    offsets = [(i, i + 1) for i in range(len(response))]
    rewards = stepscore.dense_rewards_for_response(scorer, case["problem"], response, offsets)
    assert np.count_nonzero(rewards) == 1 and rewards[-1] == pytest.approx(r.step_scores[-1])
    with pytest.raises(stepscore.InvalidArgumentError, match="scores a whole solution once"):
        scorer.session(case["problem"]).append(case["steps"][0])
