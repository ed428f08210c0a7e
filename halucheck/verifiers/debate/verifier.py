"""``debate``: the Markov-chain multi-agent debate as a verifier, every claim's debate in flight at once.

The verdict is the last Leader's; P(hallucinated) pools every valid turn's factuality-token probability
over the chain (``halucheck.verifiers.scoring.pool``); the trace is the whole chain.
"""

from __future__ import annotations

from halucheck.verifiers.debate.agents import Agents
from halucheck.verifiers.debate.scheduler import Scheduler
from halucheck.records import Verdict
from halucheck.verifiers.base import Cost, Verifier


class DebateVerifier(Verifier):
    """Trust / Skeptic / Leader debate through the Scheduler (identical claims are debated once)."""

    name = "debate"

    def describe(self) -> dict:
        c = self.options.debate
        return {"policy": c.policy, "min_rounds": c.min_rounds, "max_rounds": c.max_rounds, "prompts": c.prompts}

    def least_calls(self) -> int:
        c = self.options.debate
        return 1 + 3 * min(c.min_rounds, c.max_rounds)

    def verify(self, checks, engines, on_verdict=None, on_call=None) -> list[Verdict]:
        sched = Scheduler(Agents(engines), self.options.debate, on_verdict=on_verdict, on_turn=on_call)
        verdicts = sched.run(checks)
        s = sched.stats
        failed = sum(t.error is not None for v in verdicts for t in v.chain)
        self.costs = {self.name: Cost(len(checks), s.llm_calls, s.prompt_tokens, s.completion_tokens,
                                      s.cached_tokens, failed, s.wall_s)}
        return verdicts
