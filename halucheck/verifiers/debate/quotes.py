"""Quote checks: what makes a debate stance count.

Every Trust and Skeptic stance carries one or two verbatim quotes, checked here after decoding:

* a quote from the passages (a stance that the text is *supported* or *contradicted*) is **verified** when,
  normalised, it occurs in one of the passages the agent was shown. Normalised = Unicode NFKC, case folded,
  accents dropped, every punctuation mark or symbol a space, runs of spaces one space: a quote that differs
  from the passage only in case, spacing, quotes or dashes is the passage's text; one changed word is not.
  A quote must hold at least ``MIN_QUOTE_WORDS`` words (or be a whole passage): "the" is in every passage.
  A quote that reached the schema's ``QUOTE_CHARS`` bound was cut by decoding, maybe mid-word: its last word
  may then be the start of the passage's word.
* a *not stated* stance quotes the part of the text it says no passage states. It is verified the other way:
  the span is in the text (normalised, as above) and **no passage supports it**. A passage supports a span
  when one of its sentences holds every content word of the span (stop words aside; numbers digit for digit;
  other words alike when equal or sharing their first ``STEM`` letters, so "founded" matches "founding").

A stance none of whose quotes is verified is **void**: it casts no vote and does not move the chain.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from typing import Sequence

from halucheck.records import Quote
from halucheck.text import sentences, stop_words

MIN_QUOTE_WORDS = 3
STEM = 5
QUOTE_CHARS = 400  # a quote's length bound in the reply schema: decoding closes the string there, mid-word
_WORD = re.compile(r"\w+")


@lru_cache(maxsize=65536)
def normalise(text: str) -> str:
    """Lower-case words separated by single spaces: no punctuation, symbols or accents."""
    text = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", text).casefold())
    out = []
    for ch in text:
        cat = unicodedata.category(ch)
        if cat == "Mn":  # a combining accent
            continue
        out.append(" " if cat[0] in "PSZC" else ch)
    return " ".join("".join(out).split())


def _contains(haystack: str, needle: str) -> bool:
    """Whole-word containment of normalised texts."""
    return f" {needle} " in f" {haystack} "


def find_in_passages(quote: str, passages: Sequence[str]) -> Quote:
    """Check a quote said to be taken from ``passages``."""
    q = normalise(quote)
    if not q:
        return Quote(quote, False, why="empty quote")
    cut = len(quote) >= QUOTE_CHARS  # decoding stopped at the bound, maybe mid-word
    for i, passage in enumerate(passages, 1):
        p = normalise(passage)
        found = _contains(p, q) or (cut and f" {q}" in f" {p}")
        if found and (len(q.split()) >= MIN_QUOTE_WORDS or q == p):
            return Quote(quote, True, i)
    if len(q.split()) < MIN_QUOTE_WORDS:
        return Quote(quote, False, why=f"shorter than {MIN_QUOTE_WORDS} words")
    return Quote(quote, False, why="not in the passages word for word")


def _content(text: str) -> list[str]:
    stops = stop_words()
    return [w for w in normalise(text).split() if w not in stops]


def _alike(a: str, b: str) -> bool:
    if a == b:
        return True
    if a.isdigit() or b.isdigit() or len(a) < STEM or len(b) < STEM:
        return False
    return a[:STEM] == b[:STEM]


def missing_words(passage: str, span: str, ignore: frozenset[str] = frozenset()) -> list[str]:
    """The content words of ``span`` (less ``ignore``) that ``passage`` has nowhere, as :func:`supports` compares."""
    have = set(normalise(passage).split())
    return [w for w in _content(span) if w not in ignore and not any(_alike(w, h) for h in have)]


def supports(passage: str, span: str) -> bool:
    """True when one sentence of ``passage`` holds every content word of ``span`` (see the module)."""
    return not _content(span) or supporting_sentence(passage, span) is not None  # stop words only: nothing to lack


def supporting_sentence(passage: str, span: str) -> str | None:
    """The first sentence of ``passage`` that holds every content word of ``span``, or None (also for a span
    with no content word)."""
    need = _content(span)
    if not need:
        return None
    for sentence in sentences(passage) or [passage]:
        have = set(normalise(sentence).split())
        if all(any(_alike(w, h) for h in have) for w in need):
            return sentence
    return None


def check_not_stated(span: str, text: str, passages: Sequence[str]) -> Quote:
    """Check a "not stated" quote: a span of the checked ``text`` that no passage supports."""
    s = normalise(span)
    if not s or not _content(span):
        return Quote(span, False, why="no content word")
    if not _contains(normalise(text), s):
        return Quote(span, False, why="not a part of the text checked")
    for i, passage in enumerate(passages, 1):
        if supports(passage, span):
            return Quote(span, False, i, why=f"passage [{i}] states it")
    return Quote(span, True)


def check_quotes(finding: str, quotes: Sequence[str], text: str, passages: Sequence[str]) -> tuple[str, tuple[Quote, ...]]:
    """Every quote of a stance checked the way its ``finding`` asks (see the module); returns the finding
    the quotes bear out with the checks. A "contradicted" stance none of whose quotes is in the passages
    but all of whose quotes are words of the checked text points at those words: it is checked as "not
    stated" (small models often quote the part they doubt instead of the passage that denies it)."""
    if finding == "contradicted":
        checks = tuple(find_in_passages(q, passages) for q in quotes)
        t = normalise(text)
        if not any(c.verified for c in checks) and all(normalise(q) and _contains(t, normalise(q)) for q in quotes):
            finding = "not stated"
        else:
            return finding, checks
    if finding == "not stated":
        return finding, tuple(check_not_stated(q, text, passages) for q in quotes)
    return finding, tuple(find_in_passages(q, passages) for q in quotes)


def is_void(checks: Sequence[Quote]) -> bool:
    """A stance with no verified quote casts no vote."""
    return not any(c.verified for c in checks)
