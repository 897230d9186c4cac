"""verl rewards: a ``compute_score`` function and a dense per-token reward
manager.

verl calls ``compute_score(data_source, solution_str, ground_truth,
extra_info=None, **kwargs)`` and takes a ``float`` or a dict with a
``"score"`` key (the other keys are logged). Its reward managers are
called as ``manager(data, return_dict=False)`` on a ``DataProto`` batch and
return a reward tensor shaped like ``data.batch["responses"]`` (or
``{"reward_tensor", "reward_extra_info"}``); the built-in ones put one
reward on each response's last valid token. :class:`DenseRewardManager`
puts each step's reward on the policy tokens of that step instead.

Nothing here imports verl or torch: tensors are made with torch when the
batch holds torch tensors, with numpy otherwise.
"""

import math
from collections import defaultdict
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .. import Scorer, answers_equal, dense_rewards, extract_answer, segment

#: How a verl score combines the PRM with the answer check.
MODES = ("prm", "gated", "outcome")


def _problem(extra_info: Optional[dict]) -> str:
    info = extra_info or {}
    for key in ("question", "problem", "prompt"):
        if isinstance(info.get(key), str):
            return info[key]
    return ""


def compute_score_fn(
    scorer: Scorer,
    *,
    aggregation: str = "min",
    segmenter: str = "auto",
    mode: str = "prm",
    unscored: float = 0.0,
) -> Callable[..., Dict[str, float]]:
    """A verl ``compute_score``. The problem text comes from ``extra_info``
    (``question``, ``problem`` or ``prompt``). ``mode``: ``"prm"`` scores
    the steps' aggregate; ``"gated"`` the aggregate when the extracted
    answer equals ``ground_truth``, else 0; ``"outcome"`` 1 or 0 by the
    answer alone. A solution that cannot be scored gets ``unscored``.
    Returns ``{"score", "prm", "correct", "steps"}`` (``prm`` NaN when unscored)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")

    def compute_score(
        data_source: Any,
        solution_str: str,
        ground_truth: Any,
        extra_info: Optional[dict] = None,
        **kwargs: Any,
    ) -> Dict[str, float]:
        result = scorer.score_batch(
            [{"problem": _problem(extra_info), "response": solution_str}],
            segmenter=segmenter,
            errors="none",
        )[0]
        prm = None if result is None else result.aggregate(aggregation)
        answer = extract_answer(solution_str)
        correct = answer is not None and ground_truth is not None and answers_equal(answer, str(ground_truth))
        if mode == "outcome":
            score = float(correct)
        elif prm is None or math.isnan(prm):
            score = unscored
        else:
            score = prm if (mode == "prm" or correct) else 0.0
        return {
            "score": float(score),
            "prm": float("nan") if prm is None else float(prm),
            "correct": float(correct),
            "steps": float(0 if result is None else len(result)),
        }

    return compute_score


def offsets_from_ids(tokenizer: Any, ids: Sequence[int]) -> Tuple[str, List[Tuple[int, int]]]:
    """The decoded text of ``ids`` and each token's ``(start, end)`` in it,
    for any tokenizer with ``decode(ids, skip_special_tokens=True)``: token
    t spans from the decoded length of ``ids[:t]`` to that of
    ``ids[:t+1]`` (a prefix decode that is not a prefix of the text, as
    when a token ends inside a multi-byte character, is cut back to the
    common prefix). Tokens that decode to nothing get an empty span.
    Costs one decode per token."""
    ids = [int(i) for i in ids]
    text = tokenizer.decode(ids, skip_special_tokens=True)
    offsets: List[Tuple[int, int]] = []
    prev = 0
    for t in range(len(ids)):
        prefix = tokenizer.decode(ids[: t + 1], skip_special_tokens=True)
        n = _common_prefix(prefix, text)
        end = max(prev, n)
        offsets.append((prev, end))
        prev = end
    return text, offsets


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _zeros_like(x: Any) -> Any:
    if type(x).__module__.startswith("torch"):
        import torch  # the batch holds torch tensors, so torch is installed

        return torch.zeros_like(x, dtype=torch.float32)
    return np.zeros(np.shape(x), dtype=np.float32)


def _int(x: Any) -> int:
    return int(x.item()) if hasattr(x, "item") else int(x)


class DenseRewardManager:
    """A verl reward manager whose rewards are dense: each step of a
    response is scored by the PRM and its (optionally shaped) score put on
    the policy tokens of that step (``mode`` last-token or spread; shaping
    None, clip, delta, clip-delta or progress, see
    :func:`stepscore.dense_rewards`).

    Constructed like verl's ``NaiveRewardManager`` (``tokenizer``,
    ``num_examine``, ``compute_score``, ``reward_fn_key``) plus the scorer
    and the shaping options; called as ``manager(data, return_dict=False)``.
    Token offsets come from ``offsets_from_ids`` (any tokenizer). When a
    ``compute_score`` is given its score is added on the last valid token
    (e.g. an outcome reward next to the process rewards).
    """

    def __init__(
        self,
        tokenizer: Any,
        num_examine: int = 0,
        compute_score: Optional[Callable[..., Any]] = None,
        reward_fn_key: str = "data_source",
        *,
        scorer: Scorer,
        segmenter: str = "auto",
        mode: str = "last-token",
        shaping: Optional[str] = None,
        eta: float = 0.0,
        baseline: float = 0.0,
    ) -> None:
        self.tokenizer = tokenizer
        self.num_examine = num_examine
        self.compute_score = compute_score
        self.reward_fn_key = reward_fn_key
        self.scorer = scorer
        self.segmenter = segmenter
        self.options = {"mode": mode, "shaping": shaping, "eta": eta, "baseline": baseline}

    def __call__(self, data: Any, return_dict: bool = False, **kwargs: Any) -> Any:
        responses = data.batch["responses"]
        reward_tensor = _zeros_like(responses)
        extra: Dict[str, List[Any]] = defaultdict(list)
        for i in range(len(data)):
            item = data[i]
            prompt_ids = item.batch["prompts"]
            prompt_len = int(np.shape(prompt_ids)[-1])
            mask = item.batch["attention_mask"]
            valid_prompt = _int(mask[:prompt_len].sum())
            valid_response = _int(mask[prompt_len:].sum())
            prompt_str = self.tokenizer.decode(
                [int(t) for t in prompt_ids[prompt_len - valid_prompt :]], skip_special_tokens=True
            )
            response_ids = item.batch["responses"][:valid_response]
            response_str, offsets = offsets_from_ids(self.tokenizer, response_ids)
            info = item.non_tensor_batch.get("extra_info", None) or {}
            problem = _problem(info) or prompt_str
            steps = segment(response_str, self.segmenter)
            rewards = np.zeros(valid_response)
            scored, error = 0, ""
            if steps and valid_response > 0:
                try:
                    result = self.scorer.score(problem, [s["text"] for s in steps])
                    scored = len(result) - result.truncated_steps
                    rewards = dense_rewards(
                        response_str, steps[:scored], result.step_scores[:scored], offsets, **self.options
                    )
                except Exception as e:  # an unscorable response gets no process reward
                    error = f"{type(e).__name__}: {e}"
            extra["stepscore_steps"].append(scored)
            extra["stepscore_error"].append(error)
            if self.compute_score is not None and valid_response > 0:
                ground_truth = item.non_tensor_batch.get("reward_model", {}).get("ground_truth")
                score = self.compute_score(
                    data_source=item.non_tensor_batch.get(self.reward_fn_key),
                    solution_str=response_str,
                    ground_truth=ground_truth,
                    extra_info=info,
                )
                if isinstance(score, dict):
                    for k, v in score.items():
                        extra[k].append(v)
                    score = score["score"]
                rewards[valid_response - 1] += float(score)
            for t in range(valid_response):
                reward_tensor[i, t] = float(rewards[t])
        if return_dict:
            return {"reward_tensor": reward_tensor, "reward_extra_info": dict(extra)}
        return reward_tensor
