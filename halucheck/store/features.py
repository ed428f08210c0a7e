"""The feature store: what prompt passes yielded (``halucheck.verifiers.probe.features``), by content key, in one
SQLite file of its own (not a run database): ``halucheck train`` and ``eval -v direct|probe`` share it per model, so
a killed extraction continues where it stopped and a prompt seen before costs nothing."""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np


@dataclass(frozen=True)
class FeatureRow:
    """One stored pass: ``hidden`` (layers + 1, width) float16, the first reply token's Yes/No logits, prompt tokens."""

    hidden: np.ndarray
    yes: float
    no: float
    tokens: int


class FeatureStore:
    """Features by content key in one SQLite file; safe to share by threads of one process."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS features (key TEXT PRIMARY KEY, tokens INTEGER, yes REAL, "
                         "no REAL, layers INTEGER, width INTEGER, hidden BLOB)")
        self._lock = threading.Lock()

    @staticmethod
    def key(recipe: str, ids: Sequence[int]) -> str:
        """The content key of one prompt pass: what makes it (model and feature recipe) and its tokens."""
        return hashlib.sha256(f"{recipe}|{','.join(map(str, ids))}".encode()).hexdigest()

    def get(self, keys: Sequence[str]) -> dict[str, FeatureRow]:
        found: dict[str, FeatureRow] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                part = list(keys[start:start + 500])
                rows = self._db.execute(f"SELECT key, tokens, yes, no, layers, width, hidden FROM features WHERE key IN "
                                        f"({','.join('?' * len(part))})", part).fetchall()
                for key, tokens, yes, no, layers, width, blob in rows:
                    hidden = np.frombuffer(blob, dtype=np.float16).reshape(layers, width)
                    found[key] = FeatureRow(hidden, yes, no, tokens)
        return found

    def put(self, key: str, f: FeatureRow) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO features VALUES (?, ?, ?, ?, ?, ?, ?)",
                             (key, f.tokens, f.yes, f.no, f.hidden.shape[0], f.hidden.shape[1],
                              f.hidden.astype(np.float16).tobytes()))
            self._db.commit()

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT count(*) FROM features").fetchone()[0]

    def close(self) -> None:
        self._db.close()



__all__ = ["FeatureRow", "FeatureStore"]
