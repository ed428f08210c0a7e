"""What the direct verdict and the head read: the evidence cut into chunks at sentence boundaries, and one fixed
prompt per (chunk, claim) (``halucheck/prompts/direct.yaml``).

The whole evidence is read: overlapping passages of one source are joined (:func:`joined`), then passages are
put together in order and cut into chunks of at most :data:`CHUNK_CHARS` characters (about 400 tokens of
English) at sentence ends; a sentence longer than a chunk is cut at white space. Every chunk is judged with the
claim; the claim's verdict is its best-supporting chunk's (:mod:`halucheck.verifiers.probe.verifier`). Chunks are
measured in characters, not tokens, so the same evidence is cut the same way whatever model or engine reads it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from halucheck.prompts import load as load_prompts
from halucheck.records import Evidence
from halucheck.text import sentence_spans

# The prompt and what a forward pass yields. Part of every cached feature's key and of every head's provenance:
# change it whenever direct.yaml, the chunking or the features change.
RECIPE = "direct-v2"  # v2: the worked examples (direct.yaml's ``shots``) before the item
CHUNK_CHARS = 1600


@dataclass(frozen=True)
class Chunk:
    """One piece of a claim's evidence: its text, and where it lies (``index`` of ``of`` chunks)."""

    text: str
    index: int = 0
    of: int = 1


def chunks(passages: Sequence[str], size: int = CHUNK_CHARS) -> list[Chunk]:
    """``passages`` joined in order and cut at sentence ends into chunks of at most ``size`` characters (a
    passage boundary always ends a sentence). No evidence: one empty chunk (the claim is judged closed-book)."""
    sentences: list[str] = []
    for passage in passages:
        sentences += [passage[a:b] for a, b in sentence_spans(passage, line_breaks=False, max_chars=size)]
    texts: list[str] = []
    current = ""
    for s in sentences:
        if current and len(current) + 1 + len(s) > size:
            texts.append(current)
            current = ""
        current = f"{current} {s}" if current else s
    if current:
        texts.append(current)
    if not texts:
        return [Chunk("")]
    return [Chunk(t, i, len(texts)) for i, t in enumerate(texts)]


def joined(evidence: Sequence[Evidence]) -> list[str]:
    """The texts to read, each passage's words once: passages of one source whose character ranges overlap (a
    corpus's passages are overlapping windows, and several queries find neighbours) are joined into one span in
    document order, placed where its best-ranked member was. Passages without a location (``end <= start``),
    ones that only touch, and ones whose overlap does not read the same are kept as they are."""
    groups = [[e] for e in evidence]
    merged = True
    while merged:  # a later group joins the first earlier one it overlaps (a passage can bridge two groups)
        merged = False
        for i, g in enumerate(groups):
            j = next((j for j in range(i + 1, len(groups))
                      if any(_overlap(m, e) for m in g for e in groups[j])), None)
            if j is not None:
                g += groups.pop(j)
                merged = True
                break
    return [_span(g) for g in groups]


def _overlap(a: Evidence, b: Evidence) -> bool:
    """``a`` and ``b`` share characters of one source and read the same there."""
    if not (a.end > a.start and b.end > b.start and a.source == b.source):
        return False
    lo, hi = max(a.start, b.start), min(a.end, b.end)
    return lo < hi and len(a.text) == a.end - a.start and len(b.text) == b.end - b.start and \
        a.text[lo - a.start:hi - a.start] == b.text[lo - b.start:hi - b.start]


def _span(group: list[Evidence]) -> str:
    """One group's passages as one text, in document order."""
    if len(group) == 1:
        return group[0].text
    ordered = sorted(group, key=lambda e: (e.start, e.end))
    text, end = ordered[0].text, ordered[0].end
    for e in ordered[1:]:
        if e.end > end:
            text += e.text[max(0, end - e.start):]
            end = e.end
    return text


def _words(text: str) -> set[str]:
    from halucheck.text import stop_words

    return {w for w in re.findall(r"\w+", text.lower()) if w not in stop_words()}


def closest(parts: Sequence[Chunk], claim: str) -> int:
    """The chunk that shares the most content words with ``claim`` (ties: the first): the one a training
    example is read from when its chunks are not all computed (the lexical stand-in for the best-supporting one)."""
    want = _words(claim)
    return max(range(len(parts)), key=lambda i: (len(want & _words(parts[i].text)), -i))


def messages(document: str, text: str, question: str | None = None) -> tuple[dict, ...]:
    """The chat messages of one prompt pass: instructions, the worked examples as earlier turns, then the document
    chunk, the statement and the question."""
    prompts = load_prompts("direct")
    turns = [{"role": "system", "content": prompts["system"].render()}]
    for shot in prompts["shots"]:
        turns += [{"role": "user", "content": prompts["user"].render(
                      document=shot["document"], question=shot["question"], text=shot["text"])},
                  {"role": "assistant", "content": shot["reply"]}]
    turns.append({"role": "user", "content": prompts["user"].render(document=document, question=question, text=text)})
    return tuple(turns)


__all__ = ["CHUNK_CHARS", "Chunk", "RECIPE", "chunks", "closest", "messages"]
