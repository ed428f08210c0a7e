"""Plain-text primitives every stage shares: where sentences end, which words carry no content, and the
code points that are not text (lone UTF-16 surrogates, replaced where text enters).

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
# ... except after a title, an initial or a case's "v." before a capitalised word ("Prof. Helen Marsh", "William O.
# Douglas", "Roe v. Wade"), and after "e.g.", "i.e.", "vs.", "cf." and initials ("a U.S. Supreme Court justice",
# "moved to the U.S. in 1990") on the same line (a sentence that ends with initials runs on: rarer than one that
# names them). "Jr.", "St." and "etc." end sentences too often to be kept in theirs.
_TITLE = re.compile(r"(?<![\w.])(?:Mr|Mrs|Ms|Mx|Dr|Prof|Rev|Fr|Gen|Col|Lt|Sgt|Capt|Cmdr|Adm|Gov|Sen|Rep|Hon|Pres|Mme|"
                    r"Mlle|v|[A-Z])\.\Z")
_LATIN = re.compile(r"(?<![\w.])(?:(?i:e\.g|i\.e|vs|cf)|(?:[A-Z]\.){1,2}[A-Z])\.\Z")
_NEXT = re.compile(r"[ \t]+(\S)")


def abbreviation_before(text: str, pos: int) -> bool:
    """Whether the full stop just before ``pos`` closes an abbreviation that a sentence goes on after: a title, an
    initial or "v." followed on the same line by a capitalised word, or "e.g.", "i.e.", "vs.", "cf." or initials
    ("U.S.") followed by anything."""
    head = text[max(0, pos - 6):pos]
    nxt = _NEXT.match(text, pos)
    if not head.endswith(".") or nxt is None:
        return False
    return bool(_LATIN.search(head) or (_TITLE.search(head) and nxt.group(1).isupper()))


def sentence_spans(text: str, line_breaks: bool = True, max_chars: int | None = None) -> list[tuple[int, int]]:
    """Sentence spans ``(start, end)`` of ``text``, whitespace trimmed, in order.

    ``line_breaks``: a single line break ends a sentence (answers); False: only a blank line does
    (documents). ``max_chars``: a longer sentence is cut at whitespace so that no span exceeds it (unless
    one word does).
    """
    boundary = _END_OR_LINE if line_breaks else _END_OR_BLANK_LINE
    spans: list[tuple[int, int]] = []
    start = 0
    ends = [m.end() for m in boundary.finditer(text) if not (m.group() == "." and abbreviation_before(text, m.end()))]
    for end in ends + [len(text)]:
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


# A "word" is at most MAX_WORD_CHARS characters: a longer run without spaces (a 100,000-character token, a
# base64 blob) counts as one word per MAX_WORD_CHARS characters, so the answer's word cap and the claim
# pieces' length (claims.units) bound its characters too.
MAX_WORD_CHARS = 64
_WORD = re.compile(rf"\S{{1,{MAX_WORD_CHARS}}}")


def word_spans(text: str):
    """(start, end) of each word of ``text``, lazily; see ``MAX_WORD_CHARS``."""
    return (m.span() for m in _WORD.finditer(text))


def sentences(text: str, line_breaks: bool = True) -> list[str]:
    """The sentences of ``text`` (see :func:`sentence_spans`)."""
    return [text[s:e] for s, e in sentence_spans(text, line_breaks)]


# scikit-learn's list holds words that change what a statement or a title says (negations, quantities,
# numbers and order, time and place relations, a few content words): they are never stop words here, so
# "not", "before", "two" or "Too" in "... Multitask Learners Too" count as content.
MEANINGFUL = frozenset("""
    no not nor never none nobody noone nothing nowhere neither cannot cant couldnt hasnt without except
    all any both each every few many more most much less least several some too very enough only whole alone
    one two three four five six eight nine ten eleven twelve fifteen twenty forty fifty sixty hundred
    first third last next former formerly latter latterly
    before after above below under over between against behind beyond across along among amongst around
    during since until within toward towards through throughout thru up down out off onto upon beside besides
    front back top bottom side always often sometimes sometime ever again already still yet once
    afterwards beforehand meanwhile hereafter thereafter whereafter
    bill call cry describe detail fill find fire found full empty interest mill move name part put see
    serious show system take thick thin give get go keep made sincere amount
""".split())


# U+D800..U+DFFF: half of a UTF-16 pair. A JSON escape like "\ud83d" without its other half decodes to one;
# it has no UTF-8 form, so DuckDB, tokenizers and files refuse the string that holds it.
_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def replace_surrogates(value):
    """``(value, n)``: ``value`` (a string, or what ``json.loads`` returns) with each of its ``n`` lone
    surrogates replaced by U+FFFD, in strings, list items and object keys and values; ``value`` itself when
    ``n == 0``. May raise RecursionError on data nested as deeply as ``json.loads`` allows."""
    if isinstance(value, str):
        return _SURROGATE.subn("\ufffd", value)
    if isinstance(value, list):
        pairs = [replace_surrogates(v) for v in value]
        n = sum(k for _, k in pairs)
        return ([v for v, _ in pairs] if n else value), n
    if isinstance(value, dict):
        pairs = [(replace_surrogates(k), replace_surrogates(v)) for k, v in value.items()]
        n = sum(k[1] + v[1] for k, v in pairs)
        return ({k[0]: v[0] for k, v in pairs} if n else value), n
    return value, 0


def json_surrogates(text: str, value):
    """:func:`replace_surrogates` for ``value`` parsed from the JSON ``text``; cheap when ``text`` has no
    ``\\uD8..`` to ``\\uDF..`` escape (the only way a surrogate gets into JSON decoded from UTF-8)."""
    return replace_surrogates(value) if _SURROGATE_ESCAPE.search(text) else (value, 0)


SURROGATE_HINT = ("lone UTF-16 surrogate escape(s) (like \"\\ud83d\" without its pair), which are not text, "
                  "replaced with U+FFFD; write the whole pair (\"\\ud83d\\ude00\") or the character itself")


@lru_cache(maxsize=1)
def stop_words() -> frozenset[str]:
    """English function words: scikit-learn's list less :data:`MEANINGFUL`, plus the small talk of chat
    answers ("sure", "well")."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return (frozenset(ENGLISH_STOP_WORDS) - MEANINGFUL) | {"also", "just", "like", "yes", "sure", "well"}


__all__ = ["MEANINGFUL", "SURROGATE_HINT", "json_surrogates", "replace_surrogates", "sentence_spans", "sentences",
           "stop_words"]
