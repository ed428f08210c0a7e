"""Reference-shaped citations found in text.

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
"""

from __future__ import annotations

import re

from halucheck.verifiers.tools.citations.names import split_authors
from halucheck.verifiers.tools.citations.records import Citation

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
