"""Evidence retrieval: BM25 (bm25s) + dense embeddings, fused by reciprocal rank fusion.

Two ways in, one search API (``search_many(queries, k, mode) -> list[list[Evidence]]``, batched):

- :func:`build_index` ingests a folder into one DuckDB file (documents, chunks with offsets, embeddings; the
  BM25 index lives beside it in ``<db>.bm25/``), re-processing only changed, added or deleted files;
  :meth:`Index.open` searches it.
- :class:`PassageIndex` searches a given list of passages in memory (an item's RAG context, or the sentences
  of a source document); :func:`search_in_passages` does that for many items with batched embedding.

Modes: ``bm25``, ``dense`` (exact cosine top-k), ``hybrid`` (RRF of both; the Evidence score is the RRF score).

Where each part lives: :mod:`~halucheck.retrieval.build` (``build_index``, ``IndexReport``),
:mod:`~halucheck.retrieval.index` (``Index``), :mod:`~halucheck.retrieval.passages` (``PassageIndex``,
``search_in_passages``), :mod:`~halucheck.retrieval.fuse` (the modes and RRF), :mod:`~halucheck.retrieval.bm25`,
:mod:`~halucheck.retrieval.dense` (embedders, ``get_embedder``) and :mod:`~halucheck.retrieval.index_db` (the
DuckDB file). The names below are re-exported here; import them from this package.
"""

from __future__ import annotations

from halucheck.retrieval.bm25 import BM25, tokenize
from halucheck.retrieval.build import IndexReport, build_index
from halucheck.retrieval.dense import DenseMatrix, Embedder, FakeEmbedder, default_model, get_embedder, make_embedder
from halucheck.retrieval.fuse import MODES, RRF_K, rrf
from halucheck.retrieval.index import Index, bm25_dir
from halucheck.retrieval.passages import PassageIndex, search_in_passages

# default_model, make_embedder, RRF_K and bm25_dir are importable from here too (not in __all__)

__all__ = [
    "MODES",
    "BM25",
    "DenseMatrix",
    "Embedder",
    "FakeEmbedder",
    "Index",
    "IndexReport",
    "PassageIndex",
    "build_index",
    "get_embedder",
    "rrf",
    "search_in_passages",
    "tokenize",
]
