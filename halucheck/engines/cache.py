"""A same-interface engine wrapper that caches replies in the run database, keyed on the request hash.

This is what makes a killed run cheap to resume: every reply that came back before the kill is read
from the cache, not asked again. Only valid replies are cached (a failure is retried on resume).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Sequence

from halucheck.engines.base import Engine, Request, Result, WrappedEngine

if TYPE_CHECKING:
    from halucheck.runstore import RunStore


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
                text, parsed, pt, ct, cached_t, attempts, latency = cached[k]
                # a cached reply costs no engine call now: report no attempts, keep its token counts
                results[i] = Result(text=text, parsed=json.loads(parsed), prompt_tokens=pt, completion_tokens=ct,
                                    cached_tokens=cached_t, attempts=0, latency_s=0.0)
                self.hits += 1
            else:
                todo.append(i)
        if todo:
            self.misses += len(todo)
            fresh = self.inner.generate([requests[i] for i in todo])
            rows = []
            for i, res in zip(todo, fresh):
                results[i] = res
                if res.ok:
                    rows.append((keys[i], requests[i].tag, res.text, json.dumps(res.parsed, ensure_ascii=False),
                                 res.prompt_tokens, res.completion_tokens, res.cached_tokens, res.attempts,
                                 res.latency_s))
            self.store.cache_put(rows)
        return results  # type: ignore[return-value]
