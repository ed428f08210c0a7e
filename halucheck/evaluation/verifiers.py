"""The verifiers as ``halucheck eval`` uses them: labelled items in, one :class:`Prediction` per item out.

The verifiers themselves are ``halucheck.verifiers.base``'s (the same ones ``halucheck run`` uses, by the same
names, cascades included). This module only adapts: an :class:`EvalItem` becomes a
:class:`~halucheck.records.Case` (:func:`case_of`) and a Verdict becomes a Prediction
(:func:`prediction_of`): ``prediction`` True when the verdict says not factual, ``score`` its
P(hallucinated); an item no reply could decide gets ``prediction=None`` and the error, which the report
counts as missing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from halucheck.evaluation.datasets import EvalItem
from halucheck.evaluation.report import Prediction
from halucheck.verifiers.judges import consistency_score, likert_score
from halucheck.records import Case, Claim, Evidence, Verdict
from halucheck.verifiers.scoring import decision_score, p_hallucinated, value_token_prob
from halucheck.verifiers import Verifier, VerifierOptions, available, prefixes, register

if TYPE_CHECKING:
    from halucheck.config import Settings
    from halucheck.engines.pool import EnginePool


def text_of(item: EvalItem) -> tuple[str | None, str]:
    """(question, text) to verify. Short QA (an answer to a question) and response-level items keep
    the question apart; a claim-level item is its claim alone."""
    if item.answer is not None and item.question:
        return item.question, item.answer
    if item.response is not None and item.claim == item.response and item.question:
        return item.question, item.response
    return None, item.claim


def case_of(item: EvalItem) -> Case:
    """The claim and evidence every verifier is shown for ``item``."""
    question, text = text_of(item)
    return Case(Claim(text=text, question=question), _located(item), meta=dict(item.meta))


def _located(item: EvalItem) -> tuple[Evidence, ...]:
    """``item``'s passages; those ``eval --corpus`` retrieved keep their place in the corpus (``source:start-end``
    in ``meta["evidence_sources"]``), as ``run --corpus`` keeps it, so a verifier reads them as a run would."""
    places = item.meta.get("evidence_sources") if item.meta.get("evidence_from") == "corpus" else None
    out = []
    for n, e in enumerate(item.evidence):
        where = places[n] if isinstance(places, list) and n < len(places) and isinstance(places[n], str) else ""
        source, _, span = where.rpartition(":")
        start, _, end = span.partition("-")
        if source and start.isdigit() and end.isdigit():
            out.append(Evidence(text=e, source=source, start=int(start), end=int(end)))
        else:
            out.append(Evidence(text=e, source=item.id))
    return tuple(out)


def prediction_of(verdict: Verdict | None) -> Prediction:
    """A Verdict -> Prediction: its decision, scored by its P(hallucinated) (else its confidence); the
    verdict itself (every turn) goes along as the prediction's detail."""
    if verdict is None or verdict.factuality is None:
        return Prediction(None, None, (verdict.error if verdict else None) or "no verdict",
                          verdict.to_dict() if verdict else None)
    return Prediction(not verdict.factuality, p_hallucinated(verdict), detail=verdict.to_dict())


debate_score = prediction_of  # the name the debate's adapter had


class EvalVerifier:
    """A verifier with ``predict(items, settings)``; everything else is the verifier's own."""

    def __init__(self, verifier: Verifier) -> None:
        self.verifier = verifier

    def __getattr__(self, name: str):
        return getattr(self.verifier, name)

    def describe(self) -> dict:
        texts = f"judged by up to {prefixes.MAX_PARTS} sentence prefixes" if self.verifier.reads_prose else "whole"
        return {**self.verifier.describe(), "texts": texts}

    def predict(self, items: Sequence[EvalItem], models: "EnginePool | Settings | None") -> list[Prediction]:
        """One Prediction per item; ``models``: the engine pool (or Settings, for a pool of its own)."""
        from halucheck.engines.pool import pool_of

        engines = pool_of(models) if models is not None else None
        verdicts = prefixes.verify(self.verifier, [case_of(it) for it in items], engines)
        return [prediction_of(v) for v in verdicts]


def get_verifier(name: str, options: VerifierOptions | None = None) -> EvalVerifier:
    """The verifier (or cascade ``a,b``) registered as ``name``; a ConfigError with a suggestion otherwise. Severity
    is not scored in eval: its verifiers make no grading calls."""
    from dataclasses import replace

    from halucheck.verifiers import get_verifier as get

    return EvalVerifier(get(name, replace(options or VerifierOptions(), grade=False)))


VERIFIERS = available()  # the registered names, in order
register_verifier = register

__all__ = [
    "VERIFIERS",
    "EvalVerifier",
    "VerifierOptions",
    "case_of",
    "consistency_score",
    "debate_score",
    "decision_score",
    "get_verifier",
    "likert_score",
    "prediction_of",
    "register_verifier",
    "text_of",
    "value_token_prob",
]
