"""Check cited works against a bibliography: does the cited title exist, with that year and those authors?

The FacTool-style scientific-literature check, made deterministic: the citation is looked up in a
bibliography the user supplies and compared field by field; no model is asked anything.

**Bibliographies** (:func:`load_bibliography`): BibTeX (``.bib``), CSL-JSON (``.json``) or CSV
(``.csv``, columns ``title``, ``authors``, ``year``). Each file is parsed once per process: the result is
kept in memory, keyed by the file's resolved path, modification time and size, so a changed file is read
again and nothing is written to disk. A bad entry (no title, an unclosed brace, a year that is no year) is
a ``file:line`` warning (``file:item N`` for CSL-JSON) and the rest is loaded; a missing file, an unknown
extension or a file with no usable entry is an :class:`~halucheck.errors.InputError`.

The BibTeX reader is this module's own (no dependency): ``@type{key, field = {...} | "..." | number |
macro, ...}`` with nested braces, ``#`` concatenation, ``@string`` macros, ``@comment``/``@preamble``
skipped, ``(...)`` delimiters, LaTeX accents (``{\\"u}``, ``\\'e``, ``\\ss``, ``\\o``) and ``\\emph{...}``-style
commands turned into text. Each entry is parsed from its own ``@`` line to the next, so one broken entry
never swallows the rest. Authors are ``and``-separated, ``Last, First``, ``Last, Jr, First`` or
``First von Last``; ``and others`` marks an incomplete list; ``{Double Braced}`` names are institutions.

**Citations in text** (:func:`parse_citation`, :func:`find_citations`), by regular expressions:

- ``Devlin et al. (2018). BERT: Pre-training of ...`` and APA ``Vaswani, A., Shazeer, N., ... (2017).
  Attention is all you need.`` (authors at the start of a line, ``(year)`` then ``.`` or ``:``, then the
  title up to the first full stop);
- ``"Attention Is All You Need" by Vaswani et al., 2017`` (also ``(2017)``, ``published in 2017``, no year;
  quotes ``"…"``, ``“…”``, ``'…'``, ``‘…’`` or ``*…*``);
- ``"Title" (Vaswani et al., 2017)``, and unquoted ``Title (Author1, Author2, 2019)`` when it is the whole
  line of a list item (or the whole text given to :func:`parse_citation`);
- ``Breiman et al. (2001) titled 'Random Forests'``, IEEE ``A. Vaswani et al., "Attention is all you
  need," in Proc. NeurIPS, 2017.``;
- labelled ``Title: ...; Authors: ...; Year: 2020`` (``;`` or new lines between the three).

Not handled: author-year citations without a title (``(Devlin et al., 2018)``: there is no title to look
up), numbered references pointing elsewhere (``[3]``), unquoted titles inside running prose, titles that
hold ``. `` (``vs. Placebo``; a title is cut at its first full stop unless quoted), author lists written
``Smith, John, Doe, Jane`` (commas between surname and a full given name read as separate authors:
give initials, ``Smith, J.``, or use ``;`` between authors), and non-Latin scripts' capitalisation.

**Matching** (:func:`match`): titles are compared after folding (case, diacritics, punctuation,
whitespace, ``&`` = ``and``) with :class:`difflib.SequenceMatcher`'s ratio; a record at or above
:data:`TITLE_THRESHOLD` is the work when, besides, every content word of each title has a counterpart in
the other spelled the same or nearly (a word ratio of :data:`WORD_SIMILARITY`: plurals, British spelling,
typos; never a negated word, ``supervised``/``unsupervised``, nor another number): a character ratio alone
lets a long title with one word swapped through. Among such records the most similar wins (one whose year
and authors agree first). A cited title without a subtitle is also compared with the record's title before
its colon. The year must be equal (an unstated year, cited or recorded, is not checked).
Every cited author's surname must be among the record's authors: initials and given names are ignored,
diacritics folded, particles (``von``, ``van der``) optional, ``et al.`` allowed (the named authors must
be there, the rest is not asked for). Author order is not checked. Against a record whose own list is
incomplete (``and others``, ``et al.``), the first cited author must be listed and later cited authors
the record does not list are reported as unverified, not as wrong.
"""

from __future__ import annotations

import csv
import difflib
import json
import os
import re
import threading
import time
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Literal, Sequence

from halucheck.errors import ConfigError, InputError
from halucheck.records import Check, Turn, Verdict
from halucheck.verifiers.base import Cost, Verifier, failed_verdict

# A cited title matches a record when their folded forms have a SequenceMatcher ratio of at least this.
# Why 0.90: folding already removes case, punctuation, diacritics and spacing, so what is left for the ratio
# is wording. Chosen on factool-sci's dev split: the closest two *different* titles there score 0.846
# ("Sentiment Analysis of Twitter Data using Natural Language Processing Techniques" vs "A Sentiment Analysis
# Approach for Social Media Data Using ..."), while spelling variants of one title score 0.94-1.0
# ("Multitask"/"multi-task" 0.99, "Organizational"/"Organisational" 0.99, "Random Forests"/"Random Forest"
# 0.96, an extra word in a long title 0.94). Titles that reuse a real one's words with one content word
# changed fall below it ("Human-level control through deep reinforcement learning" vs "... deep learning":
# 0.85; "Mask R-CNN" vs "Fast R-CNN": 0.80; "Personal and Contextual Factors" vs "Personal and Situational
# Factors": 0.89): a lower bar would take such inventions as found, judged on year and authors only. Above
# the bar, the content-word check (_changed_words) still turns away a title with a word swapped or added,
# which a character ratio cannot see in a long title ("... are Supervised Multitask Reasoners": 0.93).
TITLE_THRESHOLD = 0.90
P_MATCHED = 0.02  # p_hallucinated of a citation found with its year and authors (a deterministic check)
P_WRONG = 0.98  # ... of one that is not found, or found with a wrong year or author
SEVERITY_NOT_FOUND = 4  # no such work: the citation is invented
SEVERITY_WRONG_FIELD = 2  # a real work with a wrong year or author: a detail is wrong, the work exists

Failure = Literal["title", "year", "author"]

# ---------------------------------------------------------------- folding and names

_SPECIAL = str.maketrans({"ø": "o", "Ø": "O", "æ": "ae", "Æ": "AE", "œ": "oe", "Œ": "OE", "ß": "ss", "ł": "l",
                          "Ł": "L", "đ": "d", "Đ": "D", "ð": "d", "Ð": "D", "þ": "th", "Þ": "TH", "ı": "i",
                          "’": "'", "‘": "'", "‐": "-", "‑": "-", "–": "-", "—": "-"})


def fold(text: str) -> str:
    """Lower case, diacritics and ligatures folded (``Lüscher`` -> ``luscher``, ``Veierød`` -> ``veierod``)."""
    text = unicodedata.normalize("NFKD", text.translate(_SPECIAL))
    return "".join(c for c in text if not unicodedata.combining(c)).lower()


def normalize_title(title: str) -> str:
    """The form titles are compared in: folded, ``&`` read as ``and``, punctuation as space, spaces collapsed."""
    text = fold(title).replace("&", " and ")
    text = re.sub(r"['`]", "", text)  # "Founders'" / "Founder's" -> one word
    return " ".join(re.sub(r"[\W_]+", " ", text).split())


_PARTICLES = frozenset("von van der den de du da di del della des la le dos das ter ten zu vom".split())
_SUFFIXES = frozenset("jr jr. sr sr. ii iii iv".split())
_INSTITUTION_WORDS = frozenset(
    "network consortium group collaboration team committee association organization organisation society "
    "institute project council agency foundation university center centre department office board".split())
_INITIALS = re.compile(r"^(?:[^\W\d_]\.?\s*-?\s*){1,4}$")


def _is_initials(token: str) -> bool:
    """``A.``, ``R. H. L.``, ``J.M.``, ``X.-L.``; or ``KF``/``J`` (Vancouver: up to 3 capitals, no dots)."""
    t = token.strip()
    if not t:
        return False
    if "." in t:
        return bool(_INITIALS.match(t)) and all(len(p.strip("-. ")) <= 1 for p in re.split(r"[.\s]+", t))
    return t.isalpha() and t.isupper() and len(t) <= 3


def _tokens(text: str) -> list[str]:
    return [t for t in re.sub(r"[^\w\s]", " ", fold(text).replace("'", "").replace("-", " ")).split() if t]


@dataclass(frozen=True)
class _Name:
    """A person's (or an institution's) name as its surname tokens and all its tokens, given names first."""

    surname: tuple[str, ...]
    tokens: tuple[str, ...]
    institution: bool = False


def _parse_name(name: str) -> _Name:
    """``Devlin, Jacob`` / ``Jacob Devlin`` / ``Chung KF`` / ``Ulrike von Luxburg`` / ``Cancer Genome Atlas
    Network`` -> surname and tokens (folded)."""
    name = " ".join(name.replace("{", "").replace("}", "").split()).strip(" ,;.")
    words = [w for w in name.split() if w.lower() not in _SUFFIXES]
    folded = _tokens(" ".join(words))
    if any(t in _INSTITUTION_WORDS for t in folded) and len(folded) >= 2:
        core = tuple(t for t in folded if t != "the")
        return _Name(core, core, institution=True)
    if "," in name:
        last, _, first = name.partition(",")
        first_words = [w for w in first.replace(",", " ").split() if w.lower() not in _SUFFIXES]
        surname = tuple(_tokens(last))
        return _Name(surname, tuple(_tokens(" ".join(first_words))) + surname)
    if len(words) == 1:
        return _Name(tuple(folded), tuple(folded))
    if _is_initials(words[-1]) and not _is_initials(words[0]):  # Vancouver: "Chung KF", "Maini RN"
        surname = tuple(_tokens(" ".join(words[:-1])))
        return _Name(surname, tuple(_tokens(words[-1])) + surname)
    i = len(words) - 1
    while i > 0 and words[i - 1] in _PARTICLES:  # "Ulrike von Luxburg", "von Luxburg"
        i -= 1
    surname = tuple(_tokens(" ".join(words[i:])))
    return _Name(surname, tuple(_tokens(" ".join(words[:i]))) + surname)


def surname(name: str) -> str:
    """The surname of a name as written, for display: ``Jacob Devlin`` -> ``Devlin``, ``Saks, A. M.`` -> ``Saks``."""
    name = " ".join(name.replace("{", "").replace("}", "").split()).strip(" ,;.")
    words = [w for w in name.split() if w.lower() not in _SUFFIXES]
    if not words:
        return name
    if any(t in _INSTITUTION_WORDS for t in _tokens(name)) and len(words) >= 2:
        return name
    if "," in name:
        return name.partition(",")[0].strip()
    if len(words) > 1 and _is_initials(words[-1]) and not _is_initials(words[0]):
        return " ".join(words[:-1])
    i = len(words) - 1
    while i > 0 and words[i - 1] in _PARTICLES:
        i -= 1
    return " ".join(words[i:])


def _same_person(cited: _Name, record: _Name) -> bool:
    """The cited name's surname is the record's (its last tokens; particles optional; institutions by words)."""
    if not cited.surname or not record.tokens:
        return False
    if cited.institution or record.institution:
        a, b = set(cited.tokens), set(record.tokens)
        return bool(a) and bool(b) and (a <= b or b <= a)
    forms = {cited.surname}
    bare = tuple(t for t in cited.surname if t not in _PARTICLES)
    if bare:
        forms.add(bare)
    return any(record.tokens[-len(f):] == f or record.surname == f for f in forms)


_ET_AL = re.compile(r"(?:,?\s*\bet\.?\s*al\b\.?|,?\s*\b(?:and|&)\s+(?:others|colleagues|co-?workers)\b\.?"
                    r"|,?\s*&\s*al\b\.?|\s*(?:\.\.\.|…)\s*,?)", re.IGNORECASE)


def split_authors(text: str) -> tuple[tuple[str, ...], bool]:
    """An author list as written -> (names, ``et_al``): ``et al.``, ``and colleagues``, ``and others`` or an
    APA ellipsis set ``et_al`` (the list is incomplete). Authors are separated by ``;`` when there is one
    (then each piece is one name, ``Last, First`` allowed), else by ``,``, ``and`` and ``&``; a piece that is
    only initials (``A. M.``) or a suffix (``Jr.``) belongs to the name before it (``Saks, A. M.``)."""
    s = " ".join((text or "").split())
    et_al = bool(_ET_AL.search(s))
    s = _ET_AL.sub(" ", s).replace("&", " and ")
    if ";" in s:
        pieces = [p for part in s.split(";") for p in re.split(r"\s+and\s+", part)]
        return tuple(n for n in (p.strip(" ,") for p in pieces) if n), et_al
    out: list[str] = []
    for piece in re.split(r"\s*,\s*(?:and\s+)?|\s+and\s+", s):
        piece = piece.strip(" ,")
        if not piece or piece.lower() == "and":
            continue
        if out and (_is_initials(piece) or piece.lower() in _SUFFIXES) and "," not in out[-1]:
            out[-1] = f"{out[-1]}, {piece}"
        else:
            out.append(piece)
    return tuple(n.rstrip(",") for n in out), et_al


# ---------------------------------------------------------------- records


@dataclass(frozen=True)
class Work:
    """One work of a bibliography. ``authors``: full names or surnames, as the source gives them;
    ``et_al``: the source's author list is incomplete (``and others``); ``key``: the BibTeX key or CSL id
    (else a position); ``source``: where it was read, ``file:line``."""

    title: str
    authors: tuple[str, ...] = ()
    year: int | None = None
    key: str = ""
    source: str = ""
    et_al: bool = False

    def surnames(self) -> list[str]:
        return [surname(a) for a in self.authors]

    def describe(self) -> str:
        """``"BERT: ..." (Devlin, Chang, Lee, Toutanova 2019)``."""
        names = self.surnames()
        shown = ", ".join(names[:6]) + (f" +{len(names) - 6} more" if len(names) > 6 else "")
        shown += " et al." if self.et_al else ""
        inside = " ".join(x for x in (shown, str(self.year) if self.year is not None else "") if x)
        return f'"{self.title}"' + (f" ({inside})" if inside else "")


@dataclass(frozen=True)
class Citation:
    """A citation as written in an answer: its title, its authors (``et_al``: the list ends in *et al.*),
    its year; ``text``: the citation's own text, where it was found in one."""

    title: str
    authors: tuple[str, ...] = ()
    year: int | None = None
    et_al: bool = False
    text: str = ""

    @classmethod
    def of(cls, title: str, authors: str | Sequence[str] | None = None, year: int | str | None = None,
           text: str = "") -> "Citation":
        """From fields: ``authors`` a written list (``"Devlin et al."``, ``"Saks, A. M."``) or a list of
        names; ``year`` an int or text holding one (none, or no 4-digit number: not checked)."""
        if isinstance(authors, str) or authors is None:
            names, et_al = split_authors(authors or "")
        else:
            names, et_al = split_authors("; ".join(str(a) for a in authors))
        return cls(title=" ".join(str(title).split()), authors=names, year=_year(year), et_al=et_al, text=text)

    def describe(self) -> str:
        """``"BERT: ..." (Devlin et al., 2018)``."""
        names = [surname(a) for a in self.authors]
        shown = (" and ".join(names) if len(names) <= 2 else ", ".join(names)) if names else ""
        if self.et_al:
            shown = f"{shown} et al." if shown else "et al."
        inside = ", ".join(x for x in (shown, str(self.year) if self.year is not None else "") if x)
        return f'"{self.title}"' + (f" ({inside})" if inside else "")


def _year(value) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    m = re.search(r"(?<!\d)(\d{4})(?!\d)", str(value))
    return int(m.group(1)) if m else None


# ---------------------------------------------------------------- bibliographies


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
        self._names = [tuple(_parse_name(a) for a in w.authors) for w in self.works]
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


_STOP = frozenset("a an the of and or in on for to with by from at is are as its via into".split())


def _index_words(norm: str) -> set[str]:
    return {w for w in norm.split() if w not in _STOP and (len(w) >= 3 or w.isdigit())}


def _ratio(a: str, b: str) -> float:
    if a == b:
        return 1.0
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


def title_similarity(a: str, b: str) -> float:
    """SequenceMatcher ratio of two titles' folded forms (:func:`normalize_title`), 0..1."""
    return _ratio(normalize_title(a), normalize_title(b))


_NEGATING_PREFIXES = ("un", "in", "im", "il", "ir", "non", "dis", "a", "an", "anti", "counter", "mis")
WORD_SIMILARITY = 0.8  # two title words are one word spelled two ways at or above this ratio


def _content_words(title: str) -> list[str]:
    """A title's words that carry content: folded, hyphens and apostrophes closed up (``multi-task`` ->
    ``multitask``), stop words and one- or two-letter words left out (numbers kept)."""
    text = re.sub(r"['`\-‐‑]", "", fold(title).replace("&", " and "))
    return [w for w in re.sub(r"[\W_]+", " ", text).split() if w not in _STOP and (len(w) >= 3 or w.isdigit())]


def _same_word(a: str, b: str) -> bool:
    """Equal, or the same word spelled otherwise (plural, British/American spelling, a typo): a ratio of at
    least :data:`WORD_SIMILARITY`, unless one is the other with a negating prefix (``supervised`` /
    ``unsupervised``, ``direct`` / ``indirect``). Numbers must be equal."""
    if a == b:
        return True
    if a.isdigit() or b.isdigit():
        return False
    short, long_ = sorted((a, b), key=len)
    if long_.endswith(short) and long_[: len(long_) - len(short)] in _NEGATING_PREFIXES:
        return False
    return _ratio(a, b) >= WORD_SIMILARITY


def _unmatched(a: list[str], b: list[str]) -> list[str]:
    """Words of ``a`` with no counterpart in ``b`` (:func:`_same_word`). A word written as two (``pre
    training``, ``data set``) is one: joined with a neighbour it may equal a word of the other title, or
    equal two neighbours of it joined (equal, not merely close: a joined word is long enough for a close
    ratio to hide a changed word)."""
    joined_b = {x + y for x, y in zip(b, b[1:])}
    out = []
    for k, w in enumerate(a):
        if any(_same_word(w, x) for x in b) or w in joined_b:
            continue
        if (k > 0 and a[k - 1] + w in b) or (k + 1 < len(a) and w + a[k + 1] in b):
            continue
        out.append(w)
    return out


def _changed_words(cited: str, recorded: str) -> tuple[list[str], list[str]] | None:
    """None when every content word of each title has a counterpart in the other (:func:`_same_word`);
    else (the cited title's words without one, the recorded title's words without one). A cited title
    without a colon is also compared with the recorded title before its colon (a subtitle left out)."""
    targets = [recorded] + ([recorded.split(":", 1)[0]] if ":" in recorded and ":" not in cited else [])
    a = _content_words(cited)
    result = None
    for target in targets:
        if normalize_title(cited).replace(" ", "") == normalize_title(target).replace(" ", ""):
            return None  # the same letters: only punctuation or spacing differ ("74-wk" / "74 wk")
        b = _content_words(target)
        ours, theirs = _unmatched(a, b), _unmatched(b, a)
        if not ours and not theirs:
            return None
        if result is None:
            result = (ours, theirs)
    return result


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


def _work(title, authors: str | Sequence[str], year, key: str, where: str, warnings: list[str],
          et_al: bool = False, year_where: str | None = None) -> Work | None:
    """A Work from raw fields, or None with a warning (no title); an unusable year is dropped with a warning
    (at ``year_where``, else ``where``)."""
    title = " ".join(str(title or "").split())
    if not title:
        warnings.append(f"{where}: no title; entry skipped")
        return None
    if isinstance(authors, str):
        names, more = split_authors(authors)
    else:
        names, more = tuple(a for a in authors if a), False
    y = None
    if year not in (None, ""):
        y = _year(year)
        if y is None:
            warnings.append(f"{year_where or where}: year {str(year)!r} is not a year; entry kept without one "
                            "(its year is not checked)")
    return Work(title=title, authors=names, year=y, key=key, source=where, et_al=et_al or more)


# BibTeX --------------------------------------------------------------------

_ACCENTS = {'"': "\u0308", "'": "\u0301", "`": "\u0300", "^": "\u0302", "~": "\u0303", "=": "\u0304",
            ".": "\u0307", "u": "\u0306", "v": "\u030c", "H": "\u030b", "c": "\u0327", "k": "\u0328",
            "r": "\u030a", "d": "\u0323", "b": "\u0331"}
_LETTERS = {"ss": "ß", "o": "ø", "O": "Ø", "ae": "æ", "AE": "Æ", "oe": "œ", "OE": "Œ", "aa": "å", "AA": "Å",
            "l": "ł", "L": "Ł", "i": "ı", "j": "ȷ"}
_ACCENT_CMD = re.compile(r"\\([\"'`^~=.]|[uvHckrdb](?![A-Za-z]))\s*(?:\{\s*(\\?[A-Za-z])\s*\}|(\\?[A-Za-z]))")
_LETTER_CMD = re.compile(r"\\(ss|ae|AE|oe|OE|aa|AA|o|O|l|L|i|j)(?![A-Za-z])\s*(?:\{\s*\})?")


_GREEK = {name: chr(code) for name, code in zip(
    "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi pi rho sigma tau upsilon phi chi psi "
    "omega".split(), [0x3B1, 0x3B2, 0x3B3, 0x3B4, 0x3B5, 0x3B6, 0x3B7, 0x3B8, 0x3B9, 0x3BA, 0x3BB, 0x3BC, 0x3BD, 0x3BE,
                      0x3C0, 0x3C1, 0x3C3, 0x3C4, 0x3C5, 0x3C6, 0x3C7, 0x3C8, 0x3C9])}
_GREEK.update({k.capitalize(): v.upper() for k, v in _GREEK.items()})
_GREEK_CMD = re.compile(r"\\(" + "|".join(sorted(_GREEK, key=len, reverse=True)) + r")(?![A-Za-z])\s*")


def latex_to_text(value: str) -> str:
    """LaTeX in a BibTeX value -> plain text: accents composed, ``\\ss`` -> ``ß``, escapes unescaped,
    other commands and braces dropped, ``~`` a space, ``--`` a dash."""
    def accent(m: re.Match) -> str:
        base = (m.group(2) or m.group(3) or "").lstrip("\\")  # \'{\i}: the dotless i takes the accent as i
        return unicodedata.normalize("NFC", base + _ACCENTS[m.group(1)])

    s = _ACCENT_CMD.sub(accent, value)
    s = _LETTER_CMD.sub(lambda m: _LETTERS[m.group(1)], s)
    s = re.sub(r"(?<!\\)\$", "", s)  # math shifts
    s = re.sub(r"\\([&%$#_{}])", r"\1", s)
    s = _GREEK_CMD.sub(lambda m: _GREEK[m.group(1)], s)
    s = re.sub(r"\\[A-Za-z]+\*?\s*", "", s)  # \emph, \textit, \url ...: keep their argument
    s = s.replace("{", "").replace("}", "").replace("~", " ").replace("---", "—").replace("--", "–")
    return unicodedata.normalize("NFC", " ".join(s.split()))


class _BibError(Exception):
    def __init__(self, pos: int | None, message: str) -> None:  # pos None: the entry's start
        super().__init__(message)
        self.pos, self.message = pos, message


_ENTRY_START = re.compile(r"^[ \t]*@", re.MULTILINE)
_IDENT = re.compile(r"[^\s\"#%'(),={}]+")


def parse_bibtex(text: str, name: str = "<bib>") -> tuple[list[Work], list[str]]:
    """BibTeX text -> (works, warnings). See the module docstring for what is read."""
    works: list[Work] = []
    warnings: list[str] = []
    macros: dict[str, str] = {m: m.capitalize() for m in
                              "jan feb mar apr may jun jul aug sep oct nov dec".split()}
    starts = [m.end() - 1 for m in _ENTRY_START.finditer(text)]
    seen_keys: dict[str, str] = {}

    def line_of(pos: int) -> int:
        return text.count("\n", 0, pos) + 1

    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(text)
        chunk_end = end
        try:
            kind, key, fields, fpos = _bib_entry(text, start, chunk_end, macros)
        except _BibError as e:
            warnings.append(f"{name}:{line_of(start if e.pos is None else e.pos)}: {e.message}; entry skipped")
            continue
        if kind in ("comment", "preamble", "string"):
            continue
        where = f"{name}:{line_of(start)}"
        if key in seen_keys:
            warnings.append(f"{where}: key {key!r} again (first at {seen_keys[key]}); both kept")
        seen_keys.setdefault(key, where)
        names, et_al = _bib_names(fields.get("author") or fields.get("editor") or "")
        year_raw = fields.get("year") or fields.get("date")
        year_where = f"{name}:{line_of(fpos.get('year', fpos.get('date', start)))}"
        w = _work(latex_to_text(fields.get("title", "")), names, latex_to_text(year_raw) if year_raw else None, key,
                  where, warnings, et_al=et_al, year_where=year_where)
        if w is not None:
            works.append(w)
    return works, warnings


def _bib_entry(text: str, pos: int, end: int, macros: dict[str, str]):
    """Parse one ``@type{key, fields}`` starting at ``pos`` (the ``@``), not reading past ``end``.
    Returns (type, key, {field: raw value}, {field: position})."""
    i = pos + 1
    m = _IDENT.match(text, i)
    if not m or not m.group(0).isalpha():
        raise _BibError(pos, "'@' without an entry type (write @article{key, ...})")
    kind = m.group(0).lower()
    i = _skip_ws(text, m.end(), end)
    if i >= end or text[i] not in "{(":
        raise _BibError(i, f"@{kind} without an opening brace")
    close = "}" if text[i] == "{" else ")"
    if kind == "comment":
        return kind, "", {}, {}
    body_start = i + 1
    if kind == "preamble":
        _bib_value(text, _skip_ws(text, body_start, end), end, macros, close)
        return kind, "", {}, {}
    i = _skip_ws(text, body_start, end)
    if kind == "string":
        fields, fpos, i = _bib_fields(text, i, end, macros, close)
        for k2, v in fields.items():
            macros[k2] = v
        return kind, "", {}, {}
    m = re.compile(r"[^,\s}\)]+").match(text, i)
    if not m:
        raise _BibError(i, f"@{kind} without a key (write @{kind}{{key, title = {{...}}, ...}})")
    key = m.group(0)
    i = _skip_ws(text, m.end(), end)
    if i < end and text[i] == close:
        return kind, key, {}, {}
    if i >= end or text[i] != ",":
        raise _BibError(i, f"@{kind}{{{key}: expected ',' after the key")
    fields, fpos, i = _bib_fields(text, i + 1, end, macros, close)
    return kind, key, fields, fpos


def _skip_ws(text: str, i: int, end: int) -> int:
    while i < end and text[i].isspace():
        i += 1
    return i


def _bib_fields(text: str, i: int, end: int, macros: dict[str, str], close: str):
    fields: dict[str, str] = {}
    fpos: dict[str, int] = {}
    while True:
        i = _skip_ws(text, i, end)
        if i >= end:
            raise _BibError(None, f"entry not closed: '{close}' missing (unbalanced braces?)")
        if text[i] == close:
            return fields, fpos, i + 1
        if text[i] == ",":
            i += 1
            continue
        m = _IDENT.match(text, i)
        if not m:
            raise _BibError(i, f"expected a field name, found {text[i]!r}")
        fname = m.group(0).lower()
        at = i
        i = _skip_ws(text, m.end(), end)
        if i >= end or text[i] != "=":
            raise _BibError(at, f"field {fname!r} without '=' (write {fname} = {{...}})")
        i = _skip_ws(text, i + 1, end)
        value, i = _bib_value(text, i, end, macros, close)
        fields[fname] = value
        fpos[fname] = at
        i = _skip_ws(text, i, end)
        if i < end and text[i] not in ("," + close):
            raise _BibError(i, f"field {fname!r}: expected ',' or '{close}' after its value, found {text[i]!r}")


def _bib_value(text: str, i: int, end: int, macros: dict[str, str], close: str) -> tuple[str, int]:
    """``{...}`` (nested), ``"..."`` (braces inside balanced), a number or a macro, joined by ``#``."""
    parts = []
    while True:
        i = _skip_ws(text, i, end)
        if i >= end:
            raise _BibError(max(i - 1, 0), "value missing at the end of the entry")
        c = text[i]
        if c in '{"':
            j = _closing(text, i, end)
            if j >= end:
                raise _BibError(i, "unbalanced braces: a '{' is never closed" if c == "{" else
                                'a quoted value is never closed (missing ")')
            parts.append(text[i + 1:j])
            i = j + 1
        else:
            m = _IDENT.match(text, i)
            if not m:
                raise _BibError(i, f"expected a value ({{...}}, \"...\", a number or a @string name), found {c!r}")
            word = m.group(0)
            parts.append(word if word.isdigit() else macros.get(word.lower(), word))
            i = m.end()
        j = _skip_ws(text, i, end)
        if j < end and text[j] == "#":
            i = j + 1
            continue
        return "".join(parts), i


def _closing(text: str, i: int, end: int) -> int:
    """Where the value opened at ``text[i]`` closes: the ``}`` matching a ``{``, or for a ``"`` the next ``"``
    outside braces (backslash escapes skipped); ``end`` when it never does."""
    quote = text[i] == '"'
    depth, j = 0, i + 1 if quote else i
    while j < end:
        ch = text[j]
        if ch == "\\":
            j += 2
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0 and not quote:
                return j
        elif ch == '"' and quote and depth == 0:
            return j
        j += 1
    return end


def _split_top(value: str, sep: str) -> list[str]:
    """Split at ``sep`` (a word, case-insensitive) outside braces."""
    out, depth, cur = [], 0, []
    words = re.split(r"(\s+|[{}])", value)
    for w in words:
        if w == "{":
            depth += 1
        elif w == "}":
            depth -= 1
        if depth == 0 and w.lower() == sep:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(w)
    out.append("".join(cur))
    return [o.strip() for o in out]


def _bib_names(raw: str) -> tuple[list[str], bool]:
    """BibTeX ``author`` -> display names (``First von Last`` or ``Last, First``) and whether ``and others`` ends it."""
    if not raw.strip():
        return [], False
    names, et_al = [], False
    for part in _split_top(" ".join(raw.split()), "and"):
        if not part:
            continue
        if part.lower() in ("others", "et al.", "et al"):
            et_al = True
            continue
        if part.startswith("{") and part.endswith("}") and _split_top(part[1:-1], ",") == [part[1:-1].strip()]:
            names.append(latex_to_text(part))  # {Institution Name}: one literal name
            continue
        pieces = [latex_to_text(p) for p in _split_commas(part)]
        if len(pieces) >= 3:  # Last, Jr, First
            names.append(f"{pieces[0]}, {pieces[2]} {pieces[1]}".strip())
        elif len(pieces) == 2:
            names.append(f"{pieces[0]}, {pieces[1]}".strip(" ,"))
        else:
            names.append(pieces[0])
    return names, et_al


def _split_commas(part: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in part:
        depth += ch == "{"
        depth -= ch == "}"
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return [o.strip() for o in out]


# CSL-JSON ------------------------------------------------------------------


def parse_csl_json(text: str, name: str = "<json>") -> tuple[list[Work], list[str]]:
    """CSL-JSON (a list of items; ``{"items": [...]}`` too) -> (works, warnings): ``title``, ``author``
    (``{family, given}``, with particles, or ``{literal}``; a literal ``et al.``/``others`` marks an
    incomplete list), ``issued`` (``{"date-parts": [[year, ...]]}``, ``raw`` or ``literal``)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{name}:{e.lineno}:{e.colno}: not valid JSON ({e.msg}); a CSL-JSON bibliography is a "
                         "list of items such as {\"title\": ..., \"author\": [{\"family\": ..., \"given\": ...}], "
                         "\"issued\": {\"date-parts\": [[2019]]}}") from None
    if isinstance(data, dict) and isinstance(data.get("items"), list):
        data = data["items"]
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise InputError(f"{name}: a CSL-JSON bibliography is a list of items, not {type(data).__name__}")
    works, warnings = [], []
    for n, item in enumerate(data):
        where = f"{name}:item {n}"
        if not isinstance(item, dict):
            warnings.append(f"{where}: not an object; entry skipped")
            continue
        if item.get("id") is not None:
            where += f" (id {item['id']})"
        title = item.get("title")
        if title is not None and not isinstance(title, str):
            warnings.append(f"{where}: title is not text; entry skipped")
            continue
        names, et_al, bad = [], False, False
        authors = item.get("author", [])
        if not isinstance(authors, list):
            warnings.append(f"{where}: author is not a list; entry skipped")
            continue
        for a in authors:
            if not isinstance(a, dict):
                bad = True
                break
            if a.get("literal"):
                lit = str(a["literal"]).strip()
                if lit.lower().strip(".") in ("et al", "others"):
                    et_al = True
                else:
                    names.append(lit)
                continue
            family = " ".join(str(a.get(k, "")).strip() for k in ("non-dropping-particle", "family") if a.get(k))
            given = " ".join(str(a.get(k, "")).strip() for k in ("given", "dropping-particle") if a.get(k))
            if not family:
                bad = True
                break
            names.append(f"{family}, {given}" if given else family)
        if bad:
            warnings.append(f"{where}: an author without family name or literal; entry skipped")
            continue
        w = _work(title, names, _csl_year(item.get("issued")), str(item.get("id", n)), where, warnings, et_al=et_al)
        if w is not None:
            works.append(w)
    return works, warnings


def _csl_year(issued):
    if issued is None:
        return None
    if isinstance(issued, (int, str)):
        return issued
    if isinstance(issued, dict):
        parts = issued.get("date-parts")
        if isinstance(parts, list) and parts and isinstance(parts[0], list) and parts[0]:
            return parts[0][0]
        return issued.get("raw") or issued.get("literal") or issued.get("season")
    return str(issued)


# CSV -----------------------------------------------------------------------


def parse_csv(text: str, name: str = "<csv>") -> tuple[list[Work], list[str]]:
    """CSV with a header: ``title`` (required), ``authors`` (or ``author``; separated by ``;`` or ``and``),
    ``year``; other columns ignored. Line numbers count the header as line 1."""
    lines = text.splitlines(keepends=True)
    reader = csv.reader(lines)
    try:
        header = next(reader)
    except StopIteration:
        return [], [f"{name}:1: empty file"]
    cols = {h.strip().lower(): k for k, h in enumerate(header)}
    if "title" not in cols:
        raise InputError(f"{name}:1: no 'title' column (found: {', '.join(header) or 'none'}); the header needs "
                         "title, authors, year")
    ta = cols.get("authors", cols.get("author"))
    ty = cols.get("year")
    works, warnings = [], []
    line = reader.line_num
    for row in reader:
        start, line = line + 1, reader.line_num
        if not any(c.strip() for c in row):
            continue
        where = f"{name}:{start}"
        if len(row) > len(header):
            warnings.append(f"{where}: {len(row)} fields, the header has {len(header)}; entry skipped "
                            "(quote fields that hold commas)")
            continue
        row += [""] * (len(header) - len(row))
        w = _work(row[cols["title"]], row[ta] if ta is not None else "", row[ty].strip() if ty is not None else None,
                  str(start), where, warnings)
        if w is not None:
            works.append(w)
    return works, warnings


def to_csl_json(works: Iterable[Work]) -> list[dict]:
    """Works -> CSL-JSON items (an incomplete author list ends in ``{"literal": "et al."}``)."""
    items = []
    for n, w in enumerate(works):
        authors = []
        for a in w.authors:
            nm = _parse_name(a)
            if nm.institution or ("," not in a and len(a.split()) == 1):
                authors.append({"literal": a} if nm.institution else {"family": a})
            elif "," in a:
                fam, _, giv = a.partition(",")
                authors.append({"family": fam.strip(), "given": giv.strip()})
            else:
                sn = surname(a)
                giv = a[: len(a) - len(sn)].strip() if a.endswith(sn) else a[len(sn):].strip()
                authors.append({"family": sn, "given": giv} if giv else {"family": sn})
        if w.et_al:
            authors.append({"literal": "et al."})
        item = {"id": w.key or str(n), "title": w.title, "author": authors}
        if w.year is not None:
            item["issued"] = {"date-parts": [[w.year]]}
        items.append(item)
    return items


def write_csl_json(works: Iterable[Work], path: str | os.PathLike) -> Path:
    """Write ``works`` as a CSL-JSON file (that :func:`load_bibliography` reads back); returns its path."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    items = [json.dumps(item, ensure_ascii=False) for item in to_csl_json(works)]
    p.write_text("[\n" + ",\n".join(items) + "\n]\n", encoding="utf-8")  # one work a line
    return p


# ---------------------------------------------------------------- finding citations in text

_UP = "".join(c for c in map(chr, range(0x41, 0x250)) if c.isupper() and c.isalpha())
_UPC = "[" + re.escape(_UP) + "]"
_PART = r"(?:von|van|der|den|de|du|da|di|del|della|des|la|le|dos|das|ter|ten|zu|vom)"
_TOKEN = rf"(?:{_UPC}\.(?:\s?-?{_UPC}\.)*|{_UPC}[\w'’\-]*)"
_NAME = rf"(?:{_PART}\s+)*{_TOKEN}(?:\s+(?:{_PART}\s+)*{_TOKEN}){{0,5}}"
_ELLIPSIS = r"(?:\.\.\.|…)"
_SEP = rf"(?:\s*,?\s*{_ELLIPSIS}\s*,?\s*(?:(?:and|&)\s*)?|\s*,\s*(?:(?:and|&)\s+)?|\s+and\s+|\s*&\s*)"
_ETAL = rf"(?:\s*,?\s*(?:et\.?\s*al\b\.?|and\s+(?:colleagues|others|co-?workers)\b|{_ELLIPSIS}))"
_AUTHORS = rf"{_NAME}(?:{_SEP}{_NAME}){{0,45}}{_ETAL}?"  # bounded: a long run of capitalised words stays linear
_YEAR = r"(?<!\d)(?P<{g}>(?:1[5-9]|20)\d{{2}})[a-z]?(?!\d)"


def _quoted(prefix: str) -> str:
    """A quoted (or *italic*) title; its group is named ``<prefix>_<kind>``."""
    return (rf"(?:\"(?P<{prefix}_q>[^\"\n]{{2,300}}?)\"|“(?P<{prefix}_c>[^”\n]{{2,300}}?)”"
            rf"|(?<![\w'’])'(?P<{prefix}_s>[^\n]{{2,300}}?)'(?!\w)|‘(?P<{prefix}_l>[^\n]{{2,300}}?)’(?!\w)"
            rf"|(?<![\w*])\*(?P<{prefix}_i>[^*\n]{{2,300}}?)\*(?![\w*]))")


_Y = _YEAR.format(g="year")
_Y2 = _YEAR.format(g="year2")
_Y3 = _YEAR.format(g="year3")
_Y4 = _YEAR.format(g="year4")
_ONE_YEAR = r"(?!\s*(?:,|and|&)\s*(?:1[5-9]|20)\d{2})"  # "published in 1994 and 2003 respectively": whose is whose?
_LABEL_SEP = r"\s*(?:;|\n|,(?=\s*(?i:authors?|year)\s*:))\s*"
_PATTERNS = [
    # Title: ...; Authors: ...; Year: 2020
    re.compile(rf"(?i:title)\s*:\s*(?P<title>[^;\n]+?){_LABEL_SEP}(?i:authors?)\s*:\s*(?P<authors>[^;\n]+?)"
               rf"{_LABEL_SEP}(?i:year)\s*:\s*{_Y}"),
    # "Title" by Authors (2017) / , 2017 / published in 2017 / (no year)
    re.compile(rf"{_quoted('t')}\s*,?\s*(?:by|from)\s+(?P<authors>{_AUTHORS})"
               rf"(?:\s*\(\s*(?:published\s+(?:in\s+)?)?{_Y}\s*\)|\s*,\s*(?:published\s+(?:in\s+)?)?{_Y2}{_ONE_YEAR}"
               rf"|\s+(?:published\s+)?in\s+{_Y3}{_ONE_YEAR}"
               rf"|\s*,?\s*published\s+in\s+[^\n\"“”‘(),;]{{1,100}}?\s+in\s+{_Y4}{_ONE_YEAR})?"),
    # "Title" (Authors, 2017)
    re.compile(rf"{_quoted('t')}\s*,?\s*\(\s*(?P<authors>{_AUTHORS})\s*,?\s*{_Y}\s*\)"),
    # Authors (2001) titled 'Title' / Authors (2017), "Title" / Authors titled 'Title' (2018)
    re.compile(rf"(?P<authors>{_AUTHORS})\s*(?:\(\s*{_Y}\s*\)\s*[.,:]?\s*(?:(?:titled|entitled|called|in\s+their\s+"
               rf"(?:paper|article|study)|in)\s+)?|,?\s+(?:titled|entitled|called)\s+)"
               rf"{_quoted('t')}(?:(?(year)|[^\n\"“”]{{0,120}}?{_Y2}\)?))?"),
    # IEEE: A. Vaswani et al., "Title," in ..., 2017 (the authors need an initial or et al.: see _IEEE_AUTHORS)
    re.compile(rf"(?P<authors>{_AUTHORS}),\s*{_quoted('t')}(?:[^\n\"“”]{{0,120}}?{_Y2})?"),
    # Authors published in <venue> in 2014 titled 'Title'
    re.compile(rf"(?P<authors>{_AUTHORS})\s+published\s+[^\n\"“”‘]{{0,100}}?{_Y}\s*,?\s*"
               rf"(?:titled|entitled|called)\s+{_quoted('t')}"),
    # ... a paper titled 'Title' (no authors named: the title alone is looked up)
    re.compile(rf"(?P<authors>)\b(?:titled|entitled)\s+{_quoted('t')}"),
]
_AUTHORS_FIRST = frozenset({3, 4, 5})  # the patterns above that start with the authors, not the quoted title
_IEEE = 4  # the index of the IEEE pattern above
_OPENING_QUOTE = re.compile(r"(?<!\w)[\"“‘'*]")
_WINDOW_BEFORE, _WINDOW_AFTER = 600, 800  # characters around an opening quote searched by those patterns
_IEEE_AUTHORS = re.compile(rf"(?:^|\s){_UPC}\.|\bet\.?\s*al\b")  # "Recently, 'Title'" is no citation
_LIST_MARKER = re.compile(r"^\s*(?:[-*•‣◦]|\d{1,3}[.)]|\[\d{1,3}\]|\(\d{1,3}\))\s+")
# Authors (2018). Title. ... — at the start of a line (after a list marker)
_APA = re.compile(rf"^(?P<authors>{_AUTHORS})\.?\s*\(\s*{_Y}\s*\)\s*[.:]\s*(?P<rest>\S.*)$")
# Title (Authors, 2019) — the whole line
_TITLE_PAREN = re.compile(rf"^(?P<title>[^()\n]{{3,300}}?)\s*\(\s*(?P<authors>{_AUTHORS})\s*,?\s*{_Y}\s*\)"
                          rf"\s*[.;,]?\s*$")
_TITLE_END = re.compile(r"(?<!\b[A-Z])\.(?=\s|$)")


def _title_of(m: re.Match, group: str = "t") -> str | None:
    for kind in "qcsli":
        g = f"{group}_{kind}"
        if g in m.re.groupindex and m.group(g) is not None:
            return m.group(g)
    return m.groupdict().get("title")


def _clean_title(title: str | None) -> str | None:
    if title is None:
        return None
    t = " ".join(title.split()).strip(" \"“”'‘’*_")
    t = t.rstrip(" ,;:").rstrip(".").strip()
    if len(t) < 2 or not re.search(r"[^\W\d_]", t):
        return None
    return t


def _year_of(m: re.Match) -> int | None:
    for g in ("year", "year2", "year3", "year4"):
        if g in m.re.groupindex and m.group(g):
            return int(m.group(g))
    return None


def _apa_title(rest: str) -> str | None:
    rest = rest.strip()
    for open_, close in (('"', '"'), ("“", "”"), ("*", "*"), ("‘", "’")):
        if rest.startswith(open_):
            end = rest.find(close, 1)
            if end > 1:
                return rest[1:end]
    m = _TITLE_END.search(rest)
    return rest[: m.start()] if m else rest


def _citation(title: str | None, authors: str, year: int | None, text: str) -> Citation | None:
    title = _clean_title(title)
    if title is None:
        return None
    if year is None and len(title.split()) < 2:
        return None  # a one-word quote with a capitalised word after "by" and no year: too weak a signal
    names, et_al = split_authors(authors)
    return Citation(title=title, authors=names, year=year, et_al=et_al, text=text.strip())


def _quote_windows(text: str) -> list[tuple[int, int]]:
    """Where the author-first patterns can match: around each opening quote, windows merged. Searching only
    there keeps the finder linear on long runs of capitalised names far from any quoted title."""
    out: list[tuple[int, int]] = []
    for m in _OPENING_QUOTE.finditer(text):
        lo, hi = max(0, m.start() - _WINDOW_BEFORE), min(len(text), m.start() + _WINDOW_AFTER)
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


def find_citations(text: str, whole: bool = False) -> list[tuple[Citation, tuple[int, int]]]:
    """Every citation found in ``text``, as (Citation, (start, end)) in text order; spans never overlap.

    The patterns are those of the module docstring: the quoted-title and labelled forms anywhere, the
    ``Authors (Year). Title`` form at the start of a line, and an unquoted ``Title (Authors, Year)`` only
    as a whole list-item line (or the whole text when ``whole``: :func:`parse_citation`'s case)."""
    found: list[tuple[Citation, tuple[int, int]]] = []

    def free(a: int, b: int) -> bool:
        return all(b <= s or a >= e for _, (s, e) in found)

    windows = _quote_windows(text)
    for k, pat in enumerate(_PATTERNS):
        spans = windows if k in _AUTHORS_FIRST else [(0, len(text))]
        for m in (m for lo, hi in spans for m in pat.finditer(text, lo, hi)):
            if not free(*m.span()):
                continue
            if k == _IEEE and not _IEEE_AUTHORS.search(m.group("authors")):
                continue
            title = m.group("title") if k == 0 else _title_of(m)
            c = _citation(title, m.group("authors"), _year_of(m), m.group(0))
            if c is not None:
                found.append((c, m.span()))
    offset = 0
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        marker = _LIST_MARKER.match(body)
        a = offset + (marker.end() if marker else len(body) - len(body.lstrip()))
        b = offset + len(body.rstrip())
        offset += len(line)
        seg = text[a:b]
        if not seg or not free(a, b):
            continue
        m = _APA.match(seg)
        if m:
            c = _citation(_apa_title(m.group("rest")), m.group("authors"), _year_of(m), seg)
            if c is not None:
                found.append((c, (a, b)))
                continue
        if marker or whole:
            m = _TITLE_PAREN.match(seg)
            if m:
                c = _citation(m.group("title"), m.group("authors"), _year_of(m), seg)
                if c is not None:
                    found.append((c, (a, b)))
    found.sort(key=lambda x: x[1])
    return found


def parse_citation(text: str) -> Citation | None:
    """The citation ``text`` holds (the first, if several), or None when it is not reference-shaped."""
    found = find_citations(text.strip(), whole=True)
    return found[0][0] if found else None


# ---------------------------------------------------------------- matching


@dataclass(frozen=True)
class MatchResult:
    """How a citation fares against a bibliography. ``failure``: the first field that failed (``title``:
    no such work; ``year``; ``author``), None when matched; ``candidate``: the record it was compared with
    (the closest title even when below the threshold; None for an empty pool); ``missing_authors``: cited
    names the record does not have; ``unverified_authors``: cited names a record with an incomplete list
    does not show; ``wrong_year``: the year differs (also set when an author failed too)."""

    citation: Citation
    matched: bool
    failure: Failure | None
    reason: str
    candidate: Work | None = None
    title_score: float = 0.0
    wrong_year: bool = False
    missing_authors: tuple[str, ...] = ()
    unverified_authors: tuple[str, ...] = ()

    @property
    def severity(self) -> int:
        return 0 if self.matched else SEVERITY_NOT_FOUND if self.failure == "title" else SEVERITY_WRONG_FIELD


def _author_check(c: Citation, names: Sequence[_Name], w: Work) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(missing, unverified) cited authors."""
    if not c.authors or not names:
        return (), ()
    missing = [a for a in c.authors if not any(_same_person(_parse_name(a), r) for r in names)]
    if w.et_al and missing:
        if c.authors[0] in missing:
            return tuple(missing[:1]), tuple(missing[1:])  # the lead must be among the listed authors
        return (), tuple(missing)
    return tuple(missing), ()


def match(citation: Citation, bibliography: Bibliography, threshold: float = TITLE_THRESHOLD) -> MatchResult:
    """Look ``citation`` up in ``bibliography``: the record with the most similar title at or above
    ``threshold`` (among those, one whose year and authors also agree wins), then its year and authors."""
    scored = bibliography.scored(citation.title, threshold)
    where = bibliography.name
    same = [(s, i) for s, i in scored
            if s >= threshold and not _changed_words(citation.title, bibliography.works[i].title)]
    if not same:
        best = bibliography.works[scored[0][1]] if scored else None
        score = scored[0][0] if scored else 0.0
        closest = ""
        if best is not None and score >= threshold:
            ours, theirs = _changed_words(citation.title, best.title)
            closest = (f"; closest: {best.describe()}, title similarity {score:.2f}, but its words differ: "
                       f"{', '.join(ours) or '(none)'} cited, {', '.join(theirs) or '(none)'} recorded")
        elif best is not None:
            closest = f"; closest: {best.describe()}, title similarity {score:.2f} < {threshold:.2f}"
        return MatchResult(citation, False, "title",
                           f"no work titled \"{citation.title}\" in {where} ({len(bibliography)} works){closest}",
                           best, score)
    options = []
    for score, i in same:
        w = bibliography.works[i]
        wrong_year = citation.year is not None and w.year is not None and citation.year != w.year
        missing, unverified = _author_check(citation, bibliography._names[i], w)
        rank = (not wrong_year and not missing, not missing, not wrong_year, score, -i)
        options.append((rank, w, score, wrong_year, missing, unverified))
    rank, w, score, wrong_year, missing, unverified = max(options, key=lambda o: o[0])
    problems = []
    if wrong_year:
        problems.append(f"year {citation.year} cited, {w.year} recorded")
    for a in missing:
        problems.append(f"author {surname(a)} not among the record's authors")
    failure: Failure | None = "year" if wrong_year else "author" if missing else None
    head = f"found {w.describe()} in {where}"
    if failure:
        return MatchResult(citation, False, failure, f"{head}: {'; '.join(problems)}", w, score, wrong_year,
                           missing, unverified)
    checked = [f"title ({score:.2f})"]
    checked.append(f"year {w.year}" if citation.year is not None and w.year is not None else
                   "year not checked (" + ("none cited" if citation.year is None else "none recorded") + ")")
    if citation.authors and w.authors:
        checked.append("authors " + ", ".join(surname(a) for a in citation.authors if a not in unverified))
    else:
        checked.append("authors not checked (" + ("none cited" if not citation.authors else "none recorded") + ")")
    note = ""
    if unverified:
        note = (f"; {', '.join(surname(a) for a in unverified)} not verifiable (the record lists only "
                f"{', '.join(w.surnames()) or 'no'} et al.)")
    return MatchResult(citation, True, None, f"{head}: {', '.join(checked)} match{note}", w, score, False, (),
                       unverified)


# ---------------------------------------------------------------- the verifier


class CitationVerifier(Verifier):
    """``citation``: each cited work of a claim is looked up in the bibliography of
    ``VerifierOptions.bibliography`` (:func:`match`); no model.

    The citations are ``check.meta["title"]`` / ``["authors"]`` / ``["year"]`` when the claim carries them
    (a labelled citation), ``check.meta["citations"]`` (a list of such dicts: every citation of a response),
    else every citation :func:`find_citations` finds in the claim's text (one, in a claim of kind
    ``citation``; a one-line text is read as :func:`parse_citation` reads it, so an unquoted ``Title
    (Authors, Year)`` counts there). Verdicts: all found with their year and authors -> factual, severity 0,
    ``p_hallucinated`` :data:`P_MATCHED`; a work that is not in the bibliography -> not factual, severity
    :data:`SEVERITY_NOT_FOUND` (4: the reference is invented); a real work cited with a wrong year or an
    author it does not have -> not factual, severity :data:`SEVERITY_WRONG_FIELD` (2: the work exists, a
    detail is wrong); ``p_hallucinated`` :data:`P_WRONG` for both (a deterministic check has no graded
    belief; 0.02/0.98 keep it a probability). Several citations: the worst one decides. No citation found
    -> a failed verdict saying so. The trace is one turn saying what was looked up and what was found.
    """

    name = "citation"
    uses_llm = False

    def bibliography(self) -> Bibliography:
        path = getattr(self.options, "bibliography", None)
        if not path:
            raise ConfigError("the citation check needs a bibliography: pass --bibliography FILE (BibTeX .bib, "
                              "CSL-JSON .json or CSV .csv with title, authors, year)")
        return load_bibliography(path)

    def check(self) -> None:
        self.bibliography()

    def describe(self) -> dict:
        out: dict = {"citation": {"title_threshold": TITLE_THRESHOLD, "word_similarity": WORD_SIMILARITY,
                                  "p_hallucinated": [P_MATCHED, P_WRONG],
                                  "severity": {"not_found": SEVERITY_NOT_FOUND,
                                               "wrong_year_or_author": SEVERITY_WRONG_FIELD}}}
        path = getattr(self.options, "bibliography", None)
        if path:
            try:
                bib = load_bibliography(path)
                out["citation"].update(bibliography=str(path), works=len(bib), bibliography_warnings=len(bib.warnings))
            except InputError:
                out["citation"]["bibliography"] = str(path)
        return out

    def verify(self, checks: Sequence[Check], engines=None, on_verdict=None, on_call=None) -> list[Verdict]:
        t0 = time.perf_counter()
        bib = self.bibliography()
        out = []
        for i, c in enumerate(checks):
            v = self.verdict(c, bib)
            out.append(v)
            if on_verdict is not None:
                on_verdict(i, v)
        self.costs = {self.name: Cost(claims=len(checks), wall_s=time.perf_counter() - t0)}
        return out

    @staticmethod
    def citations_of(c: Check) -> list[Citation]:
        meta = c.meta or {}
        if meta.get("title"):
            return [Citation.of(meta["title"], meta.get("authors"), meta.get("year"))]
        if isinstance(meta.get("citations"), list):
            return [Citation.of(x["title"], x.get("authors"), x.get("year"))
                    for x in meta["citations"] if isinstance(x, dict) and x.get("title")]
        text = c.claim.text.strip()
        return [cit for cit, _ in find_citations(text, whole="\n" not in text)]  # one line: read as parse_citation

    def verdict(self, c: Check, bib: Bibliography) -> Verdict:
        cits = self.citations_of(c)
        if not cits:
            return failed_verdict(self.name, "no citation found in the claim: give its title (quoted, or as "
                                  "'Authors (Year). Title.'), authors and year")
        results = [match(cit, bib) for cit in cits]
        lines = [f"cited {r.citation.describe()}: {r.reason}" for r in results]
        opinion = lines[0] if len(lines) == 1 else " ".join(f"[{k}] {line}" for k, line in enumerate(lines, 1))
        severity = max(r.severity for r in results)
        factual = severity == 0
        p = P_MATCHED if factual else P_WRONG
        turn = Turn(state="S0", role="initial", opinion=opinion, factuality=factual, error_severity=severity,
                    p_factual=1.0 - p, verifier=self.name)
        return Verdict(factuality=factual, error_severity=severity, confidence=1.0 - P_MATCHED, chain=[turn],
                       p_hallucinated=p, verifier=self.name)


__all__ = ["Bibliography", "Citation", "CitationVerifier", "MatchResult", "TITLE_THRESHOLD", "WORD_SIMILARITY", "Work",
           "find_citations", "fold", "latex_to_text", "load_bibliography", "match", "normalize_title", "parse_bibtex",
           "parse_citation", "parse_csl_json", "parse_csv", "split_authors", "surname", "title_similarity",
           "to_csl_json", "write_csl_json"]
