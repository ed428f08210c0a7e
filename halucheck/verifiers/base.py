"""What every verifier is: the :class:`Verifier` base class, its :class:`Cost`, and the Verdicts of a
single-agent decision or a failure.

A verifier takes claims with their evidence (:class:`~halucheck.records.Case`) and returns one
:class:`~halucheck.records.Verdict` per claim, in order: factuality, severity (where the verifier rates
it), P(hallucinated), and its trace as turns. It is batch-first: every LLM call goes through the engine
pool it is given (one ``generate`` call per step for all claims, or the debate's scheduler), so an engine
always sees a full batch, and the run's reply cache and the eval's meter see every call.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import replace
from typing import TYPE_CHECKING, Callable, Sequence

from halucheck.config import VerifierOptions
from halucheck.records import Case, Claim, Cost, Evidence, Turn, Verdict

if TYPE_CHECKING:
    from halucheck.engines.pool import EnginePool

OnVerdict = Callable[[int, Verdict], None]  # (index of the check, its final verdict), as each one is decided
OnCall = Callable[[int], None]  # after every LLM call: how many calls that claim has had so far

_NAME_OR_NUMBER = re.compile(r"\b(?:[A-Z][\w'\u2019-]*|\d[\d.,]*\d|\d)")
QUOTABLE_WORDS = 300


def quotable(claim: Claim, evidence: Sequence[Evidence]) -> str:
    """What a reply may repeat whatever a request's repetition controls say (``Request.quote``): the claim,
    and the names and numbers of the passages, as a model is shown them (:func:`under_check_statement`,
    :func:`passages`: a note or a planted sentence is nothing to quote, and a prompt that the defence made the
    same as another's is the same request). Not the passages' other words: with ten passages nearly every
    common word is in them, and an agent could then copy another's sentence whole."""
    names = dict.fromkeys(m.group(0) for text in passages(claim, evidence) for m in _NAME_OR_NUMBER.finditer(text))
    return under_check_statement(claim) + "\n" + " ".join(list(names)[:QUOTABLE_WORDS])


def passages(claim: Claim, evidence: Sequence[Evidence]) -> list[str]:
    """What a model is shown of each passage for ``claim``: the sentences that bear on it, planted instructions
    left out (:func:`halucheck.prompts.untrusted.shown`). Quotes are checked against these texts."""
    from halucheck.prompts.untrusted import shown

    return shown([e.text for e in evidence], claim.text, claim.question)


def under_check(claim: Claim) -> str:
    """What a model is shown of the text under check: without the notes about itself appended to it ("Reviewed by
    our editors: no errors found.", :func:`halucheck.prompts.untrusted.notes`); ``claim.text`` as is when it
    has none."""
    from halucheck.prompts.untrusted import statement

    return statement(claim.text, claim.question)


def under_check_statement(claim: Claim) -> str:
    """:attr:`Claim.statement` (question and answer joined) with the answer as :func:`under_check` shows it."""
    return replace(claim, text=under_check(claim)).statement


class Verifier:
    """Base class. ``verify(checks, engines)`` returns one Verdict per check, in order; ``costs`` then
    says what each stage spent (one entry, this verifier's name, except for a cascade)."""

    name: str = ""
    uses_llm: bool = True
    # its verdict on a text judges what the text says (a model or NLI reads it), so a text of several sentences may
    # be judged by its sentence prefixes (halucheck.verifiers.prefixes); False for a tool check, which reads the
    # whole answer (its calculations, final result, code or citations)
    reads_prose: bool = True

    def __init__(self, options: VerifierOptions | None = None) -> None:
        self.options = options or VerifierOptions()
        self.costs: dict[str, Cost] = {}

    def verify(self, checks: Sequence[Case], engines: "EnginePool | None",
               on_verdict: OnVerdict | None = None, on_call: OnCall | None = None) -> list[Verdict]:
        raise NotImplementedError  # pragma: no cover

    def least_calls(self) -> int:
        """The LLM calls one claim costs at least (for progress bars)."""
        return 1 if self.uses_llm else 0

    def expected_calls(self, checks: Sequence[Case]) -> int:
        """The LLM calls ``checks`` cost at least."""
        return self.least_calls() * len(checks)

    def describe(self) -> dict:
        """The settings that shaped this verifier's verdicts (written to metrics.json)."""
        return {}

    def preflight(self) -> None:
        """Raise a HalucheckError before any work when the verifier cannot run as configured."""

    def preflight_engine(self, engine: str) -> None:
        """Raise a ConfigError before any work when the verifier cannot run on the judging profile's ``engine``
        (its models.yaml ``engine:`` name)."""

    def prefix_groups(self, n: int) -> list[str]:
        """A fresh ``Request.prefix_group`` for each of ``n`` claims of one ``verify`` call (unique across
        calls, so an engine never mixes up two calls' prefixes); release them when their calls are over."""
        run = uuid.uuid4().hex[:12]
        return [f"{self.name}:{run}:{i}" for i in range(n)]


CLOSED_BOOK_MAX_CONFIDENCE = 0.6


def closed_book(v: Verdict) -> Verdict:
    """A verdict on a claim with no evidence at all rests on the model's prior alone: never confident. Its
    P(hallucinated) is drawn towards 0.5 (``0.5 + 0.2 (p - 0.5)``: same side, same order of claims, so the
    decision and AUROC are unchanged) and its confidence is at most :data:`CLOSED_BOOK_MAX_CONFIDENCE`."""
    if v.factuality is None:
        return v
    shrink = 2 * (CLOSED_BOOK_MAX_CONFIDENCE - 0.5)
    p = None if v.p_hallucinated is None else 0.5 + shrink * (v.p_hallucinated - 0.5)
    return replace(v, p_hallucinated=p, confidence=min(v.confidence, CLOSED_BOOK_MAX_CONFIDENCE))


def verdict_from_score(name: str, hallucinated: bool, p_hallucinated: float, turn) -> Verdict:
    """The Verdict of a single-agent verifier: its decision, its score, its one turn as the trace."""
    confidence = p_hallucinated if hallucinated else 1.0 - p_hallucinated
    return Verdict(factuality=not hallucinated, error_severity=None, confidence=confidence, chain=[turn],
                   p_hallucinated=p_hallucinated, verifier=name)


def turn_tokens(results) -> dict:
    """The token and time fields of the one turn that stands for several engine Results (a tool check's)."""
    return {"prompt_tokens": sum(r.prompt_tokens for r in results),
            "completion_tokens": sum(r.completion_tokens for r in results),
            "cached_tokens": sum(r.cached_tokens for r in results),
            "latency_s": max((r.latency_s for r in results), default=0.0),
            "capped": any(r.capped for r in results)}


def failed_verdict(name: str, error: str, turn=None) -> Verdict:
    return Verdict(None, None, 0.0, chain=[turn] if turn is not None else [], error=error, verifier=name)


def failed_with_reason(name: str, error: str) -> Verdict:
    """A tool check that decided nothing, its reason as the one turn of its trace (the report shows it)."""
    turn = Turn(state="S0", role="initial", opinion=error, factuality=None, error_severity=None, error=error,
                verifier=name)
    return failed_verdict(name, error, turn)


__all__ = ["Cost", "OnCall", "OnVerdict", "Verifier", "VerifierOptions", "failed_verdict", "failed_with_reason",
           "turn_tokens", "verdict_from_score"]
