"""The debate as a Markov chain, readable on one screen.

S0: the first agent (selfcheck's request) gives the standing verdict. Each state after it is one round:
Trust defends the standing verdict and Skeptic attacks it, each with checked quotes; S1 lets Trust speak
first, S2 the Skeptic, chosen from the standing verdict by the transition policy (the seed's states,
with Trust and Skeptic trusting and doubting the *verdict*, so the chain can move either way). Each side
argues from the passages alone (shown the other's stance, a 1.5B model copies its quotes); the Leader
reads both, in the order they spoke, with their quote checks, and names a winner, whose verdict becomes the
standing one. Only a Leader moves the verdict: an attack with no verified quote (void) or no valid reply
fails without a Leader call, but a void defence still goes to the Leader (on Factcheck-GPT dev, the attacks
that won against a void defence without one were wrong 24 times in 29).
The chain stops once an attack has failed (consensus on the standing verdict) and ``min_rounds`` have
run, or after ``max_rounds``. The verdict is the fitted score's (``score.py``: the first agent's and the
Leaders' probabilities, the verified-quote margin and the standing verdict, weights and threshold fitted on dev).

``debate()`` is a generator: it yields an AgentCall for every turn and receives the Turn back. It never
touches an engine, so the same logic runs one claim at a time or thousands at once (scheduler.py).
``--prompts paper`` runs the paper's own chain (:func:`paper_debate`).
"""

from __future__ import annotations

from typing import Generator, Sequence, cast

from halucheck.config import DEBATE_POLICIES, DebateConfig
from halucheck.records import Claim, Evidence, State, Turn, Verdict
from halucheck.verifiers.debate.agents import AgentCall
from halucheck.verifiers.debate.score import ScoreWeights, features, round_verdict, shipped
from halucheck.verifiers.scoring import pool

ORDER: dict[State, tuple[str, str, str]] = {
    "S1": ("trust", "skeptic", "leader"),
    "S2": ("skeptic", "trust", "leader"),
}
DEFAULT_SEVERITY = 2  # "a noticeable part is wrong or unsupported", when no stance rated the error


def next_state(policy: str, result: bool) -> State:
    """The transition: the next state given the standing verdict R (``config.DEBATE_POLICIES``, paper Table 4)."""
    on_true, on_false = DEBATE_POLICIES[policy]
    return cast(State, on_true if result else on_false)


def debate(claim: Claim, evidence: Sequence[Evidence], cfg: DebateConfig = DebateConfig(),
           weights: ScoreWeights | None = None) -> Generator[AgentCall, Turn, Verdict]:
    """Run one claim's debate; yields AgentCalls, receives Turns, returns the Verdict (scored with
    ``weights``, default the shipped ones)."""
    if cfg.prompts == "paper":
        return (yield from paper_debate(claim, evidence, cfg))
    first = yield AgentCall("initial", "S0")
    chain, rounds, consensus = [first], 0, False
    if not first.ok:
        return make_verdict(chain, None, 0, False)
    standing = bool(first.factuality)
    while rounds < cfg.max_rounds:
        state = next_state(cfg.policy, standing)
        sides: dict[str, Turn] = {}
        for role in ORDER[state][:2]:  # each side argues from the passages alone, not from the other's words
            sides[role] = yield AgentCall(role, state, argues=standing if role == "trust" else not standing)
        chain += list(sides.values())
        trust, skeptic = sides["trust"], sides["skeptic"]
        if skeptic.counts and trust.ok:  # a checked attack against a defence, void or not: the Leader decides
            leaders = []
            for swapped in (False, True)[: 2 if cfg.leader_both_orders else 1]:
                heard = tuple(sides.values())  # in the order they spoke; ``swapped``: the other order
                leaders.append((yield AgentCall("leader", state, heard, argues=standing, swapped=swapped)))
            chain += leaders
            # the Leader's winner (both orders agreeing), else their token probabilities, a tie to the defender
            moved = round_verdict(leaders, standing)
            if moved is None:  # no valid Leader: nothing moves (the failed turn is retried on a rerun)
                rounds += 1
                break
            verdict = moved
        else:  # an attack without a verified quote fails, a defence with no valid reply loses: no call
            verdict = standing if not skeptic.counts else not standing
            chain.append(Turn(state, "leader", _walkover(trust, skeptic), verdict, None,
                              winner="trust" if verdict == standing else "skeptic"))
        rounds += 1
        consensus = verdict == standing
        standing = verdict
        if consensus and rounds >= cfg.min_rounds:
            break
    return make_verdict(chain, standing, rounds, consensus, weights)


def _walkover(trust: Turn, skeptic: Turn) -> str:
    if not skeptic.counts:
        why = "gave no valid reply" if not skeptic.ok else "has no verified quote"
        return f"The Skeptic agent {why}: the standing verdict stays, without a Leader call."
    return "The Trust agent gave no valid reply: the Skeptic agent wins without a Leader call."


def make_verdict(chain: list[Turn], standing: bool | None, rounds: int, consensus: bool,
                 weights: ScoreWeights | None = None) -> Verdict:
    """The verdict of the fitted score (``score.py``: P(hallucinated) from the chain's features, the standing
    verdict among them, and its threshold), with the severity of the last stance that rated the error."""
    if standing is None:
        errors = {t.error for t in chain if t.error}
        return Verdict(None, None, 0.0, chain, rounds, False,
                       error="no agent gave a valid reply: " + "; ".join(sorted(errors))[:500])
    weights = weights or shipped()
    p_h = weights.score(features(chain, standing))
    factual = p_h < weights.threshold
    severity = 0 if factual else next(
        (t.error_severity for t in reversed(chain) if t.ok and t.role in ("initial", "trust", "skeptic")
         and t.factuality is False and t.error_severity), DEFAULT_SEVERITY)
    return Verdict(factual, severity, 1.0 - p_h if factual else p_h, chain, rounds, consensus, p_hallucinated=p_h)


# ---------------------------------------------------------------- the paper's own chain (--prompts paper)


def paper_debate(claim: Claim, evidence: Sequence[Evidence], cfg: DebateConfig) -> Generator[AgentCall, Turn, Verdict]:
    """MCMAD as published: Trust and Skeptic read the turn just before them, the Leader both; the chain
    stops when a state's three agents agree; the verdict is the last Leader's, its score the log-odds
    pool of every valid turn."""
    chain: list[Turn] = [(yield AgentCall("initial", "S0", prompts="paper"))]
    result = last_valid(chain)
    rounds, consensus = 0, False
    while rounds < cfg.max_rounds:
        state = next_state(cfg.policy, bool(result.factuality) if result else True)
        turns: list[Turn] = []
        for role in ORDER[state]:
            prev = last_valid(chain + turns)
            previous = tuple(t for t in turns if t.ok) if role == "leader" else ((prev,) if prev else ())
            earlier = tuple(t.opinion for t in chain + turns if t.ok)  # what its repetition controls guard
            turns.append((yield AgentCall(role, state, previous, "paper", earlier=earlier)))
        chain += turns
        rounds += 1
        result = last_valid(turns) or result
        consensus = all(t.ok for t in turns) and len({t.factuality for t in turns}) == 1
        if consensus and rounds >= cfg.min_rounds:
            break
    leaders = [t for t in chain if t.ok and t.role == "leader"]
    final = leaders[-1] if leaders else last_valid(chain)
    if final is None:
        return make_verdict(chain, None, rounds, False)
    p_h = pool(1.0 - (t.p_factual if t.p_factual is not None else float(t.factuality)) for t in chain if t.ok)
    confidence = p_h if not final.factuality else 1.0 - p_h
    return Verdict(final.factuality, final.error_severity, confidence, chain, rounds, consensus, p_hallucinated=p_h)


def last_valid(turns: Sequence[Turn]) -> Turn | None:
    return next((t for t in reversed(turns) if t.ok), None)
