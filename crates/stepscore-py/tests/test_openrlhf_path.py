"""OpenRLHF's own loading and calling path for a ``.py`` reward endpoint
(read against OpenRLHF 0.11.2's wheel, ``openrlhf/utils/agent.py``
``SingleTurnAgentExecutor`` and ``trainer/ppo_utils/samples_generator.py``;
the same code is at repository commit 3c3be62, version.txt 0.11.0):

- ``importlib.util.spec_from_file_location("reward_func", path)``,
  ``module_from_spec``, ``exec_module``: the file is loaded outside any
  package, so it must not use relative imports;
- ``_fetch_rewards_via_func``: one sample per call, every call in its own
  thread (``asyncio.to_thread``) under ``asyncio.gather``;
- the result: ``rewards_info.get("rewards")`` becomes the sample's reward and
  ``torch.tensor([reward_val])`` is built from it outside any ``try``, so a
  ``None`` reward (or ``[None]``) stops training; ``extra_logs`` values are
  turned into tensors too.

The scorer is stubbed at the adapter boundary (tests/stub_core.py); one test
runs the tiny PRM when the compiled core is installed.
"""

import asyncio
import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

from stub_core import NATIVE, StubScorer, needs_core  # noqa: F401  (imports stepscore, with or without the core)

import stepscore.adapters as adapters
import stepscore.adapters.openrlhf as openrlhf_pkg

ADAPTER_FILE = Path(openrlhf_pkg.__file__)  # what `python -c "import stepscore.adapters.openrlhf as m; print(m.__file__)"` prints
PROBLEM = "What is 12 + 21?"
GOOD = "12 + 21 = 33.\n\nThe answer is \\boxed{33}."
BAD = "12 + 21 = 34.\n\nSo the answer is 34."


def load_like_openrlhf(path):
    """SingleTurnAgentExecutor.__init__, OpenRLHF 0.11.2, verbatim in effect."""
    spec = importlib.util.spec_from_file_location("reward_func", str(path))
    reward_module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reward_module)
    return reward_module


async def fetch_rewards_via_func(reward_func, queries_list, prompts_list, labels_list):
    """SingleTurnAgentExecutor._fetch_rewards_via_func: batch size 1, a thread per call."""
    tasks = []
    for i in range(len(queries_list)):
        tasks.append(asyncio.to_thread(reward_func, queries_list[i : i + 1], prompts_list[i : i + 1], labels_list[i : i + 1]))
    return await asyncio.gather(*tasks)


def as_experience(rewards_info):
    """What OpenRLHF does with one call's result (agent.py execute, then
    samples_generator._process_response_into_experience), with numpy in
    place of torch: ``torch.tensor([None])`` and ``np.asarray([None],
    dtype=float32)`` both refuse a missing reward."""
    score_value = rewards_info.get("scores")
    if score_value is None:
        score_value = rewards_info.get("rewards")
    reward_val = rewards_info.get("rewards")
    assert reward_val is not None, "OpenRLHF would train this sample without a reward"
    reward = np.asarray([np.asarray(reward_val, dtype=np.float32)], dtype=np.float32).reshape(-1)
    score = np.asarray([np.asarray(score_value, dtype=np.float32)], dtype=np.float32).reshape(-1)
    logs = {}
    for key, value in (rewards_info.get("extra_logs") or {}).items():
        logs[key] = float(np.asarray(value, dtype=np.float32).reshape(-1)[0])
    return float(reward[0]), float(score[0]), logs


@pytest.fixture
def configured(monkeypatch):
    """The environment a user sets for the adapter file, with the model
    opened through the stub."""
    monkeypatch.setenv("STEPSCORE_MODEL", "stub-prm")
    monkeypatch.setenv("STEPSCORE_POLICY_TOKENIZER", "none")
    monkeypatch.delenv("STEPSCORE_UNSCORED_REWARD", raising=False)
    stub = StubScorer()
    monkeypatch.setattr(adapters, "_scorers", {})
    monkeypatch.setattr(adapters, "Scorer", lambda model, **options: stub)
    return stub


def test_the_adapter_file_loads_as_openrlhf_loads_it(configured):
    module = load_like_openrlhf(ADAPTER_FILE)
    assert module.__name__ == "reward_func" and callable(module.reward_func)
    # No relative import anywhere in the file: it is loaded outside its package.
    text = ADAPTER_FILE.read_text()
    assert "from ." not in text and "import ." not in text


def test_reward_func_from_threads_as_openrlhf_calls_it(configured):
    reward_func = load_like_openrlhf(ADAPTER_FILE).reward_func
    prompts = [f"Question {k}: {PROBLEM}\nAnswer: " for k in range(8)]
    responses = [GOOD if k % 2 == 0 else BAD for k in range(8)]
    queries = [p + r for p, r in zip(prompts, responses)]
    infos = asyncio.run(fetch_rewards_via_func(reward_func, queries, prompts, ["33"] * 8))
    assert len(infos) == 8
    for info, r in zip(infos, responses):
        reward, score, logs = as_experience(info)
        assert reward == pytest.approx(StubScorer.expected(r), abs=1e-6)
        assert 0.0 <= score <= 1.0
        assert logs["stepscore/unscored"] == 0.0
    assert sorted(configured.calls) == [1] * 8  # one sample per call, as OpenRLHF sends them
    assert sorted(row["response"] for row in configured.rows) == sorted(responses)


@needs_core
def test_the_adapter_file_scores_with_the_tiny_prm(monkeypatch):
    from conftest import TINY

    monkeypatch.setenv("STEPSCORE_MODEL", str(TINY))
    monkeypatch.setenv("STEPSCORE_THREADS", "1")
    monkeypatch.setenv("STEPSCORE_POLICY_TOKENIZER", "none")
    monkeypatch.setattr(adapters, "_scorers", {})
    reward_func = load_like_openrlhf(ADAPTER_FILE).reward_func
    infos = asyncio.run(fetch_rewards_via_func(reward_func, [PROBLEM + GOOD] * 4, [PROBLEM] * 4, ["33"] * 4))
    rewards = [as_experience(info)[0] for info in infos]
    assert len(set(rewards)) == 1 and math.isfinite(rewards[0])
    assert len(adapters._scorers) == 1  # one model for all threads


# Item 2 of issue 41: OpenRLHF builds torch.tensor([reward]) with no error
# handling, so an unscorable rollout must still get a number.

UNSCORABLE = [
    ("empty response", PROBLEM, PROBLEM),
    ("query not starting with its prompt", "Something else. " + GOOD, PROBLEM),
    ("scorer error (over the token limit)", PROBLEM + "FAIL\n\n" + GOOD, PROBLEM),
]


@pytest.mark.parametrize("what,query,prompt", UNSCORABLE, ids=[u[0] for u in UNSCORABLE])
def test_an_unscorable_rollout_gets_the_documented_number(configured, monkeypatch, caplog, what, query, prompt):
    monkeypatch.setenv("STEPSCORE_UNSCORED_REWARD", "-1")
    reward_func = load_like_openrlhf(ADAPTER_FILE).reward_func
    good, bad = asyncio.run(fetch_rewards_via_func(reward_func, [PROBLEM + GOOD, query], [PROBLEM, prompt], ["33", "33"]))
    assert as_experience(good)[0] == pytest.approx(StubScorer.expected(GOOD), abs=1e-6)
    reward, score, logs = as_experience(bad)
    assert reward == -1.0 and score == 0.0
    assert logs["stepscore/unscored"] == 1.0  # visible in OpenRLHF's logged metrics
    assert bad["errors"][0] and good["errors"] == [None]  # ... in the returned info
    assert "unscored (reward -1.0)" in caplog.text  # ... and in the log


def test_the_unscored_reward_defaults_to_zero(configured):
    reward_func = load_like_openrlhf(ADAPTER_FILE).reward_func
    (info,) = asyncio.run(fetch_rewards_via_func(reward_func, [PROBLEM], [PROBLEM], [None]))
    assert as_experience(info)[:2] == (0.0, 0.0)
    assert "at least one step" in info["errors"][0]


def test_a_failing_scorer_still_gives_every_sample_a_number(configured, caplog):
    configured.raise_on_call = True
    reward_func = load_like_openrlhf(ADAPTER_FILE).reward_func
    infos = asyncio.run(fetch_rewards_via_func(reward_func, [PROBLEM + GOOD] * 3, [PROBLEM] * 3, ["33"] * 3))
    for info in infos:
        reward, _, logs = as_experience(info)
        assert reward == 0.0 and logs["stepscore/unscored"] == 1.0
        assert "the scoring thread is gone" in info["errors"][0]
    assert "scoring failed for the whole call" in caplog.text


@pytest.mark.parametrize("value", ["nan", "inf", "zero"])
def test_the_unscored_reward_must_be_a_finite_number(configured, monkeypatch, value):
    monkeypatch.setenv("STEPSCORE_UNSCORED_REWARD", value)
    reward_func = load_like_openrlhf(ADAPTER_FILE).reward_func
    with pytest.raises(ValueError, match="STEPSCORE_UNSCORED_REWARD must be a finite number"):
        reward_func([PROBLEM + GOOD], [PROBLEM], ["33"])
    with pytest.raises(ValueError, match="unscored must be a finite number"):
        openrlhf_pkg.make_reward_func(configured, unscored=float(value) if value != "zero" else value)
