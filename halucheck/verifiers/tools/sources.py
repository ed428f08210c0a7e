"""Citations of the corpus itself: an answer that names one of the corpus's documents as its source.

A RAG answer often says where it comes from: ``(source: products.md)``, ``according to support.html``,
``[Source: Products]``. Each such reference is a claim of its own (kind ``source``) that the document exists
in the corpus index, checked without a model (:class:`SourceVerifier`); and the claims of the sentence that
cites it are verified against that document's passages only (``halucheck run``), not against whatever the
corpus search finds elsewhere.

What counts as a reference (:func:`find_sources`): a file name with an extension the corpus can hold
(``products.md``, ``Q3-report.pdf``), anywhere; and the text of a source note, ``(source: X)`` /
``[sources: X]`` / ``(see X)`` / a line ``Source: X``, one reference per name where a note lists several
(``;`` or ``,`` between them; a locator such as ``p. 4`` is no name). A document answers to its file name
(with or without the extension, ``-`` and ``_`` read as spaces), its path under the corpus folder, and its
title (the first line of its text, without Markdown's ``#``); case, accents and punctuation aside
(:func:`name_key`). Given the corpus's names, the finder reads a name the way the corpus spells it, so a
file name with spaces or parentheses (``(source: Q3 report (draft) v2.md)``, ``per Company Facts 2023.txt``)
is one reference, the longest corpus name written there; a name the corpus lacks is read as written.
"""

from __future__ import annotations

import bisect
import os
import re
import time
import unicodedata
from dataclasses import dataclass
from pathlib import PurePath
from typing import Iterable, Sequence

from halucheck.records import Case, Turn, Verdict
from halucheck.text import sentence_spans
from halucheck.verifiers.base import Cost, Verifier, failed_verdict

# the ingester's file types (halucheck.ingest.SUPPORTED_SUFFIXES), as a regex alternative
_EXTENSIONS = r"md|markdown|txt|html?|pdf|docx|jsonl"
_FILE = re.compile(rf"(?<![\w/.:@-])([A-Za-z0-9_][\w\-./]*\.(?:{_EXTENSIONS}))(?![\w-])", re.IGNORECASE)
_FILE_END = re.compile(rf"\.(?:{_EXTENSIONS})(?![\w-])", re.IGNORECASE)
# where a source note's names begin: after "(source:" / "[see" (closed by a bracket) or a line "Source:"
_NOTE = re.compile(r"(?P<bracket>[(\[])\s*(?:sources?|see|ref|cf\.)(?!\w)\s*[:\-]?\s*"
                   r"|^[ \t]*sources?[ \t]*:[ \t]*", re.IGNORECASE | re.MULTILINE)
_LOCATOR = re.compile(r"(?:(?:pp?|pages?|para(?:graph)?|sec(?:tion)?|ch(?:ap(?:ter)?)?|lines?|fig(?:ure)?|"
                      r"table|slide|art(?:icle)?|§)\.?\s*)?\d[\w.\-\u2013/]*", re.IGNORECASE)
NOTE_CHARS = 120  # the longest name a note is read for when the corpus has no longer one
_NOT_WORD = re.compile(r"[^\w]+|_")
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


def find_sources(text: str, names: "SourceNames | None" = None) -> list[SourceRef]:
    """The corpus-document references in ``text``, in order (see the module doc). A source note naming
    several documents (``source: a.md; b.md``) gives one reference per name in it. ``names``: the corpus's
    document names; a name it holds is read whole however it is spelled (spaces, parentheses, accents),
    the longest one written at that place."""
    files = [(m.start(1), m.start(1) + len(m.group(1).rstrip(".")))
             for m in _FILE.finditer(text) if not _WEB.search(text[max(0, m.start() - 40):m.end()])]
    refs: list[SourceRef] = []
    taken: list[tuple[int, int]] = []  # the spans of ``refs``, in order (they never overlap)

    def add(ref: SourceRef) -> None:
        i = bisect.bisect_left(taken, (ref.end,))  # the first reference starting at or after this one's end
        if not (i and taken[i - 1][1] > ref.start):
            taken.insert(i, (ref.start, ref.end))
            refs.append(ref)

    for m in _NOTE.finditer(text):
        for ref in _note_refs(text, m.end(), bool(m.group("bracket")), files, names):
            add(ref)
    if names is not None:  # a corpus file name written in the text, spaces and all
        for m in _FILE_END.finditer(text):
            span = _written_file_name(text, m.end(), names)
            if span:
                add(SourceRef(text[span[0]:span[1]], *span))
    for s, e in files:
        add(SourceRef(text[s:e], s, e))
    return sorted(refs, key=lambda r: r.start)


def _note_end(text: str, pos: int, bracket: bool, limit: int) -> int | None:
    """Where the names of a note starting at ``pos`` end: its closing bracket (brackets inside a name are
    balanced) or, for a ``Source:`` line, the line's end; None: the note is not closed in ``limit``."""
    depth = 0
    for i in range(pos, min(len(text), pos + limit)):
        ch = text[i]
        if ch == "\n":
            return None if bracket else i
        if bracket and ch in "([":
            depth += 1
        elif bracket and ch in ")]":
            if depth == 0:
                return i
            depth -= 1
    return None if bracket or pos + limit < len(text) else len(text)


def _separator(text: str, pos: int, end: int) -> int:
    """The next ``;`` or ``,`` outside brackets in ``text[pos:end]`` (``end`` if none)."""
    depth = 0
    for i in range(pos, end):
        ch = text[i]
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth = max(0, depth - 1)
        elif ch in ";," and depth == 0:
            return i
    return end


def _trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    """``start:end`` without surrounding blanks and quotes and a closing full stop."""
    while start < end and (text[start].isspace() or text[start] in "\"'\u201c\u201d"):
        start += 1
    while end > start and (text[end - 1].isspace() or text[end - 1] in "\"'\u201c\u201d."):
        end -= 1
    return start, end


def _note_refs(text: str, pos: int, bracket: bool, files: list[tuple[int, int]],
               names: "SourceNames | None") -> list[SourceRef]:
    """The names a source note lists from ``pos`` on: each the longest corpus name written there, else the
    text up to the next separator (its file names, where it is no file name itself; nothing if a locator)."""
    limit = max(NOTE_CHARS, 2 * names.longest + 40) if names is not None else NOTE_CHARS
    end = _note_end(text, pos, bracket, limit)
    if end is None:
        return []
    refs: list[SourceRef] = []
    while pos < end:
        pos, _ = _trimmed(text, pos, end)
        if pos >= end:
            break
        known = _known_name(text, pos, end, names) if names is not None else None
        stop = _separator(text, known or pos, end)
        if known:
            refs.append(SourceRef(text[pos:known], pos, known))
        else:
            refs += _written_name(text, *_trimmed(text, pos, stop), files, names)
        pos = stop + 1
    return refs


def _known_name(text: str, pos: int, end: int, names: "SourceNames") -> int | None:
    """The end of the longest corpus name ``text[pos:end]`` starts with, followed by nothing but a
    separator or a locator (``, p. 4``); None if there is none."""
    best = None
    for j in range(pos + 1, min(end, pos + 2 * names.longest + 8) + 1):
        if j < end and (text[j].isalnum() or text[j] == "_") or not (text[j - 1].isalnum() or text[j - 1] in "_)]"):
            continue  # not the end of a word
        if name_key(text[pos:j]) in names.by_key:
            rest = text[slice(*_trimmed(text, j, _separator(text, j, end)))]
            if not rest or _LOCATOR.fullmatch(rest):
                best = j
    return best


def _written_name(text: str, start: int, end: int, files: list[tuple[int, int]],
                  names: "SourceNames | None") -> list[SourceRef]:
    """The reference(s) in one name of a note that is not (the start of) a corpus name."""
    name = text[start:end]
    if len(name) < 2 or _WEB.search(name) or name.lower().startswith("http"):
        return []
    first = bisect.bisect_left(files, (start,))
    inner = [SourceRef(text[s:e], s, e) for s, e in files[first:bisect.bisect_left(files, (end,), first)] if e <= end]
    if names is not None and any(names.resolve(r.name) for r in inner):
        return inner  # "(see the manual in products.md)": the corpus's file
    extensions = [m.end() for m in _FILE_END.finditer(name)]
    if extensions == [len(name)]:
        return [SourceRef(name, start, end)]  # one file name, spaces and all
    if inner:
        return inner
    return [] if _LOCATOR.fullmatch(name) else [SourceRef(name, start, end)]


def _written_file_name(text: str, end: int, names: "SourceNames") -> tuple[int, int] | None:
    """The longest corpus file name (or path) written in ``text`` up to ``end`` (the end of its
    extension), starting at a word: its span, or None."""
    best = None
    for s in range(end - 1, max(-1, end - 2 * names.longest - 8), -1):
        ch = text[s]
        if ch == "\n":
            break
        if (ch.isalnum() or ch == "_") and (s == 0 or text[s - 1].isspace() or text[s - 1] in "([{\"'\u201c\u2018:"):
            if name_key(text[s:end]) in names.file_keys and not _WEB.search(text[max(0, s - 40):end]):
                best = (s, end)
    return best


def name_key(name: str) -> str:
    """A name as compared: accents, case and punctuation removed, ``-``/``_``/``.`` read as spaces."""
    text = name
    if not text.isascii():  # (plain ASCII has no accents to take off)
        text = "".join(ch for ch in unicodedata.normalize("NFKD", text) if not unicodedata.combining(ch))
    return " ".join(_NOT_WORD.sub(" ", text.casefold()).split())


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
        self.file_keys: set[str] = set()  # the keys of file names and paths, extension included
        self.longest = 0  # the longest name, in characters
        for source, text in sorted(documents):
            path = PurePath(source)
            names = {path.name, path.stem}
            files = {path.name}
            if root is not None:
                try:
                    files.add(str(path.relative_to(root)))
                except ValueError:
                    pass
            names |= files
            self.file_keys |= {name_key(f) for f in files}
            title = title_of(text or "")
            if title:
                names.add(title)
            for name in names:
                self.longest = max(self.longest, len(name))
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
    reads_prose = False
    uses_llm = False

    def describe(self) -> dict:
        return {"source": {"p_hallucinated": [P_FOUND, P_MISSING], "severity_not_found": SEVERITY_MISSING}}

    def verify(self, checks: Sequence[Case], engines=None, on_verdict=None, on_call=None) -> list[Verdict]:
        t0 = time.perf_counter()
        out = []
        for i, c in enumerate(checks):
            out.append(self.verdict(c))
            if on_verdict is not None:
                on_verdict(i, out[-1])
        self.costs = {self.name: Cost(claims=len(checks), wall_s=time.perf_counter() - t0)}
        return out

    def verdict(self, c: Case) -> Verdict:
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
