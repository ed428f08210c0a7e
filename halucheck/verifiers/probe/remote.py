"""``direct``'s prompt passes through an engine that serves replies, not hidden states (vLLM or another
OpenAI-compatible server): each pass is a request for one generated token and its :data:`TOP` likeliest
alternatives, and the verdict is read from the log-probabilities of "Yes" and "No" among them, as the embedded
engine reads their logits (a log-probability is the logit less one constant, so their difference is the same). The
severity grade's follow-up question is read the same way, from the digits. The server's own prefix cache reuses the
prompt starts (vLLM's automatic prefix caching: the prompts are instructions, then the document chunk, then the
statement). There are no hidden states: ``probe`` still needs the embedded engine.

A token missing from the alternatives is at most as likely as the least likely one listed, and is read as that (a
bound). A reply in which neither "Yes" nor "No" is among them decides nothing: its claim's verdict is failed, so
a run retries it, never reads it as supported.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from halucheck.engines.base import Request, SamplingParams
from halucheck.verifiers.probe.features import NO, YES, Features

if TYPE_CHECKING:
    from halucheck.engines.base import Engine

TOP = 20  # alternatives asked for: vLLM's default --max-logprobs
_NO_STATES = np.zeros((0, 0), np.float16)


class RemotePasses:
    """What :class:`~halucheck.verifiers.probe.features.Extractor` gives ``direct`` — features of prompt passes and
    the log-probabilities of a follow-up's first reply token — from a server's replies."""

    store = None  # nothing to keep: the run's reply cache holds the replies
    serves_replies = True

    def __init__(self, engine: "Engine") -> None:
        self.engine = engine
        self.passes = self.computed_tokens = self.reused_tokens = 0

    def features(self, prompts: Sequence[Sequence[dict]],
                 progress: Callable[[int, int], None] | None = None) -> list[Features]:
        """One request a prompt (chat messages); a failed one, or one whose alternatives hold neither "Yes" nor "No",
        gives features with ``error`` set."""
        results = self._ask(prompts, "direct")
        out = []
        for res in results:
            listed = _alternatives(res)
            error = res.error or (None if YES in listed or NO in listed else
                                  f"the reply's first token was neither {YES!r} nor {NO!r} among its {TOP} likeliest "
                                  f"(it was {res.text[:20]!r})")
            floor = min(listed.values(), default=0.0)
            out.append(Features(_NO_STATES, 0.0 if error else listed.get(YES, floor),
                                0.0 if error else listed.get(NO, floor), tokens=res.prompt_tokens,
                                cached=res.cached_tokens, error=error))
        if progress:
            progress(len(prompts), len(prompts))
        return out

    def replies_logits(self, conversations: Sequence[Sequence[dict]],
                       answers: Sequence[str]) -> list[tuple[np.ndarray, int, int]]:
        """For each conversation, the log-probabilities of ``answers`` as the reply's first token (-inf for one not
        among the alternatives), the prompt's tokens and how many the server reused: all asked at once."""
        out = []
        for res in self._ask(conversations, "severity"):
            listed = _alternatives(res)
            out.append((np.array([listed.get(a, -math.inf) for a in answers]), res.prompt_tokens, res.cached_tokens))
        return out

    def forget(self) -> None:
        """Nothing is kept here (the server keeps its own prefix cache)."""

    def _ask(self, prompts, tag: str):
        requests = [Request(messages=tuple(p), sampling=SamplingParams(temperature=0.0, max_tokens=1),
                            top_logprobs=TOP, tag=f"{tag}:pass") for p in prompts]
        results = self.engine.generate(requests)
        for r in results:
            self.passes += r.attempts > 0
            self.computed_tokens += (r.prompt_tokens - r.cached_tokens) if r.attempts else 0
            self.reused_tokens += r.cached_tokens if r.attempts else 0
        return results


def _alternatives(result) -> dict[str, float]:
    """The first reply token's alternatives and their log-probabilities (none when the reply failed)."""
    return dict(reversed((result.top_logprobs or [[]])[0])) if result.ok else {}  # a token twice: its likeliest


__all__ = ["RemotePasses", "TOP"]
