"""The debate chain: transitions, consensus stop, min/max rounds, bad replies, verdicts."""

import json

import pytest

from halucheck.debate import Agents, DebateConfig, check_claim, next_state
from halucheck.debate.agents import AGENT_SCHEMA, build_messages, AgentCall
from halucheck.engines.fake import FakeEngine
from halucheck.errors import ConfigError
from halucheck.records import Claim, Evidence

CLAIM = Claim("The Eiffel Tower is in Berlin.")
EVIDENCE = [Evidence("The Eiffel Tower is a wrought-iron lattice tower in Paris, France.")]


def reply(factuality: bool, severity: int = 0, opinion: str = "because") -> dict:
    return {"opinion": opinion, "factuality": factuality, "error_severity": severity}


def by_role(table: dict) -> FakeEngine:
    """An engine whose reply depends only on the speaking role (table: role -> factuality)."""

    def responder(request):
        role = request.tag.split(":")[1]
        return reply(table[role], 0 if table[role] else 4, opinion=role)

    return FakeEngine(responder=responder)


def run(engine, **cfg):
    return check_claim(CLAIM, EVIDENCE, Agents(engine=engine), DebateConfig(**cfg))


def states(verdict):
    return [(t.state, t.role) for t in verdict.chain]


@pytest.mark.parametrize(
    "policy, r_true, r_false",
    [("true-skeptic", "S2", "S1"), ("true-trust", "S1", "S2"), ("always-trust", "S1", "S1"),
     ("always-skeptic", "S2", "S2")],
)
def test_transition_table(policy, r_true, r_false):
    assert next_state(policy, True) == r_true
    assert next_state(policy, False) == r_false


@pytest.mark.parametrize("policy", ["true-skeptic", "true-trust", "always-trust", "always-skeptic"])
@pytest.mark.parametrize("initial", [True, False])
def test_first_state_follows_policy_and_state_order(policy, initial):
    # everyone after the initial agent agrees with it: consensus every round, stops at min_rounds
    engine = FakeEngine(replies=[reply(initial)] * 20)
    v = run(engine, policy=policy, min_rounds=1)
    expected = next_state(policy, initial)
    order = ["trust", "skeptic", "leader"] if expected == "S1" else ["skeptic", "trust", "leader"]
    assert states(v) == [("S0", "initial")] + [(expected, r) for r in order]
    assert v.rounds == 1 and v.consensus


def test_next_state_uses_previous_states_result():
    # initial True -> S2; its Leader says False -> S1 (true-skeptic); then all False -> consensus
    engine = FakeEngine(replies=[reply(True), reply(True), reply(True), reply(False, 4)] + [reply(False, 4)] * 3)
    v = run(engine, min_rounds=1, max_rounds=5)
    assert [s for s, _ in states(v)] == ["S0", "S2", "S2", "S2", "S1", "S1", "S1"]
    # round 1 had no consensus (True, True, False), round 2 did
    assert v.rounds == 2 and v.consensus
    assert v.factuality is False and v.error_severity == 4


def test_consensus_stops_only_after_min_rounds():
    engine = FakeEngine(replies=[reply(True)] * 40)
    assert run(engine, min_rounds=2).rounds == 2
    engine = FakeEngine(replies=[reply(True)] * 40)
    assert run(engine, min_rounds=3, max_rounds=5).rounds == 3
    engine = FakeEngine(replies=[reply(True)] * 40)
    v = run(engine, min_rounds=0, max_rounds=4)
    assert v.rounds == 1  # consensus checked after each state; 0 and 1 behave alike


def test_no_consensus_runs_to_max_rounds_and_leader_decides():
    # Skeptic always disagrees: never a consensus
    engine = by_role({"initial": True, "trust": True, "skeptic": False, "leader": False})
    v = run(engine, min_rounds=1, max_rounds=3)
    assert v.rounds == 3 and not v.consensus
    assert len(v.chain) == 1 + 3 * 3
    assert v.factuality is False and v.chain[-1].role == "leader"
    # true-skeptic: initial True -> S2; Leader False -> S1; Leader False -> S1
    assert [v.chain[i].state for i in (1, 4, 7)] == ["S2", "S1", "S1"]


def test_max_rounds_zero_is_initial_agent_alone():
    v = run(FakeEngine(replies=[reply(False, 5)]), min_rounds=0, max_rounds=0)
    assert states(v) == [("S0", "initial")]
    assert v.factuality is False and v.error_severity == 5


def test_confidence_is_agreement_share():
    engine = by_role({"initial": True, "trust": True, "skeptic": False, "leader": False})
    v = run(engine, min_rounds=1, max_rounds=1)
    # turns: initial T, skeptic F, trust T, leader F -> 2 of 4 agree with the final False
    assert v.confidence == pytest.approx(0.5)


def test_previous_turns_passed_as_in_table_12():
    engine = by_role({"initial": True, "trust": True, "skeptic": False, "leader": False})
    run(engine, min_rounds=1, max_rounds=1)
    skeptic, trust, leader = (r.messages[1]["content"] for r in engine.requests[1:4])
    assert "Here is the response from the previous agent:" in skeptic and '"opinion": "initial"' in skeptic
    assert '"opinion": "skeptic"' in trust and '"opinion": "initial"' not in trust
    # the Leader reads the Skeptic then the Trust agent of its own state
    assert leader.index("response from the Skeptic agent") < leader.index("response from the Trust agent")
    assert '"opinion": "initial"' not in leader


def test_shared_prefix_is_byte_identical_across_roles():
    calls = [AgentCall("initial", "S0"), AgentCall("skeptic", "S2"), AgentCall("leader", "S2")]
    msgs = [build_messages(CLAIM, EVIDENCE, c) for c in calls]
    assert len({m[0]["content"] for m in msgs}) == 1  # same system prompt
    prefix = msgs[0][1]["content"].split("\n\n")[0]
    assert all(m[1]["content"].startswith(prefix) for m in msgs)
    assert "Eiffel Tower is a wrought-iron" in prefix and CLAIM.text in msgs[0][1]["content"]


def test_bad_reply_is_retried_then_kept():
    # invalid JSON, then a schema violation (severity 9): retried; the third attempt is valid
    engine = FakeEngine(replies=["not json", json.dumps(reply(True, 9)), reply(False, 3)] + [reply(False, 3)] * 20)
    v = run(engine, min_rounds=1)
    first = v.chain[0]
    assert first.ok and first.factuality is False
    assert engine.requests[1].sampling.temperature > 0  # a retry samples instead of repeating greedy


def test_reply_that_never_validates_becomes_an_error_turn():
    engine = FakeEngine(replies=["{oops"] * 3 + [reply(True)] * 20)
    v = run(engine, min_rounds=1)
    first = v.chain[0]
    assert not first.ok and first.factuality is None and "not valid JSON" in first.error
    # the debate went on: the next agent gets no previous opinion, the verdict is still a Leader's
    assert v.chain[-1].role == "leader" and v.factuality is True
    assert json.loads(json.dumps(v.to_dict()))["chain"][0]["error"]


def test_engine_error_for_every_turn_gives_an_error_verdict_not_a_crash():
    engine = FakeEngine(responder=lambda r: RuntimeError("server down"))
    v = run(engine, min_rounds=1, max_rounds=2)
    assert v.factuality is None and v.error and "server down" in v.error
    assert all(not t.ok for t in v.chain)


def test_agent_schema_is_the_contract():
    assert set(AGENT_SCHEMA["properties"]) == {"opinion", "factuality", "error_severity"}
    sev = AGENT_SCHEMA["properties"]["error_severity"]
    assert (sev["minimum"], sev["maximum"]) == (0, 5)


def test_bad_config_is_rejected():
    with pytest.raises(ConfigError, match="unknown policy"):
        DebateConfig(policy="sometimes")
    with pytest.raises(ConfigError, match="min_rounds <= max_rounds"):
        DebateConfig(min_rounds=3, max_rounds=2)


def test_short_qa_joins_question_and_answer():
    engine = FakeEngine()
    check_claim(Claim("Paris.", question="What is the capital of France?"), EVIDENCE, Agents(engine=engine),
                DebateConfig(max_rounds=0, min_rounds=0))
    assert "[text]: What is the capital of France? Paris." in engine.requests[0].messages[1]["content"]


def test_engine_reported_failure_is_not_retried():
    engine = FakeEngine(responder=lambda r: RuntimeError("server down"))
    run(engine, min_rounds=0, max_rounds=0)
    assert len(engine.requests) == 1  # the engine already retried its transport: final
