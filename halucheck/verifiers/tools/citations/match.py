"""A citation looked up in a bibliography: titles compared, then the year and the authors of the record found.

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

import difflib
import re
from dataclasses import dataclass
from typing import Literal, Sequence

from halucheck.text import stop_words
from halucheck.verifiers.tools.citations.bibliography import Bibliography
from halucheck.verifiers.tools.citations.names import (PersonName, fold, normalize_title, parse_name, same_person,
                                                       surname)
from halucheck.verifiers.tools.citations.records import Citation, Work

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
SEVERITY_NOT_FOUND = 4  # no such work: the citation is invented
SEVERITY_WRONG_FIELD = 2  # a real work with a wrong year or author: a detail is wrong, the work exists

Failure = Literal["title", "year", "author"]

# ---------------------------------------------------------------- comparing titles


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
    return [w for w in re.sub(r"[\W_]+", " ", text).split() if w not in stop_words() and (len(w) >= 3 or w.isdigit())]


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


def _author_check(c: Citation, names: Sequence[PersonName], w: Work) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(missing, unverified) cited authors."""
    if not c.authors or not names:
        return (), ()
    missing = [a for a in c.authors if not any(same_person(parse_name(a), r) for r in names)]
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
