"""Reward adapters for RL trainers, in plain Python (no trainer is imported):

- :mod:`stepscore.adapters.trl`: a reward function for TRL's ``GRPOTrainer``;
- :mod:`stepscore.adapters.verl`: verl's ``compute_score`` and a dense
  per-token reward manager;
- :mod:`stepscore.adapters.openrlhf`: OpenRLHF's ``reward_func`` (for
  ``--remote_rm_url path/to/file.py``); the HTTP server is ``stepscore serve``.
"""

from typing import Any, List


def message_text(value: Any, role: str) -> str:
    """Plain text of a trainer's prompt or completion: a str as it is, or a
    conversational list of ``{"role", "content"}`` messages: the last
    ``user`` message for ``role="user"``, the ``assistant`` messages joined
    by blank lines for ``role="assistant"``."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        value = [value]
    if isinstance(value, (list, tuple)):
        texts: List[str] = []
        for m in value:
            if not isinstance(m, dict):
                raise TypeError(f"a conversational message must be a dict, got {type(m).__name__}")
            if m.get("role") == role:
                texts.append(_content(m.get("content")))
        if role == "user":
            return texts[-1] if texts else ""
        return "\n\n".join(texts)
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
