"""A same-interface engine wrapper that caches replies in the run database, keyed on the request hash.

This is what makes a killed run cheap to resume: every reply that came back before the kill is read
from the cache, not asked again. Only valid replies are cached (a failure is retried on resume).
A server engine's replies are written together, every ``MAX_DEFER_S`` (2 s) while they come in and all of them
before the call returns (every reply is on disk before it is used), and a batch engine's batch is sent in
chunks of its own batch size, each cached when it returns: a kill asks again at most the replies in flight
and those of the last 2 s, never a whole stage batch. A batch engine's replies that came back within
``DEFER_S`` are written with the run's next transaction instead of a commit of their own (a commit costs more
than asking them again).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Sequence

import time

from halucheck.engines.base import Engine, Request, Result, WrappedEngine
from halucheck.store.rows import CachedReply

if TYPE_CHECKING:
    from halucheck.store.runstore import RunStore


DEFER_S = 0.5


class CachingEngine(WrappedEngine):
    """Wraps ``inner``; ``hits`` and ``misses`` count requests served from / sent past the cache."""

    name = "cache"

    def __init__(self, inner: Engine, store: "RunStore") -> None:
        super().__init__(inner)
        self.store = store
        self.hits = self.misses = 0

    def generate(self, requests: Sequence[Request]) -> list[Result]:
        requests = list(requests)
        keys = [r.key(f"{self.inner.name}:{self.inner.model}") for r in requests]
        cached = self.store.cache_get(keys)
        results: list[Result | None] = [None] * len(requests)
        todo = []
        for i, k in enumerate(keys):
            if k in cached:
                c = cached[k]
                # a cached reply costs no engine call now: report no attempts, keep its token counts and
                # its token log-probabilities (a verdict's score reads them)
                logprobs, top = _read_logprobs(c.logprobs)
                results[i] = Result(text=c.text, parsed=json.loads(c.parsed), prompt_tokens=c.prompt_tokens,
                                    completion_tokens=c.completion_tokens, cached_tokens=c.cached_tokens, attempts=0,
                                    latency_s=0.0, logprobs=logprobs, top_logprobs=top)
                self.hits += 1
            else:
                todo.append(i)
        if not todo:
            return results  # type: ignore[return-value]
        self.misses += len(todo)
        if self.streaming and len(todo) > 1:
            self._generate_each(requests, keys, todo, results)
            return results  # type: ignore[return-value]
        if len(todo) > self.max_batch:  # longest prompts first, as batch engines group them themselves
            todo.sort(key=lambda i: -sum(len(m["content"]) for m in requests[i].messages))
        for start in range(0, len(todo), self.max_batch):
            chunk = todo[start:start + self.max_batch]
            t0 = time.perf_counter()
            for i, res in zip(chunk, self.inner.generate([requests[i] for i in chunk])):
                results[i] = res
            self._put(requests, keys, chunk, results, defer=time.perf_counter() - t0 < DEFER_S)
        return results  # type: ignore[return-value]

    def _generate_each(self, requests, keys, todo, results) -> None:
        """One request per inner call, up to the engine's concurrency at once; the replies are cached as they
        return, in one transaction for those of each ``MAX_DEFER_S``, and all of them before this returns."""
        import queue
        from concurrent.futures import ThreadPoolExecutor

        returned: queue.SimpleQueue = queue.SimpleQueue()  # each call's future, as it is done
        with ThreadPoolExecutor(max_workers=max(1, min(self.max_batch, len(todo)))) as pool:
            running = {}
            for i in todo:
                fut = pool.submit(self.inner.generate, [requests[i]])
                running[fut] = i
                fut.add_done_callback(returned.put)
            try:
                while running:
                    # woken when the replies kept so far are due to be written, even if no other came back
                    try:
                        done = [returned.get(timeout=self.store.deferred_wait())]
                    except queue.Empty:
                        done = []
                    while not returned.empty():
                        done.append(returned.get())
                    finished, failure = [], None
                    for fut in done:
                        i = running.pop(fut)
                        try:
                            results[i] = fut.result()[0]
                            finished.append(i)
                        except BaseException as exc:  # keep the replies that did come back first
                            failure = failure or exc
                    self._put(requests, keys, finished, results, defer=True)
                    if failure is not None:
                        raise failure
            except BaseException:
                for fut in running:
                    fut.cancel()
                raise
        self.store.cache_put([])  # the rest, before any of them is used

    def _put(self, requests, keys, indexes, results, defer: bool = False) -> None:
        self.store.cache_put([
            CachedReply(keys[i], requests[i].tag, results[i].text, json.dumps(results[i].parsed, ensure_ascii=False),
                        results[i].prompt_tokens, results[i].completion_tokens, results[i].cached_tokens,
                        results[i].attempts, results[i].latency_s, _logprobs_text(results[i]))
            for i in indexes if results[i].ok], defer=defer)


def _logprobs_text(result: Result) -> str | None:
    """A reply's token log-probabilities as the cache keeps them: the list of (token, logprob), or, with the
    alternatives of each token, ``{"tokens": that list, "top": [[(token, logprob), ...] per token]}``."""
    if result.top_logprobs is not None:
        return json.dumps({"tokens": result.logprobs, "top": result.top_logprobs}, ensure_ascii=False)
    return None if result.logprobs is None else json.dumps(result.logprobs, ensure_ascii=False)


def _read_logprobs(text: str | None):
    """(logprobs, top_logprobs) from what :func:`_logprobs_text` wrote."""
    if not text:
        return None, None
    data = json.loads(text)
    pairs = (lambda rows: None if rows is None else [(t, lp) for t, lp in rows])
    if isinstance(data, dict):
        return pairs(data.get("tokens")), [pairs(alts) for alts in data.get("top") or []]
    return pairs(data), None
