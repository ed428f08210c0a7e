"""The Markov-chain multi-agent debate: agents, rounds (the chain) and the scheduler."""

from halucheck.verifiers.debate.agents import AGENT_SCHEMA, AgentCall, AgentReply, Agents
from halucheck.verifiers.debate.rounds import DebateConfig, debate, next_state
from halucheck.verifiers.debate.scheduler import DebateJob, Scheduler, check_claim, run_sequential

__all__ = [
    "AGENT_SCHEMA", "AgentCall", "AgentReply", "Agents", "DebateConfig", "DebateJob",
    "Scheduler", "check_claim", "debate", "next_state", "run_sequential",
]
