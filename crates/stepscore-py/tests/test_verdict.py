"""The model's verdict on a whole solution from Python: the same numbers as
`stepscore score --verdict`, the solution score as the core defines it, and
typed errors where no verdict can be given."""

import json
import math
import subprocess

import pytest
import stepscore

from conftest import PRM

PROBLEM = "Tom has 12 apples and gives away 5. How many are left?"
STEPS = ["12 - 5 = 7.", "Tom has 7 apples left. The answer is 7."]


def test_verdict_equals_the_cli(smollm2, cli):
    scorer = stepscore.Scorer(smollm2, threads=2)
    got = scorer.verdict(PROBLEM, STEPS)
    assert 0.0 < got["p_yes"] < 1.0 and got["tokens"] > 20
    row = json.dumps({"problem": PROBLEM, "steps": STEPS})
    out = subprocess.run(
        [str(cli), "score", "--model", str(smollm2), "--threads", "2", "--verdict", "--output", "jsonl"],
        input=row, capture_output=True, text=True, check=True,
    )
    want = json.loads(out.stdout)["metadata"]["stepscore"]["verdict"]
    assert got["p_yes"] == want["p_yes"] and got["tokens"] == want["tokens"]
    # SmolLM2's head ships no solution threshold, so the CLI flags nothing.
    assert scorer.solution_threshold is None and "solution_flagged" not in want
    assert want["solution_score"] == pytest.approx(
        stepscore.solution_score(min(json.loads(out.stdout)["steps"][i]["score"] for i in range(2)), got["p_yes"]),
        abs=0, rel=0,
    )


def test_solution_score_is_the_sum_of_log_odds():
    assert stepscore.solution_score(0.9, 0.8) == pytest.approx(math.log(9) + math.log(4), rel=1e-12)
    # Probabilities at 0 or 1 are kept finite.
    assert math.isfinite(stepscore.solution_score(0.0, 1.0))


def test_no_verdict_without_steps_or_chat_template(smollm2):
    with pytest.raises(stepscore.InvalidArgumentError, match="at least one step"):
        stepscore.Scorer(smollm2, threads=1).verdict(PROBLEM, [])
    with pytest.raises(stepscore.StepscoreError, match="chat template"):
        stepscore.Scorer(PRM / "confidence-tiny", threads=1).verdict(PROBLEM, STEPS)
