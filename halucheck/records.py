"""Typed records passed between modules: claims, evidence, debate turns and verdicts.

The JSON field names produced by ``to_dict`` are a contract read by reports, tests and users' scripts.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Literal

Role = Literal["initial", "trust", "skeptic", "leader"]
State = Literal["S0", "S1", "S2"]


@dataclass(frozen=True)
class Evidence:
    """A passage used as evidence, located in its source file by character offsets."""

    text: str
    source: str = ""
    start: int = 0
    end: int = 0
    score: float = 0.0

    def to_dict(self) -> dict:
        return {"source": self.source, "start": self.start, "end": self.end, "text": self.text}


# a name in halucheck.kinds.KINDS (the table of claim kinds; records sits below it and does not import it, so a
# new kind is its entry there, not a name here)
Kind = str


@dataclass(frozen=True)
class Claim:
    """One atomic, checkable statement (or a question + answer pair for short QA). ``kind`` routes it: a
    ``calculation`` (``48 x 125 = 6000``), a math answer's final ``result`` (checked by program), ``code`` or a
    ``citation`` goes to its tool checker; ``knowledge`` to the chosen verifier, with evidence from the corpus;
    a ``premise`` (a math answer restating its question) to the chosen verifier, with the question as evidence
    (the table of kinds: :data:`halucheck.kinds.KINDS`)."""

    text: str
    question: str | None = None
    kind: Kind = "knowledge"
    # where the answer states it (character offsets, the span the report highlights); None: not located
    start: int | None = None
    end: int | None = None

    @property
    def statement(self) -> str:
        """What the agents verify: the paper joins short-QA question and answer into one claim."""
        return f"{self.question} {self.text}" if self.question else self.text


@dataclass(frozen=True)
class Case:
    """One case for a verifier: a claim with the evidence every verifier is shown for it (its outcome is a
    :class:`Verdict`). ``meta``: structured facts a
    tool checker may use when the text alone is not enough (e.g. a labelled calculation's expression and
    claimed result, a cited work's title, authors and year); not part of the key."""

    claim: Claim
    evidence: tuple[Evidence, ...] = ()
    meta: dict = field(default_factory=dict, compare=False, hash=False)

    def key(self) -> str:
        """Identical claims (same statement, same evidence texts) share a key and are verified once."""
        payload = json.dumps([self.claim.statement, [e.text for e in self.evidence]], ensure_ascii=False)
        return hashlib.sha256(payload.encode()).hexdigest()


@dataclass(frozen=True)
class UniqueCases:
    """Cases with identical claims (same statement, same evidence: :meth:`Case.key`) taken once: ``cases``
    each once, in first-seen order, and ``of[i]``: the indexes of the cases ``cases[i]`` stands for."""

    cases: list[Case]
    of: list[list[int]]


def unique_cases(cases: list[Case]) -> UniqueCases:
    """``cases`` with identical claims taken once: each is verified once, and its verdict given to all."""
    unique: list[Case] = []
    of: list[list[int]] = []
    first: dict[str, int] = {}
    for i, case in enumerate(cases):
        k = case.key()
        if k in first:
            of[first[k]].append(i)
        else:
            first[k] = len(unique)
            unique.append(case)
            of.append([i])
    return UniqueCases(unique, of)


@dataclass(frozen=True)
class Quote:
    """One quote of a debate stance and what its check found (``verifiers/debate/quotes.py``): ``passage``
    is the 1-based number of the passage it is in (or, for a "not stated" quote that failed, the passage
    that states it); ``verified`` whether it counts; ``why`` what failed."""

    text: str
    verified: bool
    passage: int | None = None
    why: str = ""

    def to_dict(self) -> dict:
        d = {"text": self.text, "verified": self.verified}
        if self.passage is not None:
            d["passage"] = self.passage
        if self.why:
            d["why"] = self.why
        return d


@dataclass
class Turn:
    """One agent's turn in the debate chain. ``error`` is set, and the verdict fields are None,
    when the agent's reply could not be obtained or never matched the schema."""

    state: State
    role: Role
    opinion: str
    factuality: bool | None
    error_severity: int | None
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    latency_s: float = 0.0
    p_factual: float | None = None  # the agent's probability of factuality=true (token logprobs)
    capped: bool = False  # the reply stopped at max_tokens (some attempt did)
    repaired: str | None = None  # how inconsistent verdict fields were mended (e.g. "severity 2 -> 0")
    verifier: str = "debate"  # the verifier whose call this was (a single-agent baseline has one S0 turn)
    # a debate stance (Trust, Skeptic): what it found ("supported", "contradicted", "not stated"), its
    # quotes with their checks, and whether it is void (no verified quote: it casts no vote);
    # a Leader: the side it named the winner ("trust" or "skeptic")
    finding: str | None = None
    quotes: tuple[Quote, ...] = ()
    void: bool = False
    winner: str | None = None
    # a verifier that judges every chunk of the evidence (direct, probe): the chunk that decided
    # ({"index": 0-based, "of": how many chunks, "text": the chunk})
    chunk: dict | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.factuality is not None

    @property
    def counts(self) -> bool:
        """A valid turn that is not void."""
        return self.ok and not self.void

    def detail(self) -> dict:
        """The stance's or Leader's own fields (stored as one JSON column)."""
        d: dict = {}
        if self.finding:
            d["finding"] = self.finding
        if self.quotes:
            d["quotes"] = [q.to_dict() for q in self.quotes]
        if self.void:
            d["void"] = True
        if self.winner:
            d["winner"] = self.winner
        if self.chunk:
            d["chunk"] = self.chunk
        return d

    @classmethod
    def detail_fields(cls, detail: dict | None) -> dict:
        """Turn keyword arguments from a stored :meth:`detail`."""
        detail = detail or {}
        return {"finding": detail.get("finding"), "void": bool(detail.get("void")), "winner": detail.get("winner"),
                "chunk": detail.get("chunk"),
                "quotes": tuple(Quote(q["text"], q["verified"], q.get("passage"), q.get("why", ""))
                                for q in detail.get("quotes", ()))}

    def to_dict(self) -> dict:
        d = {
            "state": self.state,
            "role": self.role,
            "opinion": self.opinion,
            "factuality": self.factuality,
            "error_severity": self.error_severity,
            "p_factual": None if self.p_factual is None else round(self.p_factual, 4),
            "completion_tokens": self.completion_tokens,
        }
        if self.capped:
            d["capped"] = True
        if self.repaired:
            d["repaired"] = self.repaired
        if self.error:
            d["error"] = self.error
        if self.verifier != "debate":
            d["verifier"] = self.verifier
        return {**d, **self.detail()}


@dataclass
class Verdict:
    """The outcome for one claim: the deciding verifier's judgement plus its trace of turns.

    For the debate: the verdict of its fitted score (``halucheck.verifiers.debate.score``: the first agent's and
    the Leaders' probabilities, the verified-quote margin and the chain's standing verdict) and the whole chain;
    ``--prompts paper``: the last Leader's judgement, ``p_hallucinated`` pooling every valid turn's probability.
    For a single-agent verifier: its one turn, its score; ``error_severity`` is None there (those verifiers do
    not rate severity). ``confidence`` is the probability of the side the verdict took. In a cascade
    (``halucheck.verifiers.base.Cascade``) the chain also holds the earlier stages' turns, each turn naming its
    verifier; ``verifier`` names the stage that decided.
    """

    factuality: bool | None
    error_severity: int | None
    confidence: float
    chain: list[Turn] = field(default_factory=list)
    rounds: int = 0
    consensus: bool = False
    error: str | None = None
    p_hallucinated: float | None = None  # the chain's pooled probability that the claim is not factual
    verifier: str = "debate"  # which verifier decided
    # where a text of several sentences was judged by its prefixes (halucheck.verifiers.prefixes) and a shorter
    # one decided: that prefix (the sentences written after it did not shape this verdict)
    judged: str | None = None

    @property
    def prompt_tokens(self) -> int:
        return sum(t.prompt_tokens for t in self.chain)

    @property
    def completion_tokens(self) -> int:
        return sum(t.completion_tokens for t in self.chain)

    def to_dict(self) -> dict:
        d = {
            "factuality": self.factuality,
            "error_severity": self.error_severity,
            "confidence": round(self.confidence, 4),
            "p_hallucinated": None if self.p_hallucinated is None else round(self.p_hallucinated, 4),
            "rounds": self.rounds,
            "consensus": self.consensus,
            "chain": [t.to_dict() for t in self.chain],
            "verifier": self.verifier,
        }
        if self.error:
            d["error"] = self.error
        if self.judged is not None:
            d["judged"] = self.judged
        return d


@dataclass
class Cost:
    """What a verifier's ``verify``, a pipeline stage or an eval run spent: LLM calls (retries included),
    tokens, seconds."""

    claims: int = 0
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    failed_calls: int = 0
    wall_s: float = 0.0

    def add_results(self, results) -> None:
        """Count engine Results (a reply from the run's cache spent nothing now)."""
        for r in results:
            self.llm_calls += r.attempts
            self.failed_calls += r.error is not None
            if r.attempts:
                self.prompt_tokens += r.prompt_tokens
                self.completion_tokens += r.completion_tokens
                self.cached_tokens += r.cached_tokens

    def merged(self, other: "Cost") -> "Cost":
        """This cost and ``other`` together (one verifier called twice in one run)."""
        return Cost(*(getattr(self, f) + getattr(other, f) for f in
                      ("claims", "llm_calls", "prompt_tokens", "completion_tokens", "cached_tokens", "failed_calls",
                       "wall_s")))

    def as_metrics(self) -> dict:
        """The cost as metrics.json of ``halucheck eval`` keeps it (its keys are read back by ``--compare``)."""
        return {"llm_calls": self.llm_calls, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "wall_time_s": self.wall_s}


__all__ = ["Case", "Claim", "Cost", "Evidence", "Role", "State", "Turn", "UniqueCases", "Verdict", "unique_cases"]
