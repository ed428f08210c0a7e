"""The debate's agents: their reply schema, their prompts, and the role -> engine mapping.

The debate logic (rounds.py) only says *which* role speaks with *which* previous turns; this module turns
that into an engine request and the engine's reply back into a Turn.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from pydantic import BaseModel, ConfigDict, Field

from halucheck.engines.base import Request, Result, SamplingParams
from halucheck.prompts import load as load_prompts
from halucheck.records import Claim, Evidence, Role, State, Turn

if TYPE_CHECKING:
    from halucheck.config import Settings
    from halucheck.engines.base import Engine


class AgentReply(BaseModel):
    """What every agent answers (constrained decoding enforces it; we validate it again)."""

    model_config = ConfigDict(extra="forbid")
    opinion: str
    factuality: bool
    error_severity: int = Field(ge=0, le=5)


AGENT_SCHEMA: dict = AgentReply.model_json_schema()

LABELS = {"initial": "previous agent", "trust": "Trust agent", "skeptic": "Skeptic agent", "leader": "Leader agent"}


@dataclass(frozen=True)
class AgentCall:
    """A request from the debate for one agent's turn: who speaks, in which state, after whom."""

    role: Role
    state: State
    previous: tuple[Turn, ...] = ()


def build_messages(claim: Claim, evidence: Sequence[Evidence], call: AgentCall) -> tuple[dict, ...]:
    """Chat messages for one agent turn. The system message and the start of the user message
    (evidence, claim) are identical for every turn about the same claim; the role text comes last."""
    p = load_prompts("debate")
    shared = p["shared"].render(claim=claim.statement, evidence=list(evidence))
    previous = [
        {
            "label": "previous agent" if call.role != "leader" else LABELS[t.role],
            "json": json.dumps(
                {"opinion": t.opinion, "factuality": t.factuality, "error_severity": t.error_severity},
                ensure_ascii=False,
            ),
        }
        for t in call.previous
    ]
    user = shared + "\n\n" + p["roles"][call.role].render()
    if previous:
        user += "\n" + p["previous"].render(previous=previous).rstrip()
    user += "\n\n" + p["answer"].render()
    return ({"role": "system", "content": p["system"].render()}, {"role": "user", "content": user})


def turn_from_result(call: AgentCall, result: Result) -> Turn:
    """Convert an engine result into a Turn; a failed or invalid reply becomes an error turn."""
    common = dict(
        state=call.state,
        role=call.role,
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
        cached_tokens=result.cached_tokens,
        latency_s=result.latency_s,
    )
    if result.error is None:
        try:
            reply = AgentReply.model_validate(result.parsed)
        except Exception as exc:  # schema and model disagree: still data, not a crash
            result.error = f"reply rejected: {exc}".splitlines()[0]
        else:
            return Turn(opinion=reply.opinion, factuality=reply.factuality,
                        error_severity=reply.error_severity, **common)
    return Turn(opinion=result.text[:2000], factuality=None, error_severity=None, error=result.error, **common)


class Agents:
    """Maps each debate role to its engine and sampling settings (from Settings / models.yaml)."""

    def __init__(self, settings: "Settings | None" = None, engine: "Engine | None" = None,
                 sampling: SamplingParams | None = None) -> None:
        if settings is None and engine is None:
            raise ValueError("Agents needs settings or an engine")
        self.settings = settings
        self.engine = engine
        self.sampling = sampling or SamplingParams(temperature=0.0, max_tokens=320)

    def engine_for(self, role: Role) -> "Engine":
        return self.engine if self.engine is not None else self.settings.engine_for(role)

    def request(self, claim: Claim, evidence: Sequence[Evidence], call: AgentCall) -> Request:
        sampling = self.sampling
        if self.settings is not None:
            overrides = self.settings.sampling_for(call.role)
            if overrides:
                sampling = SamplingParams(**{**sampling.__dict__, **overrides})
        return Request(
            messages=build_messages(claim, evidence, call),
            schema=AGENT_SCHEMA,
            sampling=sampling,
            tag=f"debate:{call.role}",
        )
