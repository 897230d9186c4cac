"""Scorer.search: the same result as `stepscore search` (same models, options
and engine), progress events in order, cancelling from the callback, an
exception in the callback raised from search, and bad options as typed errors."""

import json
import subprocess

import pytest

import stepscore

PROBLEM = "What is 6 times 7?"


@pytest.fixture(scope="module")
def prm(smollm2):
    return stepscore.Scorer("stepscore-prm-smollm2", threads=2, backend="cpu"), smollm2


def test_search_equals_the_cli_and_reports_events(prm, cli):
    scorer, _ = prm
    events = []
    result = scorer.search(PROBLEM, method="beam", n=4, beam_width=2, max_steps=2,
                           max_new_tokens=24, seed=3, on_event=events.append)
    out = subprocess.run(
        [str(cli), "search", "--model", "stepscore-prm-smollm2", "--backend", "cpu", "--threads", "2",
         "--method", "beam", "--n", "4", "--beam-width", "2", "--max-steps", "2",
         "--max-new-tokens", "24", "--seed", "3", "--keep-all"],
        input=json.dumps({"problem": PROBLEM}), capture_output=True, text=True, check=True)
    row = json.loads(out.stdout)
    assert [c["text"] for c in row["candidates"]] == [c["text"] for c in result["candidates"]]
    assert [c["scores"] for c in row["candidates"]] == [c["scores"] for c in result["candidates"]]
    assert row["chosen"] == result["chosen"]
    # Every candidate was announced before its tokens; streamed tokens add up to its text.
    kinds = {e["event"] for e in events}
    assert {"forked", "token", "step", "finished"} <= kinds
    for c in result["candidates"]:
        first = next(i for i, e in enumerate(events) if e.get("candidate") == c["index"])
        assert events[first]["event"] == "forked"
    scored = [e for e in events if e["event"] == "step" and e["candidate"] == result["chosen"]]
    assert [e["score"] for e in scored][-len(result["candidates"][result["chosen"]]["scores"]):] \
        == result["candidates"][result["chosen"]]["scores"][-len(scored):]


def test_the_callback_cancels_and_its_exception_is_raised(prm):
    scorer, _ = prm
    seen = []

    def stop_after_five(e):
        if e["event"] == "token":
            seen.append(e)
        return len(seen) < 5

    result = scorer.search(PROBLEM, n=2, max_new_tokens=24, on_event=stop_after_five)
    assert result["cancelled"]
    assert 5 <= result["tokens_generated"] <= 6  # the turn that wrote the fifth token finishes
    assert all(c["stop_reason"] == "cancelled" for c in result["candidates"])

    def boom(e):
        raise RuntimeError("from the callback")

    with pytest.raises(RuntimeError, match="from the callback"):
        scorer.search(PROBLEM, n=2, max_new_tokens=8, on_event=boom)


def test_bad_search_options_are_typed_errors(prm):
    scorer, _ = prm
    with pytest.raises(stepscore.InvalidArgumentError, match="multiple of beam_width"):
        scorer.search(PROBLEM, method="dvts", n=3, beam_width=2)
    with pytest.raises(stepscore.InvalidArgumentError, match="method"):
        scorer.search(PROBLEM, method="greedy")
    with pytest.raises(stepscore.InvalidArgumentError, match="aggregation"):
        scorer.search(PROBLEM, aggregation="median")
