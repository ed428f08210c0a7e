"""Client of vLLM's OpenAI-compatible server (the production engine, registered as ``vllm``).

Many requests are kept in flight at once (a thread pool over kept connections: the standard library's client for a
plain-HTTP server, ``httpx`` for https or through a proxy): the server batches whatever is in flight, so throughput
comes from concurrency, not from request batching.
Structured output uses ``response_format={"type": "json_schema", ...}``; vLLM >= 0.33 removed the
``guided_*`` request fields and silently ignores them, so they are never sent.
"""

from __future__ import annotations

import http.client
import itertools
import json
import random
import re
import threading
import time
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

import httpx

from halucheck.config import env
from halucheck.engines.base import Engine, Request, Result
from halucheck.errors import ConfigError, EngineError

START_HINT = "start it with scripts/serve_vllm.sh or fix base_url in models.yaml"


class _Retryable(Exception):
    """A failure worth retrying (connection error, 5xx, 429); ``delay`` is the server's Retry-After."""

    def __init__(self, message: str, delay: float | None = None) -> None:
        super().__init__(message)
        self.delay = delay


def _reason(exc: BaseException) -> str:
    """A short human reason for a transport error: 'connection refused', 'timed out', ..."""
    text = str(exc) or type(exc).__name__
    low = text.lower()
    if "refused" in low:
        return "connection refused"
    if isinstance(exc, (httpx.TimeoutException, TimeoutError)):
        return "timed out"
    if "name or service not known" in low or "nodename nor servname" in low:
        return "unknown host"
    return text.splitlines()[0][:160]


class _Connection(http.client.HTTPConnection):
    """A keep-alive connection whose connect has its own timeout and whose every read and write has the read
    timeout (as httpx's timeouts are)."""

    def __init__(self, host: str, port: int, connect_s: float, read_s: float) -> None:
        super().__init__(host, port, timeout=connect_s)
        self.read_s = read_s

    def connect(self) -> None:
        super().connect()
        self.sock.settimeout(self.read_s)


class _Direct:
    """POSTs to one plain-HTTP server (no proxy) through the standard library's client: about 1 ms less CPU a
    request than httpx (its request and response models, cookies, header checks), the bulk of the orchestrator's
    HTTP threads (docs/scale.md). Keep-alive connections, one per request in flight, each kept for the next; one
    that the server closed while it was kept is opened again, once."""

    def __init__(self, host: str, port: int, path: str, headers: dict, connect_s: float, read_s: float) -> None:
        self.host, self.port, self.path, self.headers = host, port, path, headers
        self.connect_s, self.read_s = connect_s, read_s
        self._idle: list[_Connection] = []
        self._lock = threading.Lock()

    def post(self, path: str, data: bytes) -> tuple[int, Any, bytes]:
        """(status, headers, body) of ``POST path``; a transport failure raises (OSError, HTTPException)."""
        with self._lock:
            kept = self._idle.pop() if self._idle else None
        if kept is not None:
            try:
                return self._send(kept, path, data)
            except (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected):
                pass  # the server closed it while it was kept: once more on a new one
        return self._send(_Connection(self.host, self.port, self.connect_s, self.read_s), path, data)

    def _send(self, conn: _Connection, path: str, data: bytes) -> tuple[int, Any, bytes]:
        try:
            conn.request("POST", self.path + path, body=data, headers=self.headers)
            resp = conn.getresponse()
            payload = resp.read()
        except BaseException:
            conn.close()
            raise
        if resp.will_close:
            conn.close()
        else:
            with self._lock:
                self._idle.append(conn)
        return resp.status, resp.headers, payload

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


def _direct(url: str, headers: dict, connect_s: float, read_s: float) -> _Direct | None:
    """A :class:`_Direct` client for a plain-HTTP ``url`` when the environment names no proxy; None otherwise
    (https, a proxy: httpx sends those, with its certificates and proxy rules)."""
    parts = urllib.parse.urlsplit(url)
    proxies = urllib.request.getproxies()
    if parts.scheme != "http" or not parts.hostname or proxies.get("http") or proxies.get("all"):
        return None
    try:
        port = parts.port or 80
    except ValueError:
        return None
    return _Direct(parts.hostname, port, parts.path, headers, connect_s, read_s)


def _schema_name(schema: dict) -> str:
    """OpenAI requires json_schema.name to match ^[a-zA-Z0-9_-]{1,64}$."""
    name = re.sub(r"[^a-zA-Z0-9_-]", "_", str(schema.get("title") or "reply"))
    return name[:64] or "reply"


class OpenAIServerEngine(Engine):
    """Engine for a vLLM OpenAI-compatible server (``vllm serve`` / ``scripts/serve_vllm.sh``).

    Profile options:
      ``base_url``: one URL or a list (requests are spread round-robin; a retry moves to the next one),
      ``max_concurrency``: requests in flight at once (default 64; also ``max_batch`` for the scheduler),
      ``timeout_s``: per-request read timeout (default 600),
      ``max_attempts``: tries per request on connection errors, 5xx and 429 (default 4), with
      exponential backoff and full jitter from ``backoff_s`` (default 0.5) up to ``max_backoff_s``,
      ``api_key``: sent as a Bearer token (default ``$HALUCHECK_API_KEY`` or "EMPTY"),
      ``check``: probe ``GET /models`` at construction (default true) so a down server or a wrong
      model name fails at once with a fixable message instead of as thousands of failed requests.

    ``model`` is the server's served model name; empty means "the only model the server serves".
    """

    name = "vllm"
    # Each call is its own HTTP request: the scheduler sends a debate's next call the moment its previous
    # one returns (the server batches continuously), instead of waiting for a lock-step batch.
    streaming = True

    def __init__(
        self,
        model: str = "",
        base_url: str | Sequence[str] = "http://127.0.0.1:8000/v1",
        max_concurrency: int = 64,
        timeout_s: float = 600.0,
        max_attempts: int = 4,
        backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
        api_key: str | None = None,
        check: bool = True,
        connect_timeout_s: float = 10.0,
        **options: Any,
    ) -> None:
        super().__init__(model=model, **options)
        urls = [base_url] if isinstance(base_url, str) else list(base_url or [])
        self.base_urls = [str(u).rstrip("/") for u in urls if str(u).strip()]
        if not self.base_urls:
            raise ConfigError("profile engine 'vllm' needs base_url (e.g. http://127.0.0.1:8000/v1) in models.yaml")
        if int(max_concurrency) < 1 or int(max_attempts) < 1:
            raise ConfigError("max_concurrency and max_attempts must be >= 1 in the vllm profile of models.yaml")
        self.max_concurrency = int(max_concurrency)
        self.max_batch = self.max_concurrency
        self.timeout_s = float(timeout_s)
        self.max_attempts = int(max_attempts)
        self.backoff_s = float(backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        key = api_key or env("HALUCHECK_API_KEY") or "EMPTY"
        self._client = httpx.Client(
            headers={"Authorization": f"Bearer {key}"},
            timeout=httpx.Timeout(self.timeout_s, connect=float(connect_timeout_s)),
            # one pooled connection per in-flight request, so the pool itself never queues requests
            limits=httpx.Limits(
                max_connections=self.max_concurrency, max_keepalive_connections=self.max_concurrency
            ),
        )
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        self._direct = {url: _direct(url, headers, float(connect_timeout_s), self.timeout_s) for url in self.base_urls}
        self._pool: ThreadPoolExecutor | None = None
        self._next_url = itertools.count()
        self._lock = threading.Lock()
        self.served_models: list[str] = []
        if check:
            self.check()

    # -- health -------------------------------------------------------------------------------
    def check(self) -> None:
        """Probe every server's ``GET /models``; raise EngineError if one is down or lacks the model."""
        for url in self.base_urls:
            try:
                resp = self._client.get(f"{url}/models", timeout=httpx.Timeout(15.0, connect=5.0))
            except httpx.HTTPError as exc:
                raise EngineError(
                    f"cannot reach the vLLM server at {url} ({_reason(exc)}); {START_HINT}"
                ) from None
            if resp.status_code in (401, 403):
                raise EngineError(
                    f"the vLLM server at {url} rejected the API key (HTTP {resp.status_code}); "
                    "set HALUCHECK_API_KEY or api_key in models.yaml to the server's --api-key"
                )
            if resp.status_code != 200:
                raise EngineError(
                    f"the server at {url} answered GET /models with HTTP {resp.status_code}; "
                    f"is base_url an OpenAI-compatible endpoint ending in /v1? {START_HINT}"
                )
            try:
                served = [m["id"] for m in resp.json().get("data", [])]
            except (ValueError, KeyError, TypeError, AttributeError):
                raise EngineError(
                    f"the server at {url} did not answer GET /models with an OpenAI model list; "
                    "point base_url at vLLM's OpenAI-compatible endpoint (…/v1)"
                ) from None
            if not self.model:
                if len(served) != 1:
                    raise ConfigError(
                        f"the vLLM server at {url} serves {', '.join(served) or 'no models'}; "
                        "set `model:` in the profile to one of them"
                    )
                self.model = served[0]
            elif self.model not in served:
                raise EngineError(
                    f"the vLLM server at {url} does not serve model {self.model!r}; it serves: "
                    f"{', '.join(served) or 'nothing'}. Set `model:` in models.yaml to one of these, "
                    "or restart the server with --served-model-name " + self.model
                )
            self.served_models = served

    # -- requests -----------------------------------------------------------------------------
    def body(self, request: Request) -> dict:
        """The JSON body of ``POST /chat/completions`` for ``request``."""
        s = request.sampling
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in request.messages],
            "temperature": s.temperature,
            "top_p": s.top_p,
            "max_tokens": s.max_tokens,
        }
        if s.seed is not None:
            body["seed"] = s.seed
        # repetition controls: the OpenAI penalties, vLLM's own repetition_penalty (an extra field its
        # server accepts), and the n-gram ban as an extra argument for halucheck's logits processor
        # (engines/vllm_ngram.py; scripts/serve_vllm.sh loads it: a server without it ignores the argument)
        if s.frequency_penalty:
            body["frequency_penalty"] = s.frequency_penalty
        if s.presence_penalty:
            body["presence_penalty"] = s.presence_penalty
        if s.repetition_penalty != 1.0:
            body["repetition_penalty"] = s.repetition_penalty
        if s.no_repeat_ngram_size > 0:
            body["vllm_xargs"] = {"no_repeat_ngram_size": int(s.no_repeat_ngram_size)}
            if request.avoid is not None:
                body["vllm_xargs"]["no_repeat_text"] = request.avoid
            if request.quote is not None:
                body["vllm_xargs"]["no_repeat_quote"] = request.quote
        if request.schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": _schema_name(request.schema), "schema": request.schema, "strict": True},
            }
        if request.logprobs or request.top_logprobs:
            body["logprobs"] = True
            body["top_logprobs"] = request.top_logprobs
        return body

    def _url(self) -> str:
        with self._lock:
            return self.base_urls[next(self._next_url) % len(self.base_urls)]

    def _post_once(self, body: dict) -> dict:
        url = self._url()
        direct = self._direct.get(url)
        try:
            if direct is not None:
                status, headers, payload = direct.post("/chat/completions", json.dumps(
                    body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8"))
            else:
                resp = self._client.post(f"{url}/chat/completions", json=body)
                status, headers, payload = resp.status_code, resp.headers, resp.content
        except (httpx.HTTPError, OSError, http.client.HTTPException) as exc:
            # connection refused/reset, timeouts: the server may come back
            raise _Retryable(f"{url}: {_reason(exc)}") from None
        if status == 429 or status >= 500:
            delay = None
            try:
                delay = float(headers.get("retry-after", ""))
            except ValueError:
                pass
            raise _Retryable(f"{url}: HTTP {status} {_error_text(payload)}", delay)
        if status != 200:  # 4xx: the request itself is wrong, a retry would fail the same way
            raise RuntimeError(f"{url}: HTTP {status} {_error_text(payload)}")
        try:
            return json.loads(payload)
        except ValueError:
            raise _Retryable(f"{url}: reply is not JSON") from None

    def _backoff(self, attempt: int, hint: float | None) -> float:
        if hint is not None and hint >= 0:
            return min(hint, self.max_backoff_s)
        # full jitter: spreads retries of many requests that failed together (e.g. a 503 burst)
        return random.uniform(0, min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1)))

    def _one(self, request: Request) -> Result:
        """Send one request with retries; any failure becomes ``Result(error=...)``."""
        body = self.body(request)
        t0 = time.perf_counter()
        last = ""
        for attempt in range(1, self.max_attempts + 1):
            try:
                data = self._post_once(body)
            except _Retryable as exc:
                last = str(exc)
                if attempt < self.max_attempts:
                    time.sleep(self._backoff(attempt, exc.delay))
                continue
            except Exception as exc:  # non-retryable: report it for this request only
                return Result(error=f"vLLM request failed: {exc}", latency_s=time.perf_counter() - t0)
            res = _parse_completion(data)
            res.latency_s = time.perf_counter() - t0
            return res
        return Result(
            error=f"vLLM request failed after {self.max_attempts} attempts: {last}",
            latency_s=time.perf_counter() - t0,
        )

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.max_concurrency, thread_name_prefix="halucheck-vllm")
            return self._pool

    def _complete(self, requests: Sequence[Request]) -> list[Result]:
        if len(requests) == 1:
            return [self._one(requests[0])]
        # the pool has max_concurrency threads, so at most that many requests are in flight;
        # map() returns results in input order whatever order they finish in
        return list(self._executor().map(self._one, requests))

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
        for direct in self._direct.values():
            if direct is not None:
                direct.close()
        self._client.close()


def _error_text(payload: bytes) -> str:
    """vLLM's error message from an error reply's body, on one line."""
    text = payload.decode("utf-8", "replace")
    try:
        data = json.loads(text)
        msg = data.get("error", {}).get("message") if isinstance(data.get("error"), dict) else data.get("message")
        msg = msg or data.get("detail") or text
    except (ValueError, AttributeError):
        msg = text
    return " ".join(str(msg).split())[:300]


def _parse_completion(data: dict) -> Result:
    """Turn a chat.completion JSON object into a Result (text, usage, cached tokens, logprobs)."""
    try:
        choice = data["choices"][0]
        text = choice["message"].get("content") or ""
    except (KeyError, IndexError, TypeError, AttributeError):
        return Result(error=f"vLLM reply has no choices[0].message: {str(data)[:200]}")
    usage = data.get("usage") or {}
    details = usage.get("prompt_tokens_details") or {}
    res = Result(
        text=text,
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        cached_tokens=int(details.get("cached_tokens") or 0),
        capped=choice.get("finish_reason") == "length",
    )
    lp = choice.get("logprobs")
    if lp and lp.get("content") is not None:
        res.logprobs = [(t.get("token", ""), float(t.get("logprob", 0.0))) for t in lp["content"]]
        if any(t.get("top_logprobs") for t in lp["content"]):
            res.top_logprobs = [[(a.get("token", ""), float(a.get("logprob", 0.0))) for a in t.get("top_logprobs") or ()]
                                for t in lp["content"]]
    return res
