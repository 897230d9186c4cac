"""A Scorer across processes: pickled (as Ray and verl ship reward
functions) and unpickled in a fresh interpreter with identical scores; its
default thread count is this process's share (affinity, OMP_NUM_THREADS),
said in `info()`."""

import json
import os
import pickle
import subprocess
import sys

import pytest

import stepscore
from conftest import TINY

PROBLEM = "What is 12 + 21?"
STEPS = ["12 + 21 = 33.", "The answer is \\boxed{33}."]


def run_python(code: str, env=None, **kw) -> dict:
    """Runs `code` in a fresh interpreter (cwd /) and returns the JSON it prints last."""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/",
                          env={**os.environ, **(env or {})}, timeout=120, **kw)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_pickle_round_trip_in_a_fresh_process(tmp_path):
    scorer = stepscore.Scorer(TINY, threads=1, max_tokens=256, truncation="drop-steps")
    want = scorer.score(PROBLEM, STEPS).step_scores
    blob = tmp_path / "scorer.pkl"
    blob.write_bytes(pickle.dumps(scorer))
    # cwd=/ : the model path was made absolute, so another working directory finds it.
    got = run_python(
        "import json, pickle, sys\n"
        f"s = pickle.loads(open({str(blob)!r}, 'rb').read())\n"
        f"print(json.dumps({{'scores': s.score({PROBLEM!r}, {STEPS!r}).step_scores, 'info': s.info()}},"
        " default=str))\n"
    )
    assert got["scores"] == want  # identical, not approximately
    assert got["info"]["threads"] == 1 and got["info"]["max_tokens"] == 256
    # In process too, and the copy is a scorer of its own.
    again = pickle.loads(pickle.dumps(scorer))
    assert again is not scorer and again.score(PROBLEM, STEPS).step_scores == want


def test_pickle_keeps_a_relative_path_working(tmp_path, monkeypatch):
    monkeypatch.chdir(TINY.parent)
    blob = pickle.dumps(stepscore.Scorer(TINY.name, threads=1))
    monkeypatch.chdir(tmp_path)
    assert pickle.loads(blob).score(PROBLEM, STEPS).step_scores == \
        stepscore.Scorer(TINY, threads=1).score(PROBLEM, STEPS).step_scores


def test_pickled_default_threads_are_worked_out_where_unpickled(tmp_path):
    blob = tmp_path / "scorer.pkl"
    blob.write_bytes(pickle.dumps(stepscore.Scorer(TINY)))
    got = run_python(
        "import json, pickle\n"
        f"s = pickle.loads(open({str(blob)!r}, 'rb').read())\n"
        "print(json.dumps(s.info(), default=str))\n",
        env={"OMP_NUM_THREADS": "1"},
    )
    assert got["threads"] == 1 and "OMP_NUM_THREADS=1" in got["threads_source"]


def test_info_says_threads_and_why():
    info = stepscore.Scorer(TINY, threads=1).info()
    assert info["threads"] == 1 and info["threads_source"] == "1: threads=1"
    assert {"model", "family", "backend", "max_tokens", "threshold", "version"} <= set(info)
    assert info["family"] == "value-head"


SHOW = "import json, stepscore\nprint(json.dumps(stepscore.Scorer({model!r}).info(), default=str))\n"


def test_default_threads_follow_omp_num_threads():
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("SKIPPED: one CPU here; OMP_NUM_THREADS=1 would not be fewer")
    got = run_python(SHOW.format(model=str(TINY)), env={"OMP_NUM_THREADS": "1"})
    assert got["threads"] == 1, got
    assert got["threads_source"].startswith("1: OMP_NUM_THREADS=1"), got
    # `threads=0` no longer means every core: it is the same default.
    got0 = run_python(f"import json, stepscore\nprint(json.dumps(stepscore.Scorer({str(TINY)!r}, threads=0).info(), default=str))",
                      env={"OMP_NUM_THREADS": "1"})
    assert got0["threads"] == 1


def test_default_threads_follow_the_affinity_mask():
    cpus = sorted(os.sched_getaffinity(0))
    code = f"import os\nos.sched_setaffinity(0, {{{cpus[0]}}})\n" + SHOW.format(model=str(TINY))
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["threads"] == 1
    assert "may use" in got["threads_source"], got
