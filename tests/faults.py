"""Test helpers for failure cases: a fault-injecting OpenAI-compatible server on 127.0.0.1 and an echoing
responder for the fake engine (distinct claims per answer, so resumed runs can be compared exactly).

The server answers ``GET /v1/models`` and ``POST /v1/chat/completions`` with a reply valid for the
request's JSON schema, unless ``fault(body)`` returns one of: ``"503"`` (HTTP 503), ``"reset"`` (close
the connection without a reply), ``"garbage"`` (HTTP 200 with a body that is not JSON), ``"invalid"``
(a reply that violates the schema) or ``"hang"`` (no reply for ``hang_s`` seconds).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

from halucheck.engines.fake import example_for
from halucheck.prompts import read_field, read_statement


def echo(request) -> dict:
    """Fake-engine responder: the answer's sentences are its claims, the claim is its query, and a claim
    naming Berlin is false."""
    user = request.messages[-1]["content"]
    if request.tag == "claims:filter":
        return {"response": read_field(user, "text", last=True).strip()}
    if request.tag == "claims:extract":
        text = read_field(user, "text", last=True).strip()
        return {"claims": [s.strip() + "." for s in text.split(".") if s.strip()]}
    if request.tag == "claims:queries":
        claim = read_field(user, "claim", last=True).strip()
        return {"queries": [claim, "about " + claim]}
    false = "Berlin" in (read_statement(user) or "")
    if request.top_logprobs:  # `direct` through a server: "No" for a claim naming Berlin, else "Yes"
        import math

        from halucheck.engines.base import Result

        top = [("No", math.log(0.9)), ("Yes", math.log(0.1))] if "Berlin" in user else \
            [("Yes", math.log(0.9)), ("No", math.log(0.1))]
        if request.tag.startswith("severity"):
            top = [("3", math.log(0.6)), ("2", math.log(0.3))]
        return Result(text=top[0][0], prompt_tokens=len(user.split()), completion_tokens=1, logprobs=[top[0]],
                      top_logprobs=[top])
    # every role's fields (the fake engine keeps those of the request's schema): a stance's quotes are the
    # schema's example, which no passage holds, so stances are void and the first agent's verdict stands
    return {"reasoning": "Checked against the evidence.", "opinion": "Checked against the evidence.",
            "factuality": not false, "error_severity": 3, "reason": "Checked.", "winner": "trust"}


def quoting(base):
    """``base`` (a fake-engine responder), but a debate stance quotes the first passage it is shown: a verified
    quote, so both sides count and every round asks the Leader (who keeps the standing verdict)."""

    def responder(request):
        reply = base(request)
        if request.tag in ("debate:trust", "debate:skeptic"):
            passage = read_field(request.messages[-1]["content"], "1")
            if passage:
                reply = {**reply, "finding": "contradicted", "quotes": [passage]}
        return reply

    return responder


def register_echo(name: str = "echo") -> None:
    """Register the fake engine with :func:`echo` as engine ``name`` (for subprocess runs of the CLI), and as
    ``name-server`` one that, like a server's client, takes each request as a call of its own."""
    from halucheck import engines
    from halucheck.engines.fake import FakeEngine

    class Server(FakeEngine):
        streaming = True

    engines.register(name, lambda model="", **kw: FakeEngine(model="echo", responder=echo, **kw))
    engines.register(f"{name}-server", lambda model="", **kw: Server(model="echo", responder=echo, **kw))


class FaultServer:
    """``with FaultServer(fault) as srv:`` serves on ``srv.url`` (…/v1); ``srv.requests`` counts posts."""

    def __init__(self, fault: Callable[[dict], str | None] = lambda body: None, hang_s: float = 5.0,
                 model: str = "m") -> None:
        self.fault, self.hang_s, self.model = fault, hang_s, model
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def _send(self, code: int, payload: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self):
                self._send(200, json.dumps({"data": [{"id": server.model}]}).encode())

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                what = server.fault(body)
                if what == "503":
                    return self._send(503, b'{"error": {"message": "overloaded"}}')
                if what == "reset":
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\1\0\0\0\0\0\0\0")
                    self.close_connection = True
                    return self.connection.close()
                if what == "garbage":
                    return self._send(200, b"<html>proxy error</html>")
                if what == "hang":
                    time.sleep(server.hang_s)
                schema = (body.get("response_format") or {}).get("json_schema", {}).get("schema")
                content = "not json at all" if what == "invalid" else json.dumps(example_for(schema))
                reply = {"choices": [{"message": {"role": "assistant", "content": content}}],
                         "usage": {"prompt_tokens": 10, "completion_tokens": 5}}
                self._send(200, json.dumps(reply).encode())

        class Server(ThreadingHTTPServer):
            def handle_error(self, request, client_address):  # a client that gave up on a hung reply
                pass

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> "FaultServer":
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
