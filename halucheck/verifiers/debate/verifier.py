"""``debate``: the Markov-chain multi-agent debate as a verifier, every claim's debate in flight at once.

The verdict and P(hallucinated) are the fitted score's (``score.py``: the weights ``halucheck calibrate -v
debate`` refitted for the profile, else the shipped ones); the trace is the whole chain, every stance with its
checked quotes.
"""

from __future__ import annotations

from halucheck.verifiers.debate.agents import Agents
from halucheck.verifiers.debate.scheduler import Scheduler
from halucheck.verifiers.debate.score import resolve_weights
from halucheck.records import Verdict
from halucheck.verifiers.base import Cost, Verifier


class DebateVerifier(Verifier):
    """Trust / Skeptic / Leader debate through the Scheduler (`halucheck run` hands it identical claims once)."""

    name = "debate"

    def describe(self) -> dict:
        c = self.options.debate
        return {"policy": c.policy, "min_rounds": c.min_rounds, "max_rounds": c.max_rounds, "prompts": c.prompts,
                "leader_both_orders": c.leader_both_orders}

    def least_calls(self) -> int:
        c = self.options.debate
        # the paper's chain: three agents a state; ours: two stances (a void one spares the Leader)
        return 1 + (3 if c.prompts == "paper" else 2) * min(c.min_rounds, c.max_rounds)

    def verify(self, checks, engines, on_verdict=None, on_call=None) -> list[Verdict]:
        prof = engines.settings.profile_for("initial")
        weights = resolve_weights(prof.name, prof.model)
        sched = Scheduler(Agents(engines, options=self.options), self.options.debate, on_verdict=on_verdict,
                          on_turn=on_call, weights=weights)
        verdicts = sched.run(checks)
        s = sched.stats
        failed = sum(t.error is not None for v in verdicts for t in v.chain)
        self.costs = {self.name: Cost(len(checks), s.llm_calls, s.prompt_tokens, s.completion_tokens,
                                      s.cached_tokens, failed, s.wall_s)}
        return verdicts
