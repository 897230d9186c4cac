"""A TRL reward function: ``GRPOTrainer(reward_funcs=[reward_function(scorer)])``
(also ``RLOOTrainer``; read against TRL 1.16.0, ``GRPOTrainer._calculate_rewards``).

TRL calls a reward function as ``f(prompts=..., completions=...,
completion_ids=..., trainer_state=..., log_extra=..., log_metric=...,
**dataset_columns)`` and takes one ``float`` (or ``None`` for a sample the
function cannot score) per completion. Prompts and completions are strings
(standard format) or lists of messages (conversational format); TRL decodes
completions without special tokens. An ``async def`` reward function is also
accepted by TRL: :func:`async_reward_function` runs the scoring in a worker
thread. Each TRL rank is its own process: a default ``Scorer`` there takes
the rank's CPU share (``OMP_NUM_THREADS``, which torchrun sets per rank).
"""

import asyncio
from typing import Any, Callable, List, Optional, Sequence

from stepscore import Scorer
from stepscore.adapters import message_text


def reward_function(
    scorer: Scorer,
    *,
    aggregation: str = "min",
    segmenter: str = "auto",
    name: str = "stepscore_prm",
    reasoning: bool = True,
) -> Callable[..., List[Optional[float]]]:
    """A reward function for TRL's ``GRPOTrainer``: each completion is cut
    into steps (``segmenter``), scored step by step, and its reward is the
    steps' ``aggregation`` (min, prod, last, mean, geo_mean). A completion
    that cannot be scored (no steps, over the token limit) gets ``None``,
    which TRL skips for that reward function. When TRL passes its
    ``log_metric`` the share of unscored completions is logged as
    ``stepscore/unscored_fraction``, and ``log_extra`` gets each
    completion's step scores as the ``stepscore_steps`` column.

    A thinking model's completion, parsed by TRL with a response template
    or schema, carries its ``<think>`` text in ``reasoning_content`` (or
    ``thinking``) and the rest in ``content``: with ``reasoning`` (the
    default) the reasoning's steps are scored before the answer's;
    ``reasoning=False`` scores ``content`` alone."""

    def reward(
        prompts: Sequence[Any],
        completions: Sequence[Any],
        completion_ids: Optional[Sequence[Sequence[int]]] = None,
        **kwargs: Any,
    ) -> List[Optional[float]]:
        if len(prompts) != len(completions):
            raise ValueError(f"{len(prompts)} prompts but {len(completions)} completions")
        rows = [
            {"problem": message_text(p, "user"), "response": message_text(c, "assistant", reasoning)}
            for p, c in zip(prompts, completions)
        ]
        results = scorer.score_batch(rows, segmenter=segmenter, errors="none")
        rewards = [None if r is None else r.aggregate(aggregation) for r in results]
        log_metric, log_extra = kwargs.get("log_metric"), kwargs.get("log_extra")
        if callable(log_metric) and rewards:
            log_metric("stepscore/unscored_fraction", sum(r is None for r in rewards) / len(rewards))
        if callable(log_extra):
            log_extra("stepscore_steps", [None if r is None else r.step_scores for r in results])
        return rewards

    reward.__name__ = name
    reward.__qualname__ = name
    return reward


def async_reward_function(scorer: Scorer, **options: Any) -> Callable[..., Any]:
    """:func:`reward_function` as an ``async def`` (TRL awaits it; the
    scoring runs in a thread, the interpreter released meanwhile)."""
    sync = reward_function(scorer, **options)

    async def reward(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> List[Optional[float]]:
        return await asyncio.to_thread(sync, prompts, completions, **kwargs)

    reward.__name__ = sync.__name__
    reward.__qualname__ = sync.__name__
    return reward
