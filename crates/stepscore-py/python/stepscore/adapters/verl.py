"""verl rewards (read against the PyPI wheels of verl 0.9.1 — ``trainer/ppo/reward.py``,
``experimental/reward_loop/``, ``experimental/agent_loop/agent_loop.py`` — and
verl 0.7.0 — ``trainer/ppo/reward.py``, ``trainer/main_ppo.py``,
``trainer/ppo/ray_trainer.py``, ``workers/reward_manager/``).

The Hydra overrides for each version are :data:`RECIPES` (the README prints
them; tests/test_verl_path.py applies them to configs shaped like each
version's and builds and calls what verl builds and calls). None needs a
``scorer=`` argument: the model is named in the config and opened once per
process by :func:`stepscore.adapters.shared_scorer`.

- :class:`StepRewardManager`, a reward-loop manager (verl 0.9.1, >= 0.8):
  ``reward.reward_manager.source=importlib
  reward.reward_manager.module.path=pkg://stepscore.adapters.verl
  reward.reward_manager.name=StepRewardManager``, options from
  ``+reward.reward_kwargs.*``. verl builds it in each of ``reward.num_workers``
  Ray actors (default 8, each with its own copy of the model and no CPUs
  reserved) as ``cls(config=, tokenizer=, compute_score=, **extra)``. On the
  default agent-loop path each finished trajectory is sent to a random
  worker, one per ``compute_score`` call: the trajectories that are in one
  worker's event loop together are scored by one ``score_batch`` call, so
  batches are as large as the rollouts that finish together allow. Set
  ``threads`` (``+reward.reward_kwargs.threads=N``): with no CPUs reserved
  the default is 1; keep ``reward.num_workers`` x ``threads`` within the
  node's free cores.
- :func:`compute_score`, a ``custom_reward_function``
  (``reward.custom_reward_function.path=pkg://stepscore.adapters.verl``,
  ``custom_reward_function.path`` before 0.8, or the file's path),
  ``...name=compute_score``, ``+...reward_kwargs.model=...``. verl's naive
  manager calls it once per sample in a thread: batches of one.
- :class:`DenseRewardManager`, verl's legacy ``AbstractRewardManager``
  interface (verl 0.7.0): top-level ``reward_manager.source=importlib
  reward_manager.module.path=... reward_manager.name=DenseRewardManager``
  (``reward_model.reward_manager`` is a plain string there), options from
  ``+reward_model.reward_kwargs.*``, and ``reward_model.use_reward_loop=False``
  (otherwise the reward loop fills ``rm_scores`` and the legacy manager is
  never called). It puts each step's reward on the policy tokens of that
  step (dense rewards).

Dense rewards on verl 0.9.1: not reachable. 0.9.1 has no legacy reward
function path (the trainer reads ``rm_scores`` from the reward loop), and the
reward loop takes one number per trajectory: the agent loop's
``_compute_score`` keeps ``result["reward_score"]`` and ``_postprocess``
writes ``torch.tensor(scores, dtype=float32)`` at each sample's last
response token. The manager's ``assemble_rm_scores`` class method, which
could spread per-token values, is only called by
``RewardLoopManager.compute_rm_score``, i.e. with ``reward.reward_model.enable``
(a GPU reward-model server verl launches) and no separate resource pool:
not a path a CPU PRM can use. On 0.9.1 the best path is one scalar per
sample (the steps' aggregate, ``mode`` gated/prm/outcome).

Nothing here imports verl or torch: tensors are made with torch when the
batch holds torch tensors, with numpy otherwise.
"""

import asyncio
import math
from collections import defaultdict
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

# Absolute imports: verl can load this file by path (custom_reward_function.path=/path/to/verl.py,
# spec_from_file_location), outside its package.
from stepscore import Scorer, answers_equal, dense_rewards, extract_answer, segment
from stepscore.adapters import message_text, shared_scorer

#: The Hydra overrides of each documented recipe (added to verl's own
#: ``python -m verl.trainer.main_ppo ...`` command line).
RECIPES: Dict[str, List[str]] = {
    # verl 0.9.1 (reward loop): one scalar per sample, a worker's concurrent samples in one batch.
    "0.9.1": [
        "reward.reward_manager.source=importlib",
        "reward.reward_manager.module.path=pkg://stepscore.adapters.verl",
        "reward.reward_manager.name=StepRewardManager",
        "+reward.reward_kwargs.model=stepscore-prm-smollm2",
        "+reward.reward_kwargs.mode=gated",
        "+reward.reward_kwargs.threads=4",
        "reward.num_workers=2",
    ],
    # verl 0.9.1, as a reward function (called once per sample).
    "0.9.1-compute_score": [
        "reward.custom_reward_function.path=pkg://stepscore.adapters.verl",
        "reward.custom_reward_function.name=compute_score",
        "+reward.custom_reward_function.reward_kwargs.model=stepscore-prm-smollm2",
        "+reward.custom_reward_function.reward_kwargs.threads=4",
        "reward.num_workers=2",
    ],
    # verl 0.7.0 (legacy reward manager): dense per-token rewards.
    "0.7.0": [
        "reward_manager.source=importlib",
        "reward_manager.module.path=pkg://stepscore.adapters.verl",
        "reward_manager.name=DenseRewardManager",
        "reward_model.use_reward_loop=False",
        "+reward_model.reward_kwargs.model=stepscore-prm-smollm2",
        "+reward_model.reward_kwargs.shaping=clip-delta",
    ],
}

#: How a verl score combines the PRM with the answer check.
MODES = ("prm", "gated", "outcome")

#: ``reward_kwargs`` that open the model (Scorer's arguments).
SCORER_OPTIONS = ("head", "family", "backend", "threads", "max_tokens", "truncation", "quantize", "truncate")


def _open(model: Any, options: Dict[str, Any]) -> Scorer:
    """The shared scorer for ``model``; pops Scorer's options from ``options``."""
    if model is None:
        raise ValueError("name the PRM: reward_kwargs.model (a GGUF file, checkpoint directory or catalog name)")
    return shared_scorer(model, **{k: options.pop(k) for k in SCORER_OPTIONS if k in options})


def _problem(extra_info: Optional[dict]) -> str:
    info = extra_info or {}
    for key in ("question", "problem", "prompt"):
        if isinstance(info.get(key), str):
            return info[key]
    return ""


def _combine(
    result: Any, solution_str: str, ground_truth: Any, mode: str, aggregation: str, unscored: float
) -> Dict[str, float]:
    """verl's score dict for one solution from its PRM result (a
    TraceScore, or None/an error when unscored)."""
    scored = result is not None and not isinstance(result, Exception)
    prm = result.aggregate(aggregation) if scored else None
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
        "steps": float(len(result) if scored else 0),
    }


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")


def compute_score_fn(
    scorer: Scorer,
    *,
    aggregation: str = "min",
    segmenter: str = "auto",
    mode: str = "prm",
    unscored: float = 0.0,
) -> Callable[..., Dict[str, float]]:
    """A verl ``compute_score`` over ``scorer``. The problem text comes from
    ``extra_info`` (``question``, ``problem`` or ``prompt``). ``mode``:
    ``"prm"`` scores the steps' aggregate; ``"gated"`` the aggregate when
    the extracted answer equals ``ground_truth``, else 0; ``"outcome"`` 1 or
    0 by the answer alone. A solution that cannot be scored gets
    ``unscored``. Returns ``{"score", "prm", "correct", "steps"}`` (``prm``
    NaN when unscored)."""
    _check_mode(mode)

    def compute_score(
        data_source: Any,
        solution_str: str,
        ground_truth: Any,
        extra_info: Optional[dict] = None,
        **kwargs: Any,
    ) -> Dict[str, float]:
        result = scorer.score_batch(
            [{"problem": _problem(extra_info), "response": solution_str}], segmenter=segmenter, errors="none"
        )[0]
        return _combine(result, solution_str, ground_truth, mode, aggregation, unscored)

    return compute_score


def compute_score(
    data_source: Any,
    solution_str: str,
    ground_truth: Any,
    extra_info: Optional[dict] = None,
    *,
    model: Any = None,
    aggregation: str = "min",
    segmenter: str = "auto",
    mode: str = "prm",
    unscored: float = 0.0,
    **kwargs: Any,
) -> Dict[str, float]:
    """verl's ``custom_reward_function`` by name (see the module docs): the
    model and options come from ``reward_kwargs`` (``model``, and Scorer's
    ``head``, ``threads``, ...; ``aggregation``, ``segmenter``, ``mode``,
    ``unscored`` as :func:`compute_score_fn`). verl's own extra keywords
    (``reward_router_address``, ``reward_model_tokenizer``) are ignored."""
    options = {k: kwargs.pop(k) for k in SCORER_OPTIONS if k in kwargs}
    scorer = _open(model, options)
    fn = compute_score_fn(scorer, aggregation=aggregation, segmenter=segmenter, mode=mode, unscored=unscored)
    return fn(data_source, solution_str, ground_truth, extra_info)


def token_offsets(tokenizer: Any, ids: Sequence[int]) -> Tuple[str, List[Tuple[int, int]]]:
    """The text of the policy's token ``ids`` (special tokens skipped) and
    each token's ``(start, end)`` span in it (``str`` indices; spans are
    contiguous, special tokens get an empty one).

    From the tokenizer's own offset mapping (a ``transformers`` fast
    tokenizer): the text is decoded once and encoded once with
    ``return_offsets_mapping``; when the policy's ids are not that
    encoding's (a sampled, non-canonical tokenization), the spans come from
    one streaming decode (``tokenizers.decoders.DecodeStream``), still one
    pass over the ids. A tokenizer with neither is a ``TypeError``."""
    ids = [int(i) for i in ids]
    special = set(int(i) for i in (getattr(tokenizer, "all_special_ids", None) or []))
    text = tokenizer.decode(ids, skip_special_tokens=True)
    plain = [i for i in ids if i not in special]
    try:
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    except NotImplementedError:  # a slow (Python) tokenizer has no offsets
        enc = None
    if enc is not None and list(enc["input_ids"]) == plain:
        return text, _contiguous(ids, special, enc["offset_mapping"], len(text))
    return _stream_offsets(tokenizer, ids)


def _contiguous(ids: List[int], special: set, mapping: Sequence[Any], length: int) -> List[Tuple[int, int]]:
    # A token's span starts where the previous one ended, so whitespace an
    # offset mapping trims (ByteLevel's trim_offsets) belongs to a token.
    spans = iter(mapping)
    out: List[Tuple[int, int]] = []
    prev, last = 0, -1
    for t, i in enumerate(ids):
        if i in special:
            out.append((prev, prev))
            continue
        _, end = next(spans)
        end = max(prev, int(end))
        out.append((prev, end))
        prev, last = end, t
    if last >= 0 and prev < length:
        out[last] = (out[last][0], length)
        out[last + 1 :] = [(length, length)] * (len(out) - last - 1)
    return out


def _stream_offsets(tokenizer: Any, ids: List[int]) -> Tuple[str, List[Tuple[int, int]]]:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise TypeError(
            f"token offsets need a fast tokenizer (transformers' use_fast=True), got {type(tokenizer).__name__}"
        )
    from tokenizers.decoders import DecodeStream  # transformers' fast tokenizers depend on it

    stream = DecodeStream(skip_special_tokens=True)
    pieces: List[str] = []
    offsets: List[Tuple[int, int]] = []
    prev = 0
    for i in ids:
        piece = stream.step(backend, i) or ""  # None until a character is complete
        pieces.append(piece)
        offsets.append((prev, prev + len(piece)))
        prev += len(piece)
    return "".join(pieces), offsets


def _zeros_like(x: Any) -> Any:
    if type(x).__module__.startswith("torch"):
        import torch  # the batch holds torch tensors, so torch is installed

        return torch.zeros_like(x, dtype=torch.float32)
    return np.zeros(np.shape(x), dtype=np.float32)


def _int(x: Any) -> int:
    return int(x.item()) if hasattr(x, "item") else int(x)


def _sample(item: Any, tokenizer: Any) -> Dict[str, Any]:
    """One DataProto item's parts: its valid response ids, the problem
    (``extra_info`` question/problem/prompt, else the raw chat's last user
    message, else the prompt decoded without special tokens), ground truth,
    data source and extra info."""
    prompt_ids = item.batch["prompts"]
    prompt_len = int(np.shape(prompt_ids)[-1])
    mask = item.batch["attention_mask"]
    valid_prompt = _int(mask[:prompt_len].sum())
    valid_response = _int(mask[prompt_len:].sum())
    nt = item.non_tensor_batch
    info = nt.get("extra_info", None) or {}
    problem = _problem(info)
    if not problem and nt.get("raw_prompt", None) is not None:
        problem = message_text(list(nt["raw_prompt"]), "user")
    if not problem:
        problem = tokenizer.decode([int(t) for t in prompt_ids[prompt_len - valid_prompt :]], skip_special_tokens=True)
    return {
        "response_ids": item.batch["responses"][:valid_response],
        "valid_response": valid_response,
        "problem": problem,
        "ground_truth": (nt.get("reward_model", None) or {}).get("ground_truth"),
        "extra_info": info,
    }


class DenseRewardManager:
    """A verl reward manager (the legacy ``AbstractRewardManager``
    interface) whose rewards are dense: each step of a response is scored by
    the PRM and its (optionally shaped) score put on the policy tokens of
    that step (``mode`` last-token or spread; shaping None, clip, delta,
    clip-delta or progress, see :func:`stepscore.dense_rewards`).

    verl builds it as ``cls(tokenizer=, num_examine=, compute_score=,
    reward_fn_key=, **reward_kwargs)``: ``model`` names the PRM (or pass an
    open ``scorer``), plus Scorer's options (``head``, ``threads``, ...) and
    the shaping options. The whole batch is scored by one ``score_batch``
    call; token spans come from the policy tokenizer's offset mapping
    (:func:`token_offsets`). When ``outcome`` is true and verl passes a
    ``compute_score``, its score is added on the last valid token (an
    outcome reward next to the process rewards); ``outcome=False`` leaves
    the PRM alone.
    """

    def __init__(
        self,
        tokenizer: Any,
        num_examine: int = 0,
        compute_score: Optional[Callable[..., Any]] = None,
        reward_fn_key: str = "data_source",
        *,
        scorer: Optional[Scorer] = None,
        model: Any = None,
        segmenter: str = "auto",
        mode: str = "last-token",
        shaping: Optional[str] = None,
        eta: float = 0.0,
        baseline: float = 0.0,
        outcome: bool = True,
        **scorer_options: Any,
    ) -> None:
        unknown = set(scorer_options) - set(SCORER_OPTIONS)
        if unknown:
            raise TypeError(f"DenseRewardManager: unknown reward_kwargs {sorted(unknown)}")
        self.tokenizer = tokenizer
        self.num_examine = num_examine
        self.compute_score = compute_score if outcome else None
        self.reward_fn_key = reward_fn_key
        self.scorer = scorer if scorer is not None else _open(model, scorer_options)
        self.segmenter = segmenter
        self.options = {"mode": mode, "shaping": shaping, "eta": eta, "baseline": baseline}

    def __call__(self, data: Any, return_dict: bool = False, **kwargs: Any) -> Any:
        responses = data.batch["responses"]
        reward_tensor = _zeros_like(responses)
        extra: Dict[str, List[Any]] = defaultdict(list)
        samples = [_sample(data[i], self.tokenizer) for i in range(len(data))]
        texts: List[str] = []
        offsets: List[List[Tuple[int, int]]] = []
        steps: List[List[Dict[str, Any]]] = []
        for s in samples:
            text, offs = token_offsets(self.tokenizer, s["response_ids"])
            texts.append(text)
            offsets.append(offs)
            steps.append(segment(text, self.segmenter) if s["valid_response"] > 0 else [])
        results = self.scorer.score_batch(
            [(s["problem"], [st["text"] for st in sts]) for s, sts in zip(samples, steps)], errors="return"
        )
        printed: Dict[Any, int] = defaultdict(int)
        for i, (s, result) in enumerate(zip(samples, results)):
            n = s["valid_response"]
            rewards = np.zeros(n)
            scored, error = 0, ""
            if isinstance(result, Exception):
                error = f"{type(result).__name__}: {result}"
            else:
                lo, scored = result.scored_from, len(result) - result.truncated_steps
                rewards = dense_rewards(
                    texts[i], steps[i][lo:scored], result.step_scores[lo:scored], offsets[i], **self.options
                )
            extra["stepscore_steps"].append(scored)
            extra["stepscore_error"].append(error)
            source = data[i].non_tensor_batch.get(self.reward_fn_key)
            if self.compute_score is not None and n > 0:
                score = self.compute_score(
                    data_source=source, solution_str=texts[i], ground_truth=s["ground_truth"], extra_info=s["extra_info"]
                )
                if isinstance(score, dict):
                    for k, v in score.items():
                        extra[k].append(v)
                    score = score["score"]
                rewards[n - 1] += float(score)
            for t in range(n):
                reward_tensor[i, t] = float(rewards[t])
            if printed[source] < self.num_examine:
                printed[source] += 1
                print("[problem]", s["problem"], "\n[response]", texts[i], "\n[step rewards]", rewards[rewards != 0])
        if return_dict:
            return {"reward_tensor": reward_tensor, "reward_extra_info": dict(extra)}
        return reward_tensor


class StepRewardManager:
    """verl's reward-loop manager (verl >= 0.8): one scalar per sample, the
    PRM's aggregate combined with the answer check by ``mode`` (as
    :func:`compute_score_fn`). Options from ``config.reward.reward_kwargs``:
    ``model`` and Scorer's options, ``aggregation``, ``segmenter``,
    ``mode``, ``unscored``. verl's ``compute_score`` argument is not called
    (the answer check is stepscore's ``extract_answer`` / ``answers_equal``).

    verl awaits ``run_single`` once per sample, a worker's samples all at
    once: the samples that arrive in the same turn of the event loop are
    scored together by one ``score_batch`` call in a worker thread.
    """

    def __init__(self, config: Any, tokenizer: Any, compute_score: Any = None, **kwargs: Any) -> None:
        options = dict(_reward_kwargs(config))
        self.tokenizer = tokenizer
        self.scorer = _open(options.pop("model", None), options)
        self.aggregation = options.pop("aggregation", "min")
        self.segmenter = options.pop("segmenter", "auto")
        self.mode = options.pop("mode", "prm")
        self.unscored = float(options.pop("unscored", 0.0))
        _check_mode(self.mode)
        if options:
            raise TypeError(f"StepRewardManager: unknown reward_kwargs {sorted(options)}")
        self._pending: List[Tuple[Dict[str, Any], "asyncio.Future[Dict[str, Any]]"]] = []

    async def run_single(self, data: Any) -> Dict[str, Any]:
        s = _sample(data[len(data) - 1], self.tokenizer)
        s["text"] = self.tokenizer.decode([int(t) for t in s["response_ids"]], skip_special_tokens=True)
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._pending.append((s, future))
        if len(self._pending) == 1:
            # Runs after every sample already scheduled on this loop has queued.
            loop.call_soon(self._flush, loop)
        return await future

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        batch, self._pending = self._pending, []
        job = loop.run_in_executor(None, self._score, [s for s, _ in batch])

        def deliver(done: "asyncio.Future[List[Dict[str, Any]]]") -> None:
            for (_, future), out in zip(batch, _outcomes(done, len(batch))):
                if not future.done():
                    if isinstance(out, BaseException):
                        future.set_exception(out)
                    else:
                        future.set_result(out)

        job.add_done_callback(deliver)

    def _score(self, samples: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
        rows = [{"problem": s["problem"], "response": s["text"]} for s in samples]
        results = self.scorer.score_batch(rows, segmenter=self.segmenter, errors="return")
        out = []
        for s, r in zip(samples, results):
            info = _combine(r, s["text"], s["ground_truth"], self.mode, self.aggregation, self.unscored)
            out.append({"reward_score": info["score"], "reward_extra_info": info})
        return out

    @classmethod
    def assemble_rm_scores(cls, data: Any, scores: List[float]) -> Any:
        """verl's ``rm_scores``: each sample's score on its last valid token."""
        prompt_len = int(np.shape(data.batch["prompts"])[-1])
        rm = _zeros_like(data.batch["responses"])
        for i, score in enumerate(scores):
            n = _int(data.batch["attention_mask"][i, prompt_len:].sum())
            if n > 0:
                rm[i, n - 1] = float(score)
        return rm


def _outcomes(done: Any, n: int) -> List[Any]:
    if done.cancelled():
        return [asyncio.CancelledError()] * n
    if done.exception() is not None:
        return [done.exception()] * n
    return list(done.result())


def _reward_kwargs(config: Any) -> Dict[str, Any]:
    # verl >= 0.8 keeps them at config.reward.reward_kwargs (OmegaConf or dict).
    reward = config.get("reward", None) if hasattr(config, "get") else getattr(config, "reward", None)
    if reward is None:
        return {}
    kwargs = reward.get("reward_kwargs", None) if hasattr(reward, "get") else getattr(reward, "reward_kwargs", None)
    return dict(kwargs or {})
