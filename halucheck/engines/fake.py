"""Scripted engine for unit tests: the real scheduler, validation and store still run.

Replies come, in order of priority, from a queue (``enqueue``), a ``responder`` callable, or a default
built from the request's JSON schema (a profile names a responder as ``"module:function"``). A reply may be a dict (fitted to the request's schema, see
:func:`fit`, and serialised to JSON), a raw string (sent as is, e.g. to test schema violations), a
:class:`~halucheck.engines.base.Result` (returned as it is) or an Exception instance (that request fails, the others
do not). A request that asks for alternatives (``top_logprobs``) and gets the default reply is answered "Yes" or "No"
with both as alternatives, P(Yes) a hash of its prompt (the same prompt, the same P).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from collections import deque
from pathlib import Path
from typing import Any, Callable, Sequence

from halucheck.engines.base import Engine, Request, Result

Reply = dict | str | Result | Exception


def example_for(schema: dict | None) -> Any:
    """A small instance that satisfies ``schema`` (enough for the schemas halucheck uses)."""
    if not schema:
        return "fake reply"
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return example_for(schema[key][0])
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        return {k: example_for(v) for k, v in schema.get("properties", {}).items()}
    if kind == "array":
        return [example_for(schema.get("items", {}))] * max(1, schema.get("minItems", 1))
    if kind == "boolean":
        return True
    if kind == "integer":
        return int(schema.get("minimum", 0))
    if kind == "number":
        return float(schema.get("minimum", 0.0))
    return "fake"


def fit(reply: dict, schema: dict | None) -> dict:
    """A scripted dict reply shaped to ``schema``: keys the schema wants but the reply lacks are filled
    in from :func:`example_for`, keys it does not know are dropped; for a choice of objects (``anyOf``)
    the first whose fixed values (``const``) the reply agrees with. One scripted reply then serves
    every debate role, whatever that role's own fields are."""
    if not schema or not isinstance(reply, dict):
        return reply
    for key in ("anyOf", "oneOf"):
        if key in schema:
            branches = schema[key]
            agree = [b for b in branches if all(
                k not in reply or reply[k] == p["const"]
                for k, p in b.get("properties", {}).items() if "const" in p)]
            return fit(reply, (agree or branches)[0])
    props = schema.get("properties")
    if not props:
        return reply
    return {k: reply[k] if k in reply else example_for(p) for k, p in props.items()}


class FakeEngine(Engine):
    """Test double registered as ``fake``.

    Options (also settable from a models.yaml profile): ``replies`` (a list), ``replies_file`` (JSONL,
    one reply per line), ``reply`` (a dict merged into every default reply), ``max_batch``, and
    ``step_latency`` = [a, b]: each ``_complete`` call sleeps a + b * batch_size seconds, a model of a
    batching server for scheduler benchmarks. For tests across processes (a Ray worker): ``call_log``, a
    file that gets one JSON line per request (its tag and last message), and ``crash_marker`` with
    ``crash_after``: the process exits at once, as if killed, on its ``crash_after``-th request, unless the
    marker file exists (it is made first, so the process started again goes on).
    """

    name = "fake"

    def __init__(
        self,
        model: str = "fake",
        replies: Sequence[Reply] | None = None,
        replies_file: str | None = None,
        reply: dict | None = None,
        responder: Callable[[Request], Reply] | str | None = None,
        max_batch: int = 1024,
        step_latency: Sequence[float] | None = None,
        call_log: str | None = None,
        crash_marker: str | None = None,
        crash_after: int = 1,
        **options: Any,
    ) -> None:
        super().__init__(model=model, **options)
        self.queue: deque[Reply] = deque(replies or [])
        if replies_file:
            with open(Path(replies_file), encoding="utf-8") as fh:
                self.queue.extend(json.loads(line) for line in fh if line.strip())
        self.reply_overrides = dict(reply or {})
        if isinstance(responder, str):  # "module:function", e.g. from a models.yaml profile
            from halucheck.registry import import_path

            responder = import_path(responder)
        self.responder = responder
        self.max_batch = int(max_batch)
        self.step_latency = tuple(step_latency) if step_latency else None
        self.call_log, self.crash_marker, self.crash_after = call_log, crash_marker, int(crash_after)
        self.requests: list[Request] = []  # every request received, retries included
        self.batch_sizes: list[int] = []

    def enqueue(self, *replies: Reply) -> None:
        self.queue.extend(replies)

    def _reply_for(self, request: Request) -> Reply:
        if self.queue:
            return self.queue.popleft()
        if self.responder is not None:
            return self.responder(request)
        if request.top_logprobs:
            return _yes_or_no(request)
        obj = example_for(request.schema)
        if isinstance(obj, dict):
            obj.update({k: v for k, v in self.reply_overrides.items() if k in obj})
        return obj

    def _complete(self, requests: Sequence[Request]) -> list[Result]:
        self.requests.extend(requests)
        if self.call_log:
            with open(self.call_log, "a", encoding="utf-8") as fh:
                fh.write("".join(json.dumps({"tag": r.tag, "prompt": r.messages[-1]["content"]}) + "\n"
                                 for r in requests))
        if self.crash_marker and len(self.requests) >= self.crash_after and not Path(self.crash_marker).exists():
            Path(self.crash_marker).touch()
            os._exit(1)  # a kill: no cleanup, no exception anyone could catch
        self.batch_sizes.append(len(requests))
        if self.step_latency:
            a, b = self.step_latency
            time.sleep(a + b * len(requests))
        out = []
        for req in requests:
            reply = self._reply_for(req)
            if isinstance(reply, Exception):
                out.append(Result(error=f"engine error: {reply}"))
                continue
            if isinstance(reply, Result):
                out.append(reply)
                continue
            text = reply if isinstance(reply, str) else json.dumps(fit(reply, req.schema))
            out.append(Result(text=text, prompt_tokens=_prompt_words(req), completion_tokens=len(text.split())))
        return out


def _yes_or_no(request: Request) -> Result:
    """The default reply to a request for alternatives: "Yes" or "No", P(Yes) from a hash of the prompt."""
    digest = hashlib.sha256(json.dumps(request.messages, sort_keys=True).encode()).digest()
    p = (int.from_bytes(digest[:4], "big") + 0.5) / 2**32
    top = sorted([("Yes", math.log(p)), ("No", math.log1p(-p))], key=lambda a: -a[1])
    return Result(text=top[0][0], prompt_tokens=_prompt_words(request), completion_tokens=1, logprobs=[top[0]],
                  top_logprobs=[top[:max(1, request.top_logprobs)]])


def _prompt_words(request: Request) -> int:
    """A fake reply's prompt tokens: the words of the request's messages."""
    return sum(len(m["content"].split()) for m in request.messages)
