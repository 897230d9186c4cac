"""OpenRLHF rewards.

OpenRLHF takes rewards from ``--remote_rm_url``: either an HTTP server
answering ``POST /get_reward`` with ``{"query": [...], "prompts": [...],
"labels": [...]}`` -> ``{"rewards": [...]}`` (that is ``stepscore serve``;
:mod:`stepscore.client` speaks to it), or a Python file defining
``reward_func(queries, prompts, labels, **kwargs)`` that returns
``{"rewards", "scores", "extra_logs"}``. Queries are prompt + response
text; the response is the query past its prompt.

This module is such a file: ``--remote_rm_url
$(python -c "import stepscore.adapters.openrlhf as m; print(m.__file__)")``
with the model named by the environment (``STEPSCORE_MODEL``, and
optionally ``STEPSCORE_HEAD``, ``STEPSCORE_FAMILY``, ``STEPSCORE_THREADS``,
``STEPSCORE_AGGREGATION``). Or build one with :func:`make_reward_func`.
"""

import os
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from .. import Scorer


def split_query(query: str, prompt: Optional[str]) -> str:
    """The response part of an OpenRLHF query (prompt + response)."""
    if prompt and query.startswith(prompt):
        return query[len(prompt) :]
    return query


def _tensor(values: List[float]) -> Any:
    try:
        import torch  # OpenRLHF runs with torch; without it, numpy
    except ImportError:
        return np.asarray(values, dtype=np.float32)
    return torch.tensor(values, dtype=torch.float32)


def make_reward_func(
    scorer: Scorer,
    *,
    aggregation: str = "min",
    segmenter: str = "auto",
    unscored: float = 0.0,
) -> Callable[..., Dict[str, Any]]:
    """An OpenRLHF ``reward_func``: each response's reward is its steps'
    ``aggregation``; ``scores`` (OpenRLHF's dynamic-filtering signal, 0..1)
    is the same clipped to [0, 1]; unscorable responses get ``unscored``
    and are counted in ``extra_logs``."""

    def reward_func(
        queries: Sequence[str],
        prompts: Sequence[str],
        labels: Optional[Sequence[Any]] = None,
        **kwargs: Any,
    ) -> Dict[str, Any]:
        if len(prompts) != len(queries):
            raise ValueError(f"{len(queries)} queries but {len(prompts)} prompts")
        rows = [{"problem": p, "response": split_query(q, p)} for q, p in zip(queries, prompts)]
        results = scorer.score_batch(rows, segmenter=segmenter, errors="none")
        rewards: List[float] = []
        failed = 0
        for r in results:
            value = None if r is None else r.aggregate(aggregation)
            if value is None or value != value:
                failed += 1
                value = unscored
            rewards.append(float(value))
        return {
            "rewards": _tensor(rewards),
            "scores": _tensor([min(max(r, 0.0), 1.0) for r in rewards]),
            "extra_logs": {"stepscore/unscored": _tensor([float(failed)])},
        }

    return reward_func


_default: Optional[Callable[..., Dict[str, Any]]] = None


def reward_func(queries: Sequence[str], prompts: Sequence[str], labels: Optional[Sequence[Any]] = None, **kwargs: Any) -> Dict[str, Any]:
    """OpenRLHF's entry point, with the scorer from ``STEPSCORE_MODEL``
    (loaded on the first call)."""
    global _default
    if _default is None:
        model = os.environ.get("STEPSCORE_MODEL")
        if not model:
            raise RuntimeError("set STEPSCORE_MODEL to a GGUF file or checkpoint directory")
        scorer = Scorer(
            model,
            head=os.environ.get("STEPSCORE_HEAD") or None,
            family=os.environ.get("STEPSCORE_FAMILY") or None,
            threads=int(os.environ.get("STEPSCORE_THREADS", "0")),
        )
        _default = make_reward_func(scorer, aggregation=os.environ.get("STEPSCORE_AGGREGATION", "min"))
    return _default(queries, prompts, labels, **kwargs)
