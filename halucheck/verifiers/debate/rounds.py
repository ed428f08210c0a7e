"""The Markov-chain multi-agent debate (MCMAD), exactly as the paper, readable on one screen.

S0: the initial agent gives a first opinion. Then the chain moves between two states of three agents:
S1 = Trust -> Skeptic -> Leader and S2 = Skeptic -> Trust -> Leader. The next state depends only on the
previous state's result R (its last valid factuality) through the transition policy. The chain stops when
the three agents of a state agree on factuality and at least ``min_rounds`` states have run, or after
``max_rounds`` states. The final verdict is the last Leader's.

``debate()`` is a generator: it yields an AgentCall for every turn and receives the Turn back. It never
touches an engine, so the same logic runs one claim at a time or thousands at once (scheduler.py).
"""

from __future__ import annotations

from typing import Generator, Sequence

from halucheck.config import DebateConfig
from halucheck.verifiers.debate.agents import AgentCall
from halucheck.records import Claim, Evidence, State, Turn, Verdict
from halucheck.verifiers.scoring import pool

# Policy -> (next state when R is True, next state when R is False). Paper Table 4; default True->Skeptic.
POLICIES: dict[str, tuple[State, State]] = {
    "true-skeptic": ("S2", "S1"),
    "true-trust": ("S1", "S2"),
    "always-trust": ("S1", "S1"),
    "always-skeptic": ("S2", "S2"),
}
ORDER: dict[State, tuple[str, str, str]] = {
    "S1": ("trust", "skeptic", "leader"),
    "S2": ("skeptic", "trust", "leader"),
}


def next_state(policy: str, result: bool) -> State:
    """The transition: the next state given the previous state's result R."""
    on_true, on_false = POLICIES[policy]
    return on_true if result else on_false


def debate(claim: Claim, evidence: Sequence[Evidence], cfg: DebateConfig = DebateConfig(),
           ) -> Generator[AgentCall, Turn, Verdict]:
    """Run one claim's debate; yields AgentCalls, receives Turns, returns the Verdict."""
    chain: list[Turn] = [(yield AgentCall("initial", "S0", prompts=cfg.prompts))]
    result = last_valid(chain)
    rounds, consensus = 0, False
    while rounds < cfg.max_rounds:
        state = next_state(cfg.policy, bool(result.factuality) if result else True)
        turns: list[Turn] = []
        for role in ORDER[state]:
            if role == "leader":  # the Leader reads both agents of this state, in the order they spoke
                previous = tuple(t for t in turns if t.ok)
            else:  # Trust and Skeptic read the agent just before them (the last valid one)
                prev = last_valid(chain + turns)
                previous = (prev,) if prev else ()
            earlier = tuple(t.opinion for t in chain + turns if t.ok)  # what the agent must not repeat
            turns.append((yield AgentCall(role, state, previous, cfg.prompts, earlier)))
        chain += turns
        rounds += 1
        result = last_valid(turns) or result
        consensus = all(t.ok for t in turns) and len({t.factuality for t in turns}) == 1
        if consensus and rounds >= cfg.min_rounds:
            break
    return make_verdict(chain, rounds, consensus)


def last_valid(turns: Sequence[Turn]) -> Turn | None:
    return next((t for t in reversed(turns) if t.ok), None)


def make_verdict(chain: list[Turn], rounds: int, consensus: bool) -> Verdict:
    """Final verdict = the last Leader's (the last valid turn if no Leader answered validly).

    P(hallucinated) pools every valid turn's own probability that the claim is not factual (its
    factuality token's probability; 0 or 1 where the engine gave none) by the mean of their log-odds
    (``scoring.pool``): every agent read the evidence, so every agent's certainty counts, and a split
    chain lands near 0.5 even when its last Leader was sure. Confidence = the pooled probability of the
    side the verdict took; below 0.5 it says the chain as a whole leaned the other way.
    """
    leaders = [t for t in chain if t.ok and t.role == "leader"]
    final = leaders[-1] if leaders else last_valid(chain)
    if final is None:
        errors = {t.error for t in chain if t.error}
        return Verdict(None, None, 0.0, chain, rounds, False,
                       error="no agent gave a valid reply: " + "; ".join(sorted(errors))[:500])
    p_h = pool(1.0 - (t.p_factual if t.p_factual is not None else float(t.factuality)) for t in chain if t.ok)
    confidence = p_h if not final.factuality else 1.0 - p_h
    return Verdict(final.factuality, final.error_severity, confidence, chain, rounds, consensus, p_hallucinated=p_h)
