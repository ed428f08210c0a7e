"""Reciprocal rank fusion (Cormack et al., 2009): score(d) = sum over rankings of 1 / (k + rank(d))."""

from __future__ import annotations

from typing import Hashable, Sequence

RRF_K = 60


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
