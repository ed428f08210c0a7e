"""The debate's agents: their reply schemas, their prompts, and the role -> engine mapping.

The debate logic (rounds.py) only says *which* role speaks with *which* previous turns; this module turns
that into an engine request and the engine's reply back into a Turn.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Sequence, get_args

from pydantic import BaseModel, ConfigDict, Field

from halucheck.config import EVIDENCE_K
from halucheck.engines.base import Request, Result, SamplingParams
from halucheck.prompts import load as load_prompts
from halucheck.records import Claim, Evidence, Role, State, Turn
from halucheck.text import sentences
from halucheck.verifiers.scoring import decision_score, value_token_prob

if TYPE_CHECKING:
    from halucheck.engines.base import Engine
    from halucheck.engines.pool import EnginePool




class AgentReply(BaseModel):
    """The paper's reply, every role alike (``--prompts paper``); constrained decoding enforces it and
    we validate it again."""

    model_config = ConfigDict(extra="forbid")
    opinion: str
    factuality: bool
    error_severity: int = Field(ge=0, le=5)


AGENT_SCHEMA: dict = AgentReply.model_json_schema()

# The default ("grounded") replies: each role's own fields, then a verdict whose two fields agree. The
# schema is a choice of two objects, factual with severity 0 or not factual with severity 1-5, so a
# reply can never be "factual, severity 3" (constrained decoding follows the schema exactly).
_TEXT = {"type": "string"}


def role_fields(role: str, n_passages: int = EVIDENCE_K) -> dict[str, dict]:
    """A grounded role's own reply fields; ``passages`` may name any of the ``n_passages`` shown (1 when none
    is: a number that names no passage is dropped from the opinion)."""
    cited = {"type": "array", "items": {"type": "integer", "enum": list(range(1, max(1, n_passages) + 1))},
             "maxItems": 3}
    return {
        "initial": {"passages": cited, "opinion": _TEXT},
        "skeptic": {"doubt": _TEXT, "passages": cited,
                    "finding": {"type": "string", "enum": ["supported", "contradicted", "not stated"]}, "why": _TEXT},
        "trust": {"passages": cited, "support": _TEXT},
        "leader": {"side": {"type": "string", "enum": ["trust", "skeptic", "both"]}, "reason": _TEXT},
    }[role]


def consistent_schema(fields: dict[str, dict], title: str = "reply") -> dict:
    """A JSON schema: ``fields`` in order, then factuality and error_severity that agree."""

    def branch(factual: bool) -> dict:
        props = dict(fields)
        props["factuality"] = {"type": "boolean", "const": factual}
        props["error_severity"] = {"type": "integer", "const": 0} if factual else \
            {"type": "integer", "enum": [1, 2, 3, 4, 5]}
        return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}

    return {"title": title, "anyOf": [branch(True), branch(False)]}


@lru_cache(maxsize=None)
def role_schema(role: str, n_passages: int = EVIDENCE_K) -> dict:
    """The grounded reply schema of ``role`` for a claim shown ``n_passages`` passages."""
    return consistent_schema(role_fields(role, n_passages), f"{role}_reply")


DEBATE_ROLES: tuple[Role, ...] = get_args(Role)
ROLE_SCHEMAS: dict[str, dict] = {role: role_schema(role) for role in DEBATE_ROLES}  # with the default evidence count

LABELS = {"initial": "first agent", "trust": "Trust agent", "skeptic": "Skeptic agent", "leader": "Leader agent"}


def schema_for(role: Role, prompts: str = "grounded", n_passages: int = EVIDENCE_K) -> dict:
    return AGENT_SCHEMA if prompts == "paper" else role_schema(role, n_passages)


@dataclass(frozen=True)
class AgentCall:
    """A request from the debate for one agent's turn: who speaks, in which state, after whom, with
    which prompt set."""

    role: Role
    state: State
    previous: tuple[Turn, ...] = ()
    prompts: str = "grounded"
    earlier: tuple[str, ...] = ()  # every earlier opinion of the chain, which this turn must not repeat


def _verdict_words(t: Turn) -> str:
    return "factual" if t.factuality else f"not factual (severity {t.error_severity})"


def build_messages(claim: Claim, evidence: Sequence[Evidence], call: AgentCall) -> tuple[dict, ...]:
    """Chat messages for one agent turn.

    Grounded set: the system message and the start of the user message (evidence, claim) are identical
    for every turn about the same claim; the role's task and the previous opinions come last.
    Paper set (Table 12): the role's prompt, the claim and evidence, then the previous agents' JSON.
    """
    if call.prompts == "paper":
        p = load_prompts("debate_paper")
        previous = [
            {"label": "previous agent" if call.role != "leader" else LABELS[t.role],
             "json": json.dumps({"opinion": t.opinion, "factuality": t.factuality,
                                 "error_severity": t.error_severity}, ensure_ascii=False)}
            for t in call.previous
        ]
        user = p["roles"][call.role].render() + "\n\n" + p["shared"].render(claim=claim.statement, evidence=list(evidence))
        if previous:
            user = user.rstrip() + "\n" + p["previous"].render(previous=previous).rstrip()
        return ({"role": "user", "content": user},)
    p = load_prompts("debate")
    shared = p["shared"].render(claim=claim.statement, evidence=list(evidence))
    user = shared + "\n\n" + p["roles"][call.role].render()
    if call.previous:
        previous = [{"label": LABELS[t.role], "verdict": _verdict_words(t), "opinion": brief(t.opinion)}
                    for t in call.previous]
        user += "\n" + p["previous"].render(previous=previous).rstrip()
    user += "\n\n" + p["answer"].render()
    return ({"role": "system", "content": p["system"].render()}, {"role": "user", "content": user})


def opinion_of(role: Role, reply: dict, n_evidence: int) -> str:
    """One line of prose for a grounded reply: what the report shows and the next agent reads."""
    cited = [n for n in reply.get("passages", []) if 1 <= n <= n_evidence]
    refs = ", ".join(f"[{n}]" for n in dict.fromkeys(cited))
    if role == "skeptic":
        text = f"Doubts \u201c{reply['doubt'].strip()}\u201d ({reply['finding']}): {reply['why'].strip()}"
    elif role == "trust":
        text = reply["support"].strip()
    elif role == "leader":
        side = {"both": "both agents", "trust": "the Trust agent", "skeptic": "the Skeptic agent"}[reply["side"]]
        text = f"Sides with {side}: {reply['reason'].strip()}"
    else:
        text = reply["opinion"].strip()
    return f"{text} (passages {refs})" if refs else text


# " (passages [1], [3])": how opinion_of closes a grounded opinion that cited passages
_PASSAGES = re.compile(r" \(passages (?:\[\d+\](?:, )?)+\)$")
_FRAME = re.compile(r"^(Sides with (both agents|the Trust agent|the Skeptic agent): |Doubts )|"
                    r" \((supported|contradicted|not stated)\):|" + _PASSAGES.pattern)
BRIEF_WORDS = 30


def brief(opinion: str, words: int = BRIEF_WORDS) -> str:
    """An opinion as the next agent reads it: its first sentence, at most ``words`` words, and the
    passages it cited. Small models continue whatever long text they are shown; a short line gives them
    the point to answer, not a paragraph to copy."""
    body, refs = opinion, ""
    m = _PASSAGES.search(opinion)
    if m:
        body, refs = opinion[: m.start()], m.group(0)
    first = next(iter(sentences(body)), "")
    cut = first.split()
    if len(cut) > words:
        first = " ".join(cut[:words]) + " \u2026"
    return first + refs


_NAME_OR_NUMBER = re.compile(r"\b(?:[A-Z][\w'\u2019-]*|\d[\d.,]*\d|\d)")
QUOTABLE_WORDS = 300


def quotable(claim: Claim, evidence: Sequence[Evidence]) -> str:
    """What an agent may repeat although another agent wrote it (``Request.quote``): the claim, and the
    names and numbers of the passages. Not the passages' other words: with ten passages nearly every
    common word is in them, and an agent could then copy another's sentence whole."""
    names = dict.fromkeys(m.group(0) for e in evidence for m in _NAME_OR_NUMBER.finditer(e.text))
    return claim.statement + "\n" + " ".join(list(names)[:QUOTABLE_WORDS])


def cited_passages(opinion: str) -> set[int]:
    """The passage numbers an opinion cited (what :func:`opinion_of` appended)."""
    m = _PASSAGES.search(opinion)
    return {int(n) for n in re.findall(r"\d+", m.group(0))} if m else set()


def agent_words(role: str, opinion: str) -> str:
    """An opinion without the fixed phrases :func:`opinion_of` puts around the agent's own words."""
    return _FRAME.sub("", opinion)


def repair(factuality: bool, severity: int) -> tuple[int, str | None]:
    """Make the severity agree with the verdict: factual => 0, not factual => at least 1."""
    if factuality and severity != 0:
        return 0, f"severity {severity} -> 0 (factual)"
    if not factuality and severity == 0:
        return 1, "severity 0 -> 1 (not factual)"
    return severity, None


def turn_from_result(call: AgentCall, result: Result, n_evidence: int = EVIDENCE_K) -> Turn:
    """Convert an engine result into a Turn; a failed or invalid reply becomes an error turn."""
    common = dict(
        state=call.state,
        role=call.role,
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
        cached_tokens=result.cached_tokens,
        latency_s=result.latency_s,
        capped=result.capped,
    )
    if result.error is None:
        try:
            if call.prompts == "paper":
                reply = AgentReply.model_validate(result.parsed)
                opinion, factuality, severity = reply.opinion, reply.factuality, reply.error_severity
            else:  # the engine validated it against the role's schema
                data = result.parsed
                opinion, factuality, severity = opinion_of(call.role, data, n_evidence), data["factuality"], \
                    int(data["error_severity"])
        except Exception as exc:  # schema and model disagree: still data, not a crash
            result.error = f"reply rejected: {exc}".splitlines()[0]
        else:
            severity, repaired = repair(factuality, severity)
            p = value_token_prob(result, "factuality")
            p_factual = None if p is None else 1.0 - decision_score(not factuality, p)
            return Turn(opinion=opinion, factuality=factuality, error_severity=severity, p_factual=p_factual,
                        repaired=repaired, **common)
    return Turn(opinion=result.text[:2000], factuality=None, error_severity=None, error=result.error, **common)


# Each debate role's defaults; models.yaml's `sampling:` section (per role) goes on top.
DEBATE_SAMPLING = SamplingParams(temperature=0.0, max_tokens=256)


class Agents:
    """Maps each debate role to its engine (from an engine pool, or one engine for every role) and its
    sampling settings (models.yaml's, through the pool's Settings)."""

    def __init__(self, engines: "EnginePool | None" = None, engine: "Engine | None" = None,
                 sampling: SamplingParams | None = None) -> None:
        if engines is None and engine is None:
            raise ValueError("Agents needs an engine pool or an engine")
        self.engines = engines
        self.engine = engine
        self.sampling = sampling or DEBATE_SAMPLING

    def engine_for(self, role: Role) -> "Engine":
        return self.engine if self.engine is not None else self.engines.engine_for(role)

    def engines_in_use(self) -> set["Engine"]:
        return {self.engine_for(r) for r in DEBATE_ROLES}

    def release(self, group: str) -> None:
        """A debate is over: its engines may drop the prompt prefix its calls shared."""
        for engine in self.engines_in_use():
            engine.release([group])

    def request(self, claim: Claim, evidence: Sequence[Evidence], call: AgentCall,
                group: str | None = None) -> Request:
        """``group``: the claim's key; every call of its debate shares a prompt start (see
        ``Request.prefix_group``)."""
        sampling = (self.engines.settings.sampling(call.role, self.sampling) if self.engines is not None
                    else self.sampling)
        return Request(
            messages=build_messages(claim, evidence, call),
            schema=schema_for(call.role, call.prompts, len(evidence)),
            sampling=sampling,
            logprobs=True,  # the factuality token's probability scores the turn
            tag=f"debate:{call.role}",
            # the n-gram ban guards the other agents' words and the reply itself, not the evidence
            avoid="\n".join(call.earlier),
            # ... while the claim's words and the passages' names and numbers stay free to use
            quote=quotable(claim, evidence),
            prefix_group=group,
        )
