"""Plain-text primitives every stage shares: where sentences end, and which words carry no content.

One sentence splitter serves answers (claims, coverage, source lookup), documents (chunking for the
index) and agents' opinions; one stop-word list serves coverage, the eval's evidence selection and
bibliography matching. (BM25 retrieval keeps the analyzer of the bm25s library it runs on.)
"""

from __future__ import annotations

import re
from functools import lru_cache

_CLOSERS = "\"'\u201d\u2019)\\]"
# A sentence ends at . ! ? (with closing quotes or brackets) before whitespace or the end of the text:
# "4.2 million" and "v1.5" stay inside their sentence. In an answer a line break ends one too (lists,
# bullets); in a document only a blank line does (hard-wrapped lines are not sentences).
_END_OR_LINE = re.compile(rf"[.!?]+[{_CLOSERS}]*(?=\s|$)|\n")
_END_OR_BLANK_LINE = re.compile(rf"[.!?]+[{_CLOSERS}]*(?=\s|$)|\n[ \t]*\n")


def sentence_spans(text: str, line_breaks: bool = True, max_chars: int | None = None) -> list[tuple[int, int]]:
    """Sentence spans ``(start, end)`` of ``text``, whitespace trimmed, in order.

    ``line_breaks``: a single line break ends a sentence (answers); False: only a blank line does
    (documents). ``max_chars``: a longer sentence is cut at whitespace so that no span exceeds it (unless
    one word does).
    """
    boundary = _END_OR_LINE if line_breaks else _END_OR_BLANK_LINE
    spans: list[tuple[int, int]] = []
    start = 0
    for end in [m.end() for m in boundary.finditer(text)] + [len(text)]:
        _add_span(text, start, end, spans, max_chars)
        start = end
    return spans


def _add_span(text: str, start: int, end: int, spans: list, max_chars: int | None) -> None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    while max_chars is not None and end - start > max_chars:
        cut = text.rfind(" ", start + 1, start + max_chars)
        if cut <= start:
            cut = start + max_chars
        spans.append((start, cut))
        start = cut
        while start < end and text[start].isspace():
            start += 1
    if end > start:
        spans.append((start, end))


def sentences(text: str, line_breaks: bool = True) -> list[str]:
    """The sentences of ``text`` (see :func:`sentence_spans`)."""
    return [text[s:e] for s, e in sentence_spans(text, line_breaks)]


@lru_cache(maxsize=1)
def stop_words() -> frozenset[str]:
    """English function words: scikit-learn's list, plus the small talk of chat answers ("sure", "well")."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS) | {"also", "just", "like", "yes", "sure", "well"}


__all__ = ["sentence_spans", "sentences", "stop_words"]
