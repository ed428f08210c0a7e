"""Which words of an answer its claims check: each claim's span in the answer, and the text no claim covers.

An extractor can drop a fact ("... up 12 percent from 2022") while the sentence it sits in yields other
claims; highlighting whole sentences then paints the dropped fact as checked. Here coverage is measured
on content words (numbers, names and other words outside a stop list, lightly normalised):

- a claim covers the content words of its located sentence that it states itself;
- a claim's ``span`` is its whole sentence when it alone covers every content word there (and when none
  of its words matched); otherwise it runs from the first to the last word only it covers (all its
  words when it shares every one), so two claims of one sentence are highlighted apart;
- content words no claim covers form *gaps*, cut at each covered word. A gap is ``not checked`` when it
  holds a number, a capitalised word inside a sentence or at least two content words, ``subjective`` when
  its sentence has no claim and reads as dialogue or opinion (a question back, "I think", "feel free"),
  and ``filler`` otherwise (a lone "Interestingly,").

The matching is lexical: a claim that paraphrases the answer ("founded" for "set up") leaves those words
uncovered. That errs toward "not checked", the safe side for an audit.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

from halucheck.claims import looks_like_dialogue, sentences
from halucheck.text import stop_words

_WORD = re.compile(r"[^\W_]+(?:[.,'’][^\W_]+)*", re.UNICODE)
NOT_CHECKED, SUBJECTIVE, FILLER = "not checked", "subjective", "filler"


def _has_digit(word: str) -> bool:
    return not word.isalpha() and any(ch.isdigit() for ch in word)  # (most words are letters only)


def normalise(word: str) -> str:
    """Lower case, no possessive, numbers without thousands separators, a plural -s dropped."""
    w = word.lower().replace("’", "'")
    if w.endswith("'s"):
        w = w[:-2]
    if _has_digit(w):
        return w.replace(",", "")
    if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
        w = w[:-1]
    return w


def is_content(word: str) -> bool:
    if _has_digit(word):
        return True
    return len(word) > 2 and word.lower() not in stop_words()


@dataclass(frozen=True)
class Word:
    start: int
    end: int
    norm: str
    capital: bool  # capitalised and not the first word of its sentence: likely a name
    number: bool


@dataclass(frozen=True)
class Gap:
    start: int
    end: int
    kind: str  # NOT_CHECKED, SUBJECTIVE or FILLER

    def to_dict(self, answer: str) -> dict:
        return {"start": self.start, "end": self.end, "kind": self.kind, "text": answer[self.start:self.end]}


@dataclass(frozen=True)
class Coverage:
    """``spans``: per claim, its [start, end) in the answer; ``gaps``: uncovered text;
    ``checked_share``: covered content words / content words (1.0 for an answer without any)."""

    spans: list[tuple[int, int]]
    gaps: list[Gap]
    checked_share: float

    def not_checked(self) -> list[Gap]:
        return [g for g in self.gaps if g.kind == NOT_CHECKED]


def content_words(text: str, offset: int = 0) -> list[Word]:
    out = []
    for i, m in enumerate(_WORD.finditer(text)):
        w = m.group(0)
        read = _read(w)
        if read is not None:
            out.append(Word(offset + m.start(), offset + m.end(), read[0], capital=i > 0 and w[:1].isupper(),
                            number=read[1]))
    return out


@lru_cache(maxsize=1 << 16)
def _read(word: str) -> tuple[str, bool] | None:
    """A content word's normal form and whether it is a number; None for a word without content. (Words
    recur: a long answer reads each distinct one once.)"""
    return (normalise(word), _has_digit(word)) if is_content(word) else None


def measure(answer: str, claims: Sequence[tuple[str, int, int]]) -> Coverage:
    """Coverage of ``answer`` by ``claims``: (claim text, start, end of the answer text it was located in).
    Linear in the answer's length (plus the words of each claim's located text): a long answer's report is
    seconds."""
    sents = sentences(answer)
    words_of = [content_words(s.text, s.start) for s in sents]
    flat = [w for ws in words_of for w in ws]
    # per claim, the answer words of its located text: the words are in order and apart, so those inside
    # [s, e) are one run of ``flat``, range(first starting at or after s, first ending after e)
    starts, ends = [w.start for w in flat], [w.end for w in flat]
    inside = [range(bisect_left(starts, s), bisect_right(ends, e)) for _, s, e in claims]
    stated = [{w.norm for w in content_words(text)} for text, _, _ in claims]
    covered_by = [{k for k in ks if flat[k].norm in norms} for norms, ks in zip(stated, inside)]
    owners = Counter(k for ks in covered_by for k in ks)
    spans = []
    for (text, s, e), ks, located in zip(claims, covered_by, inside):
        own = [k for k in ks if owners[k] == 1] or sorted(ks)
        if not own or len(own) == len(located):  # (own is part of located)
            spans.append((s, e))
        else:
            spans.append((flat[min(own)].start, flat[max(own)].end))
    claimed = _claimed(sents, claims)
    gaps: list[Gap] = []
    k = 0
    for sent, ws, has_claim in zip(sents, words_of, claimed):
        subjective = None  # read once per sentence, when it has a gap
        run: list[Word] = []
        for w in ws + [None]:  # None closes the last run
            if w is not None and k not in owners:
                run.append(w)
            else:
                if run:
                    if subjective is None:
                        subjective = not has_claim and looks_like_dialogue(sent.text)
                    gaps.append(_gap(run, subjective))
                run = []
            if w is not None:
                k += 1
    total = len(flat)
    share = (len(owners) / total) if total else 1.0
    return Coverage(spans, gaps, round(share, 4))


def _claimed(sents: Sequence, claims: Sequence[tuple[str, int, int]]) -> list[bool]:
    """Per sentence, whether a claim was located in it: a claim's located text holds the sentence or starts
    inside it."""
    by_start = sorted((s, e) for _, s, e in claims)
    firsts = [s for s, _ in by_start]
    reach, furthest = [], None  # furthest end among the claims starting up to each one
    for _, e in by_start:
        furthest = e if furthest is None or e > furthest else furthest
        reach.append(furthest)
    out = []
    for sent in sents:
        before = bisect_right(firsts, sent.start)  # the claims starting at or before the sentence
        holds = before > 0 and reach[before - 1] >= sent.end
        at = bisect_left(firsts, sent.start)
        out.append(holds or (at < len(firsts) and firsts[at] < sent.end))
    return out


def _gap(run: list[Word], subjective: bool) -> Gap:
    if subjective:
        kind = SUBJECTIVE
    elif len(run) >= 2 or any(w.number or w.capital for w in run):
        kind = NOT_CHECKED
    else:
        kind = FILLER
    return Gap(run[0].start, run[-1].end, kind)


__all__ = ["FILLER", "NOT_CHECKED", "SUBJECTIVE", "Coverage", "Gap", "content_words", "measure", "normalise"]
