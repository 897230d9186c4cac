"""OpenRLHF rewards (read against OpenRLHF 0.11.2, ``openrlhf/utils/agent.py``
and ``openrlhf/cli/train_ppo_ray.py``).

OpenRLHF takes rewards from ``--reward.remote_url`` (``--remote_rm_url``
before 0.11): either an HTTP server answering ``POST`` with ``{"query": [...],
"prompts": [...], "labels": [...]}`` -> ``{"rewards": [...]}`` (that is
``stepscore serve``'s ``/get_reward``; :mod:`stepscore.client` speaks to it),
or a Python file defining ``reward_func(queries, prompts, labels)`` that
returns ``{"rewards", "scores", "extra_logs"}``. OpenRLHF calls that function
with one sample at a time, from several threads at once
(``asyncio.to_thread``).

Each query is ``tokenizer.decode(prompt_ids + response_ids,
skip_special_tokens=False)`` with the policy's tokenizer: the chat-templated
prompt (with ``--data.apply_chat_template``), the response, and the EOS the
policy ended on. :class:`QuerySplitter` takes that apart with the same
tokenizer so only the user's question and the response's text reach the
PRM, never the template's markup or special tokens.

This module is such a file: ``--reward.remote_url
$(python -c "import stepscore.adapters.openrlhf as m; print(m.__file__)")``
with the model named by the environment (``STEPSCORE_MODEL``, and
optionally ``STEPSCORE_HEAD``, ``STEPSCORE_FAMILY``, ``STEPSCORE_THREADS``,
``STEPSCORE_AGGREGATION``, ``STEPSCORE_UNSCORED_REWARD``: the reward of
a sample that cannot be scored, default 0.0) and the policy's tokenizer by
``STEPSCORE_POLICY_TOKENIZER`` (the ``--actor.pretrain`` path or hub name,
loaded with ``transformers.AutoTokenizer``; ``none`` when the prompts are
plain text). Or build one with :func:`make_reward_func`.

OpenRLHF loads the file by path (``importlib.util.spec_from_file_location
("reward_func", path)``), outside the ``stepscore`` package, so this file
imports ``stepscore`` absolutely; ``stepscore`` must be installed wherever
OpenRLHF's vLLM engine actors run. On an existing Ray cluster (``ray job
submit``, or ``RAY_ADDRESS`` set) the actors do not see the shell's
environment: OpenRLHF's ``ray.init`` forwards only ``TOKENIZERS_PARALLELISM``,
``NCCL_DEBUG`` and ``RAY_ENABLE_ZERO_COPY_TORCH_TENSORS``, so pass the
``STEPSCORE_*`` variables in the job's runtime environment:
``ray job submit --runtime-env-json '{"env_vars": {"STEPSCORE_MODEL": ...,
"STEPSCORE_POLICY_TOKENIZER": ...}}' -- python -m openrlhf.cli.train_ppo_ray ...``.
"""

import logging
import math
import os
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

# Absolute imports only: OpenRLHF loads this file by path
# (importlib.util.spec_from_file_location("reward_func", path)), outside
# its package, where a relative import raises ImportError.
from stepscore import Scorer
from stepscore.adapters import shared_scorer

log = logging.getLogger("stepscore.adapters.openrlhf")

_PROBE = "\u2063stepscore-probe\u2063"


class QuerySplitter:
    """Splits OpenRLHF's (query, prompt) pairs into the PRM's (problem,
    response).

    Without a tokenizer the prompts are plain text: the problem is the
    prompt and the response the query past it. With the policy's
    ``tokenizer`` (a ``transformers`` tokenizer): the response loses every
    special token the tokenizer knows (EOS, end of turn, padding), and when
    the tokenizer has a chat template the problem is the content of the
    prompt's last user turn (the template's generation prompt and the text
    before the user header are dropped). A query that does not start with
    its prompt, or a prompt the template did not render, is a ``ValueError``
    naming what is wrong: nothing is scored half-understood.
    """

    def __init__(self, tokenizer: Any = None) -> None:
        self.special: List[str] = []
        self.header: Optional[str] = None
        self.generation_prompt = ""
        if tokenizer is None:
            return
        special = set(getattr(tokenizer, "all_special_tokens", []) or [])
        for token in (getattr(tokenizer, "added_tokens_decoder", None) or {}).values():
            if getattr(token, "special", False):
                special.add(str(token))
        # Longest first, so "<|im_end|>" goes before a shorter token inside it.
        self.special = sorted((t for t in special if t), key=len, reverse=True)
        if getattr(tokenizer, "chat_template", None):
            rendered = tokenizer.apply_chat_template(
                [{"role": "user", "content": _PROBE}], tokenize=False, add_generation_prompt=True
            )
            before, _, after = rendered.partition(_PROBE)
            self.generation_prompt = after
            self.header = self._user_header(before)

    def _user_header(self, before: str) -> str:
        # The user turn's header: the shortest tail of the text before the
        # user's content that starts with a special token and names the
        # user role ("<|im_start|>user\n", "<|start_header_id|>user<|end_header_id|>\n\n").
        starts = sorted({i for t in self.special for i in _find_all(before, t)}, reverse=True)
        for i in starts:
            if "user" in before[i:].lower():
                return before[i:]
        if starts:
            return before[starts[0] :]
        raise ValueError(f"the chat template's user turn has no special-token header: {before!r}")

    def strip_special(self, text: str) -> str:
        for t in self.special:
            text = text.replace(t, "")
        return text

    def split(self, query: str, prompt: str) -> Tuple[str, str]:
        """``(problem, response)`` of one OpenRLHF sample."""
        if not isinstance(query, str) or not isinstance(prompt, str):
            raise TypeError(f"query and prompt must be str, got {type(query).__name__} and {type(prompt).__name__}")
        if not query.startswith(prompt):
            raise ValueError(
                f"the query does not start with its prompt (OpenRLHF posts prompt + response): prompt {prompt[:80]!r}"
            )
        response = self.strip_special(query[len(prompt) :])
        problem = prompt
        if self.header is not None:
            if not problem.endswith(self.generation_prompt):
                raise ValueError(
                    f"the prompt does not end with the chat template's generation prompt "
                    f"{self.generation_prompt!r}: {prompt[-80:]!r}"
                )
            problem = problem[: len(problem) - len(self.generation_prompt)]
            k = problem.rfind(self.header)
            if k < 0:
                raise ValueError(f"the prompt has no user turn ({self.header!r}): {prompt[:80]!r}")
            problem = problem[k + len(self.header) :]
        return self.strip_special(problem).strip(), response


def _find_all(text: str, sub: str) -> List[int]:
    out, i = [], text.find(sub)
    while i >= 0:
        out.append(i)
        i = text.find(sub, i + 1)
    return out


def _tensor(values: List[float]) -> Any:
    try:
        import torch  # OpenRLHF runs with torch; without it, numpy
    except ImportError:
        return np.asarray(values, dtype=np.float32)
    return torch.tensor(values, dtype=torch.float32)


def make_reward_func(
    scorer: Scorer,
    *,
    tokenizer: Any = None,
    aggregation: str = "min",
    segmenter: str = "auto",
    unscored: float = 0.0,
) -> Callable[..., Dict[str, Any]]:
    """An OpenRLHF ``reward_func``: each response's reward is its steps'
    ``aggregation``; ``scores`` (OpenRLHF's dynamic-filtering signal, 0..1)
    is the same clipped to [0, 1]. ``tokenizer``: the policy's, to strip its
    chat markup and special tokens (see :class:`QuerySplitter`).

    Every sample gets a number, never ``None``: OpenRLHF turns each reward
    into ``torch.tensor([reward])`` with no error handling, so one ``None``
    stops training. A sample that cannot be split or scored (an empty
    response, a query that does not start with its prompt, a trace over the
    token limit, a non-finite score, or a scorer that fails as a whole) gets
    ``unscored`` (a finite number; ``STEPSCORE_UNSCORED_REWARD`` for the
    file entry point, default 0.0). It stays visible: its reason is in the
    result's ``errors`` (one ``str`` or ``None`` per sample; OpenRLHF ignores
    the key), it is counted in ``extra_logs["stepscore/unscored"]`` (OpenRLHF
    logs it with its metrics) and logged as a warning.
    """
    unscored = _finite_reward(unscored, "unscored")
    splitter = QuerySplitter(tokenizer)

    def reward_func(
        queries: Sequence[str],
        prompts: Sequence[str],
        labels: Optional[Sequence[Any]] = None,
        **kwargs: Any,
    ) -> Dict[str, Any]:
        if len(prompts) != len(queries):
            raise ValueError(f"{len(queries)} queries but {len(prompts)} prompts")
        rows: List[Any] = []
        errors: Dict[int, str] = {}
        for i, (q, p) in enumerate(zip(queries, prompts)):
            try:
                problem, response = splitter.split(q, p)
                rows.append({"problem": problem, "response": response})
            except (TypeError, ValueError) as e:
                errors[i] = f"{type(e).__name__}: {e}"
                rows.append(None)
        good = [r for r in rows if r is not None]
        try:
            scored: List[Any] = list(scorer.score_batch(good, segmenter=segmenter, errors="return"))
        except Exception as e:  # the scorer as a whole: every sample of the call unscored, never None
            log.exception("stepscore: scoring failed for the whole call of %d samples", len(good))
            scored = [e] * len(good)
        results = iter(scored)
        rewards: List[float] = []
        for i, row in enumerate(rows):
            value: Optional[float] = None
            if row is not None:
                r = next(results)
                if isinstance(r, Exception):
                    errors[i] = f"{type(r).__name__}: {r}"
                else:
                    value = r.aggregate(aggregation)
                    if value is None or not math.isfinite(value):
                        errors[i] = "no step was scored" if value is None else f"non-finite score {value}"
                        value = None
            rewards.append(float(unscored if value is None else value))
        for i, why in errors.items():
            log.warning("stepscore: sample %d of this call unscored (reward %s): %s", i, unscored, why)
        return {
            "rewards": _tensor(rewards),
            "scores": _tensor([min(max(r, 0.0), 1.0) for r in rewards]),
            "extra_logs": {"stepscore/unscored": _tensor([float(len(errors))])},
            "errors": [errors.get(i) for i in range(len(rows))],
        }

    return reward_func


def _finite_reward(value: Any, name: str) -> float:
    """``value`` as a finite float, or a ``ValueError`` naming ``name``: NaN
    or infinity would poison the trainer's reward averages."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a finite number, got {value!r}") from None
    if x != x or x in (float("inf"), float("-inf")):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return x


def _policy_tokenizer() -> Any:
    name = os.environ.get("STEPSCORE_POLICY_TOKENIZER")
    if not name:
        raise RuntimeError(
            "set STEPSCORE_POLICY_TOKENIZER to the policy's tokenizer (the --actor.pretrain path or hub name) "
            "so its chat template and EOS are taken off the queries, or to `none` when the prompts are plain "
            "text (no --data.apply_chat_template)"
        )
    if name.lower() == "none":
        return None
    from transformers import AutoTokenizer  # OpenRLHF installs transformers

    return AutoTokenizer.from_pretrained(name, trust_remote_code=True)


def _from_environment() -> Callable[..., Dict[str, Any]]:
    model = os.environ.get("STEPSCORE_MODEL")
    if not model:
        raise RuntimeError("set STEPSCORE_MODEL to a GGUF file, checkpoint directory or catalog name")
    threads = os.environ.get("STEPSCORE_THREADS")
    scorer = shared_scorer(
        model,
        head=os.environ.get("STEPSCORE_HEAD") or None,
        family=os.environ.get("STEPSCORE_FAMILY") or None,
        threads=int(threads) if threads else None,
    )
    unscored = _finite_reward(os.environ.get("STEPSCORE_UNSCORED_REWARD", "0"), "STEPSCORE_UNSCORED_REWARD")
    return make_reward_func(
        scorer,
        tokenizer=_policy_tokenizer(),
        aggregation=os.environ.get("STEPSCORE_AGGREGATION", "min"),
        unscored=unscored,
    )


_lock = threading.Lock()
_default: Optional[Callable[..., Dict[str, Any]]] = None


def reward_func(
    queries: Sequence[str], prompts: Sequence[str], labels: Optional[Sequence[Any]] = None, **kwargs: Any
) -> Dict[str, Any]:
    """OpenRLHF's entry point, configured by the environment (see the module
    docs) on the first call; concurrent first calls build it once."""
    global _default
    if _default is None:
        with _lock:
            if _default is None:
                _default = _from_environment()
    return _default(queries, prompts, labels, **kwargs)
