"""Searching given passages in memory: :class:`PassageIndex` (an item's RAG context, or the sentences of a
source document) and :func:`search_in_passages` for many items with batched embedding.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from halucheck.config import SEARCH_HITS
from halucheck.errors import ConfigError
from halucheck.records import Evidence
from halucheck.retrieval.bm25 import BM25
from halucheck.retrieval.dense import DenseMatrix, get_embedder
from halucheck.retrieval.fuse import check_mode, fused_search
from halucheck.text import sentence_spans


class PassageIndex:
    """Search within a given list of passages, in memory (e.g. one item's RAG context).

    ``passages`` are strings or :class:`Evidence` (whose source and offsets are kept in the hits).
    ``embedder`` is an embedder object, a model spec, or None for the default model; ``embeddings`` may
    supply the passages' vectors already computed (see :func:`search_in_passages`).
    """

    def __init__(self, passages: Sequence[str | Evidence], embedder=None, embeddings: np.ndarray | None = None):
        self.passages = [p if isinstance(p, Evidence) else Evidence(text=p, start=0, end=len(p)) for p in passages]
        self._embedder = embedder
        self._embeddings = embeddings
        self._bm25: BM25 | None = None
        self._dense: DenseMatrix | None = None

    @classmethod
    def from_text(
        cls, text: str, source: str = "", unit: str = "sentence", embedder=None, **chunking
    ) -> "PassageIndex":
        """Passages cut from one document: its sentences (``unit="sentence"``) or overlapping chunks
        (``unit="chunk"``, keyword arguments as :func:`halucheck.ingest.chunk_text`)."""
        from halucheck import ingest

        if unit == "sentence":
            spans = sentence_spans(text, line_breaks=False, max_chars=chunking.get("max_chars", 1000))
        elif unit == "chunk":
            spans = [(c.start, c.end) for c in ingest.chunk_text(text, **chunking)]
        else:
            raise ConfigError(f"unknown passage unit {unit!r}; use 'sentence' or 'chunk'")
        return cls([Evidence(text[s:e], source, s, e) for s, e in spans], embedder=embedder)

    def __len__(self) -> int:
        return len(self.passages)

    @property
    def embedder(self):
        if self._embedder is None or isinstance(self._embedder, str):
            self._embedder = get_embedder(self._embedder)
        return self._embedder

    def _bm25_search(self, queries, k):
        if self._bm25 is None:
            self._bm25 = BM25.build([p.text for p in self.passages])
        return self._bm25.search_many(queries, k)

    def _dense_search(self, queries, k, query_embeddings=None):
        if self._dense is None:
            emb = self._embeddings
            if emb is None:
                emb = self.embedder.encode([p.text for p in self.passages])
            self._dense = DenseMatrix(emb if len(emb) else np.zeros((0, 1), np.float32))
        if not len(self._dense):
            return [[] for _ in queries]
        q = query_embeddings if query_embeddings is not None else self.embedder.encode(list(queries))
        return self._dense.search_many(q, k)

    def search_many(
        self, queries: Sequence[str], k: int = SEARCH_HITS, mode: str = "hybrid",
        query_embeddings: np.ndarray | None = None,
    ) -> list[list[Evidence]]:
        """Top-``k`` passages per query, best first, as :class:`Evidence` with the mode's score."""
        dense = lambda qs, kk: self._dense_search(qs, kk, query_embeddings)  # noqa: E731
        ranked = fused_search(queries, k, mode, self._bm25_search, dense)
        out = []
        for hits in ranked:
            row = []
            for i, s in hits:
                p = self.passages[i]
                row.append(Evidence(text=p.text, source=p.source, start=p.start, end=p.end, score=s))
            out.append(row)
        return out

    def search(self, query: str, k: int = SEARCH_HITS, mode: str = "hybrid") -> list[Evidence]:
        """Top-``k`` passages for one query."""
        return self.search_many([query], k, mode)[0]


def search_in_passages(
    groups: Sequence[tuple[Sequence[str], Sequence[str | Evidence]]],
    k: int = SEARCH_HITS,
    mode: str = "hybrid",
    embedder=None,
    batch_size: int = 64,
) -> list[list[list[Evidence]]]:
    """For many items at once, search each item's queries within that item's own passages.

    ``groups`` holds ``(queries, passages)`` per item; the result holds, per item, per query, the top-``k``
    passages. All passages and all queries are embedded in two batched calls.
    """
    check_mode(mode)
    if not groups:
        return []
    emb_model = embedder if embedder is not None and not isinstance(embedder, str) else get_embedder(embedder)
    need_dense = mode != "bm25"
    p_emb = q_emb = None
    if need_dense:
        p_emb = emb_model.encode([str(getattr(p, "text", p)) for _, ps in groups for p in ps], batch_size=batch_size)
        q_emb = emb_model.encode([q for qs, _ in groups for q in qs], batch_size=batch_size)
    out, pi, qi = [], 0, 0
    for queries, passages in groups:
        np_, nq = len(passages), len(queries)
        index = PassageIndex(passages, embedder=emb_model, embeddings=p_emb[pi : pi + np_] if need_dense else None)
        out.append(index.search_many(queries, k, mode, query_embeddings=q_emb[qi : qi + nq] if need_dense else None))
        pi, qi = pi + np_, qi + nq
    return out
