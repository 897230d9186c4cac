"""Per-token log-probs (`score(..., token_logprobs=True)`): spans are str
indices (code points) into each step, checked against the CLI's byte spans
(`stepscore score --token-logprobs`) converted here independently, on text
with "×", "é" and emoji that the tiny byte-level tokenizer splits."""

import json
import math
import re
import subprocess

import stepscore
from conftest import PRM

CONFIDENCE = PRM / "confidence-tiny"
PROBLEM = "What is 6 × 9?"
# Each step's only number comes after non-ASCII text.
STEPS = ["é × ø = 54", "😀 so then 12.", "The answer is 54 🙂"]
NUMBERS = ["54", "12", "54"]


def char_span(text, start, end):
    """Byte offsets -> str indices, widened to whole characters."""
    starts = []
    for i, c in enumerate(text):
        starts.extend([i] * len(c.encode("utf-8")))
    starts.append(len(text))
    a = starts[start]
    b = starts[end] if end == len(starts) - 1 or starts[end] != starts[end - 1] else starts[end] + 1
    return a, b


def cli_tokens(cli, tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"id": "t", "problem": PROBLEM, "steps": STEPS}, ensure_ascii=False) + "\n", encoding="utf-8")
    out = subprocess.run(
        [str(cli), "score", str(path), "--model", str(CONFIDENCE), "--family", "confidence", "--output", "jsonl", "--token-logprobs", "--threads", "1"],
        check=True,
        capture_output=True,
    )
    return json.loads(out.stdout)["metadata"]["stepscore"]["token_logprobs"]


def test_token_logprobs_are_str_spans_equal_to_the_cli(cli, tmp_path):
    scorer = stepscore.Scorer(CONFIDENCE, family="confidence", threads=1)
    plain = scorer.score(PROBLEM, STEPS)
    assert plain.token_logprobs is None and plain.least_likely is None
    r = scorer.score(PROBLEM, STEPS, token_logprobs=True)
    assert r.step_scores == plain.step_scores
    want = cli_tokens(cli, tmp_path)
    assert len(r.token_logprobs) == len(want) == len(STEPS)
    for i, (got, ref, text) in enumerate(zip(r.token_logprobs, want, STEPS)):
        assert len(got) == len(ref) == r.confidence[i]["tokens"], i
        for g, w in zip(got, ref):
            assert (g["start"], g["end"]) == char_span(text, w["start"], w["end"]), (i, g, w)
            assert abs(g["logprob"] - w["logprob"]) <= 1e-6, (i, g, w)
            assert abs(g["entropy"] - w["entropy"]) <= 1e-6, (i, g, w)
        assert got[0]["start"] == 0 and got[-1]["end"] == len(text)
        mean = sum(t["logprob"] for t in got) / len(got)
        assert math.isclose(mean, r.confidence[i]["mean_logprob"], abs_tol=1e-9)
        # The least likely number: the step's only one, found through str indices.
        least = r.least_likely[i]
        assert text[least["start"] : least["end"]] == NUMBERS[i], (i, least)
        digits = [t["logprob"] for t in got if re.fullmatch(r"\d+", text[t["start"] : t["end"]].strip())]
        assert least["logprob"] == min(digits)


def test_sessions_and_batches_give_the_same_tokens():
    scorer = stepscore.Scorer(CONFIDENCE, family="confidence", threads=1)
    full = scorer.score(PROBLEM, STEPS, token_logprobs=True)
    session = scorer.session(PROBLEM)
    for s in STEPS:
        session.append(s)
    assert len(session.token_logprobs) == len(STEPS)
    for got, want in zip(session.token_logprobs, full.token_logprobs):
        assert [(t["start"], t["end"]) for t in got] == [(t["start"], t["end"]) for t in want]
        assert all(abs(a["logprob"] - b["logprob"]) <= 1e-6 for a, b in zip(got, want))
    assert [(l["start"], l["end"]) for l in session.least_likely] == [(l["start"], l["end"]) for l in full.least_likely]
    [batch] = scorer.score_batch([{"problem": PROBLEM, "steps": STEPS}], token_logprobs=True)
    assert batch.token_logprobs == full.token_logprobs
    assert batch.least_likely == full.least_likely
    assert scorer.score_batch([{"problem": PROBLEM, "steps": STEPS}])[0].token_logprobs is None


def test_heads_without_token_statistics_give_none(tiny):
    r = tiny.score("What is 2 + 3?", ["2 + 3 = 5.", "So é is 5."], token_logprobs=True)
    assert r.token_logprobs is None and r.least_likely is None
    session = tiny.session("What is 2 + 3?")
    session.append("2 + 3 = 5.")
    assert session.token_logprobs == [] and session.least_likely == []
