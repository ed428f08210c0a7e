"""The debate chain: S0 = selfcheck, opposing sides with checked quotes, a Leader that names a winner,
transitions, consensus stop, bad replies; and the paper's own chain under ``--prompts paper``."""

import json
import math

import jsonschema
import pytest

from halucheck.engines.base import Result, SamplingParams
from halucheck.engines.fake import FakeEngine
from halucheck.errors import ConfigError
from halucheck.records import Case, Claim, Evidence
from halucheck.verifiers.debate import Agents, DebateConfig, check_claim, next_state
from halucheck.verifiers.debate.agents import (AGENT_SCHEMA, LEADER_SCHEMA, STANCE_SCHEMAS, AgentCall,
                                               build_messages, turn_from_result)
from halucheck.verifiers.debate.score import features
from halucheck.verifiers.judges import SelfCheck

CLAIM = Claim("The Eiffel Tower is in Berlin.")
PASSAGE = "The Eiffel Tower is a wrought-iron lattice tower in Paris, France."
EVIDENCE = [Evidence(PASSAGE)]
TRUE_QUOTE = "The Eiffel Tower is a wrought-iron lattice tower in Paris"


def scripted(initial=True, leader="skeptic", factual_quotes=(TRUE_QUOTE,), finding="not stated",
             not_factual_quotes=("in Berlin",)):
    """An engine answering every role: S0's verdict, the stances' quotes (by the verdict they argue),
    the Leader's winner (a value, or a callable of the request)."""

    def responder(request):
        role = request.tag.split(":")[1]
        if role == "initial":
            return {"reasoning": "Compared with passage 1.", "factuality": initial}
        if role == "leader":
            return {"reason": "Quote 1 settles it.", "winner": leader(request) if callable(leader) else leader}
        if request.schema["title"] == "stance_factual":
            return {"quotes": list(factual_quotes), "argument": f"{role}: it is supported."}
        return {"finding": finding, "quotes": list(not_factual_quotes), "argument": f"{role}: it is not.",
                "error_severity": 4}

    return FakeEngine(responder=responder)


def run(engine, claim=CLAIM, evidence=EVIDENCE, **cfg):
    """One debate; the Leader asked in one order unless ``leader_both_orders`` says otherwise."""
    return check_claim(claim, evidence, Agents(engine=engine), DebateConfig(**{"leader_both_orders": False, **cfg}))


def roles(verdict):
    return [(t.state, t.role) for t in verdict.chain]


@pytest.mark.parametrize(
    "policy, r_true, r_false",
    [("true-skeptic", "S2", "S1"), ("true-trust", "S1", "S2"), ("always-trust", "S1", "S1"),
     ("always-skeptic", "S2", "S2")],
)
def test_transition_table(policy, r_true, r_false):
    assert next_state(policy, True) == r_true
    assert next_state(policy, False) == r_false


def test_the_first_agent_is_selfcheck_with_question_and_answer_as_their_own_fields():
    engine = scripted()
    claim = Claim("Paris.", question="What is the capital of France?")
    run(engine, claim=claim, max_rounds=0, min_rounds=0)
    selfcheck = SelfCheck().request(Case(claim, tuple(EVIDENCE)), None)
    first = engine.requests[0]
    assert first.key() == selfcheck.key()  # the same request: replies are shared with -v selfcheck
    assert "[question]: What is the capital of France?\n" in first.messages[-1]["content"]
    assert "[answer]: Paris.\n" in first.messages[-1]["content"]
    assert list(first.schema["properties"]) == ["reasoning", "factuality"]  # reasons, then decides


@pytest.mark.parametrize("initial, state, first_speaker", [(True, "S2", "skeptic"), (False, "S1", "trust")])
def test_trust_defends_and_skeptic_attacks_the_standing_verdict(initial, state, first_speaker):
    engine = scripted(initial=initial, leader="trust")
    v = run(engine)
    assert roles(v)[1][0] == state and v.chain[1].role == first_speaker
    trust = next(t for t in v.chain if t.role == "trust")
    skeptic = next(t for t in v.chain if t.role == "skeptic")
    assert trust.factuality is initial and skeptic.factuality is (not initial)  # the sides oppose
    titles = {r.tag: r.schema["title"] for r in engine.requests[1:3]}
    assert titles["debate:trust"] == ("stance_factual" if initial else "stance_not_factual")
    assert titles["debate:skeptic"] == ("stance_not_factual" if initial else "stance_factual")
    # each side argues from the passages alone: neither is shown the other's words
    assert not any("argues that" in r.messages[-1]["content"] for r in engine.requests[1:3])
    assert v.factuality is initial and v.consensus and v.rounds == 1  # the attack failed: consensus


@pytest.mark.parametrize("initial", [True, False])
def test_a_winning_attack_moves_the_chain_either_way(initial):
    engine = scripted(initial=initial, leader="skeptic")
    v = run(engine, min_rounds=1, max_rounds=1)
    assert v.factuality is (not initial) and v.chain[-1].winner == "skeptic" and not v.consensus
    # with room for another state, the new standing verdict is defended and attacked in turn
    engine = scripted(initial=initial, leader=lambda r: "skeptic" if r.messages[-1]["content"].count("standing verdict that the text is factual") == int(initial) else "trust")
    v = run(engine, min_rounds=1, max_rounds=3)
    assert v.rounds == 2 and v.consensus and v.factuality is (not initial)
    assert [t.state for t in v.chain if t.role == "leader"] == [next_state("true-skeptic", initial),
                                                                next_state("true-skeptic", not initial)]


def test_the_leader_reads_both_stances_whole_with_their_checks():
    engine = scripted(initial=True, finding="contradicted",
                      not_factual_quotes=("lattice tower in Paris, France", "It was moved to Berlin in 1999"))
    v = run(engine, max_rounds=1)
    leader = engine.requests[3]
    assert leader.tag == "debate:leader" and leader.schema == LEADER_SCHEMA
    text = leader.messages[-1]["content"]
    assert '"lattice tower in Paris, France" -- found in passage [1]' in text
    assert '"It was moved to Berlin in 1999" -- NOT FOUND (not in the passages word for word)' in text
    assert text.index("The Skeptic agent argues") < text.index("The Trust agent argues")  # spoken order (S2)
    skeptic = v.chain[1]
    assert [q.verified for q in skeptic.quotes] == [True, False] and not skeptic.void
    assert v.factuality is False and v.error_severity == 4


def test_an_attack_without_a_verified_quote_fails_without_a_leader_call_and_a_void_defence_goes_to_the_leader():
    # the Skeptic invents its quote: void, and the standing verdict stays without asking the Leader
    engine = scripted(initial=True, finding="contradicted", not_factual_quotes=("The tower stands in Berlin",))
    v = run(engine, max_rounds=2)
    assert [r.tag for r in engine.requests] == ["debate:initial", "debate:skeptic", "debate:trust"]
    skeptic, leader = v.chain[1], v.chain[3]
    assert skeptic.void and not skeptic.counts and leader.role == "leader" and leader.winner == "trust"
    assert "has no verified quote" in leader.opinion and leader.completion_tokens == 0
    assert v.factuality is True and v.consensus
    # the Trust side invents its quote: void, but only a Leader moves the verdict, so it is asked
    engine = scripted(initial=True, factual_quotes=("The Eiffel Tower is in Berlin, Germany",))
    v = run(engine, min_rounds=1, max_rounds=1)
    assert v.chain[2].role == "trust" and v.chain[2].void
    assert [r.tag for r in engine.requests][-1] == "debate:leader" and len(engine.requests) == 4
    assert v.factuality is False and v.chain[-1].winner == "skeptic" and v.chain[-1].completion_tokens > 0
    engine = scripted(initial=True, leader="trust", factual_quotes=("The Eiffel Tower is in Berlin, Germany",))
    assert run(engine, min_rounds=1, max_rounds=1).factuality is True  # the Leader may keep it standing


def test_one_leader_names_the_verdict_even_when_its_token_was_unsure():
    """A Leader whose winner token had under even odds (its P is clamped to 0.5) still decides: the verdict
    is the winner's, never the defender's by a tie."""
    from halucheck.records import Turn
    from halucheck.verifiers.debate.rounds import debate

    from halucheck.verifiers.debate.score import ScoreWeights

    standing_only = ScoreWeights(0.0, {"first": 0.0, "leader": 0.0, "margin": 0.0, "verdict": 3.0})
    chain = debate(Claim(CLAIM), EVIDENCE, DebateConfig(min_rounds=1, max_rounds=1), weights=standing_only)
    call = next(chain)
    answers = {"initial": Turn("S0", "initial", "fine", True, 0, p_factual=0.9),
               "skeptic": Turn("S2", "skeptic", "no", False, 4), "trust": Turn("S2", "trust", "yes", True, 0),
               "leader": Turn("S2", "leader", "the quote", False, None, p_factual=0.5, winner="skeptic")}
    try:
        while True:
            call = chain.send(answers[call.role])
    except StopIteration as stop:
        verdict = stop.value
    assert verdict.factuality is False and verdict.chain[-1].winner == "skeptic"


def test_leader_in_both_orders_is_asked_twice_and_averaged():
    seen = []

    def leader(request):
        text = request.messages[-1]["content"]
        seen.append(text.index("The Trust agent argues") < text.index("The Skeptic agent argues"))
        return "trust" if seen[-1] else "skeptic"  # a Leader that picks whichever side it reads first

    v = run(scripted(initial=True, leader=leader), max_rounds=1, leader_both_orders=True)
    assert seen == [False, True]  # spoken order (Skeptic first in S2), then swapped
    leaders = [t for t in v.chain if t.role == "leader"]
    assert [t.winner for t in leaders] == ["skeptic", "trust"]
    assert v.factuality is True  # 1:1 without token probabilities: a tie keeps the standing verdict


def test_stances_and_leaders_have_no_repetition_controls_and_no_quote_list():
    penalised = SamplingParams(temperature=0.0, max_tokens=200, repetition_penalty=1.3, frequency_penalty=0.5,
                               no_repeat_ngram_size=3)
    engine = scripted()
    check_claim(CLAIM, EVIDENCE, Agents(engine=engine, sampling=penalised), DebateConfig(max_rounds=1))
    for r in engine.requests[1:]:
        assert not r.sampling.penalized and r.sampling.max_tokens == 200 and not r.avoid and r.quote is None


def test_stance_turns_record_their_quote_checks_in_results():
    v = run(scripted(initial=True, leader="skeptic"), max_rounds=1)
    chain = json.loads(json.dumps(v.to_dict()))["chain"]
    skeptic = chain[1]
    assert skeptic["role"] == "skeptic" and skeptic["finding"] == "not stated"
    assert skeptic["quotes"] == [{"text": "in Berlin", "verified": True}]
    assert chain[2]["quotes"][0] == {"text": TRUE_QUOTE, "verified": True, "passage": 1}
    assert chain[3]["winner"] == "skeptic"


def test_turn_probability_comes_from_the_winner_token():
    reply = {"reason": "Quote 1 shows Paris.", "winner": "skeptic"}
    text = json.dumps(reply)
    head, _, tail = text.partition('"winner": "')
    lps = [(head + '"winner": "', 0.0), ("sk", math.log(0.8)), (tail[2:], 0.0)]
    t = turn_from_result(AgentCall("leader", "S2", argues=True), Result(text=text, parsed=reply, logprobs=lps))
    assert t.factuality is False and t.winner == "skeptic" and t.p_factual == pytest.approx(0.2)


def test_score_follows_the_chain():
    sure_false = run(scripted(initial=False, leader="trust"), max_rounds=1)
    sure_true = run(scripted(initial=True, leader="trust"), max_rounds=1)
    assert sure_false.p_hallucinated > 0.5 > sure_true.p_hallucinated
    x = features(sure_false.chain, False)
    assert x["verdict"] == 1.0 and x["margin"] == 0.0  # one verified quote each way


def test_every_reply_shape_is_a_strict_schema():
    for schema, good in ((STANCE_SCHEMAS[True], {"quotes": ["a b c"], "argument": "x"}),
                         (STANCE_SCHEMAS[False], {"finding": "contradicted", "quotes": ["a b c"], "argument": "x",
                                                  "error_severity": 3}),
                         (LEADER_SCHEMA, {"reason": "x", "winner": "trust"})):
        validator = jsonschema.Draft202012Validator(schema)
        assert validator.is_valid(good)
        assert not validator.is_valid({**good, "extra": 1})
    assert not jsonschema.Draft202012Validator(LEADER_SCHEMA).is_valid({"reason": "x", "winner": "both"})
    assert not jsonschema.Draft202012Validator(STANCE_SCHEMAS[True]).is_valid({"quotes": [], "argument": "x"})
    assert not jsonschema.Draft202012Validator(STANCE_SCHEMAS[True]).is_valid({"quotes": ["a", "b", "c"], "argument": "x"})


def test_shared_prefix_is_byte_identical_across_stances_and_leader():
    first = run(scripted(), max_rounds=1)
    assert first.rounds == 1
    engine = scripted()
    run(engine, max_rounds=1)
    msgs = [r.messages for r in engine.requests[1:]]
    assert len({m[0]["content"] for m in msgs}) == 1  # same system prompt
    prefix = msgs[0][1]["content"].split("\n\n")[0]
    assert all(m[1]["content"].startswith(prefix) for m in msgs)
    assert PASSAGE in prefix.replace('\\"', '"')


def test_an_invalid_first_reply_is_retried_then_the_claim_is_undecided():
    engine = FakeEngine(replies=["{oops"] * 3)
    v = run(engine, min_rounds=1)
    assert v.factuality is None and "no agent gave a valid reply" in v.error
    assert not v.chain[0].ok and "not valid JSON" in v.chain[0].error


def test_a_failed_leader_keeps_the_standing_verdict_and_leaves_an_error_turn_to_retry():
    def responder(request):
        if request.tag == "debate:leader":
            return RuntimeError("server went away")
        return scripted().responder(request)

    v = run(FakeEngine(responder=responder), max_rounds=2)
    assert v.factuality is True and v.chain[-1].error and v.rounds == 1


def test_engine_error_for_every_turn_gives_an_error_verdict_not_a_crash():
    engine = FakeEngine(responder=lambda r: RuntimeError("server down"))
    v = run(engine, min_rounds=1, max_rounds=2)
    assert v.factuality is None and v.error and "server down" in v.error
    assert len(engine.requests) == 1  # the engine already retried its transport: final


def test_max_rounds_zero_is_the_first_agent_alone():
    v = run(scripted(initial=False), min_rounds=0, max_rounds=0)
    assert roles(v) == [("S0", "initial")] and v.factuality is False


def test_bad_config_is_rejected():
    with pytest.raises(ConfigError, match="unknown policy"):
        DebateConfig(policy="sometimes")
    with pytest.raises(ConfigError, match="min_rounds <= max_rounds"):
        DebateConfig(min_rounds=3, max_rounds=2)
    with pytest.raises(ConfigError, match="unknown prompt set"):
        DebateConfig(prompts="clever")


def test_every_configurable_policy_moves_to_a_debate_state():
    from halucheck.config import DEBATE_POLICIES
    from halucheck.verifiers.debate.rounds import ORDER

    assert all(state in ORDER for states in DEBATE_POLICIES.values() for state in states)


# ---------------------------------------------------------------- the paper's chain (--prompts paper)


def paper_reply(factuality: bool, severity: int | None = None, opinion: str = "because") -> dict:
    return {"opinion": opinion, "factuality": factuality,
            "error_severity": (0 if factuality else 3) if severity is None else severity}


def paper_by_role(table: dict) -> FakeEngine:
    def responder(request):
        role = request.tag.split(":")[1]
        return paper_reply(table[role], 0 if table[role] else 4, opinion=role)

    return FakeEngine(responder=responder)


def test_paper_chain_runs_to_max_rounds_without_consensus_and_the_leader_decides():
    engine = paper_by_role({"initial": True, "trust": True, "skeptic": False, "leader": False})
    v = run(engine, min_rounds=1, max_rounds=3, prompts="paper")
    assert v.rounds == 3 and not v.consensus and len(v.chain) == 1 + 3 * 3
    assert v.factuality is False and v.chain[-1].role == "leader"
    assert [v.chain[i].state for i in (1, 4, 7)] == ["S2", "S1", "S1"]


def test_paper_prompts_repair_inconsistent_severity_and_count_it():
    engine = FakeEngine(replies=[paper_reply(True, 2), paper_reply(False, 0)] + [paper_reply(False, 4)] * 20)
    v = run(engine, min_rounds=1, max_rounds=1, prompts="paper")
    assert (v.chain[0].error_severity, v.chain[0].repaired) == (0, "severity 2 -> 0 (factual)")
    assert (v.chain[1].error_severity, v.chain[1].repaired) == (1, "severity 0 -> 1 (not factual)")


def test_previous_turns_passed_as_in_table_12():
    engine = paper_by_role({"initial": True, "trust": True, "skeptic": False, "leader": False})
    run(engine, min_rounds=1, max_rounds=1, prompts="paper")
    skeptic, trust, leader = (r.messages[-1]["content"] for r in engine.requests[1:4])
    assert "DO NOT REPEAT the previous agent\u2019s opinion" in skeptic  # Table 7, word for word
    assert "Here is the response from the previous agent:" in skeptic and '"opinion": "initial"' in skeptic
    assert '"opinion": "skeptic"' in trust and '"opinion": "initial"' not in trust
    assert leader.index("response from the Skeptic agent") < leader.index("response from the Trust agent")
    assert engine.requests[0].schema == AGENT_SCHEMA


def test_paper_messages_join_question_and_answer_as_the_paper_does():
    msgs = build_messages(Claim("Paris.", question="What is the capital of France?"), EVIDENCE,
                          AgentCall("initial", "S0", prompts="paper"))
    assert '[text]: "What is the capital of France? Paris."' in msgs[-1]["content"]


# ---------------------------------------------------------------- the fitted score decides


def _chain(initial, leader_winners=(), p_first=None):
    """S0 then one round whose Leader turns name ``leader_winners`` (S0 factual: a skeptic win flips it)."""
    from halucheck.records import Turn

    p0 = p_first if p_first is not None else (0.9 if initial else 0.1)
    chain = [Turn("S0", "initial", "r", initial, 0 if initial else None, p_factual=p0)]
    for w, p in leader_winners:
        moved = (w == "trust") == initial
        chain.append(Turn("S2", "leader", "q", moved, None, p_factual=p, winner=w))
    return chain


def test_the_standing_verdict_is_read_back_from_the_chain_as_the_debate_moved_it():
    from halucheck.verifiers.debate.score import standing_of

    assert standing_of(_chain(True)) is True
    assert standing_of(_chain(True, [("skeptic", 0.2)])) is False
    # the two orders disagree: the mean P(factual) decides, a tie to the standing verdict
    assert standing_of(_chain(True, [("skeptic", 0.2), ("trust", 0.9)])) is True  # 0.55
    assert standing_of(_chain(True, [("skeptic", 0.2), ("trust", 0.7)])) is False  # 0.45: the attack wins
    assert standing_of(_chain(True, [("skeptic", 0.2), ("trust", 0.8)])) is True  # 0.5: a tie
    assert standing_of([]) is None


def test_the_verdict_is_the_fitted_scores_not_the_leaders():
    from halucheck.verifiers.debate.rounds import make_verdict
    from halucheck.verifiers.debate.score import ScoreWeights, shipped

    chain = _chain(True, [("skeptic", 0.3)], p_first=0.95)  # a confident first agent, a Leader that flips it
    leader_only = ScoreWeights(0.0, {"first": 0.0, "leader": 0.0, "margin": 0.0, "verdict": 3.0})
    first_only = ScoreWeights(0.0, {"first": 1.0, "leader": 0.0, "margin": 0.0, "verdict": 0.0}, threshold=0.4)
    assert make_verdict(chain, False, 1, False, leader_only).factuality is False
    v = make_verdict(chain, False, 1, False, first_only)
    assert v.factuality is True and v.error_severity == 0 and v.p_hallucinated == pytest.approx(0.05)
    assert v.confidence == pytest.approx(0.95)
    # the threshold is part of the decision: the same P on the other side of it
    high = make_verdict(_chain(True, p_first=0.55), True, 0, True,
                        ScoreWeights(0.0, {"first": 1.0}, threshold=0.4))
    assert high.p_hallucinated == pytest.approx(0.45) and high.factuality is False and high.error_severity == 2
    assert shipped().threshold == pytest.approx(shipped().to_dict()["threshold"])


def test_weights_refitted_for_a_profile_are_used_for_that_model_only(tmp_path):
    from halucheck.verifiers.debate.score import ScoreWeights, resolve_weights, save_weights, shipped, weights_path

    assert resolve_weights("cpu-1.5b", "m", root=tmp_path) == shipped()
    mine = ScoreWeights(0.1, {"first": 1.0, "leader": 0.0, "margin": 0.0, "verdict": 0.0}, 0.3, {"model": "m"})
    save_weights(mine, weights_path("cpu-1.5b", tmp_path))
    assert resolve_weights("cpu-1.5b", "m", root=tmp_path) == mine
    assert resolve_weights("other", "m", root=tmp_path) == shipped()
    with pytest.raises(ConfigError, match="fitted on model m, this run uses n"):
        resolve_weights("cpu-1.5b", "n", root=tmp_path)
    weights_path("cpu-1.5b", tmp_path).write_text("{not json")
    with pytest.raises(ConfigError, match="unreadable"):
        resolve_weights("cpu-1.5b", "m", root=tmp_path)


def test_fitting_puts_the_weight_where_the_signal_is():
    """Labels that follow the first agent and not the Leader: the fit weighs the first agent up, the Leader
    down, and its threshold separates the fitting data."""
    from halucheck.verifiers.debate.score import fit

    chains, labels = [], []
    for k in range(40):
        hallucinated = k % 2 == 0
        p_first = 0.2 + 0.1 * (k % 3) if hallucinated else 0.7 + 0.1 * (k % 3)  # S0 right, confidence varies
        winner = "skeptic" if k % 4 < 2 else "trust"  # a Leader unrelated to the truth
        chains.append(_chain(p_first >= 0.5, [(winner, 0.3 if winner == "skeptic" else 0.7)], p_first=p_first))
        labels.append(hallucinated)
    w = fit(chains, labels, {"model": "m"})
    assert w.weights["first"] > 0.5 and abs(w.weights["leader"]) < w.weights["first"]
    assert w.provenance["model"] == "m" and w.provenance["items"] == 40
    assert all((w.score(features(c)) >= w.threshold) == y for c, y in zip(chains, labels))
    with pytest.raises(ConfigError, match="hallucinated and factual"):
        fit(chains[:1], labels[:1])
