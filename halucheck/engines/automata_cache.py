"""Outlines indexes kept on disk: the token-level automaton of a reply schema costs 10-15 s to build on
two CPU cores (per schema, per process), so `halucheck check` would pay it on every call.

An index depends on the regex of its schema, the tokenizer's vocabulary and end tokens, and the
outlines_core version that built it; the file name hashes all three. Files are written atomically
(temporary name, then rename); one that cannot be read back is built again and replaced, never trusted.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any, Callable


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("outlines_core")
    except PackageNotFoundError:  # pragma: no cover - a dependency of outlines
        return "unknown"


class AutomataCache:
    """``get(regex, tokenizer_key, build)``: the Index from disk, or ``build(regex)`` stored for next time.
    ``folder=None``: ``user_cache_dir()/outlines``; an unwritable folder only costs the rebuild."""

    def __init__(self, folder: str | os.PathLike | None = None) -> None:
        if folder is None:
            from halucheck.config import user_cache_dir

            folder = user_cache_dir() / "outlines"
        self.folder = Path(folder)
        self.hits = self.misses = 0

    def path(self, regex: str, tokenizer_key: str) -> Path:
        digest = hashlib.sha256("\0".join([_version(), tokenizer_key, regex]).encode()).hexdigest()
        return self.folder / f"{digest[:32]}.index"

    def get(self, regex: str, tokenizer_key: str, build: Callable[[str], Any]) -> Any:
        from outlines_core import Index

        path = self.path(regex, tokenizer_key)
        try:
            index = Index.from_binary(path.read_bytes())
        except Exception:  # missing, truncated or from another build: build it again
            pass
        else:
            self.hits += 1
            return index
        self.misses += 1
        index = build(regex)
        self._store(path, index)
        return index

    def _store(self, path: Path, index: Any) -> None:
        tmp = None
        try:
            data = index.__reduce__()[1][0]  # outlines_core pickles an Index as Index.from_binary(bytes)
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except Exception:  # a read-only or full cache folder: the index still works in memory
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)


__all__ = ["AutomataCache"]
