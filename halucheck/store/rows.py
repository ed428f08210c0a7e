"""The rows a run database holds, as records: what :class:`halucheck.store.runstore.RunStore` takes and gives back.

A claim travels as one :class:`~halucheck.records.Claim` (text, question, kind, span); a stage's cost as one
:class:`~halucheck.records.Cost`, keyed by the stage's name.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from halucheck.records import Claim, Evidence, Verdict


@dataclass(frozen=True)
class ItemRow:
    """An input item as the run keeps it: its place in the input (``idx``), id, line, question, answer and
    context; ``truncated_at``: where an over-long answer's checked part ends (None: all of it is checked);
    ``claims_done``: its claims are extracted."""

    idx: int
    id: str
    line: int
    question: str | None
    answer: str
    context: str | None = None
    truncated_at: int | None = None
    claims_done: bool = False


@dataclass(frozen=True)
class ClaimRow:
    """A claim of an item: its id (``"<item>:<ordinal>"``), its item, its place among the item's claims and the
    claim itself; ``verified``: it has a verdict already (one to replace: no valid verdict, or a failed turn)."""

    claim_id: str
    item_idx: int
    ordinal: int
    claim: Claim
    verified: bool = False


@dataclass(frozen=True)
class ErrorRow:
    """A failure or warning that stands: of a stage (``filter``, ``extract``, ``queries``, ``input``, ...), for an
    item, an input line and/or a claim; ``item_id``: the id an unusable input line gives, if any."""

    stage: str
    message: str
    item_idx: int | None = None
    line: int | None = None
    claim_id: str | None = None
    item_id: str | None = None


@dataclass(frozen=True)
class FoundEvidence:
    """The evidence stage's outcome for one claim: its search queries and its passages in rank order."""

    claim_id: str
    queries: list[str]
    evidence: list[Evidence]


@dataclass(frozen=True)
class CachedReply:
    """One LLM reply in the run's reply cache, by its request's key; ``parsed`` and ``logprobs`` (a list of
    [token, logprob] pairs, or None) as JSON text."""

    key: str
    tag: str
    text: str
    parsed: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    attempts: int
    latency_s: float
    logprobs: str | None = None

    def row(self) -> tuple:
        """Its llm_cache row (the table's columns, in order; not dataclasses.astuple, which deep-copies every
        field)."""
        return (self.key, self.tag, self.text, self.parsed, self.prompt_tokens, self.completion_tokens,
                self.cached_tokens, self.attempts, self.latency_s, self.logprobs)


@dataclass
class Pending:
    """Work not done yet: items without claims, claims without evidence, claims without a clean verdict."""

    items: int = 0
    evidence: int = 0
    debates: int = 0

    def __bool__(self) -> bool:
        return bool(self.items or self.evidence or self.debates)

    def __str__(self) -> str:
        parts = [(self.items, "answer(s) without claims"), (self.evidence, "claim(s) without evidence"),
                 (self.debates, "claim(s) without a clean verdict")]
        return ", ".join(f"{n} {what}" for n, what in parts if n)


@dataclass
class RunContents:
    """Everything the reports read of a run, read in one pass: items in input order, each item's claims in
    answer order, every claim's evidence (rank order), queries and verdict, the errors that belong to an item
    and the input lines that could not be used."""

    items: list[ItemRow]
    claims: dict[int, list[ClaimRow]] = field(default_factory=dict)
    evidence: dict[str, list[Evidence]] = field(default_factory=dict)
    queries: dict[str, list[str]] = field(default_factory=dict)
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    item_errors: list[ErrorRow] = field(default_factory=list)
    unusable_lines: list[ErrorRow] = field(default_factory=list)


__all__ = ["CachedReply", "ClaimRow", "ErrorRow", "FoundEvidence", "ItemRow", "Pending", "RunContents"]
