"""A client for ``stepscore serve`` (standard library only).

>>> client = RewardClient("http://127.0.0.1:8000")  # doctest: +SKIP
>>> client.get_reward(["Q: 2+2?\\nA: 2+2=4.\\n\\nSo 4."], ["Q: 2+2?\\nA: "])  # doctest: +SKIP
[0.51...]
"""

import json
import os
import urllib.error
import urllib.request
from typing import Any, Dict, List, Optional, Sequence


class ServerError(Exception):
    """The server answered with an error status. Attributes: ``status``,
    ``body`` (the decoded JSON error, or the raw text), ``retry_after``
    (seconds, for 429/503, else None)."""

    def __init__(self, status: int, body: Any, retry_after: Optional[float]):
        super().__init__(f"HTTP {status}: {body}")
        self.status = status
        self.body = body
        self.retry_after = retry_after


class RewardClient:
    """Posts JSON to a ``stepscore serve`` server. ``api_key`` (default: the
    ``STEPSCORE_API_KEY`` environment variable) is sent as a bearer token.
    Error bodies are ``{"error": {"code", "message"}}``; on the vLLM routes
    (``/pooling``, ``/classify``) they have vLLM's shape, ``{"error":
    {"message", "type", "param", "code": HTTP status, "stepscore_code"}}``."""

    def __init__(self, url: str, timeout: float = 60.0, api_key: Optional[str] = None):
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.api_key = api_key if api_key is not None else os.environ.get("STEPSCORE_API_KEY")

    def _request(self, method: str, path: str, payload: Optional[Any] = None) -> Any:
        data = None if payload is None else json.dumps(payload).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                body = resp.read()
                ctype = resp.headers.get("Content-Type", "")
        except urllib.error.HTTPError as e:
            raw = e.read().decode(errors="replace")
            try:
                body_obj: Any = json.loads(raw)
            except ValueError:
                body_obj = raw
            ra = e.headers.get("Retry-After")
            raise ServerError(e.code, body_obj, float(ra) if ra else None) from None
        return json.loads(body) if "json" in ctype else body.decode()

    def get_reward(self, queries: Sequence[str], prompts: Optional[Sequence[str]] = None, labels: Optional[Sequence[Any]] = None) -> List[float]:
        """OpenRLHF's route: one reward per query."""
        payload: Dict[str, Any] = {"query": list(queries)}
        if prompts is not None:
            payload["prompts"] = list(prompts)
        if labels is not None:
            payload["labels"] = list(labels)
        return self._request("POST", "/get_reward", payload)["rewards"]

    def score(self, traces: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
        """The native route: per-step scores of each trace (row dicts with
        ``problem`` and ``steps``, or ``problem`` and ``response``)."""
        return self._request("POST", "/v1/score_steps", {"traces": list(traces)})["results"]

    def pooling(self, inputs: Sequence[str], model: Optional[str] = None) -> List[List[List[float]]]:
        """vLLM's pooling route: per input (chat text, ``<extra_0>`` after each
        step), one ``[p_incorrect, p_correct]`` pair per step."""
        payload: Dict[str, Any] = {"input": list(inputs)}
        if model is not None:
            payload["model"] = model
        return [d["data"] for d in self._request("POST", "/pooling", payload)["data"]]

    def classify(self, inputs: Sequence[str], model: Optional[str] = None) -> List[List[float]]:
        """vLLM's classification route: per input, the ``[p_incorrect,
        p_correct]`` pair of the trace's aggregate score."""
        payload: Dict[str, Any] = {"input": list(inputs)}
        if model is not None:
            payload["model"] = model
        return [d["probs"] for d in self._request("POST", "/classify", payload)["data"]]

    def health(self) -> Dict[str, Any]:
        return self._request("GET", "/health")

    def metrics(self) -> str:
        return self._request("GET", "/metrics")
