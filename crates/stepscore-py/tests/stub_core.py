"""``import stepscore`` for the trainer-path tests, with the compiled core
when it is installed (CI installs the wheel) and, in a checkout where the
wheel is not built, with a placeholder core: the adapters are plain Python,
and these tests stub the scorer at the adapter boundary, so they still run.
``NATIVE`` says which; a test that needs the real core skips without it.

Only the trainer-path test files import this module; the other test files
import ``stepscore`` directly and need the wheel.
"""

import sys
import types

import pytest


def _absent(*args, **kwargs):
    raise RuntimeError("the compiled core (stepscore._stepscore) is not built in this checkout")


def _load() -> bool:
    try:
        import stepscore  # noqa: F401

        return True
    except ImportError as e:
        if "_stepscore" not in str(e):
            raise
    stub = types.ModuleType("stepscore._stepscore")

    def __getattr__(name):
        if name.startswith("__"):
            if name == "__version__":
                return "0+no-core"
            raise AttributeError(name)
        cls = type(name, (Exception,), {"__init__": _absent})
        setattr(stub, name, cls)
        return cls

    stub.__getattr__ = __getattr__
    sys.modules["stepscore._stepscore"] = stub
    import stepscore  # noqa: F401

    return False


NATIVE = _load()

needs_core = pytest.mark.skipif(not NATIVE, reason="SKIPPED: the compiled core is not built (pip install the wheel)")


class Result:
    """A stand-in for ``stepscore.TraceScore``: ``aggregate`` and ``len``."""

    def __init__(self, step_scores):
        self.step_scores = list(step_scores)

    def __len__(self):
        return len(self.step_scores)

    def aggregate(self, how="min"):
        if not self.step_scores:
            return None
        return {"min": min, "max": max}.get(how, min)(self.step_scores)


class StubScorer:
    """A scorer at the adapter boundary: ``score_batch(rows, segmenter=,
    errors=)`` as the core's, each row's steps its response's blank-line
    paragraphs, each step's score ``len(step) / 100`` (capped at 1). A
    response containing ``FAIL`` is an error (returned or ``None`` by
    ``errors``, as the core does); rows are recorded in ``rows``."""

    def __init__(self, raise_on_call: bool = False):
        import threading

        self.rows = []
        self.calls = []
        self.lock = threading.Lock()
        self.raise_on_call = raise_on_call

    def score_batch(self, rows, segmenter="auto", errors="raise"):
        rows = list(rows)
        with self.lock:
            self.rows.extend(rows)
            self.calls.append(len(rows))
        if self.raise_on_call:
            raise RuntimeError("the scoring thread is gone")
        out = []
        for r in rows:
            steps = [s for s in r["response"].split("\n\n") if s.strip()]
            if "FAIL" in r["response"] or not steps:
                err = ValueError("a trace needs at least one step" if not steps else "trace too long")
                if errors == "raise":
                    raise err
                out.append(err if errors == "return" else None)
            else:
                out.append(Result(min(len(s) / 100.0, 1.0) for s in steps))
        return out

    @staticmethod
    def expected(response, how="min"):
        return Result(min(len(s) / 100.0, 1.0) for s in response.split("\n\n") if s.strip()).aggregate(how)
