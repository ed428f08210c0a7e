"""collab-cal (Collaborative Calibration) with a scripted engine: steps and batches, stances, the aggregate,
revisions, invalid replies, and the eval CLI."""

import json
import math
import re
from itertools import count

import pytest
from typer.testing import CliRunner

from halucheck.cli import app
from halucheck.verifiers.collab import CollabCal, ConsensusReply, RevisionReply, aggregate, first_confidence
from halucheck.config import Settings
from halucheck.engines import register
from halucheck.engines.fake import FakeEngine
from halucheck.engines.pool import EnginePool
from halucheck.prompts import load as load_prompts
from halucheck.records import Case, Claim, Evidence
from halucheck.verifiers import VerifierOptions, get_verifier

runner = CliRunner()
_names = count()
PERSONAS = [p["line"] for p in load_prompts("collab")["personas"]]
EVIDENCE = (Evidence("Paris is the capital of France."),)


def pool_with(engine):
    """An engine pool whose every role is served by ``engine`` (registered under a fresh name)."""
    name = f"collab-scripted-{next(_names)}"
    register(name, lambda model="", **kw: engine)
    return EnginePool(Settings.from_dict({"profiles": {"p": {"engine": name}}}))


def checks(n):
    return [Case(Claim(f"Claim number {i}. Paris is in France."), EVIDENCE) for i in range(n)]


def who(req):
    """(claim number, agent number, step) of a request, read from its prompt; for an argument (no persona)
    the stance it argues, "factual" or "not factual", in place of the agent."""
    user = req.messages[-1]["content"]
    claim = int(re.search(r"Claim number (\d+)\.", user).group(1))
    step = req.tag.split(":")[-1]
    if step == "argue":
        stance = re.search(r"Your stance in the debate is: the \w+ is (not factual|factual)\.", user).group(1)
        return claim, stance, step
    agent = next(a for a, line in enumerate(PERSONAS) if line in user)
    return claim, agent, step


class Script(FakeEngine):
    """Replies from ``table[(claim, agent, step)]`` (a dict, or a raw string for an invalid reply)."""

    def __init__(self, table, **kw):
        super().__init__(responder=lambda req: table[who(req)], **kw)


def answer(factual, confidence, reasoning="r"):
    return {"reasoning": reasoning, "factuality": factual, "confidence": confidence}


def revised(factual, confidence, rationale="why"):
    return {"logic": "good", "facts": "poor", "clarity": "fair", "conciseness": "excellent",
            "rationale": rationale, "factuality": factual, "confidence": confidence}


# ---------------------------------------------------------------- the arithmetic


def test_aggregate_is_the_majority_with_its_mean_confidence():
    # majority "not factual" (2 of 3): the mean confidence of those two, the dissenter does not count
    assert aggregate([(True, 0.9), (True, 0.7), (False, 0.8)]) == pytest.approx(0.8)
    # majority "factual": P(hallucinated) = 1 - mean(0.6, 1.0)
    assert aggregate([(False, 0.6), (False, 1.0), (True, 0.9)]) == pytest.approx(0.2)
    # a tie: the mean of every vote's P(hallucinated), (0.9 + (1 - 0.7)) / 2
    assert aggregate([(True, 0.9), (False, 0.7)]) == pytest.approx(0.6)
    assert aggregate([(False, 0.5)]) == pytest.approx(0.5) and aggregate([]) is None


def test_first_confidence_takes_the_higher_of_words_and_token():
    assert first_confidence(70, None) == pytest.approx(0.7)
    assert first_confidence(70, 0.95) == pytest.approx(0.95)
    assert first_confidence(90, 0.6) == pytest.approx(0.9)
    assert first_confidence(50, 0.2) == pytest.approx(0.5)  # a chosen token below 0.5 counts as 0.5


# ---------------------------------------------------------------- the steps


def split_and_consensus_table():
    """Claim 0: agents 0 and 1 say not factual, agent 2 factual; after the debate agent 2 gives in.
    Claim 1: all three say factual and stay there."""
    t = {
        (0, 0, "answer"): answer(False, 90, "Passage 1 names Paris, not Lyon."),
        (0, 1, "answer"): answer(False, 70, "The city is wrong."),
        (0, 2, "answer"): answer(True, 80, "Looks right."),
        (0, "not factual", "argue"): {"argument": "Passage 1 contradicts the city."},
        (0, "factual", "argue"): {"argument": "Passage 1 backs the country."},
        (0, 0, "revise"): revised(False, 90),
        (0, 1, "revise"): revised(False, 80),
        (0, 2, "revise"): revised(False, 60, "The opposing side cites passage 1."),
    }
    for a in range(3):
        t[(1, a, "answer")] = answer(True, 80)
        t[(1, a, "consensus")] = {"rationale": "All agree.", "factuality": True, "confidence": 90}
    return t


def test_one_generate_per_step_with_every_claims_requests():
    eng = Script(split_and_consensus_table())
    released = []
    eng.release = lambda groups: released.append(list(groups))
    calls, decided = {}, []
    v = get_verifier("collab-cal", VerifierOptions(seed=10))
    out = v.verify(checks(2), pool_with(eng), on_verdict=lambda i, verdict: decided.append(i),
                   on_call=lambda n: calls.setdefault(len(decided), []).append(n))
    # S0: 2 claims x 3 agents; S1: one argument per stance of the split claim; S2: every agent again
    assert eng.batch_sizes == [6, 2, 6]
    steps = [[who(r)[2] for r in eng.requests[a:b]] for a, b in ((0, 6), (6, 8), (8, 14))]
    assert steps == [["answer"] * 6, ["argue"] * 2, ["revise"] * 3 + ["consensus"] * 3]
    first = eng.requests[:6]
    assert {r.sampling.seed for r in first} == {11, 12, 13} and all(r.sampling.temperature > 0 for r in first)
    assert all(r.logprobs for r in first)
    assert all(r.sampling.temperature == 0 and not r.logprobs for r in eng.requests[6:])
    # one argument per stance, written without a persona
    assert [who(r)[:2] for r in eng.requests[6:8]] == [(0, "not factual"), (0, "factual")]
    assert not any(line in r.messages[-1]["content"] for r in eng.requests[6:8] for line in PERSONAS)
    # every prompt shows the evidence as the other verifiers do (verifiers.yaml's shared block)
    assert all("[evidences]:\n[1] Paris is the capital of France.\n" in r.messages[-1]["content"] for r in eng.requests)
    # each step's calls of a claim share a prefix group (an engine keeping prompt prefixes computes the
    # shared start once), released when the step is over
    group = {(who(r)[0], who(r)[2]): r.prefix_group for r in eng.requests}
    assert all(r.prefix_group == group[who(r)[0], who(r)[2]] for r in eng.requests)
    assert len(set(group.values())) == len(group) == 5  # (claim, step): 2 answer, 1 argue, 1 revise, 1 consensus
    assert released == [sorted({r.prefix_group for r in eng.requests[a:b]}) for a, b in ((0, 6), (6, 8), (8, 14))]
    # cost, progress and verdict callbacks
    assert v.costs["collab-cal"].llm_calls == 14 and v.costs["collab-cal"].claims == 2
    assert v.least_calls() == 6 and v.describe()["agents"] == 3
    assert calls[0] == [1, 2, 3, 1, 2, 3, 4, 5, 6, 7, 8, 4, 5, 6] and decided == [0, 1]
    assert [len(x.chain) for x in out] == [3 + 2 + 3, 3 + 3]


def test_stances_arguments_and_counts_reach_the_revisions():
    eng = Script(split_and_consensus_table())
    out = get_verifier("collab-cal").verify(checks(2), pool_with(eng))
    revise = {who(r)[:2]: r for r in eng.requests if who(r)[2] in ("revise", "consensus")}
    dissenter = revise[(0, 2)].messages[-1]["content"]
    # the lone "factual" agent is told the opposing stance's argument, its own, and the head count
    assert 'The argument from the opposing side is: Passage 1 contradicts the city.\n' in dissenter
    assert 'The argument supporting your original answer is: Passage 1 backs the country.\n' in dissenter
    assert "2 of the 3 deliberators disagree with you" in dissenter and "no other deliberator agrees" in dissenter
    assert "Your original answer was: the text is factual, with a confidence of 80 %" in dissenter
    majority = revise[(0, 1)].messages[-1]["content"]
    assert 'The argument from the opposing side is: Passage 1 backs the country.\n' in majority
    assert "1 of the 3 deliberators disagree" in majority and "1 other deliberator also agrees" in majority
    assert revise[(0, 0)].schema == RevisionReply.model_json_schema()
    # the consensus claim: no arguments, the agents are told everyone agreed
    assert revise[(1, 0)].schema == ConsensusReply.model_json_schema()
    assert "all 2 other deliberators agreed" in revise[(1, 0)].messages[-1]["content"]
    # the trace: one turn per agent per step, in step order
    split, agreed = out
    assert [t.state for t in split.chain] == ["S0"] * 3 + ["S1"] * 2 + ["S2"] * 3
    assert [t.state for t in agreed.chain] == ["S0"] * 3 + ["S2"] * 3
    assert all(t.role == "initial" and t.verifier == "collab-cal" and t.ok for t in split.chain + agreed.chain)
    assert [t.factuality for t in split.chain] == [False, False, True, False, True, False, False, False]
    assert split.chain[0].opinion == "Passage 1 names Paris, not Lyon."
    assert split.chain[0].p_factual == pytest.approx(0.1)
    assert split.chain[3].opinion == "Passage 1 contradicts the city."
    assert split.chain[7].opinion.startswith("The opposing side cites passage 1. (opposing argument rated: logic good")
    assert split.chain[7].p_factual == pytest.approx(0.4)
    # the aggregate: all three revised to "not factual" with 0.9, 0.8, 0.6
    assert split.p_hallucinated == pytest.approx((0.9 + 0.8 + 0.6) / 3)
    assert split.factuality is False and split.confidence == pytest.approx(split.p_hallucinated)
    assert split.error_severity is None and split.verifier == "collab-cal"
    assert (split.rounds, split.consensus) == (3, True)
    assert agreed.p_hallucinated == pytest.approx(0.1) and agreed.factuality is True
    assert agreed.confidence == pytest.approx(0.9) and agreed.rounds == 2


def test_revisions_change_the_outcome():
    t = {(0, 0, "answer"): answer(True, 90), (0, 1, "answer"): answer(True, 60), (0, 2, "answer"): answer(False, 90),
         (0, "factual", "argue"): {"argument": "It matches."},
         (0, "not factual", "argue"): {"argument": "Passage 1 says otherwise."},
         (0, 0, "revise"): revised(True, 70), (0, 1, "revise"): revised(False, 80),
         (0, 2, "revise"): revised(False, 90)}
    before = aggregate([(False, 0.9), (False, 0.6), (True, 0.9)])
    assert before == pytest.approx(0.25)  # stage 1 alone: factual
    v = get_verifier("collab-cal").verify(checks(1), pool_with(Script(t)))[0]
    assert v.p_hallucinated == pytest.approx((0.8 + 0.9) / 2) and v.factuality is False
    assert v.consensus is False


def test_invalid_replies_are_left_out():
    t = split_and_consensus_table()
    t[(0, 1, "answer")] = "no JSON here"  # agent 1 of claim 0: out of the stances and of every later step
    t[(1, 0, "consensus")] = '{"rationale": "x"}'  # agent 0 of claim 1: its revision does not count
    t[(1, 1, "consensus")] = {"rationale": "Less sure.", "factuality": True, "confidence": 70}
    eng = Script(t)
    v = get_verifier("collab-cal")
    split, agreed = v.verify(checks(2), pool_with(eng))
    # the invalid replies were retried twice each, inside the same generate call
    assert eng.batch_sizes == [6, 1, 1, 2, 5, 1, 1]
    assert not any(who(r)[:2] == (0, 1) for r in eng.requests[8:])  # after its two retries
    assert v.costs["collab-cal"].failed_calls == 2
    bad = [t for t in split.chain if t.error]
    assert [(t.state, t.factuality, t.p_factual) for t in bad] == [("S0", None, None)]
    assert "JSON" in bad[0].error and bad[0].opinion == "no JSON here"
    dissenter = next(r for r in eng.requests if who(r)[:3] == (0, 2, "revise")).messages[-1]["content"]
    assert "1 of the 2 deliberators disagree with you" in dissenter
    # claim 0: agents 0 and 2 revised to "not factual" with 0.9 and 0.6
    assert split.p_hallucinated == pytest.approx(0.75)
    # claim 1: agent 0's revision is out; agents 1 and 2 said factual with 0.7 and 0.9
    assert agreed.p_hallucinated == pytest.approx(1 - (0.7 + 0.9) / 2)
    assert [t.state for t in agreed.chain if t.error] == ["S2"]


def test_a_failed_argument_is_replaced_by_its_arguers_first_reasoning():
    t = split_and_consensus_table()
    t[(0, "factual", "argue")] = "garbage"
    eng = Script(t)
    split, _ = get_verifier("collab-cal").verify(checks(2), pool_with(eng))
    majority = next(r for r in eng.requests if who(r)[:3] == (0, 0, "revise")).messages[-1]["content"]
    assert 'The argument from the opposing side is: Looks right.\n' in majority  # agent 2's S0 reasoning
    s1 = [t for t in split.chain if t.state == "S1"]
    assert [(t.factuality, t.error is None) for t in s1] == [(False, True), (None, False)]
    assert split.p_hallucinated == pytest.approx((0.9 + 0.8 + 0.6) / 3)


def test_no_valid_revision_falls_back_to_the_first_answers():
    t = split_and_consensus_table()
    for a in range(3):
        t[(1, a, "consensus")] = "garbage"
    agreed = get_verifier("collab-cal").verify(checks(2), pool_with(Script(t)))[1]
    assert agreed.factuality is True and agreed.p_hallucinated == pytest.approx(0.2)  # S0: factual, 0.8 each
    assert agreed.error is None and sum(t.error is not None for t in agreed.chain) == 3


def test_all_invalid_is_a_failed_verdict():
    t = split_and_consensus_table()
    for a in range(3):
        t[(1, a, "answer")] = "not json at all"
    eng = Script(t)
    split, failed = get_verifier("collab-cal").verify(checks(2), pool_with(eng))
    assert split.factuality is False  # the other claim of the batch is unaffected
    assert failed.factuality is None and failed.p_hallucinated is None and failed.confidence == 0.0
    assert "no agent gave a valid answer" in failed.error and "JSON" in failed.error
    assert failed.verifier == "collab-cal" and [t.state for t in failed.chain] == ["S0"] * 3
    assert not any(who(r)[0] == 1 for r in eng.requests if who(r)[2] != "answer")


class TokenEngine(Script):
    """Also returns logprobs: the factuality token gets log(p), every other token 0."""

    def __init__(self, table, p):
        super().__init__(table)
        self.p = p

    def _complete(self, requests):
        out = super()._complete(requests)
        for req, res in zip(requests, out):
            if req.logprobs and res.error is None:
                toks = re.findall(r"\s*(?:\w+|[^\w\s])", res.text)
                res.logprobs = [(x, math.log(self.p) if x.strip() in ("true", "false") else 0.0) for x in toks]
        return out


def test_first_confidence_reads_the_decision_token():
    t = split_and_consensus_table()
    eng = TokenEngine(t, 0.95)
    split, _ = get_verifier("collab-cal").verify(checks(2), pool_with(eng))
    # S0 verbal 90, 70, 80 -> 0.95 each (the token is surer); revisions stay verbal
    assert [t.p_factual for t in split.chain[:3]] == [pytest.approx(0.05)] * 2 + [pytest.approx(0.95)]
    dissenter = next(r for r in eng.requests if who(r)[:3] == (0, 2, "revise")).messages[-1]["content"]
    assert "with a confidence of 95 %" in dissenter
    assert split.p_hallucinated == pytest.approx((0.9 + 0.8 + 0.6) / 3)


def test_more_samples_more_agents_with_cycled_personas():
    eng = FakeEngine()  # every reply the schema's first example: factual, confidence 50
    v = get_verifier("collab-cal", VerifierOptions(samples=5))
    out = v.verify(checks(1), pool_with(eng))
    assert eng.batch_sizes == [5, 5] and v.least_calls() == 10
    assert v.describe()["personas"] == ["step-by-step", "self-ask", "recall-first", "step-by-step", "self-ask"]
    assert {r.sampling.seed for r in eng.requests[:5]} == {1, 2, 3, 4, 5}
    assert out[0].factuality is False and out[0].p_hallucinated == pytest.approx(0.5)  # 0.5 counts as hallucinated
    assert isinstance(get_verifier("collab-cal"), CollabCal)


# ---------------------------------------------------------------- CLI

CONFIG = """
default_profile: fake
profiles:
  fake:
    engine: fake
    reply: {factuality: false, confidence: 90, reasoning: "Passage 1 contradicts it."}
"""


def test_cli_eval_collab_cal(tmp_path, toy_sets):
    cfg = tmp_path / "models.yaml"
    cfg.write_text(CONFIG)
    out = tmp_path / "run"
    r = runner.invoke(app, ["eval", "-d", "a", "-n", "4", "-v", "collab-cal", "--config", str(cfg), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "collab-cal/fake" in r.stdout
    rows = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and all(row["prediction"] is True and row["score"] == pytest.approx(0.9) for row in rows)
    chain = rows[0]["detail"]["chain"]
    assert [t["state"] for t in chain] == ["S0"] * 3 + ["S2"] * 3  # every agent agreed: no arguments
    assert all(t["verifier"] == "collab-cal" and t["role"] == "initial" for t in chain)
    assert chain[0]["opinion"] == "Passage 1 contradicts it." and rows[0]["detail"]["verifier"] == "collab-cal"
    m = json.loads((out / "metrics.json").read_text())
    assert m["cost"]["llm_calls"] == 4 * 6 and m["cost"]["invalid_replies"] == 0
    assert m["settings"]["verifier"] == "collab-cal" and m["settings"]["agents"] == 3
    r = runner.invoke(app, ["eval", "-d", "a", "-n", "2", "-v", "collab-cal", "--samples", "4", "--config", str(cfg),
                            "-o", str(tmp_path / "four")])
    assert r.exit_code == 0, r.output
    m = json.loads((tmp_path / "four" / "metrics.json").read_text())
    assert m["settings"]["agents"] == 4 and m["cost"]["llm_calls"] == 2 * 8
