"""The Python scores equal `stepscore score`'s on the same files (1e-6):
the tiny value-head PRM on generated traces, and the default PRM
(SmolLM2-135M-Instruct + the built-in head) on the shipped examples."""

import json

import pytest

import stepscore
from conftest import ROOT, TINY, cli_scores, make_traces, write_jsonl


def assert_same(py, cli, ids):
    for i in ids:
        a, b = py[i], cli[i]
        assert len(a) == len(b), i
        for x, y in zip(a, b):
            assert (x is None and y is None) or abs(x - y) <= 1e-6, (i, a, b)


def test_tiny_prm_equals_cli(tmp_path, cli):
    rows = make_traces(60, seed=11)
    path = write_jsonl(tmp_path / "traces.jsonl", rows)
    want = cli_scores(cli, path, "--model", str(TINY), "--threads", "1")
    scorer = stepscore.Scorer(TINY, threads=1)
    got = {r["id"]: s.step_scores for r, s in zip(rows, scorer.score_batch(rows))}
    assert set(want) == set(got)
    assert_same(got, want, want)


def test_truncation_equals_cli(tmp_path, cli):
    rows = make_traces(20, seed=5)
    path = write_jsonl(tmp_path / "traces.jsonl", rows)
    want = cli_scores(cli, path, "--model", str(TINY), "--max-tokens", "30", "--truncation", "drop-steps")
    scorer = stepscore.Scorer(TINY, max_tokens=30, truncation="drop-steps")
    got = {r["id"]: s.step_scores for r, s in zip(rows, scorer.score_batch(rows, errors="none")) if s}
    assert set(got) == set(want)
    assert any(None in v for v in want.values())
    assert_same(got, want, want)


def test_catalog_prm_equals_cli_on_examples(cli, smollm2):
    path = ROOT / "examples" / "traces.jsonl"
    want = cli_scores(cli, path, "--model", "stepscore-prm-smollm2")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    scorer = stepscore.Scorer("stepscore-prm-smollm2")  # the catalog's fast PRM, as the CLI names it
    assert scorer.family == "value-head"
    got = {r["id"]: s.step_scores for r, s in zip(rows, scorer.score_batch(rows))}
    assert set(got) == set(want)
    assert_same(got, want, want)
