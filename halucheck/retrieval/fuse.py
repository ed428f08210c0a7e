"""Reciprocal rank fusion (Cormack et al., 2009): score(d) = sum over rankings of 1 / (k + rank(d)), and the
search modes built on it: ``bm25``, ``dense`` (one ranker) or ``hybrid`` (RRF of both).
"""

from __future__ import annotations

from typing import Callable, Hashable, Sequence

from halucheck.errors import ConfigError

RRF_K = 60
MODES = ("bm25", "dense", "hybrid")


def rrf(
    rankings: Sequence[Sequence[Hashable]], k: int = RRF_K, limit: int | None = None
) -> list[tuple[Hashable, float]]:
    """Fuse ranked lists of ids (best first) into one ``(id, score)`` list, best first.

    Every id in any list appears once (the union); ties keep the order of first appearance across the
    lists read rank by rank, so results are deterministic.
    """
    scores: dict[Hashable, float] = {}
    first_seen: dict[Hashable, tuple[int, int]] = {}
    for li, ranking in enumerate(rankings):
        for rank, item in enumerate(ranking, 1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
            first_seen.setdefault(item, (rank, li))
    fused = sorted(scores.items(), key=lambda kv: (-kv[1], first_seen[kv[0]]))
    return fused[:limit] if limit is not None else fused


def check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ConfigError(f"unknown retrieval mode {mode!r}; use one of: {', '.join(MODES)}")


def hybrid_depth(k: int) -> int:
    # candidates taken from each ranker before fusion: deep enough that a passage ranked well by one ranker
    # but just outside the other's top-k still gets both contributions
    return max(2 * k, 50)


def fused_search(
    queries: Sequence[str],
    k: int,
    mode: str,
    bm25_fn: Callable[[Sequence[str], int], list[list[tuple[int, float]]]],
    dense_fn: Callable[[Sequence[str], int], list[list[tuple[int, float]]]],
    rrf_k: int = RRF_K,
) -> list[list[tuple[int, float]]]:
    """Per query, ``(key, score)`` best first, for any ranker pair returning keys with scores."""
    check_mode(mode)
    if k <= 0 or not queries:
        return [[] for _ in queries]
    if mode == "bm25":
        return [hits[:k] for hits in bm25_fn(queries, k)]
    if mode == "dense":
        return [hits[:k] for hits in dense_fn(queries, k)]
    depth = hybrid_depth(k)
    sparse, dense = bm25_fn(queries, depth), dense_fn(queries, depth)
    return [
        rrf([[key for key, _ in s], [key for key, _ in d]], k=rrf_k, limit=k) for s, d in zip(sparse, dense)
    ]
