"""Shared fixtures: the tiny PRM checkpoints, the CLI binary, the cached
SmolLM2 model, deterministic traces, and `stepscore serve` processes."""

import json
import os
import random
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PRM = ROOT / "tests" / "fixtures" / "prm"
TINY = PRM / "skywork-prm-tiny"
FAMILIES = ["skywork-prm-tiny", "qwen2-prm-tiny", "math-shepherd-tiny", "rlhflow-tiny", "confidence-tiny"]


def cli_path() -> Path:
    env = os.environ.get("STEPSCORE_CLI")
    if env:
        return Path(env)
    path = ROOT / "target" / "debug" / "stepscore"
    if not path.exists():
        subprocess.run(["cargo", "build", "-q", "-p", "stepscore-cli"], cwd=ROOT, check=True)
    return path


@pytest.fixture(scope="session")
def cli() -> Path:
    return cli_path()


@pytest.fixture(scope="session")
def tiny():
    import stepscore

    return stepscore.Scorer(TINY, threads=1)


def cached_model(file_name: str) -> Path:
    """A catalog model's file in stepscore's cache; skips the test when it is not fetched."""
    import stepscore

    # The core's cache rule (STEPSCORE_CACHE, XDG_CACHE_HOME, HOME), not a copy of it.
    cache = stepscore.cache_dir()
    if cache is None:
        pytest.skip("SKIPPED: no cache directory (set STEPSCORE_CACHE or HOME)")
    path = Path(cache) / file_name
    if not path.exists():
        pytest.skip(f"SKIPPED: {path} not fetched (run `stepscore fetch`)")
    return path


@pytest.fixture(scope="session")
def smollm2() -> Path:
    """The fast PRM's backbone GGUF (catalog `stepscore-prm-smollm2`)."""
    return cached_model("SmolLM2-135M-Instruct.Q4_1.gguf")


@pytest.fixture(scope="session")
def qwen15b() -> Path:
    """The default PRM's backbone GGUF (catalog `stepscore-prm-qwen1.5b`)."""
    return cached_model("Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf")


WORDS = ["First", "compute", "7", "\\times", "3", "=", "21.", "Then", "12", "+", "33.", "The", "answer", "is",
         "\\boxed{33}.", "We", "factor:", "$x", "2$", "so", "sum", "fruits", "Réponse", "ответ", "π", "≈"]


def make_traces(n: int, seed: int = 7):
    """ProcessBench rows with 1-4 steps of words the tiny tokenizers know."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        steps = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 9))) for _ in range(rng.randint(1, 4))]
        problem = "What is " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6))) + "?"
        rows.append({"id": f"t{i}", "problem": problem, "steps": steps, "label": -1})
    return rows


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def cli_scores(cli: Path, path: Path, *args: str):
    """`stepscore score` JSONL output: id -> step scores (exit code 1 means
    some records could not be scored; the others are in the output)."""
    proc = subprocess.run(
        [str(cli), "score", str(path), "--output", "jsonl", "--backend", "cpu", *args],
        capture_output=True, text=True,
    )
    assert proc.returncode in (0, 1), proc.stderr
    out = proc.stdout
    result = {}
    for line in out.splitlines():
        row = json.loads(line)
        result[row["id"]] = [s.get("score") for s in row["steps"]]
    return result


class Server:
    """A `stepscore serve` process on a free loopback port."""

    def __init__(self, cli: Path, *args: str):
        self.proc = subprocess.Popen(
            [str(cli), "serve", "--listen", "127.0.0.1:0", "--backend", "cpu", *args],
            stderr=subprocess.PIPE, text=True,
        )
        self.log = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.log.append(line)
            m = re.search(r"serving on (http://\S+)", line)
            if m:
                self.url = m.group(1)
                return
        self.proc.kill()
        raise RuntimeError("server did not start:\n" + "".join(self.log))

    def stop(self, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout=timeout)
        self.log.extend(self.proc.stderr.readlines())
        return rc


@pytest.fixture
def serve(cli):
    started = []

    def start(*args: str) -> Server:
        s = Server(cli, *args)
        started.append(s)
        return s

    yield start
    for s in started:
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait()
