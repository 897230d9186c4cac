"""`stepscore serve` on loopback: answers equal the library's, concurrent
clients all answered (bounded in count and time), 413/429/504 and 400
codes, per-trace errors, metrics, graceful shutdown finishing accepted
work."""

import json
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

import stepscore
from stepscore.client import RewardClient, ServerError
from conftest import TINY, make_traces


def expected_reward(tiny, prompt, response):
    steps = [s["text"] for s in stepscore.segment(response)]
    return tiny.score(prompt, steps).aggregate("min")


def wait_for(pred, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.02)
    return False


def test_routes_equal_the_library(serve, tiny):
    srv = serve("--model", str(TINY), "--threads", "1")
    c = RewardClient(srv.url, timeout=30)
    h = c.health()
    assert h["status"] == "ok" and h["family"] == "value-head"
    prompts = ["Q: What is 2+3?\n", "Q: What is 12 + 21?\n"]
    responses = ["2+3 = 5.\n\nThe answer is 5.", "12 + 21 = 33.\n\nSo 33."]
    rewards = c.get_reward([p + r for p, r in zip(prompts, responses)], prompts, ["5", "33"])
    for p, r, got in zip(prompts, responses, rewards):
        assert abs(got - expected_reward(tiny, p, r)) <= 1e-6
    rows = make_traces(12) + [{"problem": "p", "steps": "bad"}]
    results = c.score(rows)
    assert len(results) == len(rows)
    for row, res in zip(rows[:-1], results):
        want = tiny.score(row["problem"], row["steps"]).step_scores
        assert res["error"] is None
        assert all(abs(a - b) <= 1e-6 for a, b in zip(res["step_scores"], want))
        assert abs(res["score"] - min(want)) <= 1e-6
    assert results[-1]["error"]["code"] == "input" and "steps" in results[-1]["error"]["message"]
    # vLLM's routes give the same numbers: per step, and the trace's minimum.
    chat = ("<|im_start|>user\n" + rows[0]["problem"] + "<|im_end|>\n<|im_start|>assistant\n"
            + "".join(s + "<extra_0>" for s in rows[0]["steps"]) + "<|im_end|>")
    want = tiny.score(rows[0]["problem"], rows[0]["steps"]).step_scores
    pairs = c.pooling([chat])[0]
    assert all(abs(p[1] - w) <= 1e-6 for p, w in zip(pairs, want)) and len(pairs) == len(want)
    assert abs(c.classify([chat])[0][1] - min(want)) <= 1e-6
    text = c.metrics()
    assert 'stepscore_requests_total{route="get_reward",status="200"} 1' in text
    assert "stepscore_traces_scored_total 16" in text
    assert srv.stop() == 0


def test_concurrent_clients_lose_no_request(serve, tiny):
    srv = serve("--model", str(TINY), "--threads", "1", "--max-batch", "16")
    c = RewardClient(srv.url, timeout=60)
    rows = make_traces(64, seed=3)
    want = [tiny.score(r["problem"], r["steps"]).aggregate("min") for r in rows]
    queries = [r["problem"] + "\n" + "\n\n".join(r["steps"]) for r in rows]
    prompts = [r["problem"] + "\n" for r in rows]

    def client(k):
        # 16 clients x 6 requests of 4 traces each, every answer checked.
        got = []
        for j in range(6):
            idx = [(k * 6 + j + m) % len(rows) for m in range(4)]
            rewards = c.get_reward([queries[i] for i in idx], [prompts[i] for i in idx])
            got.append((idx, rewards))
        return got

    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(client, range(16), timeout=120))
    n = 0
    for per_client in answers:
        for idx, rewards in per_client:
            assert len(rewards) == 4
            for i, r in zip(idx, rewards):
                expected = expected_reward(tiny, prompts[i], queries[i][len(prompts[i]):])
                assert abs(r - expected) <= 1e-6
            n += 1
    assert n == 96
    text = c.metrics()
    assert 'stepscore_requests_total{route="get_reward",status="200"} 96' in text
    # Batching across clients: fewer engine passes than requests.
    batches = int(float(next(l for l in text.splitlines() if l.startswith("stepscore_batches_total")).split()[1]))
    assert batches < 96
    assert srv.stop() == 0


def test_size_limits_answer_413(serve):
    srv = serve("--model", str(TINY), "--max-body-bytes", "4096", "--max-traces", "3", "--max-trace-bytes", "200")
    c = RewardClient(srv.url)
    with pytest.raises(ServerError) as e:
        c.get_reward(["x" * 5000])
    assert e.value.status == 413
    with pytest.raises(ServerError) as e:
        c.get_reward(["a", "b", "c", "d"])
    assert e.value.status == 413 and e.value.body["error"]["code"] == "too_many_traces"
    res = c.score([{"problem": "p", "steps": ["y" * 300]}, {"problem": "p", "steps": ["ok."]}])
    assert res[0]["error"]["code"] == "trace_too_long" and res[1]["error"] is None
    assert srv.stop() == 0


def test_full_queue_answers_429(serve):
    # The worker holds its first job while it waits 1.4 s for more: the
    # 4-trace queue is full meanwhile. (A batch wait at or past --timeout,
    # which turned every such job into a 504, is refused at start since
    # issue 44's D17; the Rust suite's entry_points test covers that.)
    srv = serve("--model", str(TINY), "--queue", "4", "--batch-wait-ms", "1400", "--timeout", "1.5")
    c = RewardClient(srv.url)
    first = {}

    def held():
        first["rewards"] = c.get_reward(["1.\n\n2.", "3.", "4.", "5."])

    t = threading.Thread(target=held)
    t.start()
    assert wait_for(lambda: c.health()["queue"] == 4)
    with pytest.raises(ServerError) as e:
        c.get_reward(["6."])
    assert e.value.status == 429 and e.value.retry_after is not None and e.value.retry_after >= 1
    t.join(timeout=30)
    # The held job is answered once the wait ends, and its permits come back.
    assert len(first["rewards"]) == 4
    assert wait_for(lambda: c.health()["queue"] == 0)
    assert srv.stop() == 0


JSON = {"Content-Type": "application/json"}


def test_bad_requests_answer_400(serve):
    srv = serve("--model", str(TINY))
    for body in [b"not json", b"[1, 2]", json.dumps({"query": "one string"}).encode(),
                 json.dumps({"query": ["a"], "prompts": ["a", "b"]}).encode()]:
        req = urllib.request.Request(srv.url + "/get_reward", data=body, method="POST", headers=JSON)
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=10)
        assert e.value.code == 400
        assert "error" in json.loads(e.value.read())
    req = urllib.request.Request(srv.url + "/v1/score_steps", data=b'{"traces": 3}', method="POST", headers=JSON)
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=10)
    assert e.value.code == 400
    assert srv.stop() == 0


def test_graceful_shutdown_finishes_accepted_work(serve, tiny):
    srv = serve("--model", str(TINY), "--batch-wait-ms", "800")
    c = RewardClient(srv.url, timeout=30)
    prompt, response = "Q: 2+3?\n", "2+3 = 5.\n\nSo 5."
    got = {}

    def request():
        got["rewards"] = c.get_reward([prompt + response] * 3, [prompt] * 3)

    t = threading.Thread(target=request)
    t.start()
    assert wait_for(lambda: c.health()["queue"] == 3)
    rc = srv.stop()  # SIGTERM while the request is queued
    t.join(timeout=30)
    assert rc == 0
    want = expected_reward(tiny, prompt, response)
    assert got["rewards"] == [pytest.approx(want, abs=1e-6)] * 3
    assert any("shutting down" in line for line in srv.log)
    with pytest.raises(OSError):
        c.health()
