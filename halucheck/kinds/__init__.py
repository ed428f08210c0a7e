"""Claim kinds, one home each: the table :data:`KINDS` says, for every kind of claim, how its claims are found,
what evidence they get, which checker decides them and what the report says a verdict on them rests on. The
claims stage makes claims of these kinds, the pipeline gives each the evidence its entry names
(``Pipeline.gather_evidence``), routing sends it to its checker (:class:`halucheck.verifiers.cascade.Routed`)
and the report reads its basis (:func:`halucheck.reports.basis_of`).

Adding a kind: its entry here, naming its finder (``"module:function"``, a function of the answer's text the
claims stage runs on every answer, in :mod:`halucheck.claims` or a module of this package) and its checker (a
registered verifier, :mod:`halucheck.verifiers`); nothing else (``records.Kind`` is any name in the table).
Knowledge, premise and result claims have no finder: the claims stage makes them (their ``found`` says where).

The finders that both the claims stage and a tool check use live here too: :mod:`halucheck.kinds.calculations`
(``expression = result`` in a text) and :mod:`halucheck.kinds.results` (a math answer's final result).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# What evidence claims of a kind get: passages searched for them (their queries, the corpus, the item's
# context), none (a tool decides without passages: a corpus passage shown under a calculation would read as the
# evidence that decided it), the question they restate, or the opening of the document they name.
EvidenceFrom = Literal["search", "none", "question", "named document"]


@dataclass(frozen=True)
class ClaimKind:
    """One kind of claim. ``checker``: the registered verifier that decides its claims (None: the run's
    ``--verifier``); ``needs``: the ``VerifierOptions`` field that checker needs (unset: the claims go to the
    ``--verifier``, with searched evidence); ``optional``: the checker may be unusable here (no sandbox), its
    claims then go to the ``--verifier``; ``basis``: what the report says a model's verdict on it rests on when
    it has evidence (a tool's verdict rests on the tool, one without evidence on nothing: closed-book)."""

    name: str
    found: str  # how its claims are found
    evidence: EvidenceFrom
    checker: str | None = None
    needs: str | None = None
    optional: bool = False
    basis: Literal["evidence", "question"] = "evidence"
    # "module:function" (imported by the claims stage, :func:`halucheck.claims.claims_of_answers`) that finds its
    # claims in an answer without a model, ``(text, halucheck.claims.Finding) -> [(claim text, start, end, ...)]``;
    # None: the claims stage makes them itself (``found`` names where)
    finder: str | None = None
    # what the finder reads: the prose (the answer's checked text, notes and ``answer`` kinds' spans blanked out),
    # or the ``answer``: found first, its spans blanked out of the prose, its claims carrying the question
    reads: Literal["prose", "answer"] = "prose"
    # "module:function" (imported on first use by routing, :class:`halucheck.verifiers.cascade.Routed`) that
    # settles one of its claims without a call, ``(Case) -> Verdict | None`` (None: it goes to its checker)
    settled_by: str | None = None

    def evidence_given(self, options: object) -> EvidenceFrom:
        """What evidence its claims get under ``options`` (``VerifierOptions``): a checker's needs unmet, they go
        to the ``--verifier`` and are searched for."""
        return self.evidence if self.needs is None or getattr(options, self.needs) else "search"


KINDS: dict[str, ClaimKind] = {k.name: k for k in (
    ClaimKind("knowledge", "the extractor, one sentence of the answer at a time, and a short answer with its "
              "question; no finder: made by the claims stage itself (claims.claims_of_answers)", "search"),
    ClaimKind("premise", "a math answer's extracted claim that restates its question; no finder: sorted out of "
              "the extractor's claims (claims.math_claims); "
              "one the question states is settled without a call (settled_by)", "question",
              basis="question", settled_by="halucheck.verifiers.tools.premise:restated"),
    ClaimKind("calculation", "expression = result written in the answer (kinds.calculations.calculations), and "
              "those a model lists in a math answer (kinds.calculations.list_calculations, by the claims stage)",
              "none", "arith", finder="halucheck.claims:found_calculations"),
    ClaimKind("result", "a math answer's final result (kinds.results.final_result); no finder: only a math "
              "answer has one (claims.math_claims)", "none", "program", optional=True),
    ClaimKind("citation", "a reference-shaped citation, given a bibliography (claims.citations)", "none", "citation",
              needs="bibliography", finder="halucheck.claims:found_citations"),
    ClaimKind("code", "a fenced code block (claims.code_blocks)", "none", "code", optional=True,
              finder="halucheck.claims:found_code", reads="answer"),
    ClaimKind("source", "a corpus document the answer names as its source (verifiers/tools/sources.find_sources)",
              "named document", "source", finder="halucheck.claims:found_sources"),
)}

# the verifiers that are tools (a verdict of theirs rests on the tool, not a model's judgement)
TOOL_CHECKS = tuple(k.checker for k in KINDS.values() if k.checker)


def kind_of(name: str) -> ClaimKind:
    """The entry of kind ``name`` (a claim stored before kinds were recorded is ``knowledge``)."""
    return KINDS.get(name, KINDS["knowledge"])


__all__ = ["KINDS", "TOOL_CHECKS", "ClaimKind", "EvidenceFrom", "kind_of"]
