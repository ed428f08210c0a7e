"""The two records a citation check compares: a :class:`Work` of a bibliography and a :class:`Citation` as
written in an answer (title, authors, year)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from halucheck.verifiers.tools.citations.names import split_authors, surname


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
        return cls(title=" ".join(str(title).split()), authors=names, year=year_of(year), et_al=et_al, text=text)

    def describe(self) -> str:
        """``"BERT: ..." (Devlin et al., 2018)``."""
        names = [surname(a) for a in self.authors]
        shown = (" and ".join(names) if len(names) <= 2 else ", ".join(names)) if names else ""
        if self.et_al:
            shown = f"{shown} et al." if shown else "et al."
        inside = ", ".join(x for x in (shown, str(self.year) if self.year is not None else "") if x)
        return f'"{self.title}"' + (f" ({inside})" if inside else "")


def year_of(value) -> int | None:
    """The four-digit year in ``value`` (an int, or text such as "2017a" or "May 2019"), else None."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    m = re.search(r"(?<!\d)(\d{4})(?!\d)", str(value))
    return int(m.group(1)) if m else None
