"""OpenAIServerEngine against a tiny stdlib HTTP stub of vLLM's OpenAI-compatible server.

The stub only checks the client's side of the protocol (request body, concurrency, retries, error
messages); ``scripts/vllm_cpu_smoke.sh`` checks the engine against a real vLLM server.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from halucheck.engines import Request, SamplingParams, create_engine
from halucheck.engines.openai_server import OpenAIServerEngine
from halucheck.errors import EngineError

SCHEMA = {
    "title": "Opinion",
    "type": "object",
    "properties": {"factuality": {"type": "boolean"}, "opinion": {"type": "string"}},
    "required": ["factuality", "opinion"],
}


def completion(content: str, prompt_tokens: int = 7, completion_tokens: int = 3, cached: int | None = None):
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
             "total_tokens": prompt_tokens + completion_tokens}
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return {
        "id": "cmpl-1",
        "object": "chat.completion",
        "model": "stub-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": usage,
    }


class Stub:
    """A scripted server: ``handler(body) -> (status, json, headers)`` answers POST /chat/completions."""

    def __init__(self, models=("stub-model",), handler=None, keep_alive=False):
        self.models = list(models)
        self.ports: list[int] = []  # the client's port of each POST: one per connection
        self.handler = handler or (lambda body: (200, completion(json.dumps({"factuality": True, "opinion": "ok"})), {}))
        self.bodies: list[dict] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        stub = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

            def log_message(self, *args):  # keep pytest output clean
                pass

            def _send(self, status, obj, headers=None):
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in stub.models]})
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with stub.lock:
                    stub.bodies.append(body)
                    stub.ports.append(self.client_address[1])
                    stub.in_flight += 1
                    stub.max_in_flight = max(stub.max_in_flight, stub.in_flight)
                try:
                    status, obj, headers = stub.handler(body)
                finally:
                    with stub.lock:
                        stub.in_flight -= 1
                self._send(status, obj, headers)

        class Server(ThreadingHTTPServer):
            def handle_error(self, request, client_address):  # a client that gave up on a late reply
                pass

        self.server = Server(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stub():
    servers = []

    def make(**kw):
        s = Stub(**kw)
        servers.append(s)
        return s

    yield make
    for s in servers:
        s.close()


def req(text: str, **kw) -> Request:
    return Request(messages=({"role": "user", "content": text},), schema=SCHEMA, **kw)


def user_text(body: dict) -> str:
    return body["messages"][-1]["content"]


def test_body_uses_response_format_and_no_guided_fields(stub):
    s = stub()
    eng = OpenAIServerEngine(model="stub-model", base_url=s.url)
    [res] = eng.generate([req("claim", sampling=SamplingParams(temperature=0.2, top_p=0.9, max_tokens=50, seed=7))])
    assert res.ok and res.parsed == {"factuality": True, "opinion": "ok"}
    body = s.bodies[0]
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Opinion", "schema": SCHEMA, "strict": True},
    }
    assert not [k for k in body if k.startswith("guided")]
    assert "structured_outputs" not in body and "extra_body" not in body
    assert (body["model"], body["temperature"], body["top_p"], body["max_tokens"], body["seed"]) == (
        "stub-model", 0.2, 0.9, 50, 7)
    assert "logprobs" not in body
    eng.close()


def test_registered_as_vllm_and_max_batch_is_concurrency(stub):
    s = stub()
    eng = create_engine("vllm", model="stub-model", base_url=s.url, max_concurrency=5)
    assert isinstance(eng, OpenAIServerEngine) and eng.max_batch == 5
    eng.close()


def test_usage_cached_tokens_and_logprobs(stub):
    def handler(body):
        out = completion('{"factuality": false, "opinion": "no"}', prompt_tokens=40, completion_tokens=9, cached=32)
        if body.get("logprobs"):
            out["choices"][0]["logprobs"] = {"content": [
                {"token": "{", "logprob": -0.01, "bytes": [123], "top_logprobs": []},
                {"token": "\"", "logprob": -0.5, "bytes": [34], "top_logprobs": []},
            ]}
        return 200, out, {}

    s = stub(handler=handler)
    eng = OpenAIServerEngine(model="stub-model", base_url=s.url)
    [res] = eng.generate([req("claim", logprobs=True)])
    assert s.bodies[0]["logprobs"] is True and s.bodies[0]["top_logprobs"] == 0
    assert (res.prompt_tokens, res.completion_tokens, res.cached_tokens) == (40, 9, 32)
    assert res.logprobs == [("{", -0.01), ("\"", -0.5)]
    eng.close()


def test_top_logprobs_are_asked_for_and_read_per_token(stub):
    def handler(body):
        out = completion("No", prompt_tokens=300, completion_tokens=1, cached=280)
        if body.get("top_logprobs"):
            out["choices"][0]["logprobs"] = {"content": [
                {"token": "No", "logprob": -0.2, "bytes": [78, 111],
                 "top_logprobs": [{"token": "No", "logprob": -0.2}, {"token": "Yes", "logprob": -1.7},
                                  {"token": "The", "logprob": -6.0}]}]}
        return 200, out, {}

    s = stub(handler=handler)
    eng = OpenAIServerEngine(model="stub-model", base_url=s.url)
    [res, plain] = eng.generate([req("claim", top_logprobs=20), req("other")])
    asked = {user_text(b): b for b in s.bodies}  # sent at once: in either order
    assert asked["claim"]["logprobs"] is True and asked["claim"]["top_logprobs"] == 20
    assert "logprobs" not in asked["other"] and "top_logprobs" not in asked["other"]
    assert res.logprobs == [("No", -0.2)]
    assert res.top_logprobs == [[("No", -0.2), ("Yes", -1.7), ("The", -6.0)]]
    assert plain.top_logprobs is None and plain.logprobs is None
    eng.close()


def test_order_preserved_and_concurrency_bounded(stub):
    def handler(body):
        i = int(user_text(body))
        time.sleep(0.02 * (i % 4))  # later requests often finish first
        return 200, completion(json.dumps({"factuality": i % 2 == 0, "opinion": str(i)})), {}

    s = stub(handler=handler)
    eng = OpenAIServerEngine(model="stub-model", base_url=s.url, max_concurrency=4)
    results = eng.generate([req(str(i)) for i in range(24)])
    assert [r.parsed["opinion"] for r in results] == [str(i) for i in range(24)]
    assert s.max_in_flight <= 4
    assert s.max_in_flight >= 2  # really concurrent
    eng.close()


def test_retries_503_with_backoff_then_succeeds(stub):
    calls = []

    def handler(body):
        calls.append(time.perf_counter())
        if len(calls) <= 2:
            return 503, {"error": {"message": "overloaded"}}, {}
        return 200, completion('{"factuality": true, "opinion": "fine"}'), {}

    s = stub(handler=handler)
    eng = OpenAIServerEngine(model="stub-model", base_url=s.url, max_attempts=4, backoff_s=0.05)
    [res] = eng.generate([req("x")])
    assert res.ok and res.parsed["opinion"] == "fine"
    assert len(calls) == 3
    eng.close()


def test_backoff_is_exponential_capped_and_honours_retry_after(monkeypatch):
    eng = OpenAIServerEngine(model="m", base_url="http://127.0.0.1:9/v1", backoff_s=0.5, max_backoff_s=3, check=False)
    monkeypatch.setattr("halucheck.engines.openai_server.random.uniform", lambda a, b: b)
    assert [eng._backoff(a, None) for a in (1, 2, 3, 4, 5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert eng._backoff(1, 2.0) == 2.0
    eng.close()


def test_429_retry_after_then_success(stub):
    calls = []

    def handler(body):
        calls.append(1)
        if len(calls) == 1:
            return 429, {"error": {"message": "slow down"}}, {"Retry-After": "0"}
        return 200, completion('{"factuality": true, "opinion": "ok"}'), {}

    s = stub(handler=handler)
    eng = OpenAIServerEngine(model="stub-model", base_url=s.url, backoff_s=5)  # Retry-After wins over 5 s
    t0 = time.perf_counter()
    [res] = eng.generate([req("x")])
    assert res.ok and len(calls) == 2 and time.perf_counter() - t0 < 2
    eng.close()


def test_per_request_failure_is_isolated(stub):
    def handler(body):
        text = user_text(body)
        if text == "bad":
            return 400, {"error": {"message": "schema is not supported"}}, {}
        if text == "down":
            return 500, {"error": {"message": "engine dead"}}, {}
        return 200, completion(json.dumps({"factuality": True, "opinion": text})), {}

    s = stub(handler=handler)
    eng = OpenAIServerEngine(model="stub-model", base_url=s.url, max_attempts=2, backoff_s=0.01)
    eng.max_retries = 0  # only the transport retries are under test here
    results = eng.generate([req("a"), req("bad"), req("down"), req("b")])
    assert [r.ok for r in results] == [True, False, False, True]
    assert "HTTP 400" in results[1].error and "schema is not supported" in results[1].error
    assert "after 2 attempts" in results[2].error and "HTTP 500" in results[2].error
    assert sum(user_text(b) == "bad" for b in s.bodies) == 1  # a 4xx is not retried
    assert sum(user_text(b) == "down" for b in s.bodies) == 2
    eng.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_unreachable_server_is_one_line_engine_error():
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(EngineError) as info:
        OpenAIServerEngine(model="m", base_url=url)
    msg = str(info.value)
    assert msg == (f"cannot reach the vLLM server at {url} (connection refused); "
                   "start it with scripts/serve_vllm.sh or fix base_url in models.yaml")


def test_wrong_model_name_lists_served_models(stub):
    s = stub(models=("qwen-7b", "llama-8b"))
    with pytest.raises(EngineError) as info:
        OpenAIServerEngine(model="qwen2.5-coder-0.5b-instruct", base_url=s.url)
    msg = str(info.value)
    assert "does not serve model 'qwen2.5-coder-0.5b-instruct'" in msg
    assert "qwen-7b, llama-8b" in msg and "\n" not in msg


def test_empty_model_takes_the_only_served_model(stub):
    s = stub(models=("only-one",))
    eng = OpenAIServerEngine(model="", base_url=s.url)
    assert eng.model == "only-one"
    eng.close()


def test_round_robin_over_several_servers(stub):
    a, b = stub(), stub()
    eng = OpenAIServerEngine(model="stub-model", base_url=[a.url, b.url], max_concurrency=2)
    results = eng.generate([req(str(i)) for i in range(10)])
    assert all(r.ok for r in results)
    assert len(a.bodies) == 5 and len(b.bodies) == 5
    eng.close()


def test_connections_are_kept_for_the_next_request_and_one_closed_meanwhile_is_opened_again(stub):
    s = stub(keep_alive=True)
    eng = OpenAIServerEngine(model="stub-model", base_url=s.url, max_concurrency=2)
    assert eng._direct[s.url] is not None  # plain HTTP, no proxy: the standard library's client
    assert all(r.ok for r in eng.generate([req(str(i)) for i in range(6)]))
    assert len(set(s.ports)) <= 2  # six requests over at most two connections
    for conn in eng._direct[s.url]._idle:  # the server drops them, as a server restarted meanwhile does
        conn.sock.shutdown(socket.SHUT_RDWR)
    [res] = eng.generate([req("again")])
    assert res.ok and res.attempts == 1 and res.parsed["opinion"] == "ok"
    eng.close()


def test_a_proxy_in_the_environment_leaves_the_requests_to_httpx(stub, monkeypatch):
    s = stub()
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")  # not read by halucheck itself: httpx's rules decide
    eng = OpenAIServerEngine(model="stub-model", base_url=s.url)
    assert eng._direct[s.url] is None
    [res] = eng.generate([req("x")])
    assert res.ok and len(s.bodies) == 1
    eng.close()


def test_a_reply_that_takes_longer_than_the_timeout_is_retried_then_fails_as_timed_out(stub):
    s = stub(handler=lambda body: (time.sleep(0.6), (200, completion('{"factuality": true, "opinion": "late"}'), {}))[1])
    eng = OpenAIServerEngine(model="stub-model", base_url=s.url, timeout_s=0.2, max_attempts=2, backoff_s=0.01)
    eng.max_retries = 0
    [res] = eng.generate([req("x")])
    assert not res.ok and "after 2 attempts" in res.error and "timed out" in res.error
    assert len(s.bodies) == 2
    eng.close()


def test_a_reply_with_a_lone_surrogate_escape_is_text_after_validation():
    from halucheck.engines.base import validate_reply

    obj, err = validate_reply('{"opinion": "ok \\ud83d", "n": 1}', {"type": "object"})
    assert err is None and obj == {"opinion": "ok \ufffd", "n": 1}
    obj["opinion"].encode("utf-8")  # encodable: the run database takes it
