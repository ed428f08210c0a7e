"""The debate chain: transitions, consensus stop, min/max rounds, bad replies, verdicts."""

import json

import pytest

from halucheck.verifiers.debate import Agents, DebateConfig, check_claim, next_state
import math

import jsonschema

from halucheck.verifiers.debate.agents import (AGENT_SCHEMA, BRIEF_WORDS, ROLE_SCHEMAS, AgentCall, brief, build_messages,
                                     role_schema, turn_from_result)
from halucheck.engines.base import Result
from halucheck.engines.fake import FakeEngine
from halucheck.errors import ConfigError
from halucheck.records import Claim, Evidence
from halucheck.verifiers.scoring import EPS, pool

CLAIM = Claim("The Eiffel Tower is in Berlin.")
EVIDENCE = [Evidence("The Eiffel Tower is a wrought-iron lattice tower in Paris, France.")]


def reply(factuality: bool, severity: int | None = None, opinion: str = "because") -> dict:
    """A reply for any role: the fake engine keeps the fields the role's schema has (fake.fit)."""
    if severity is None:
        severity = 0 if factuality else 3
    return {"opinion": opinion, "doubt": opinion, "why": opinion, "support": opinion, "reason": opinion,
            "factuality": factuality, "error_severity": severity}


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


def test_score_pools_the_turns_without_logprobs_as_votes():
    engine = by_role({"initial": True, "trust": True, "skeptic": False, "leader": False})
    v = run(engine, min_rounds=1, max_rounds=1)
    # turns: initial T, skeptic F, trust T, leader F: two sure votes each way pool to 0.5
    assert v.p_hallucinated == pytest.approx(0.5) and v.confidence == pytest.approx(0.5)
    engine = by_role({"initial": False, "trust": False, "skeptic": False, "leader": False})
    v = run(engine, min_rounds=1, max_rounds=1)
    assert v.p_hallucinated == pytest.approx(1 - EPS) and v.confidence == pytest.approx(1 - EPS)


def _logprob_reply(role_reply: dict, p_chosen: float) -> Result:
    text = json.dumps(role_reply)
    head, _, tail = text.partition('"factuality": ')
    lps = [(head + '"factuality": ', 0.0), (tail[:5 if tail.startswith("false") else 4], math.log(p_chosen)),
           (tail[5 if tail.startswith("false") else 4:], 0.0)]
    return Result(text=text, parsed=role_reply, logprobs=lps)


def test_turn_probability_comes_from_the_factuality_token():
    call = AgentCall("skeptic", "S2")
    t = turn_from_result(call, _logprob_reply({"doubt": "in Berlin", "passages": [1], "finding": "contradicted",
                                                "why": "It is in Paris.", "factuality": False,
                                                "error_severity": 4}, 0.8))
    assert t.factuality is False and t.p_factual == pytest.approx(0.2)
    assert t.opinion == "Doubts \u201cin Berlin\u201d (contradicted): It is in Paris. (passages [1])"
    t = turn_from_result(AgentCall("initial", "S0"), _logprob_reply(
        {"passages": [], "opinion": "Supported.", "factuality": True, "error_severity": 0}, 0.9))
    assert t.p_factual == pytest.approx(0.9)


def test_pool_is_the_mean_of_log_odds():
    assert pool([0.9, 0.9]) == pytest.approx(0.9)
    assert pool([0.9, 0.1]) == pytest.approx(0.5)
    assert pool([0.8, 0.5]) == pytest.approx(1 / (1 + math.exp(-math.log(4) / 2)))
    assert pool([1.0]) == pytest.approx(1 - EPS) and pool([]) is None


def test_each_grounded_role_has_its_own_reply_shape_and_consistent_verdict():
    fields = {role: set(ROLE_SCHEMAS[role]["anyOf"][0]["properties"]) - {"factuality", "error_severity"}
              for role in ("initial", "trust", "skeptic", "leader")}
    assert len({frozenset(f) for f in fields.values()}) == 4  # no two roles answer alike
    assert "doubt" in fields["skeptic"] and "side" in fields["leader"]
    validator = jsonschema.Draft202012Validator(ROLE_SCHEMAS["leader"])
    base = {"side": "trust", "reason": "[1] says Paris."}
    assert validator.is_valid({**base, "factuality": True, "error_severity": 0})
    assert validator.is_valid({**base, "factuality": False, "error_severity": 4})
    assert not validator.is_valid({**base, "factuality": True, "error_severity": 1})  # factual => 0
    assert not validator.is_valid({**base, "factuality": False, "error_severity": 0})  # not factual => >= 1


def test_paper_prompts_repair_inconsistent_severity_and_count_it():
    engine = FakeEngine(replies=[reply(True, 2), reply(False, 0)] + [reply(False, 4)] * 20)
    v = run(engine, min_rounds=1, max_rounds=1, prompts="paper")
    assert (v.chain[0].error_severity, v.chain[0].repaired) == (0, "severity 2 -> 0 (factual)")
    assert (v.chain[1].error_severity, v.chain[1].repaired) == (1, "severity 0 -> 1 (not factual)")
    assert v.to_dict()["chain"][0]["repaired"]


def test_next_agent_reads_a_brief_of_the_previous_opinion():
    long = "Passage 1 puts it in Paris. " + "It also says much more " * 10 + "(passages [1])"
    assert brief("Passage 1 puts it in Paris. Then more. (passages [1], [2])") == \
        "Passage 1 puts it in Paris. (passages [1], [2])"
    assert brief(long) == "Passage 1 puts it in Paris. (passages [1])"
    assert brief("w " * 40).endswith("\u2026") and len(brief("w " * 40).split()) == BRIEF_WORDS + 1


def test_grounded_previous_opinions_are_prose_lines():
    engine = by_role({"initial": True, "trust": True, "skeptic": False, "leader": False})
    run(engine, min_rounds=1, max_rounds=1)
    skeptic, trust, leader = (r.messages[1]["content"] for r in engine.requests[1:4])
    assert "The first agent judged the claim factual: \"initial" in skeptic and "{" not in skeptic.split("[text]")[1]
    assert "The Skeptic agent judged the claim not factual (severity 4)" in trust and "first agent" not in trust
    assert leader.index("The Skeptic agent judged") < leader.index("The Trust agent judged")
    assert engine.requests[1].schema == role_schema("skeptic", len(EVIDENCE)) and engine.requests[1].logprobs


def test_previous_turns_passed_as_in_table_12():
    engine = by_role({"initial": True, "trust": True, "skeptic": False, "leader": False})
    run(engine, min_rounds=1, max_rounds=1, prompts="paper")
    skeptic, trust, leader = (r.messages[-1]["content"] for r in engine.requests[1:4])
    assert "DO NOT REPEAT the previous agent\u2019s opinion" in skeptic  # Table 7, word for word
    assert "Here is the response from the previous agent:" in skeptic and '"opinion": "initial"' in skeptic
    assert '"opinion": "skeptic"' in trust and '"opinion": "initial"' not in trust
    # the Leader reads the Skeptic then the Trust agent of its own state
    assert leader.index("response from the Skeptic agent") < leader.index("response from the Trust agent")
    assert '"opinion": "initial"' not in leader


def test_unknown_prompt_set_is_rejected():
    with pytest.raises(ConfigError, match="unknown prompt set"):
        DebateConfig(prompts="clever")


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
    assert "[text]: \"What is the capital of France? Paris.\"" in engine.requests[0].messages[1]["content"]


def test_engine_reported_failure_is_not_retried():
    engine = FakeEngine(responder=lambda r: RuntimeError("server down"))
    run(engine, min_rounds=0, max_rounds=0)
    assert len(engine.requests) == 1  # the engine already retried its transport: final


def test_every_configurable_policy_has_its_transitions():
    from halucheck.config import DEBATE_POLICIES
    from halucheck.verifiers.debate.rounds import POLICIES

    assert tuple(POLICIES) == DEBATE_POLICIES


@pytest.mark.parametrize("n", [1, 10, 15])
def test_an_agent_may_cite_every_passage_it_is_shown_and_no_other(n):
    """The evidence count is one setting: every passage shown is citable, a number past them is not."""
    evidence = [Evidence(f"Passage {i}.") for i in range(1, n + 1)]
    engine = by_role({"initial": True, "trust": True, "skeptic": True, "leader": True})
    check_claim(CLAIM, evidence, Agents(engine=engine), DebateConfig(min_rounds=1, max_rounds=1))
    for request in engine.requests:
        validator = jsonschema.Draft202012Validator(request.schema)
        factual = {"factuality": True, "error_severity": 0}
        fields = {k: "x" for k in request.schema["anyOf"][0]["properties"] if k not in ("passages", *factual)}
        fields.update({"side": "trust", "finding": "supported"} if "side" in fields or "finding" in fields else {})
        fields = {k: v for k, v in fields.items() if k in request.schema["anyOf"][0]["properties"]}
        if "passages" not in request.schema["anyOf"][0]["properties"]:
            continue
        assert validator.is_valid({**fields, "passages": [n], **factual}), request.tag
        assert not validator.is_valid({**fields, "passages": [n + 1], **factual}), request.tag
        assert f"[{n}]" in request.messages[-1]["content"]
