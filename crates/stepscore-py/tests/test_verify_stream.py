"""Scorer.verify_stream / stepscore.verify_stream: the core's stream
verifier from Python. The llama-cpp-python recording (tests/fixtures/stream)
gives the same steps and scores as `stepscore verify-stream`; bytes, chunk
dicts and text pieces give the same steps; spans are str indices; a low step
stops reading; malformed input is a typed error naming its line."""

import json
import subprocess

import pytest

import stepscore

from conftest import ROOT, TINY

RECORDING = ROOT / "tests" / "fixtures" / "stream" / "llama_cpp_python_smollm2.sse"
PROBLEM = ("Tom has 3 apples and buys 5 more. Then he gives 2 away. How many apples does he "
           "have? Think step by step.")


def pieces(data: bytes, size: int = 7):
    return [data[i:i + size] for i in range(0, len(data), size)]


def steps(events):
    return [(e["text"], e["score"]) for e in events if e["event"] == "step"]


def test_recorded_stream_matches_the_cli(tiny, cli):
    events = list(stepscore.verify_stream(tiny, PROBLEM, pieces(RECORDING.read_bytes()), stop=False))
    out = subprocess.run(
        [str(cli), "verify-stream", str(RECORDING), "--problem", PROBLEM, "-m", str(TINY),
         "--backend", "cpu", "--no-stop"],
        capture_output=True, text=True, check=True)
    want = [json.loads(line) for line in out.stdout.splitlines()]
    assert [e for e in events if e["event"] != "text"] == want
    assert len(steps(events)) == 4 and events[-1]["done"] is True


def test_bytes_chunks_and_text_give_the_same_steps_with_str_spans(tiny):
    contents = ["Naïve ✓ step", " one.\n", "\nStep two:", " 2 × 3 = 6.\n\nDone."]
    chunks = [{"choices": [{"index": 0, "delta": {"content": c}, "finish_reason": None}]}
              for c in contents]
    body = "".join(f"data: {json.dumps(c)}\r\n\r\n" for c in chunks)
    body += 'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\r\n\r\ndata: [DONE]\r\n\r\n'
    class Chunk:
        """Stands for the openai client's ChatCompletionChunk (a pydantic model)."""

        def __init__(self, d):
            self.d = d

        def model_dump(self):
            return self.d

    runs = [
        stepscore.verify_stream(tiny, "p", pieces(body.encode(), 3), stop=False),
        stepscore.verify_stream(tiny, "p", chunks, stop=False),
        stepscore.verify_stream(tiny, "p", [Chunk(c) for c in chunks], stop=False),
        stepscore.verify_stream(tiny, "p", contents, stop=False),
    ]
    results = [list(r) for r in runs]
    assert all(steps(r) == steps(results[0]) for r in results)
    text = "".join(contents)
    got = [e for e in results[0] if e["event"] == "step"]
    assert [e["text"] for e in got] == ["Naïve ✓ step one.", "Step two: 2 × 3 = 6.", "Done."]
    for e in got:
        assert text[e["start"]:e["end"]] == e["text"]


def test_a_low_step_stops_reading_the_stream(tiny):
    full = list(stepscore.verify_stream(tiny, PROBLEM, [RECORDING.read_bytes()], stop=False))
    scores = [s for _, s in steps(full)]
    low = min(range(len(scores) - 1), key=scores.__getitem__)
    read = []

    def endless():
        for p in pieces(RECORDING.read_bytes()):
            read.append(p)
            yield p
        raise AssertionError("read past the stop")

    events = list(stepscore.verify_stream(tiny, PROBLEM, endless(), stop_below=scores[low] + 1e-9))
    assert events[-1]["event"] == "stopped" and events[-1]["step"] == low
    assert len(steps(events)) == low + 1
    v = tiny.verify_stream("p", stop_below=0.25)
    assert v.threshold == 0.25
    assert tiny.verify_stream("p", stop=False).threshold is None


def test_bad_input_is_a_typed_error_naming_the_line(tiny):
    v = tiny.verify_stream("p", source="s")
    with pytest.raises(stepscore.InputError, match=r"s line 3: not JSON") as e:
        v.feed(b'data: {"choices":[{"delta":{"content":"a"}}]}\n\ndata: {"choices": [\n\n')
    assert e.value.line == 3
    v = tiny.verify_stream("p", source="s")
    with pytest.raises(stepscore.InputError, match=r"the server sent an error: boom"):
        v.feed(b'data: {"error": {"message": "boom"}}\n\n')
    with pytest.raises(stepscore.InputError, match="stream ended before its end"):
        list(stepscore.verify_stream(tiny, "p", [b'data: {"choices":[{"delta":{"content":"a"}}]}\n\n']))
    with pytest.raises(stepscore.InvalidArgumentError, match=r"\[0, 1\]"):
        tiny.verify_stream("p", stop_below=1.5)
