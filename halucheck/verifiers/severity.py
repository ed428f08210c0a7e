"""Severity 0-5 for the verdicts of verifiers that do not rate it themselves (the single judges, ``direct``,
``probe``): a claim found supported is 0; a claim found not supported gets the seed paper's 1-5 grade from one short
constrained call (``prompts/severity.yaml``: ``{"error_severity": N}``, at most 16 tokens) with the evidence that
decided it. Flagged claims only, so a run where nothing is wrong pays nothing. A call that fails leaves the severity
unrated (None), never invented.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Callable, Sequence

from halucheck.engines.base import Request, SamplingParams
from halucheck.prompts import load as load_prompts
from halucheck.records import Case, Cost, Verdict

if TYPE_CHECKING:
    from halucheck.engines.pool import EnginePool

ROLE = "initial"
SCHEMA = {"type": "object", "properties": {"error_severity": {"type": "integer", "enum": [1, 2, 3, 4, 5]}},
          "required": ["error_severity"], "additionalProperties": False}
MAX_DOCUMENT_CHARS = 4000  # of the deciding evidence shown to the grader


def messages(document: str, text: str, question: str | None = None) -> tuple[dict, ...]:
    prompts = load_prompts("severity")
    return ({"role": "system", "content": prompts["system"].render()},
            {"role": "user", "content": prompts["user"].render(document=document[:MAX_DOCUMENT_CHARS], question=question,
                                                               text=text)})


def grade(checks: Sequence[Case], verdicts: list[Verdict], engines: "EnginePool", cost: Cost | None,
          evidence_of: Callable[[int, Verdict], str], tag: str) -> None:
    """Set ``error_severity`` in place: 0 for a factual verdict, the graded 1-5 for a not-factual one (its first turn
    too); ``evidence_of(i, verdict)``: the evidence that decided claim ``i``."""
    from halucheck.verifiers.base import under_check

    flagged = [i for i, v in enumerate(verdicts) if v.factuality is False]
    for v in verdicts:
        if v.factuality is True and v.error_severity is None:
            v.error_severity = 0
            if v.chain:
                v.chain[0] = replace(v.chain[0], error_severity=0)
    if not flagged:
        return
    requests = [Request(messages=messages(evidence_of(i, verdicts[i]), under_check(checks[i].claim),
                                          checks[i].claim.question),
                        schema=SCHEMA, sampling=SamplingParams(temperature=0.0, max_tokens=16), tag=f"{tag}:severity")
                for i in flagged]
    results = engines.engine_for(ROLE).generate(requests)
    if cost is not None:
        cost.add_results(results)
    for i, res in zip(flagged, results):
        if not (res.ok and isinstance(res.parsed, dict)):
            continue
        v = verdicts[i]
        v.error_severity = int(res.parsed["error_severity"])
        if v.chain:
            first = v.chain[0]
            v.chain[0] = replace(first, error_severity=v.error_severity,
                                 prompt_tokens=first.prompt_tokens + res.prompt_tokens,
                                 completion_tokens=first.completion_tokens + res.completion_tokens)


__all__ = ["SCHEMA", "grade", "messages"]
