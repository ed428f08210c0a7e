"""The KV cache of each claim's shared prompt start, kept between calls by the ``transformers`` engine.

Every call about one claim (a debate's turns; any requests given the same ``Request.prefix_group``)
starts with the same tokens: system prompt, evidence, claim. An entry holds the keys and values of those
tokens, per layer, for one group; the next call of the group prefills only what follows them.

What an entry holds is learnt, not declared: a group's first call stores the KV of its whole prompt; its
next call keeps only the longest common token prefix of the two (the part every call shares), and from
then on reuses exactly that. A token's keys and values depend on it and the tokens before it only
(causal attention, positions counted from the start), so a common token prefix is always safe to reuse:
nothing has to be told where the shared text ends, and a prompt that shares less simply reuses less.

Past the shared start, a group also keeps each earlier call's own tokens and their KV (an *extension*,
at most ``MAX_EXTENSIONS`` per group): a later call that goes on like one of them (the same role's
instructions, asked again in the next round) reuses that part too. A call thus reuses its longest common
prefix with any earlier call of its group, one level deep: the shared start, then one extension.

A request without a group belongs to its *stage's* group (:func:`group_of`: every call with the same system
prompt, e.g. every claim extraction or every selfcheck verdict of a run), whose entry converges to what all those
calls share (the system prompt, instructions and worked examples); such a group keeps no extensions (the rest of
each call is its own). So no prompt start is computed twice within a run, across claims and answers.

Bounded in bytes: the least recently used groups are dropped first; ``release`` drops a group whose
calls are over (a finished debate).
"""

from __future__ import annotations

import hashlib
import os
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Sequence

# Fewer shared tokens than this are not worth a cache entry (the system prompt of two unrelated groups).
MIN_SHARED_TOKENS = 16
# Earlier calls' own parts kept per group (a debate asks each of its 3-4 roles again; the newest are kept).
MAX_EXTENSIONS = 8


@dataclass
class Entry:
    """Tokens and, per layer, their keys and values ``(heads, tokens, dim)``: a group's shared start, or an
    extension (tokens that followed it in one call, and their KV at those positions)."""

    tokens: list[int]
    layers: list[tuple[Any, Any]]
    extensions: list["Entry"] = field(default_factory=list)  # a shared start's, oldest first

    @property
    def nbytes(self) -> int:
        own = sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in self.layers)
        return own + sum(e.nbytes for e in self.extensions)

    def split(self, n: int) -> "Entry":
        """Keep the first ``n`` tokens (copies, so the longer tensors' memory is freed) and return the rest
        as an extension; the old extensions went on from the old end, so they are dropped."""
        tail = Entry(self.tokens[n:], [(k[:, n:].clone(), v[:, n:].clone()) for k, v in self.layers])
        self.tokens = self.tokens[:n]
        self.layers = [(k[:, :n].clone(), v[:, :n].clone()) for k, v in self.layers]
        self.extensions = []
        return tail


@dataclass(frozen=True)
class Hit:
    """What one call reuses: ``n`` tokens of its group's shared start, then ``m`` tokens of an extension
    (none when ``m`` is 0). Holds the layers as they were when matched, so a later call that shrinks the
    entry does not change what this one reads."""

    base: list[tuple[Any, Any]]
    n: int
    extension: list[tuple[Any, Any]] | None = None
    m: int = 0

    @property
    def tokens(self) -> int:
        return self.n + self.m

    def pieces(self) -> list[tuple[list[tuple[Any, Any]], int]]:
        """(layers, tokens used) in prompt order."""
        return [(self.base, self.n)] + ([(self.extension, self.m)] if self.m else [])


STAGE = "stage:"  # the prefix of a stage's implicit group


def group_of(request) -> str | None:
    """The prefix group a request's prompt start is kept under: its own ``prefix_group``, else its stage's (a hash of
    its system message; None without one)."""
    if request.prefix_group:
        return request.prefix_group
    first = request.messages[0] if request.messages else None
    if not first or first.get("role") != "system":
        return None
    return STAGE + hashlib.sha256(str(first.get("content", "")).encode()).hexdigest()[:16]


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens ``a`` and ``b`` share."""
    return len(os.path.commonprefix([list(a), list(b)]))


class PrefixCache:
    """Per-group prefix KV, least recently used first out once ``max_bytes`` is exceeded.

    Counters for reports and benchmarks: ``hits`` / ``misses`` (calls of a group with / without a usable
    entry), ``extension_hits`` (hits that also reused an earlier call's own part), ``reused_tokens``
    (prompt tokens served from entries), ``evictions``, ``peak_bytes`` (the most the entries held, counted
    before evicting: what the groups in flight asked for).
    """

    def __init__(self, max_bytes: int, min_tokens: int = MIN_SHARED_TOKENS,
                 max_extensions: int = MAX_EXTENSIONS) -> None:
        self.max_bytes = int(max_bytes)
        self.min_tokens = min_tokens
        self.max_extensions = max_extensions
        self.entries: OrderedDict[str, Entry] = OrderedDict()
        self.bytes = self.peak_bytes = 0
        self.hits = self.misses = self.extension_hits = self.reused_tokens = self.evictions = 0

    def __len__(self) -> int:
        return len(self.entries)

    def match(self, group: str, ids: Sequence[int]) -> Hit | None:
        """What the group's entry serves of ``ids``: its shared start and the extension that goes on
        furthest like ``ids``; None when fewer than ``min_tokens`` are shared.

        The last prompt token is always left to compute (its logits give the first reply token). When
        ``ids`` shares fewer tokens than the shared start holds, the start shrinks to the shared part (that
        is what the group's calls have in common) and the part cut off becomes an extension.
        """
        entry = self.entries.get(group)
        n = min(common_prefix(entry.tokens, ids), len(ids) - 1) if entry is not None else 0
        if n < self.min_tokens:
            self.misses += 1
            return None
        if n < len(entry.tokens):
            before = entry.nbytes
            tail = entry.split(n)
            if len(tail.tokens) >= self.min_tokens and not group.startswith(STAGE):
                entry.extensions.append(tail)
            self.bytes += entry.nbytes - before
        rest = ids[n : len(ids) - 1]
        ext, m = max(((e, common_prefix(e.tokens, rest)) for e in entry.extensions), key=lambda p: p[1],
                     default=(None, 0))
        if m < self.min_tokens:
            ext, m = None, 0
        else:
            entry.extensions.remove(ext)
            entry.extensions.append(ext)  # newest last: the oldest goes first
            self.extension_hits += 1
        self.entries.move_to_end(group)
        self.hits += 1
        self.reused_tokens += n + m
        return Hit(entry.layers, n, ext.layers if ext else None, m)

    def store(self, group: str, tokens: Sequence[int], layers: list[tuple[Any, Any]]) -> None:
        """Keep ``layers`` (this prompt's KV, per layer ``(heads, tokens, dim)``) as the group's entry."""
        if len(tokens) < self.min_tokens or group in self.entries:
            return
        entry = Entry(list(tokens), layers)
        if entry.nbytes > self.max_bytes:
            return
        self.entries[group] = entry
        self._grew(entry.nbytes)

    def wants(self, group: str, start: Sequence[int], tokens: Sequence[int]) -> bool:
        """Whether :meth:`extend` would keep ``tokens`` after ``start``: ``start`` is still exactly the
        group's shared start, ``tokens`` are enough to reuse and no extension already holds them (so a
        caller copies their KV only when it will be kept)."""
        entry = self.entries.get(group)
        return (entry is not None and not group.startswith(STAGE) and len(tokens) >= self.min_tokens
                and list(start) == entry.tokens
                and not any(common_prefix(e.tokens, tokens) == len(tokens) for e in entry.extensions))

    def extend(self, group: str, start: Sequence[int], tokens: Sequence[int], layers: list[tuple[Any, Any]]) -> None:
        """Keep ``tokens`` (what followed ``start`` in one call) and their KV as an extension of the group,
        when it :meth:`wants` them."""
        if not self.wants(group, start, tokens):
            return
        entry = self.entries[group]
        ext = Entry(list(tokens), layers)
        entry.extensions.append(ext)
        grown = ext.nbytes
        while len(entry.extensions) > self.max_extensions:
            grown -= entry.extensions.pop(0).nbytes
        self._grew(grown)

    def _grew(self, nbytes: int) -> None:
        self.bytes += nbytes
        self.peak_bytes = max(self.peak_bytes, self.bytes)
        while self.bytes > self.max_bytes and self.entries:
            _, old = self.entries.popitem(last=False)
            self.bytes -= old.nbytes
            self.evictions += 1

    def release(self, group: str) -> None:
        """Forget the group (its calls are over)."""
        entry = self.entries.pop(group, None)
        if entry is not None:
            self.bytes -= entry.nbytes


__all__ = ["Entry", "Hit", "MAX_EXTENSIONS", "MIN_SHARED_TOKENS", "PrefixCache", "STAGE", "common_prefix", "group_of"]
