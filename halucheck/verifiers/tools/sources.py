"""Citations of the corpus itself: an answer that names one of the corpus's documents as its source.

A RAG answer often says where it comes from: ``(source: products.md)``, ``according to support.html``,
``[Source: Products]``. Each such reference is a claim of its own (kind ``source``) that the document exists
in the corpus index, checked without a model (:class:`SourceVerifier`); and the claims of the sentence that
cites it are verified against that document's passages only (``halucheck run``), not against whatever the
corpus search finds elsewhere.

What counts as a reference (:func:`find_sources`): a file name with an extension the corpus can hold
(``products.md``, ``Q3-report.pdf``), anywhere; and the text of a source note, ``(source: X)`` /
``[sources: X]`` / ``(see X)`` / a line ``Source: X``. A document answers to its file name (with or without
the extension, ``-`` and ``_`` read as spaces), its path under the corpus folder, and its title (the first
line of its text, without Markdown's ``#``); case, accents and punctuation aside (:func:`name_key`).
"""

from __future__ import annotations

import os
import re
import time
import unicodedata
from dataclasses import dataclass
from pathlib import PurePath
from typing import Iterable, Sequence

from halucheck.records import Check, Turn, Verdict
from halucheck.text import sentence_spans
from halucheck.verifiers.base import Cost, Verifier, failed_verdict

# the ingester's file types (halucheck.ingest.SUPPORTED_SUFFIXES), as a regex alternative
_EXTENSIONS = r"md|markdown|txt|html?|pdf|docx|jsonl"
_FILE = re.compile(rf"(?<![\w/.:@-])([A-Za-z0-9_][\w\-./]*\.(?:{_EXTENSIONS}))(?![\w-])", re.IGNORECASE)
_NOTE = re.compile(r"[(\[]\s*(?:sources?|see|ref|cf\.)\s*[:\-]?\s*([^)\]\n]{2,120}?)\s*[)\]]"
                   r"|^[ \t]*sources?[ \t]*:[ \t]*(.{2,120}?)[ \t]*$", re.IGNORECASE | re.MULTILINE)
_WEB = re.compile(r"\b(?:www\.|[\w-]+\.(?:com|org|net|edu|gov|io|co)/)", re.IGNORECASE)
TITLE_WORDS = 14  # a first line longer than this is prose, not a title
P_FOUND, P_MISSING = 0.02, 0.98  # a lookup has no graded belief; these keep it a probability
SEVERITY_MISSING = 4  # the answer names a source the corpus does not have: the reference is invented


@dataclass(frozen=True)
class SourceRef:
    """A document an answer names as its source: the name as written and where it is in the text."""

    name: str
    start: int
    end: int


def find_sources(text: str) -> list[SourceRef]:
    """The corpus-document references in ``text``, in order (see the module doc). A source note naming
    several documents (``source: a.md, b.md``) gives one reference per file name in it."""
    refs: list[SourceRef] = []
    for m in _FILE.finditer(text):
        if not _WEB.search(text[max(0, m.start() - 40):m.end()]):  # a web address, not a corpus file
            refs.append(SourceRef(m.group(1).rstrip("."), m.start(1), m.start(1) + len(m.group(1).rstrip("."))))
    for m in _NOTE.finditer(text):
        group = 1 if m.group(1) is not None else 2
        s, e = m.start(group), m.end(group)
        if any(r.start < e and s < r.end for r in refs):  # a note naming a file: the file name is the reference
            continue
        name = m.group(group).strip().strip("\"'\u201c\u201d").rstrip(".")
        if name and not _WEB.search(name) and not name.lower().startswith("http"):
            refs.append(SourceRef(name, s, e))
    return sorted(refs, key=lambda r: r.start)


def name_key(name: str) -> str:
    """A name as compared: accents, case and punctuation removed, ``-``/``_``/``.`` read as spaces."""
    text = unicodedata.normalize("NFKD", name)
    text = "".join(ch for ch in text if not unicodedata.combining(ch)).casefold()
    return " ".join(re.sub(r"[^\w]+|_", " ", text).split())


def title_of(text: str) -> str | None:
    """A document's title: its first non-blank line without Markdown's ``#``, if it is short enough to be one."""
    for line in text.splitlines():
        line = line.strip().lstrip("#").strip()
        if line:
            return line if len(line.split()) <= TITLE_WORDS else None
    return None


class SourceNames:
    """Which corpus document a name refers to: ``resolve(name)`` -> its ``source`` (path), or None.

    Built from ``(source, text)`` pairs; ``root``: the corpus folder, so ``guides/setup.md`` names the
    document at ``root/guides/setup.md``. A name shared by several documents (two ``README.md``) refers to
    each; ``resolve`` then returns the first in path order (all of them are in the corpus)."""

    def __init__(self, documents: Iterable[tuple[str, str]], root: str | os.PathLike | None = None) -> None:
        self.by_key: dict[str, list[str]] = {}
        for source, text in sorted(documents):
            path = PurePath(source)
            names = {path.name, path.stem}
            if root is not None:
                try:
                    names.add(str(path.relative_to(root)))
                except ValueError:
                    pass
            title = title_of(text or "")
            if title:
                names.add(title)
            for name in names:
                key = name_key(name)
                if key and source not in self.by_key.setdefault(key, []):
                    self.by_key[key].append(source)

    @classmethod
    def of_index(cls, index, root: str | os.PathLike | None = None) -> "SourceNames":
        """The names of every document in a corpus index (:class:`halucheck.retrieval.Index`)."""
        return cls(index.documents(), root)

    def resolve(self, name: str) -> str | None:
        key = name_key(name)
        hits = self.by_key.get(key) or self.by_key.get(name_key(PurePath(name).stem)) if key else None
        return hits[0] if hits else None


def backing_sources(answer: str, start: int, end: int, refs: Sequence[SourceRef]) -> list[SourceRef]:
    """The references in the sentence(s) of ``answer`` that hold the span ``start:end`` (a claim located
    there): the sources that claim is said to come from."""
    spans = [(s, e) for s, e in sentence_spans(answer) if s < max(end, start + 1) and start < e]
    return [r for r in refs if any(s <= r.start < e for s, e in spans)]


class SourceVerifier(Verifier):
    """``source``: a claim of kind ``source`` (the name of a document the answer cites) is factual when the
    corpus has that document. The pipeline resolves the name (:class:`SourceNames`) and gives the claim the
    document's opening passage as evidence, or no evidence when there is none; this verifier reads that. No
    model. Not found -> not factual, severity :data:`SEVERITY_MISSING`."""

    name = "source"
    uses_llm = False

    def describe(self) -> dict:
        return {"source": {"p_hallucinated": [P_FOUND, P_MISSING], "severity_not_found": SEVERITY_MISSING}}

    def verify(self, checks: Sequence[Check], engines=None, on_verdict=None, on_call=None) -> list[Verdict]:
        t0 = time.perf_counter()
        out = []
        for i, c in enumerate(checks):
            out.append(self.verdict(c))
            if on_verdict is not None:
                on_verdict(i, out[-1])
        self.costs = {self.name: Cost(claims=len(checks), wall_s=time.perf_counter() - t0)}
        return out

    def verdict(self, c: Check) -> Verdict:
        name = c.claim.text.strip()
        if not name:
            return failed_verdict(self.name, "the claim names no document")
        found = sorted({e.source for e in c.evidence if e.source})
        if found:
            opinion, factual, severity, p = f"cites {name!r}: in the corpus as {found[0]}", True, 0, P_FOUND
        else:
            opinion, factual, severity, p = (f"cites {name!r}: no document of that file name or title in the "
                                             "corpus", False, SEVERITY_MISSING, P_MISSING)
        turn = Turn(state="S0", role="initial", opinion=opinion, factuality=factual, error_severity=severity,
                    p_factual=1.0 - p, verifier=self.name)
        return Verdict(factuality=factual, error_severity=severity, confidence=1.0 - P_FOUND, chain=[turn],
                       p_hallucinated=p, verifier=self.name)


__all__ = ["SourceNames", "SourceRef", "SourceVerifier", "backing_sources", "find_sources", "name_key", "title_of"]
