"""A math answer's premise checked against its question without a model.

A sentence of a math answer that restates the question ("Their total age now is 162.", kind ``premise``) has the
question as its one passage of evidence (:func:`halucheck.evidence.question_evidence`). When one sentence of the
question holds every content word of the claim (numbers digit for digit; the support test of the debate's quote
checks, :func:`halucheck.verifiers.debate.quotes.supporting_sentence`) the claim restates it: factual, with that
sentence as the trace. A premise the question does not hold word for word (a changed number, "twice" for
"half") goes to the run's verifier with the question as its evidence, as before: a 1.5B judge asked about
restated premises called 37 of them false on 35 right answers.
"""

from __future__ import annotations

from halucheck.records import Check, Turn, Verdict
from halucheck.verifiers.debate.quotes import supporting_sentence

NAME = "question"
P_RESTATED = 0.05  # P(hallucinated) of a premise the question states word for word


def restated(check: Check) -> Verdict | None:
    """The verdict on a premise its question states (see the module), else None."""
    for passage in check.evidence:
        sentence = supporting_sentence(passage.text, check.claim.text)
        if sentence is not None:
            opinion = f"The question states it: \"{sentence.strip()}\""
            turn = Turn("S0", "initial", opinion, True, 0, p_factual=1.0 - P_RESTATED, verifier=NAME)
            return Verdict(True, 0, 1.0 - P_RESTATED, chain=[turn], p_hallucinated=P_RESTATED, verifier=NAME)
    return None


__all__ = ["restated"]
