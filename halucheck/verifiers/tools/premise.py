"""A math answer's premise checked against its question without a model.

A sentence of a math answer that restates the question ("Their total age now is 162.", kind ``premise``) has the
question as its one passage of evidence (:func:`halucheck.evidence.question_evidence`). When one sentence of the
question holds every content word of the claim (numbers digit for digit; the support test of the debate's quote
checks, :func:`halucheck.verifiers.debate.quotes.supporting_sentence`) the claim restates it: factual, with that
sentence as the trace. So does a claim whose numbers all stand in one sentence of the question and whose other
content words all stand somewhere in it (without a number: its content words alone), words for "a quantity"
and for the unit of a rate ("in one hectare" for "per hectare") aside ("Dylan bought 8885928 + 6 fish
sausages." for "He bought 8885928 chicken sausages and 6 more fish sausages"; "Total number of floors =
6762883"): the answer names what the question calls "he", or labels a given number. Neither test reads word
order, so a premise that swaps who does what passes; its consequence shows in the final result, which the
programs check. A premise with a word or number the question lacks ("twice" for "half", a changed number)
goes to the run's verifier with the question as its evidence: a 1.5B judge asked about restated premises
called 37 of them false on 35 right answers (Factool math, dev).
"""

from __future__ import annotations

from halucheck.records import Case, Turn, Verdict
from halucheck.text import sentences
from halucheck.verifiers.debate.quotes import missing_words, supporting_sentence
from halucheck.arithmetic import numbers_in

NAME = "question"
P_RESTATED = 0.05  # P(hallucinated) of a premise the question states
QUANTITY_WORDS = frozenset({"number", "total", "amount", "sum", "count", "value", "quantity",
                            "one", "each", "per", "every"})  # and the unit of a rate: "in one hectare", "per hectare"


def restated(check: Case) -> Verdict | None:
    """The verdict on a premise its question states (see the module), else None."""
    for passage in check.evidence:
        sentence = supporting_sentence(passage.text, check.claim.text) or _given(passage.text, check.claim.text)
        if sentence is not None:
            opinion = f"The question states it: \"{sentence.strip()}\""
            turn = Turn("S0", "initial", opinion, True, 0, p_factual=1.0 - P_RESTATED, verifier=NAME)
            return Verdict(True, 0, 1.0 - P_RESTATED, chain=[turn], p_hallucinated=P_RESTATED, verifier=NAME)
    return None


def _given(question: str, claim: str) -> str | None:
    """The sentence of ``question`` that holds every number of ``claim`` (for a claim without one: the sentence
    sharing most of its words), when the question holds its other content words too (see the module)."""
    if missing_words(question, claim, QUANTITY_WORDS):
        return None
    numbers = numbers_in(claim)
    if numbers:
        return next((s for s in sentences(question) if numbers <= numbers_in(s)), None)
    words = set(claim.lower().split())
    return max(sentences(question) or [question], key=lambda s: len(words & set(s.lower().split())))


__all__ = ["restated"]
