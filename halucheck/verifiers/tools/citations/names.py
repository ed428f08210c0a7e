"""Folding text and reading names: the case-, diacritic- and punctuation-free forms titles and names are
compared in (:func:`fold`, :func:`normalize_title`), a person's (or an institution's) name as surname and
given names (``Last, First``, ``First von Last``, Vancouver ``Last FM``), and an author list as written split
into names (:func:`split_authors`, which also says whether the list ends in *et al.*)."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

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
class PersonName:
    """A person's (or an institution's) name as its surname tokens and all its tokens, given names first."""

    surname: tuple[str, ...]
    tokens: tuple[str, ...]
    institution: bool = False


def parse_name(name: str) -> PersonName:
    """``Devlin, Jacob`` / ``Jacob Devlin`` / ``Chung KF`` / ``Ulrike von Luxburg`` / ``Cancer Genome Atlas
    Network`` -> surname and tokens (folded)."""
    name = " ".join(name.replace("{", "").replace("}", "").split()).strip(" ,;.")
    words = [w for w in name.split() if w.lower() not in _SUFFIXES]
    folded = _tokens(" ".join(words))
    if any(t in _INSTITUTION_WORDS for t in folded) and len(folded) >= 2:
        core = tuple(t for t in folded if t != "the")
        return PersonName(core, core, institution=True)
    if "," in name:
        last, _, first = name.partition(",")
        first_words = [w for w in first.replace(",", " ").split() if w.lower() not in _SUFFIXES]
        surname = tuple(_tokens(last))
        return PersonName(surname, tuple(_tokens(" ".join(first_words))) + surname)
    if len(words) == 1:
        return PersonName(tuple(folded), tuple(folded))
    if _is_initials(words[-1]) and not _is_initials(words[0]):  # Vancouver: "Chung KF", "Maini RN"
        surname = tuple(_tokens(" ".join(words[:-1])))
        return PersonName(surname, tuple(_tokens(words[-1])) + surname)
    i = len(words) - 1
    while i > 0 and words[i - 1] in _PARTICLES:  # "Ulrike von Luxburg", "von Luxburg"
        i -= 1
    surname = tuple(_tokens(" ".join(words[i:])))
    return PersonName(surname, tuple(_tokens(" ".join(words[:i]))) + surname)


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


def same_person(cited: PersonName, record: PersonName) -> bool:
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
