"""The debate's agents: their reply schemas, their prompts, and the role -> engine mapping.

The debate logic (rounds.py) only says *which* role speaks, *which* verdict it argues and *whom* it
answers; this module turns that into an engine request and the engine's reply back into a Turn, with
every quote checked (quotes.py).

Default ("grounded") set:

* ``initial`` (S0) is selfcheck's own request (``verifiers/judges.py``): the question and the answer as
  their own fields, reasoning before the verdict. Its replies are shared with ``-v selfcheck``.
* ``trust`` defends the standing verdict, ``skeptic`` attacks it; a stance arguing "factual" gives
  ``quotes`` and an ``argument``, one arguing "not factual" a ``finding`` ("contradicted" / "not
  stated"), ``quotes``, an ``argument`` and an ``error_severity``. The verdict of a stance is the one it
  was asked to argue; the quotes decide whether it counts. No repetition control touches a stance or a
  Leader (their quotes must be verbatim).
* ``leader`` reads both stances whole, with their quote checks, and names a ``winner``.

``--prompts paper`` keeps the paper's texts and reply (opinion, factuality, severity) for every role.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Sequence, get_args

from pydantic import BaseModel, ConfigDict, Field

from halucheck.config import VerifierOptions
from halucheck.engines.base import Request, Result, SamplingParams
from halucheck.prompts import load as load_prompts
from halucheck.records import Case, Claim, Evidence, Role, State, Turn
from halucheck.verifiers.base import passages, quotable, under_check, under_check_statement
from halucheck.verifiers.debate.quotes import QUOTE_CHARS, check_quotes, is_void
from halucheck.verifiers.judges import SelfCheck
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

ARGUMENT_CHARS = 300
_QUOTES = {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": QUOTE_CHARS},
           "minItems": 1, "maxItems": 2}
_ARGUMENT = {"type": "string", "maxLength": ARGUMENT_CHARS}


def _object(props: dict) -> dict:
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


# a stance's schema by the verdict it argues; the Leader's
STANCE_SCHEMAS: dict[bool, dict] = {
    True: {"title": "stance_factual", **_object({"quotes": _QUOTES, "argument": _ARGUMENT})},
    False: {"title": "stance_not_factual", **_object({
        "finding": {"type": "string", "enum": ["contradicted", "not stated"]}, "quotes": _QUOTES,
        "argument": _ARGUMENT, "error_severity": {"type": "integer", "enum": [1, 2, 3, 4, 5]}})},
}
LEADER_SCHEMA: dict = {"title": "leader", **_object({"reason": _ARGUMENT,
                                                     "winner": {"type": "string", "enum": ["trust", "skeptic"]}})}

DEBATE_ROLES: tuple[Role, ...] = get_args(Role)
LABELS = {"initial": "first agent", "trust": "Trust agent", "skeptic": "Skeptic agent", "leader": "Leader agent"}
NAMES = {"trust": "Trust", "skeptic": "Skeptic"}


@dataclass(frozen=True)
class AgentCall:
    """A request from the debate for one agent's turn: who speaks, in which state, which verdict it
    argues (a stance: True = factual; the Leader: the standing verdict), whom it reads (the Leader: both
    stances, in the order they spoke; the paper's agents: the turns before them), with which prompt set. ``swapped``: the
    Leader reads the Skeptic's stance first."""

    role: Role
    state: State
    previous: tuple[Turn, ...] = ()
    prompts: str = "grounded"
    argues: bool | None = None
    swapped: bool = False
    # the paper's agents: every earlier opinion of the chain, what this turn's repetition controls guard
    # (``Request.avoid``; never the evidence, which the agent may quote)
    earlier: tuple[str, ...] = ()


def schema_for(call: AgentCall) -> dict | None:
    if call.prompts == "paper":
        return AGENT_SCHEMA
    if call.role == "leader":
        return LEADER_SCHEMA
    return STANCE_SCHEMAS[bool(call.argues)]


def _noun(claim: Claim) -> str:
    return "answer" if claim.question else "text"


def stance_view(t: Turn) -> dict:
    """A stance as the Leader reads it: verdict, finding, quotes with their checks."""
    checks = []
    for q in t.quotes:
        if q.verified:
            checks.append(f"found in passage [{q.passage}]" if q.passage else "checked: no passage states it")
        else:
            checks.append(f"NOT FOUND ({q.why})" if q.why else "NOT FOUND")
    return {"name": NAMES[t.role], "position": "factual" if t.factuality else "not factual",
            "finding": t.finding if t.finding != "supported" else None,
            "quotes": [{"text": q.text, "check": c} for q, c in zip(t.quotes, checks)], "argument": t.opinion}


def build_messages(claim: Claim, evidence: Sequence[Evidence], call: AgentCall) -> tuple[dict, ...]:
    """Chat messages for one stance or Leader turn (S0 is selfcheck's request: :meth:`Agents.request`).

    Grounded set: the system message and the start of the user message (evidence, question, text) are
    identical for every call about the same claim; the role's task and the stances come last.
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
        shown = [replace(e, text=t) for e, t in zip(evidence, passages(claim, evidence))]
        user = (p["roles"][call.role].render() + "\n\n"
                + p["shared"].render(claim=under_check_statement(claim), evidence=shown))
        if previous:
            user = user.rstrip() + "\n" + p["previous"].render(previous=previous).rstrip()
        return ({"role": "user", "content": user},)
    p = load_prompts("debate")
    noun = _noun(claim)
    user = p["shared"].render(evidence=passages(claim, evidence), question=claim.question, text=under_check(claim)) + "\n\n"
    if call.role == "leader":
        first, second = (call.previous[::-1] if call.swapped else call.previous)
        user += p["leader"].render(noun=noun, standing="factual" if call.argues else "not factual",
                                   first=p["stance"].render(s=stance_view(first), noun=noun),
                                   second=p["stance"].render(s=stance_view(second), noun=noun))
    else:
        task = p["argue_factual" if call.argues else "argue_not_factual"]
        defends = (call.role == "trust")
        user += task.render(name=NAMES[call.role], defends=defends, noun=noun)
    user += "\n\n" + p["answer"].render()
    return ({"role": "system", "content": p["system"].render(noun=noun)}, {"role": "user", "content": user})


def repair(factuality: bool, severity: int) -> tuple[int, str | None]:
    """Make the severity agree with the verdict: factual => 0, not factual => at least 1."""
    if factuality and severity != 0:
        return 0, f"severity {severity} -> 0 (factual)"
    if not factuality and severity == 0:
        return 1, "severity 0 -> 1 (not factual)"
    return severity, None


def turn_from_result(call: AgentCall, result: Result, claim: Claim | None = None,
                     evidence: Sequence[Evidence] = ()) -> Turn:
    """Convert an engine result into a Turn; a failed or invalid reply becomes an error turn. A stance's
    quotes are checked against ``evidence`` (and, for "not stated", against ``claim``)."""
    common = dict(state=call.state, role=call.role, prompt_tokens=result.prompt_tokens,
                  completion_tokens=result.completion_tokens, cached_tokens=result.cached_tokens,
                  latency_s=result.latency_s, capped=result.capped)
    if result.error is None:
        try:
            return _turn(call, result, result.parsed, claim, evidence, common)
        except Exception as exc:  # schema and model disagree: still data, not a crash
            result.error = f"reply rejected: {exc}".splitlines()[0]
    return Turn(opinion=result.text[:2000], factuality=None, error_severity=None, error=result.error, **common)


def _turn(call: AgentCall, result: Result, data: dict, claim: Claim | None, evidence: Sequence[Evidence],
          common: dict) -> Turn:
    if call.prompts == "paper":
        reply = AgentReply.model_validate(data)
        severity, repaired = repair(reply.factuality, reply.error_severity)
        p = value_token_prob(result, "factuality")
        p_factual = None if p is None else 1.0 - decision_score(not reply.factuality, p)
        return Turn(opinion=reply.opinion, factuality=reply.factuality, error_severity=severity,
                    p_factual=p_factual, repaired=repaired, **common)
    if call.role == "initial":  # selfcheck's reply
        factual = bool(data["factuality"])
        p = value_token_prob(result, "factuality")
        p_factual = None if p is None else 1.0 - decision_score(not factual, p)
        return Turn(opinion=str(data["reasoning"]).strip(), factuality=factual, error_severity=0 if factual else None,
                    p_factual=p_factual, **common)
    if call.role == "leader":
        winner = data["winner"]
        if winner not in NAMES:
            raise ValueError(f"winner {winner!r} is neither trust nor skeptic")
        factual = call.argues if winner == "trust" else not call.argues
        p = value_token_prob(result, "winner")
        p_win = 1.0 if p is None else max(0.5, p)  # the probability of the side it chose (see decision_score)
        p_factual = p_win if factual else 1.0 - p_win
        return Turn(opinion=str(data["reason"]).strip(), factuality=factual, error_severity=None,
                    p_factual=p_factual, winner=winner, **common)
    quotes = [q for q in data["quotes"] if isinstance(q, str)][:2]
    if not quotes:
        raise ValueError("a stance needs one or two quotes")
    finding = data.get("finding", "supported")
    statement = claim.statement if claim is not None else ""
    finding, checks = check_quotes(finding, quotes, statement, passages(claim, evidence) if claim is not None
                                   else [e.text for e in evidence])
    factual = bool(call.argues)
    severity = 0 if factual else int(data["error_severity"])
    return Turn(opinion=str(data["argument"]).strip(), factuality=factual, error_severity=severity,
                finding=finding, quotes=checks, void=is_void(checks), **common)


# Each stance's and Leader's defaults; models.yaml's `sampling:` section (per role) goes on top, except
# the repetition controls: a stance quotes the passages word for word (see Agents.request).
DEBATE_SAMPLING = SamplingParams(temperature=0.0, max_tokens=256)
_NO_REPETITION_CONTROLS = dict(repetition_penalty=1.0, frequency_penalty=0.0, presence_penalty=0.0,
                               no_repeat_ngram_size=0)


class Agents:
    """Maps each debate role to its engine (from an engine pool, or one engine for every role) and its
    sampling settings (models.yaml's, through the pool's Settings)."""

    def __init__(self, engines: "EnginePool | None" = None, engine: "Engine | None" = None,
                 sampling: SamplingParams | None = None, options: VerifierOptions | None = None) -> None:
        if engines is None and engine is None:
            raise ValueError("Agents needs an engine pool or an engine")
        self.engines = engines
        self.engine = engine
        self.sampling = sampling or DEBATE_SAMPLING
        self.first = SelfCheck(options or VerifierOptions())  # S0

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
        if call.role == "initial" and call.prompts != "paper":
            return replace(self.first.request(Case(claim, tuple(evidence)), self.engines), tag="debate:initial")
        sampling = (self.engines.settings.sampling(call.role, self.sampling) if self.engines is not None
                    else self.sampling)
        if call.prompts != "paper":
            sampling = replace(sampling, **_NO_REPETITION_CONTROLS)
        return Request(
            messages=build_messages(claim, evidence, call),
            schema=schema_for(call),
            sampling=sampling,
            logprobs=True,  # the verdict or winner token's probability scores the turn
            tag=f"debate:{call.role}",
            avoid="\n".join(call.earlier) if call.prompts == "paper" else None,
            quote=quotable(claim, evidence) if call.prompts == "paper" else None,
            prefix_group=group,
        )

