"""Scoring with Ray Data, one model per actor.

>>> import ray.data, stepscore.ray
>>> ds = ray.data.read_json("traces.jsonl")  # doctest: +SKIP
>>> ds = ds.map_batches(stepscore.ray.StepScorer, fn_constructor_kwargs={"model": "prm.gguf"},
...                     concurrency=4, batch_size=64)  # doctest: +SKIP

Or in one call: ``stepscore.ray.score_jsonl("traces.jsonl", "prm.gguf",
output="scored/")``. Rows are any format ``stepscore score`` reads
(ProcessBench, TRL PRM, raw, chat, native); the scored batch keeps every
input column and adds ``step_scores`` (list), ``score`` (the aggregate,
NaN when unscored), ``tokens`` and ``error`` (None, or why the row could
not be scored).

Ray is imported only by :func:`score_jsonl`; :class:`StepScorer` is a plain
callable class (Ray Data constructs one per actor).
"""

from typing import Any, Dict, Optional

import numpy as np

from . import Scorer


class StepScorer:
    """A ``map_batches`` callable over numpy batches (``batch_format="numpy"``,
    Ray's default): loads the model once, then scores each batch with the
    interpreter released. Keyword arguments are :class:`stepscore.Scorer`'s
    plus ``segmenter`` (for raw rows) and ``aggregation``. Without
    ``threads`` the scorer runs as many engine threads as the CPUs Ray
    reserved for the actor (``num_cpus``; 1 when none), not every core."""

    def __init__(self, model: str, *, segmenter: str = "auto", aggregation: str = "min", **scorer_options: Any):
        self.scorer = Scorer(model, **scorer_options)
        self.segmenter = segmenter
        self.aggregation = aggregation

    def __call__(self, batch: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        columns = list(batch)
        n = len(batch[columns[0]]) if columns else 0
        rows = [{c: batch[c][i] for c in columns if not _missing(batch[c][i])} for i in range(n)]
        results = self.scorer.score_batch(rows, segmenter=self.segmenter, errors="return")
        step_scores = np.empty(n, dtype=object)
        score = np.full(n, np.nan)
        tokens = np.zeros(n, dtype=np.int64)
        error = np.empty(n, dtype=object)
        for i, r in enumerate(results):
            if isinstance(r, Exception):
                error[i] = f"{type(r).__name__}: {r}"
                step_scores[i] = []
                continue
            step_scores[i] = r.step_scores
            agg = r.aggregate(self.aggregation)
            score[i] = np.nan if agg is None else agg
            tokens[i] = r.tokens
            error[i] = None
        # Input columns back as plain lists: Ray hands list columns over as
        # object arrays of arrays, which it cannot turn back into Arrow
        # lists (it falls back to pickling them, and pandas' JSON writer
        # crashes on those).
        out = {c: _plain(v) for c, v in batch.items()}
        out.update({"step_scores": step_scores, "score": score, "tokens": tokens, "error": error})
        return out


def _plain(column: np.ndarray) -> np.ndarray:
    if column.dtype != object:
        return column
    out = np.empty(len(column), dtype=object)
    for i, v in enumerate(column):
        out[i] = v.tolist() if isinstance(v, np.ndarray) else v
    return out


def _missing(v: Any) -> bool:
    # Ray fills a column absent from some rows with None (or NaN for numbers).
    return v is None or (isinstance(v, float) and v != v)


def score_jsonl(
    path: str,
    model: str,
    *,
    output: Optional[str] = None,
    concurrency: int = 1,
    batch_size: int = 64,
    num_cpus: Optional[float] = None,
    segmenter: str = "auto",
    aggregation: str = "min",
    **scorer_options: Any,
) -> Any:
    """Reads a JSONL dataset (a file or folder, local or any filesystem Ray
    reads), scores it with ``concurrency`` actors (one model each,
    ``num_cpus`` Ray CPUs reserved per actor, default ``threads`` or 1; each
    actor runs ``threads`` engine threads, by default the CPUs it reserved)
    and writes JSONL files into ``output`` when given.
    Returns the scored ``ray.data.Dataset`` (lazy: consume it or pass
    ``output``)."""
    import ray.data

    threads = int(scorer_options.get("threads") or 0)
    ds = ray.data.read_json(path)
    ds = ds.map_batches(
        StepScorer,
        fn_constructor_kwargs={"model": model, "segmenter": segmenter, "aggregation": aggregation, **scorer_options},
        compute=ray.data.ActorPoolStrategy(size=concurrency),
        batch_size=batch_size,
        num_cpus=num_cpus if num_cpus is not None else float(max(threads, 1)),
    )
    if output is not None:
        ds.write_json(output)
    return ds
