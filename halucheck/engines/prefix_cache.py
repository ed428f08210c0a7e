"""The KV cache of each claim's shared prompt start, kept between calls by the ``transformers`` engine.

Every call about one claim (a debate's turns; any requests given the same ``Request.prefix_group``)
starts with the same tokens: system prompt, evidence, claim. An entry holds the keys and values of those
tokens, per layer, for one group; the next call of the group prefills only what follows them.

What an entry holds is learnt, not declared: a group's first call stores the KV of its whole prompt; its
next call keeps only the longest common token prefix of the two (the part every call shares), and from
then on reuses exactly that. A token's keys and values depend on it and the tokens before it only
(causal attention, positions counted from the start), so a common token prefix is always safe to reuse:
nothing has to be told where the shared text ends, and a prompt that shares less simply reuses less.

Bounded in bytes: the least recently used groups are dropped first; ``release`` drops a group whose
calls are over (a finished debate).
"""

from __future__ import annotations

import os
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Sequence

# Fewer shared tokens than this are not worth a cache entry (the system prompt of two unrelated groups).
MIN_SHARED_TOKENS = 16


@dataclass
class Entry:
    """One group's cached prefix: its tokens and, per layer, keys and values ``(heads, tokens, dim)``."""

    tokens: list[int]
    layers: list[tuple[Any, Any]]

    @property
    def nbytes(self) -> int:
        return sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in self.layers)

    def truncate(self, n: int) -> None:
        """Keep the first ``n`` tokens (copies, so the longer tensors' memory is freed)."""
        self.tokens = self.tokens[:n]
        self.layers = [(k[:, :n].clone(), v[:, :n].clone()) for k, v in self.layers]


class PrefixCache:
    """Per-group prefix KV, least recently used first out once ``max_bytes`` is exceeded.

    Counters for reports and benchmarks: ``hits`` / ``misses`` (calls of a group with / without a usable
    entry), ``reused_tokens`` (prompt tokens served from entries), ``evictions``, ``peak_bytes`` (the most
    the entries held, counted before evicting: what the groups in flight asked for).
    """

    def __init__(self, max_bytes: int, min_tokens: int = MIN_SHARED_TOKENS) -> None:
        self.max_bytes = int(max_bytes)
        self.min_tokens = min_tokens
        self.entries: OrderedDict[str, Entry] = OrderedDict()
        self.bytes = self.peak_bytes = 0
        self.hits = self.misses = self.reused_tokens = self.evictions = 0

    def __len__(self) -> int:
        return len(self.entries)

    def match(self, group: str, ids: Sequence[int]) -> tuple[Entry | None, int]:
        """The group's entry and how many leading tokens of ``ids`` it serves (0 when none).

        The last prompt token is always left to compute (its logits give the first reply token). When
        ``ids`` shares fewer tokens than the entry holds, the entry shrinks to the shared part: that is
        what the group's calls have in common.
        """
        entry = self.entries.get(group)
        n = 0
        if entry is not None:
            n = min(len(os.path.commonprefix([entry.tokens, list(ids)])), len(ids) - 1)
        if n < self.min_tokens:
            self.misses += 1
            return None, 0
        if n < len(entry.tokens):
            self.bytes -= entry.nbytes
            entry.truncate(n)
            self.bytes += entry.nbytes
        self.entries.move_to_end(group)
        self.hits += 1
        self.reused_tokens += n
        return entry, n

    def store(self, group: str, tokens: Sequence[int], layers: list[tuple[Any, Any]]) -> None:
        """Keep ``layers`` (this prompt's KV, per layer ``(heads, tokens, dim)``) as the group's entry."""
        if len(tokens) < self.min_tokens or group in self.entries:
            return
        entry = Entry(list(tokens), layers)
        if entry.nbytes > self.max_bytes:
            return
        self.entries[group] = entry
        self.bytes += entry.nbytes
        self.peak_bytes = max(self.peak_bytes, self.bytes)
        while self.bytes > self.max_bytes:
            _, old = self.entries.popitem(last=False)
            self.bytes -= old.nbytes
            self.evictions += 1

    def release(self, group: str) -> None:
        """Forget the group (its calls are over)."""
        entry = self.entries.pop(group, None)
        if entry is not None:
            self.bytes -= entry.nbytes


__all__ = ["Entry", "MIN_SHARED_TOKENS", "PrefixCache"]
