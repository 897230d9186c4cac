"""Reward adapters for RL trainers, in plain Python (no trainer is imported):

- :mod:`stepscore.adapters.trl`: a reward function for TRL's ``GRPOTrainer``
  and ``RLOOTrainer``;
- :mod:`stepscore.adapters.verl`: verl's ``compute_score``, a reward-loop
  manager (verl >= 0.8) and a dense per-token reward manager (verl's legacy
  ``AbstractRewardManager`` interface);
- :mod:`stepscore.adapters.openrlhf`: OpenRLHF's ``reward_func`` (for
  ``--reward.remote_url path/to/file.py``); the HTTP server is ``stepscore serve``.

Trainers build reward functions by name in each worker and call them from
several threads at once: :func:`shared_scorer` opens a model once per
process however many threads ask for it first.
"""

import threading
from typing import Any, Dict, List, Tuple

from .. import Scorer

_lock = threading.Lock()
_scorers: Dict[Tuple[str, Tuple[Tuple[str, Any], ...]], Scorer] = {}


def shared_scorer(model: Any, **options: Any) -> Scorer:
    """The process's one :class:`stepscore.Scorer` for ``model`` and
    ``options`` (Scorer's keyword arguments): opened by the first call, under
    a lock, so concurrent first calls load the model once and share it."""
    key = (str(model), tuple(sorted(options.items())))
    with _lock:
        scorer = _scorers.get(key)
        if scorer is None:
            scorer = Scorer(model, **options)
            _scorers[key] = scorer
    return scorer


#: Where chat parsers put a thinking model's reasoning: ``reasoning_content``
#: (TRL's ``parse_response`` schemas for Qwen3, DeepSeek-R1, GPT-OSS...; the
#: OpenAI-compatible servers) or ``thinking`` (TRL's LFM2.5 schema).
REASONING_FIELDS = ("reasoning_content", "thinking")


def message_text(value: Any, role: str, reasoning: bool = True) -> str:
    """Plain text of a trainer's prompt or completion: a str as it is, or a
    conversational list of ``{"role", "content"}`` messages: the last
    ``user`` message for ``role="user"``, the ``assistant`` messages joined
    by blank lines for ``role="assistant"``. With ``reasoning`` (the
    default) an assistant message's reasoning (``reasoning_content`` or
    ``thinking``, where a thinking model's ``<think>`` text is parsed to)
    comes before its ``content``, so its steps are scored too; empty parts
    are left out."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        value = [value]
    if isinstance(value, (list, tuple)):
        texts: List[str] = []
        for m in value:
            if not isinstance(m, dict):
                raise TypeError(f"a conversational message must be a dict, got {type(m).__name__}")
            if m.get("role") != role:
                continue
            if role == "user":
                texts.append(_content(m.get("content")))
                continue
            if reasoning:
                for field in REASONING_FIELDS:
                    if m.get(field):
                        texts.append(_content(m.get(field)))
                        break
            texts.append(_content(m.get("content")))
        if role == "user":
            return texts[-1] if texts else ""
        return "\n\n".join(t for t in texts if t)
    raise TypeError(f"expected a str or a list of messages, got {type(value).__name__}")


def _content(c: Any) -> str:
    # OpenAI-style content: a str, or a list of parts with "text".
    if c is None:
        return ""
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in c)
    return str(c)
