"""The one engine interface: a batch of chat requests in, results out in the same order.

Engines only turn requests into text (``_complete``). Parsing and JSON-schema validation happen here,
once, for every engine: a reply that does not validate is retried (sampled, with a new seed) and, if it
still fails, returned with ``error`` set, never raised. A bad model reply is data, not a crash. A failure
the engine reports itself (a server that stayed down through its own retries) is final.
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

import jsonschema

from halucheck.text import json_surrogates


@dataclass(frozen=True)
class SamplingParams:
    """Decoding settings. ``temperature == 0`` means greedy.

    Repetition controls (vLLM's meanings; every engine applies the ones it has):
    ``repetition_penalty`` (> 1 divides the positive logits, multiplies the negative ones, of every token
    already in the prompt or the reply), ``frequency_penalty`` / ``presence_penalty`` (subtracted from
    a token's logit per occurrence / once, counting only the reply's own tokens) and
    ``no_repeat_ngram_size`` (n > 0: never repeat an n-gram of the prompt or the reply; the
    ``transformers`` engine only, vLLM has no such control).
    """

    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 384
    seed: int | None = None
    repetition_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    no_repeat_ngram_size: int = 0

    @property
    def penalized(self) -> bool:
        return (self.repetition_penalty != 1.0 or self.frequency_penalty != 0.0
                or self.presence_penalty != 0.0 or self.no_repeat_ngram_size > 0)


@dataclass(frozen=True)
class Request:
    """One chat completion: messages (``{"role", "content"}``), an optional JSON schema the reply
    must satisfy, sampling parameters, and whether per-token logprobs are wanted."""

    messages: tuple[dict, ...]
    schema: dict | None = None
    sampling: SamplingParams = field(default_factory=SamplingParams)
    logprobs: bool = False
    # Alternatives wanted for each generated token, with their log-probabilities (a server's ``top_logprobs``):
    # ``direct`` on a server reads "Yes" and "No" among the first token's (verifiers/probe/remote.py)
    top_logprobs: int = 0
    tag: str = ""  # what the call is for (e.g. "debate:skeptic"); used for accounting only
    # What no_repeat_ngram_size guards: None = the whole prompt and the reply (as transformers and most
    # engines define it); a string = only that text (e.g. the other agents' opinions) and the reply,
    # so the reply may still quote its evidence.
    avoid: str | None = None
    # Text the reply may repeat through that ban and the penalties (in a debate: the claim, and the
    # passages' names and numbers): see engines/ngrams.py.
    quote: str | None = None
    # Requests with the same group start alike (a debate's calls about one claim): an engine that keeps
    # prompt KV between calls (``transformers``) reuses their common start. Not part of the reply's key:
    # it changes the cost, never the reply.
    prefix_group: str | None = None

    def key(self, model: str = "") -> str:
        """A stable hash of everything that determines the reply (for caching and dedupe)."""
        payload = json.dumps(
            {
                "model": model,
                "messages": list(self.messages),
                "schema": self.schema,
                "sampling": self.sampling.__dict__,
                "logprobs": self.logprobs,
                **({"top_logprobs": self.top_logprobs} if self.top_logprobs else {}),
                "avoid": self.avoid,
                **({"quote": self.quote} if self.quote is not None else {}),
            },
            sort_keys=True,
            ensure_ascii=False,
        )
        return hashlib.sha256(payload.encode()).hexdigest()


@dataclass
class Result:
    """The reply to one request. ``parsed`` holds the validated JSON object when a schema was given."""

    text: str = ""
    parsed: Any = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  # prompt tokens served from a prefix cache, where the engine reports it
    logprobs: list[tuple[str, float]] | None = None
    # per generated token, the alternatives asked for (``Request.top_logprobs``) and their log-probabilities
    top_logprobs: list[list[tuple[str, float]]] | None = None
    error: str | None = None
    attempts: int = 1
    latency_s: float = 0.0
    capped: bool = False  # some attempt stopped at max_tokens instead of ending by itself

    @property
    def ok(self) -> bool:
        return self.error is None


@functools.lru_cache(maxsize=256)
def _validator(schema_json: str):
    """One checked validator per schema: ``jsonschema.validate`` re-checks the schema on every reply."""
    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def validate_reply(text: str, schema: dict | None) -> tuple[Any, str | None]:
    """Parse ``text`` as JSON and check it against ``schema``. Returns (object, error message)."""
    if schema is None:
        return text, None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, f"reply is not valid JSON ({exc.msg} at char {exc.pos})"
    obj, _ = json_surrogates(text, obj)  # a model's lone "\ud83d" would not survive the run database
    exc = jsonschema.exceptions.best_match(_validator(json.dumps(schema, sort_keys=True)).iter_errors(obj))
    if exc is not None:  # the same error jsonschema.validate would raise
        path = "/".join(str(p) for p in exc.absolute_path) or "<root>"
        return None, f"reply violates the schema at {path}: {exc.message}"
    return obj, None


class Engine:
    """Base class of all engines. Subclasses implement ``_complete`` (text only, same order).

    ``max_batch`` is how many requests the engine wants at once (a batch engine takes all ready
    requests; a server client bounds its in-flight requests), read by the debate scheduler.
    """

    name: str = "base"
    max_batch: int = 1
    max_retries: int = 2
    retry_temperature: float = 0.7

    def __init__(self, model: str = "", **options: Any) -> None:
        self.model = model
        self.options = options
        self.calls = 0  # engine calls (requests actually sent, retries included)

    # -- to implement -------------------------------------------------------------------------
    def _complete(self, requests: Sequence[Request]) -> list[Result]:  # pragma: no cover
        raise NotImplementedError

    # -- public -------------------------------------------------------------------------------
    def generate(self, requests: Sequence[Request]) -> list[Result]:
        """Run ``requests`` and return validated results in the same order."""
        requests = list(requests)
        results: list[Result | None] = [None] * len(requests)
        pending = list(range(len(requests)))
        attempt = 0
        while pending:
            attempt += 1
            batch = [self._retry_request(requests[i], attempt) for i in pending]
            t0 = time.perf_counter()
            try:
                raw = self._complete(batch)
            except Exception as exc:  # engine failure for the whole batch: record it, keep going
                from halucheck.errors import HalucheckError

                if not isinstance(exc, HalucheckError):
                    raise
                raw = [Result(error=str(exc)) for _ in batch]
            self.calls += len(batch)
            elapsed = time.perf_counter() - t0
            still = []
            for i, res in zip(pending, raw):
                if not res.latency_s:  # engines that do not time each request get the batch's time
                    res.latency_s = elapsed
                prev = results[i]
                if prev is not None:  # a retry: the failed attempts' cost still counts
                    res.prompt_tokens += prev.prompt_tokens
                    res.completion_tokens += prev.completion_tokens
                    res.cached_tokens += prev.cached_tokens
                    res.latency_s += prev.latency_s
                    res.capped = res.capped or prev.capped
                res.attempts = attempt
                # an engine-reported failure is final (the engine already retried its transport);
                # only a reply that does not validate is asked again
                if res.error is None:
                    res.parsed, res.error = validate_reply(res.text, requests[i].schema)
                    if res.error is not None and attempt <= self.max_retries:
                        still.append(i)
                results[i] = res
            pending = still
        return results  # type: ignore[return-value]

    def _retry_request(self, request: Request, attempt: int) -> Request:
        """A retry of a greedy request would repeat the same reply: sample instead, with a new seed."""
        if attempt == 1:
            return request
        s = request.sampling
        return replace(
            request,
            sampling=replace(
                s,
                temperature=max(s.temperature, self.retry_temperature),
                seed=(s.seed or 0) + attempt,
            ),
        )

    def release(self, groups: Sequence[str]) -> None:
        """The calls of these prefix groups are over: an engine that keeps their prefixes drops them."""

    def close(self) -> None:
        """Release resources (servers, GPU memory)."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} model={self.model!r}>"


class WrappedEngine(Engine):
    """Base of same-interface wrappers (reply cache, cost meter): the model, batch size, streaming mode,
    call count and lifetime are the inner engine's; a subclass overrides ``generate``."""

    def __init__(self, inner: Engine) -> None:
        # no super().__init__: nothing of the wrapper's own, everything is the inner engine's
        self.inner = inner
        self.model, self.options = inner.model, {}
        self.max_batch = inner.max_batch
        self.streaming = getattr(inner, "streaming", False)

    def generate(self, requests: Sequence[Request]) -> list[Result]:
        return self.inner.generate(requests)

    @property
    def calls(self) -> int:  # type: ignore[override]
        return self.inner.calls

    def release(self, groups: Sequence[str]) -> None:
        self.inner.release(groups)

    def close(self) -> None:
        self.inner.close()
