"""A bibliography to look citations up in: :class:`Bibliography` (works indexed by title words, scored by
title similarity) and :func:`load_bibliography`.

**Bibliographies** (:func:`load_bibliography`): BibTeX (``.bib``), CSL-JSON (``.json``) or CSV
(``.csv``, columns ``title``, ``authors``, ``year``). Each file is parsed once per process: the result is
kept in memory, keyed by the file's resolved path, modification time and size, so a changed file is read
again and nothing is written to disk. A bad entry (no title, an unclosed brace, a year that is no year) is
a ``file:line`` warning (``file:item N`` for CSL-JSON) and the rest is loaded; a missing file, an unknown
extension or a file with no usable entry is an :class:`~halucheck.errors.InputError`.
"""

from __future__ import annotations

import difflib
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from halucheck.errors import InputError
from halucheck.text import stop_words
from halucheck.verifiers.tools.citations.formats import parse_bibtex, parse_csl_json, parse_csv
from halucheck.verifiers.tools.citations.names import normalize_title, parse_name
from halucheck.verifiers.tools.citations.records import Work


@dataclass
class Bibliography:
    """Works to look citations up in, indexed by title words; ``warnings``: the entries skipped or mended
    while reading (``file:line: what``); ``name``: how verdicts name it (the file's name)."""

    works: list[Work]
    name: str = "bibliography"
    warnings: list[str] = field(default_factory=list)
    path: str | None = None

    def __post_init__(self) -> None:
        self._norm = [normalize_title(w.title) for w in self.works]
        self._main = [normalize_title(w.title.split(":", 1)[0]) if ":" in w.title else None for w in self.works]
        self._names = [tuple(parse_name(a) for a in w.authors) for w in self.works]
        self._exact: dict[str, list[int]] = {}
        self._postings: dict[str, set[int]] = {}
        for i, (t, m) in enumerate(zip(self._norm, self._main)):
            self._exact.setdefault(t, []).append(i)
            if m:
                self._exact.setdefault(m, []).append(i)
            for word in _index_words(t):
                self._postings.setdefault(word, set()).add(i)

    def __len__(self) -> int:
        return len(self.works)

    def __iter__(self):
        return iter(self.works)

    def scored(self, title: str, threshold: float = 0.0) -> list[tuple[float, int]]:
        """(title similarity, index), best first, of the records scoring at least ``threshold``, or of the
        best one alone when none does. Looked at: every record sharing an indexed title word with ``title``
        (all of them when it has none); a record whose quick upper bound cannot reach the threshold nor beat
        the best so far is skipped. A cited title without a colon is also compared with each record's title
        before its colon (a subtitle left out)."""
        norm = normalize_title(title)
        words = _index_words(norm)
        if words:
            shared: dict[int, int] = {}
            for w in words:
                for i in self._postings.get(w, ()):
                    shared[i] = shared.get(i, 0) + 1
            pool = sorted(shared, key=lambda i: (-shared[i], i))
        else:
            pool = list(range(len(self.works)))
        pool += [i for i in self._exact.get(norm, []) if i not in shared] if words else []
        sm = difflib.SequenceMatcher(None, autojunk=False)
        sm.set_seq2(norm)
        best = (0.0, -1)
        out = []
        for i in pool:
            score = 0.0
            for target in (self._norm[i], self._main[i] if ":" not in title else None):
                if not target:
                    continue
                if target == norm:
                    score = 1.0
                    break
                sm.set_seq1(target)
                if sm.real_quick_ratio() < min(threshold, best[0]) or sm.quick_ratio() < min(threshold, best[0]):
                    continue
                score = max(score, sm.ratio())
            if score > best[0]:
                best = (score, i)
            if score >= threshold and threshold > 0:
                out.append((score, i))
        out.sort(key=lambda x: (-x[0], x[1]))
        if not out and best[1] >= 0:
            out = [best]
        return out




def _index_words(norm: str) -> set[str]:
    return {w for w in norm.split() if w not in stop_words() and (len(w) >= 3 or w.isdigit())}


_CACHE: dict[tuple[str, int, int], Bibliography] = {}
_CACHE_LOCK = threading.Lock()
FORMATS = {".bib": "BibTeX", ".json": "CSL-JSON", ".csv": "CSV"}


def load_bibliography(path: str | os.PathLike) -> Bibliography:
    """Read a BibTeX, CSL-JSON or CSV bibliography (by extension), once per process and file version.

    Bad entries become ``file:line`` warnings on the result (``file:item N`` for CSL-JSON) and are
    skipped; an InputError when the file is missing, of an unknown kind, unreadable as a whole, or holds
    no usable entry."""
    p = Path(path).expanduser()
    if not p.is_file():
        what = "is a folder" if p.is_dir() else "not found"
        raise InputError(f"bibliography {p} {what}; pass --bibliography FILE, a BibTeX (.bib), CSL-JSON (.json) "
                         "or CSV (.csv: title, authors, year) file")
    ext = p.suffix.lower()
    if ext not in FORMATS:
        raise InputError(f"bibliography {p}: unknown format {p.suffix or '(no extension)'!r}; give a .bib (BibTeX), "
                         ".json (CSL-JSON) or .csv (columns title, authors, year) file")
    st = p.stat()
    key = (str(p.resolve()), st.st_mtime_ns, st.st_size)
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
    if hit is not None:
        return hit
    try:
        text = p.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(f"bibliography {p}: not UTF-8 text ({e.reason} at byte {e.start}); save it as UTF-8") from None
    reader = {".bib": parse_bibtex, ".json": parse_csl_json, ".csv": parse_csv}[ext]
    works, warnings = reader(text, p.name)
    if not works:
        first = f" (first problem: {warnings[0]})" if warnings else ""
        raise InputError(f"bibliography {p}: no usable entry{first}; each needs at least a title")
    bib = Bibliography(works, name=p.name, warnings=warnings, path=str(p))
    with _CACHE_LOCK:
        for k in [k for k in _CACHE if k[0] == key[0]]:
            del _CACHE[k]  # an older version of the same file
        _CACHE[key] = bib
    return bib
