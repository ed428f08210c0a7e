"""Bibliography files: BibTeX (``.bib``), CSL-JSON (``.json``) and CSV (``.csv``, columns ``title``,
``authors``, ``year``) read into :class:`~halucheck.verifiers.tools.citations.records.Work` records, and
works written back as CSL-JSON. A bad entry (no title, an unclosed brace, a year that is no year) is a
``file:line`` warning (``file:item N`` for CSL-JSON) and the rest is read.

The BibTeX reader is this module's own (no dependency): ``@type{key, field = {...} | "..." | number |
macro, ...}`` with nested braces, ``#`` concatenation, ``@string`` macros, ``@comment``/``@preamble``
skipped, ``(...)`` delimiters, LaTeX accents (``{\\"u}``, ``\\'e``, ``\\ss``, ``\\o``) and ``\\emph{...}``-style
commands turned into text. Each entry is parsed from its own ``@`` line to the next, so one broken entry
never swallows the rest. Authors are ``and``-separated, ``Last, First``, ``Last, Jr, First`` or
``First von Last``; ``and others`` marks an incomplete list; ``{Double Braced}`` names are institutions.
"""

from __future__ import annotations

import csv
import json
import os
import re
import unicodedata
from pathlib import Path
from typing import Iterable, Sequence

from halucheck.errors import InputError
from halucheck.text import SURROGATE_HINT, json_surrogates
from halucheck.verifiers.tools.citations.names import parse_name, split_authors, surname
from halucheck.verifiers.tools.citations.records import Work, year_of


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
        y = year_of(year)
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


CSL_EXAMPLE = ('list of items such as {"title": ..., "author": [{"family": ..., "given": ...}], '
               '"issued": {"date-parts": [[2019]]}}')


def parse_csl_json(text: str, name: str = "<json>") -> tuple[list[Work], list[str]]:
    """CSL-JSON (a list of items; ``{"items": [...]}`` too) -> (works, warnings): ``title``, ``author``
    (``{family, given}``, with particles, or ``{literal}``; a literal ``et al.``/``others`` marks an
    incomplete list), ``issued`` (``{"date-parts": [[year, ...]]}``, ``raw`` or ``literal``)."""
    try:
        data, replaced = json_surrogates(text, json.loads(text))
    except json.JSONDecodeError as e:
        raise InputError(f"{name}:{e.lineno}:{e.colno}: not valid JSON ({e.msg}); a CSL-JSON bibliography is a "
                         f"{CSL_EXAMPLE}") from None
    except RecursionError:
        raise InputError(f"{name}: nested too deeply to be a CSL-JSON bibliography; it is a {CSL_EXAMPLE}") from None
    except ValueError as e:  # a number of more than 4,300 digits
        raise InputError(f"{name}: cannot be read as JSON ({str(e).split(';')[0]}); write such numbers as strings: "
                         f"a CSL-JSON bibliography is a {CSL_EXAMPLE}") from None
    if isinstance(data, dict) and isinstance(data.get("items"), list):
        data = data["items"]
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise InputError(f"{name}: a CSL-JSON bibliography is a list of items, not {type(data).__name__}")
    works, warnings = [], [f"{name}: {replaced} {SURROGATE_HINT}"] if replaced else []
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
            nm = parse_name(a)
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
