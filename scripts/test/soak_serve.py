#!/usr/bin/env python3
"""Soak test of `stepscore serve` (standard library only).

Starts the server on a loopback port, sends REQUESTS requests from CLIENTS
threads, a fraction of them hostile (malformed JSON, stalled mid-body,
oversized), while NON_READERS more clients pipeline `GET /metrics` and never
read their answers (the server must close them at its write timeout), and checks every good answer against `stepscore score` (the
CLI) on the same traces. Reports answers, errors by code, p50/p99 latency
of the good requests, and the server's peak and final RSS; then sends
SIGTERM with one stalled client connected and reports how long the server
took to exit (it must be within its shutdown deadline).

Exit status 0 when every good request got its right answer, every hostile
one got the expected refusal, nothing was lost and shutdown met its deadline.

  scripts/test/soak_serve.py --bin target/debug/stepscore \\
      --model tests/fixtures/prm/skywork-prm-tiny --requests 10000 --clients 32
"""

import argparse
import collections
import http.client
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def make_pool(n, rng):
    words = ["add", "the", "two", "numbers", "so", "we", "get", "carry", "then", "check"]
    pool = []
    for i in range(n):
        steps = [
            " ".join(rng.choice(words) for _ in range(rng.randint(2, 12))) + f" {i}."
            for _ in range(rng.randint(1, 5))
        ]
        pool.append({"id": f"t{i}", "problem": f"Problem {i}: what is {i} + {i}?", "steps": steps})
    return pool


def cli_scores(bin_path, model, pool):
    """Step scores of each pool trace by `stepscore score` (the CLI)."""
    text = "".join(json.dumps(t) + "\n" for t in pool)
    out = subprocess.run(
        [bin_path, "score", "--model", model, "--backend", "cpu", "--threads", "1", "--output", "jsonl"],
        input=text.encode(), capture_output=True, check=True,
    )
    want = {}
    for line in out.stdout.decode().splitlines():
        row = json.loads(line)
        want[row["id"]] = [s["score"] for s in row["steps"]]
    assert len(want) == len(pool), f"the CLI scored {len(want)} of {len(pool)} traces"
    return want


def start_server(bin_path, model, extra):
    proc = subprocess.Popen(
        [bin_path, "serve", "--model", model, "--backend", "cpu", "--threads", "1",
         "--listen", "127.0.0.1:0", *extra],
        stdout=open(os.devnull, "w"), stderr=subprocess.PIPE, text=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        if "serving on http://" in line:
            host, port = line.split("serving on http://")[1].split()[0].rsplit(":", 1)
            # Keep draining stderr so the server never blocks on it.
            threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
            return proc, host, int(port)
    proc.kill()
    sys.exit("the server did not start")


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.outcomes = collections.Counter()  # (kind, status or code)
        self.latency = []
        self.wrong = []
        self.max_diff = 0.0

    def add(self, key):
        with self.lock:
            self.outcomes[key] += 1


def post(host, port, path, body, timeout=120):
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, resp.getheader("Retry-After"), data
    finally:
        conn.close()


def error_code(data):
    try:
        return json.loads(data)["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return "not-json"


def good(host, port, pool, want, rng, stats):
    rows = [rng.choice(pool) for _ in range(rng.randint(1, 4))]
    body = json.dumps({"traces": rows})
    for _ in range(100):
        t0 = time.monotonic()
        status, retry, data = post(host, port, "/v1/score_steps", body)
        dt = time.monotonic() - t0
        if status in (429, 503):
            stats.add(("good-retried", error_code(data)))
            time.sleep(float(retry or 1))
            continue
        break
    if status != 200:
        stats.add(("good", f"status {status} {error_code(data)}"))
        stats.wrong.append(f"status {status}: {data[:200]!r}")
        return
    results = json.loads(data)["results"]
    ok = len(results) == len(rows)
    for row, res in zip(rows, results):
        exp = want[row["id"]]
        got = res["step_scores"]
        if res["error"] is not None or res["id"] != row["id"] or len(got) != len(exp):
            ok = False
            continue
        d = max(abs(a - b) for a, b in zip(got, exp))
        with stats.lock:
            stats.max_diff = max(stats.max_diff, d)
        ok &= d <= 1e-9
    with stats.lock:
        stats.latency.append(dt)
    stats.add(("good", "right" if ok else "WRONG"))
    if not ok:
        stats.wrong.append(f"{rows} -> {results}")


def malformed(host, port, rng, stats):
    body = rng.choice(['{"traces": [', '{"traces": 5}', "[]", '{"traces":[{"problem":"p","steps":["a"],"steps":["b"]}]}'])
    status, _, data = post(host, port, "/v1/score_steps", body)
    code = error_code(data)
    if status == 200:  # a duplicate key is an error in its row's slot
        code = json.loads(data)["results"][0]["error"]["code"]
    stats.add(("malformed", f"{status} {code}"))


def oversized(host, port, max_body, stats):
    body = '{"traces": []' + " " * max_body + "}"
    try:
        status, _, data = post(host, port, "/v1/score_steps", body)
        stats.add(("oversized", f"{status} {error_code(data)}"))
    except (ConnectionError, http.client.HTTPException, OSError):
        # The server may answer 413 and close before the whole body is sent.
        stats.add(("oversized", "closed while sending"))


def stalled(host, port, stats):
    """Sends headers and part of the body, then waits for the server to give up."""
    s = socket.create_connection((host, port), timeout=120)
    try:
        s.sendall(f"POST /v1/score_steps HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
                  "Content-Length: 100\r\n\r\n{".encode())
        data = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        if data.startswith(b"HTTP/"):
            status = data.split(b" ", 2)[1].decode()
            body = data.split(b"\r\n\r\n", 1)[-1]
            stats.add(("stalled", f"{status} {error_code(body)}"))
        else:
            stats.add(("stalled", "closed"))
    finally:
        s.close()


def non_reader(host, port, stop, results):
    """Pipelines GET /metrics without reading until the server stops taking
    requests; once the run is over, reads what the server sent before it
    closed the connection and records (requests sent, answers received)."""
    s = socket.create_connection((host, port), timeout=120)
    req = f"GET /metrics HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()
    batch = req * 500
    sent = 0
    s.settimeout(2)
    try:
        while not stop.is_set():
            s.sendall(batch)
            sent += 500
    except OSError:  # the send blocked (timeout), or the server closed
        pass
    stop.wait()
    data = b""
    s.settimeout(60)
    try:
        while True:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            data += chunk
        how = "closed"
    except ConnectionResetError:
        how = "reset"
    except socket.timeout:
        how = "still open"
    finally:
        s.close()
    results.append((sent, data.count(b"HTTP/1.1 200"), how))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="target/debug/stepscore")
    ap.add_argument("--model", default="tests/fixtures/prm/skywork-prm-tiny")
    ap.add_argument("--requests", type=int, default=10000)
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--hostile", type=float, default=0.05, help="fraction of hostile requests")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--non-readers", type=int, default=4,
                    help="clients that pipeline GET /metrics and never read")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    pool = make_pool(64, rng)
    want = cli_scores(args.bin, args.model, pool)
    max_body = 1 << 20
    shutdown_s = 5.0
    proc, host, port = start_server(args.bin, args.model, [
        "--max-body-bytes", str(max_body), "--max-body-memory", str(16 << 20),
        "--body-timeout", "2", "--header-timeout", "5", "--shutdown-timeout", str(shutdown_s),
        "--write-timeout", "2",
    ])
    stats = Stats()
    peak = [0]
    done = threading.Event()

    def watch_rss():
        while not done.is_set():
            peak[0] = max(peak[0], rss_kib(proc.pid))
            time.sleep(0.05)

    threading.Thread(target=watch_rss, daemon=True).start()
    start_rss = rss_kib(proc.pid)
    kinds = []
    for i in range(args.requests):
        r = rng.random()
        h = args.hostile / 3
        kinds.append("malformed" if r < h else "stalled" if r < 2 * h else "oversized" if r < 3 * h else "good")
    counter = iter(range(args.requests))
    lock = threading.Lock()
    failures = []

    def client(seed):
        crng = random.Random(seed)
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            try:
                k = kinds[i]
                if k == "good":
                    good(host, port, pool, want, crng, stats)
                elif k == "malformed":
                    malformed(host, port, crng, stats)
                elif k == "oversized":
                    oversized(host, port, max_body, stats)
                else:
                    stalled(host, port, stats)
            except Exception as e:  # a lost request
                stats.add((kinds[i], f"lost: {type(e).__name__}"))
                failures.append(f"{kinds[i]}: {e!r}")

    stop_non_readers = threading.Event()
    non_readers = []
    nr_threads = [threading.Thread(target=non_reader, args=(host, port, stop_non_readers, non_readers))
                  for _ in range(args.non_readers)]
    for t in nr_threads:
        t.start()
    t0 = time.monotonic()
    threads = [threading.Thread(target=client, args=(args.seed * 1000 + c,)) for c in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    stop_non_readers.set()
    for t in nr_threads:
        t.join()
    time.sleep(1.0)
    final = rss_kib(proc.pid)
    done.set()
    peak[0] = max(peak[0], final)

    # Shutdown with one stalled client connected.
    s = socket.create_connection((host, port))
    s.sendall(f"POST /v1/score_steps HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
              "Content-Length: 100\r\n\r\n{".encode())
    time.sleep(0.2)
    t_term = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=shutdown_s + 30)
    except subprocess.TimeoutExpired:
        proc.kill()
    exit_s = time.monotonic() - t_term
    s.close()

    lat = sorted(stats.latency)
    pct = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] * 1000 if lat else float("nan")
    answered = sum(n for (kind, _), n in stats.outcomes.items() if kind != "good-retried")
    print(f"requests: {args.requests} from {args.clients} clients in {wall:.1f}s; answered: {answered}")
    for (kind, what), n in sorted(stats.outcomes.items()):
        print(f"  {kind:10} {what}: {n}")
    print(f"good-request latency: p50 {pct(0.5):.1f} ms, p99 {pct(0.99):.1f} ms; max |server - CLI| {stats.max_diff:.3g}")
    print(f"server RSS: at start {start_rss / 1024:.1f} MiB, peak {peak[0] / 1024:.1f} MiB, final {final / 1024:.1f} MiB")
    for sent, answered_nr, how in non_readers:
        print(f"  non-reader: {sent} pipelined GET /metrics sent, {answered_nr} answers before the server closed ({how})")
    print(f"SIGTERM with a stalled client: exited in {exit_s:.2f}s (deadline {shutdown_s}s), status {proc.returncode}")
    bad = [k for k in stats.outcomes if k[0] == "good" and k[1] != "right"]
    hostile_ok = {
        "malformed": lambda w: w.startswith("400 ") or w == "200 input",
        "oversized": lambda w: w.startswith("413 ") or w == "closed while sending",
        "stalled": lambda w: w.startswith("408 ") or w == "closed",
    }
    bad += [k for k in stats.outcomes if k[0] in hostile_ok and not hostile_ok[k[0]](k[1])]
    # A client that never reads is cut off at the write timeout: it got
    # fewer answers than it asked for, and the connection is closed.
    bad += [("non-reader", f"{how}: {n} of {sent}") for sent, n, how in non_readers
            if how == "still open" or n >= sent]
    ok = not bad and not failures and answered >= args.requests and exit_s <= shutdown_s + 2 and proc.returncode == 0
    for f in failures[:5] + stats.wrong[:5]:
        print("  ", f)
    print("PASS" if ok else f"FAIL: {bad}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
