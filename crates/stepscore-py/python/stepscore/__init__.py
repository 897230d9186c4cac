"""stepscore: score every step of a reasoning trace with a process reward model.

The compiled core (``stepscore._stepscore``) holds the model, the scoring,
segmentation, aggregation, selection, answer matching and reward shaping;
this package adds plain-Python adapters for RL trainers
(``stepscore.adapters.trl``, ``.verl``, ``.openrlhf``), a client for
``stepscore serve`` (``stepscore.client``) and Ray Data scoring
(``stepscore.ray``).

>>> import stepscore
>>> scorer = stepscore.Scorer()  # the default PRM, fetched on first use  # doctest: +SKIP
>>> scorer = stepscore.Scorer("tests/fixtures/prm/skywork-prm-tiny")  # doctest: +SKIP
>>> scorer.score("What is 2+3?", ["2+3 = 5.", "The answer is 5."]).step_scores  # doctest: +SKIP
[0.49..., 0.50...]

Offsets and spans on this side are ``str`` indices (code points).
Errors are typed: every error is a ``StepscoreError``; its subclasses
(``InputError``, ``FileError``, ``InvalidArgumentError``, ``ModelError``,
``TraceTooLongError``, ``TokenizerError``, ``GpuError``, ``InternalError``) mirror the core's
error kinds. Wrong Python types raise ``TypeError``.
"""

from typing import Any, Dict, Iterable, Iterator, Optional, Sequence, Tuple, Union

import numpy as np

from ._stepscore import (  # noqa: F401
    FileError,
    Generation,
    GpuError,
    InputError,
    InternalError,
    InvalidArgumentError,
    ModelError,
    Scorer,
    Session,
    StepscoreError,
    StreamVerifier,
    TokenizerError,
    TraceScore,
    TraceTooLongError,
    __version__,
    aggregate,
    answers_equal,
    auroc,
    cache_dir,
    calibration,
    catalog_models,
    clip_rewards,
    delta_rewards,
    dense_rewards,
    dense_token_rewards,
    check_arithmetic,
    extract_answer,
    fetch,
    first_error,
    normalize_answer,
    papo_advantages,
    processbench_f1,
    progress_rewards,
    segment,
    select_best,
    solution_score,
)

__all__ = [
    "FileError",
    "Generation",
    "GpuError",
    "InputError",
    "InternalError",
    "InvalidArgumentError",
    "ModelError",
    "Scorer",
    "Session",
    "StepscoreError",
    "StreamVerifier",
    "TokenizerError",
    "TraceScore",
    "TraceTooLongError",
    "aggregate",
    "answers_equal",
    "auroc",
    "cache_dir",
    "calibration",
    "catalog_models",
    "clip_rewards",
    "delta_rewards",
    "dense_rewards",
    "dense_rewards_for_response",
    "dense_token_rewards",
    "check_arithmetic",
    "extract_answer",
    "fetch",
    "first_error",
    "normalize_answer",
    "papo_advantages",
    "processbench_f1",
    "progress_rewards",
    "segment",
    "select_best",
    "solution_score",
    "verify_stream",
]


def dense_rewards_for_response(
    scorer: Scorer,
    problem: str,
    response: str,
    token_offsets: Sequence[Tuple[int, int]],
    *,
    segmenter: str = "auto",
    mode: str = "last-token",
    shaping: Optional[str] = None,
    eta: float = 0.0,
    baseline: float = 0.0,
    offsets_unit: str = "char",
) -> np.ndarray:
    """Scores ``response`` step by step and puts the step scores on the
    policy's tokens (see :func:`dense_rewards` for the placement rules).

    Steps dropped by truncation get no reward (their tokens get 0), as do
    tokens after the last scored step; an outcome reward model scores the
    last step alone, so its one reward is the only one. A response with no
    step gives zeros.
    """
    steps = segment(response, segmenter)
    if not steps:
        return np.zeros(len(token_offsets))
    result = scorer.score(problem, [s["text"] for s in steps])
    lo, hi = result.scored_from, len(result) - result.truncated_steps
    return dense_rewards(
        response,
        steps[lo:hi],
        result.step_scores[lo:hi],
        token_offsets,
        mode=mode,
        shaping=shaping,
        eta=eta,
        baseline=baseline,
        offsets_unit=offsets_unit,
    )


def verify_stream(
    scorer: Scorer,
    problem: str,
    stream: Iterable[Any],
    *,
    stop_below: Optional[float] = None,
    stop: bool = True,
    source: str = "<stream>",
) -> Iterator[Dict[str, Any]]:
    """Yields the events of verifying a generator's answer to ``problem``
    as it is written (see :class:`StreamVerifier`): ``stream`` yields the
    bytes of a streaming HTTP response (``requests``' ``iter_content()``,
    ``httpx``' ``iter_bytes()``), chunk objects (the ``openai`` client's
    ``ChatCompletionChunk``, or dicts) or plain text pieces. At a
    ``stopped`` event it stops reading ``stream``: close the response to
    end the generation on the server.

    >>> for ev in stepscore.verify_stream(scorer, problem, response.iter_content(None)):  # doctest: +SKIP
    ...     print(ev["event"], ev.get("score"))
    """
    v = scorer.verify_stream(problem, stop_below=stop_below, stop=stop, source=source)
    framed = False
    for piece in stream:
        if isinstance(piece, (bytes, bytearray, memoryview)):
            framed = True
            events = v.feed(bytes(piece))
        elif isinstance(piece, str):
            events = v.feed_text(piece)
        else:
            # An openai ChatCompletionChunk (pydantic) or a dict.
            dump = getattr(piece, "model_dump", None)
            events = v.feed_chunk(dump() if callable(dump) else piece)
        yield from events
        if v.ended:
            return
    yield from (v.close() if framed else v.end())
