"""TRL's calling path for a reward function (read against TRL 1.16.0's
wheel, ``trl/trainer/grpo_trainer.py``): ``_calculate_rewards`` builds the
keyword set (every dataset column but prompt/completion/completion_ids,
``trainer_state``, ``log_extra``, ``log_metric``), calls
``f(prompts=, completions=, completion_ids=, **reward_kwargs)`` (awaited
under ``asyncio.gather`` for an ``async def``), turns ``None`` into NaN and
makes a float32 tensor of the list.

With a thinking model and a response template or schema (transformers >= 5),
``_generate`` decodes each completion with ``parse_response``: the
``<think>`` text goes to the message's ``reasoning_content`` (``thinking``
in the LFM2.5 schema, ``trl/chat_template_utils.py``), the rest to
``content``. The reasoning steps are the ones a PRM is for, so the adapter
scores them with the answer. The scorer is stubbed at the adapter boundary.
"""

import asyncio
import inspect

import numpy as np
import pytest

from stub_core import StubScorer  # noqa: F401  (imports stepscore, with or without the core)

from stepscore.adapters import message_text, trl

PROBLEM = "What is 12 + 21?"
THINK = "Tens: 10 + 20 = 30.\n\nUnits: 2 + 1 = 3, so 33."
ANSWER = "The answer is \\boxed{33}."


def calculate_rewards(reward_func, inputs, prompts, completions, completion_ids_list, log):
    """GRPOTrainer._calculate_rewards for one plain-function reward func,
    numpy in place of torch."""
    keys = [key for key in inputs[0] if key not in ["prompt", "completion", "completion_ids"]]
    reward_kwargs = {key: [example[key] for example in inputs] for key in keys}
    reward_kwargs["trainer_state"] = object()
    reward_kwargs["log_extra"] = lambda column, values: log.setdefault("extra", {}).__setitem__(column, values)
    reward_kwargs["log_metric"] = lambda name, value: log.setdefault("metric", {}).__setitem__(name, value)
    if inspect.iscoroutinefunction(reward_func):

        async def invoke():
            return await reward_func(prompts=prompts, completions=completions, completion_ids=completion_ids_list,
                                     **reward_kwargs)

        output = asyncio.run(invoke())
    else:
        output = reward_func(prompts=prompts, completions=completions, completion_ids=completion_ids_list,
                             **reward_kwargs)
    output = [r if r is not None else np.nan for r in output]
    assert len(output) == len(prompts)
    return np.asarray(output, dtype=np.float32)


def batch(field):
    prompt = [{"role": "system", "content": "Think first."}, {"role": "user", "content": PROBLEM}]
    completions = [
        [{"role": "assistant", field: THINK, "content": ANSWER}],  # parse_response with a thinking schema
        [{"role": "assistant", "content": ANSWER}],  # no reasoning parsed
        [{"role": "assistant", field: "", "content": ANSWER}],  # an empty think block
    ]
    inputs = [{"prompt": prompt, "solution": "33", "completion": c, "completion_ids": [1, 2, 3]} for c in completions]
    return inputs, [prompt] * 3, completions, [[1, 2, 3]] * 3


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("field", ["reasoning_content", "thinking"])
def test_trl_scores_the_reasoning_of_a_thinking_model(field, asynchronous):
    stub = StubScorer()
    make = trl.async_reward_function if asynchronous else trl.reward_function
    f = make(stub, aggregation="min")
    log = {}
    rewards = calculate_rewards(f, *batch(field), log=log)
    assert [r["problem"] for r in stub.rows] == [PROBLEM] * 3
    responses = [r["response"] for r in stub.rows]
    assert responses[0] == THINK + "\n\n" + ANSWER  # the think steps, then the answer
    assert responses[1] == ANSWER and responses[2] == ANSWER
    assert rewards[0] == pytest.approx(StubScorer.expected(THINK + "\n\n" + ANSWER))
    assert rewards[0] != pytest.approx(StubScorer.expected(ANSWER))  # not the answer alone
    assert log["metric"] == {"stepscore/unscored_fraction": 0.0}
    assert len(log["extra"]["stepscore_steps"][0]) == 3  # two reasoning steps and the answer


def test_trl_can_score_the_answer_alone():
    stub = StubScorer()
    calculate_rewards(trl.reward_function(stub, reasoning=False), *batch("reasoning_content"), log={})
    assert [r["response"] for r in stub.rows] == [ANSWER] * 3


def test_message_text_reads_reasoning_fields():
    msgs = [{"role": "assistant", "reasoning_content": "a", "content": "b"}, {"role": "assistant", "thinking": "c"}]
    assert message_text(msgs, "assistant") == "a\n\nb\n\nc"
    assert message_text(msgs, "assistant", reasoning=False) == "b"
    assert message_text([{"role": "user", "content": "q", "reasoning_content": "x"}], "user") == "q"
