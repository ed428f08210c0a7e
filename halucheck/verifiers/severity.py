"""Severity 0-5 for the verdicts of verifiers that do not rate it themselves (the single judges, ``direct``,
``probe``): a claim found supported is 0; a claim found not supported gets the seed paper's 1-5 grade
(``prompts/severity.yaml``). Flagged claims only, so a run where nothing is wrong pays nothing.

- :func:`grade` (the judges): one short constrained call (``{"error_severity": N}``, at most 16 tokens) with the
  evidence that decided. A call that fails leaves the severity unrated (None), never invented.
- :func:`grade_after_pass` (``direct``, ``probe``): the next question in the deciding prompt pass's own
  conversation, its answer read from the logits of the digits 1-5 as the reply's first token (the grade a greedy
  constrained call would give), nothing decoded. The pass's KV is reused, so a grade computes only its question.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from halucheck.engines.base import Request, SamplingParams
from halucheck.prompts import load as load_prompts
from halucheck.records import Case, Cost, Verdict

if TYPE_CHECKING:
    from halucheck.engines.pool import EnginePool
    from halucheck.verifiers.probe.features import Extractor
    from halucheck.verifiers.probe.remote import RemotePasses

ROLE = "initial"
SCHEMA = {"type": "object", "properties": {"error_severity": {"type": "integer", "enum": [1, 2, 3, 4, 5]}},
          "required": ["error_severity"], "additionalProperties": False}
MAX_DOCUMENT_CHARS = 4000  # of the deciding evidence shown to the grader
GRADES = (1, 2, 3, 4, 5)


def messages(document: str, text: str, question: str | None = None) -> tuple[dict, ...]:
    prompts = load_prompts("severity")
    return ({"role": "system", "content": prompts["system"].render(scale=prompts["scale"].render())},
            {"role": "user", "content": prompts["user"].render(document=document[:MAX_DOCUMENT_CHARS], question=question,
                                                               text=text)})


def grade(checks: Sequence[Case], verdicts: list[Verdict], engines: "EnginePool", cost: Cost | None,
          evidence_of: Callable[[int, Verdict], str], tag: str) -> None:
    """Set ``error_severity`` in place: 0 for a factual verdict, the graded 1-5 for a not-factual one (its first turn
    too); ``evidence_of(i, verdict)``: the evidence that decided claim ``i``."""
    from halucheck.verifiers.base import under_check

    flagged = _zero_the_supported(verdicts)
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
        if res.ok and isinstance(res.parsed, dict):
            _set(verdicts[i], int(res.parsed["error_severity"]), res.prompt_tokens, res.completion_tokens)


def conversation(prompt: Sequence[dict], question: str | None = None) -> tuple[dict, ...]:
    """The deciding pass's ``prompt`` (chat messages, the statement and ``question`` in it), its answer "No", and the
    grading question."""
    prompts = load_prompts("severity")
    ask = prompts["follow_up"].render(question=question, scale=prompts["scale"].render())
    return (*prompt, {"role": "assistant", "content": "No"}, {"role": "user", "content": ask})


def grade_after_pass(checks: Sequence[Case], verdicts: list[Verdict], extractor: "Extractor | RemotePasses",
                     cost: Cost | None, prompt_of: Callable[[int, Verdict], Sequence[dict]]) -> None:
    """Set ``error_severity`` in place, as :func:`grade` does, from one prompt pass per flagged claim on
    ``extractor``'s model (or one request for a token and its alternatives to a server, all at once);
    ``prompt_of(i, verdict)``: the messages of the pass that decided claim ``i``."""
    flagged = _zero_the_supported(verdicts)
    asked = extractor.replies_logits([conversation(prompt_of(i, verdicts[i]), checks[i].claim.question)
                                      for i in flagged], [str(n) for n in GRADES])
    for i, (logits, tokens, reused) in zip(flagged, asked):
        if cost is not None:
            cost.llm_calls += 1
            cost.prompt_tokens += tokens
            cost.cached_tokens += reused
        if np.isfinite(logits).any():  # a server's reply may list no digit among its alternatives: unrated
            _set(verdicts[i], GRADES[int(logits.argmax())], tokens, 0, reused)


def _zero_the_supported(verdicts: list[Verdict]) -> list[int]:
    """Severity 0 for each factual verdict (its first turn too); the indices of the not-factual ones."""
    for v in verdicts:
        if v.factuality is True and v.error_severity is None:
            v.error_severity = 0
            if v.chain:
                v.chain[0] = replace(v.chain[0], error_severity=0)
    return [i for i, v in enumerate(verdicts) if v.factuality is False]


def _set(v: Verdict, severity: int, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> None:
    """A flagged verdict's grade, in it and its first turn, whose tokens count the grading too."""
    v.error_severity = severity
    if v.chain:
        first = v.chain[0]
        v.chain[0] = replace(first, error_severity=severity, prompt_tokens=first.prompt_tokens + prompt_tokens,
                             completion_tokens=first.completion_tokens + completion_tokens,
                             cached_tokens=first.cached_tokens + cached_tokens)


__all__ = ["GRADES", "SCHEMA", "conversation", "grade", "grade_after_pass", "messages"]
