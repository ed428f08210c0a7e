"""The eval verifiers and harness with a fake engine: score mappings, batching, cost, files, CLI."""

import json
import math
import re
from itertools import count

import pytest

from typer.testing import CliRunner

from halucheck.cli import app
from halucheck.config import Settings
from halucheck.engines import register
from halucheck.engines.base import Result
from halucheck.engines.fake import FakeEngine
from halucheck.evaluation import EvalItem
from halucheck.evaluation.harness import run_eval, select_evidence
from halucheck.evaluation.verifiers import (
    VERIFIERS,
    VerifierOptions,
    consistency_score,
    debate_score,
    decision_score,
    get_verifier,
    likert_score,
    text_of,
    value_token_prob,
)
from halucheck.verifiers.debate import DebateConfig
from halucheck.errors import ConfigError
from halucheck.records import Turn, Verdict

runner = CliRunner()
_names = count()


def settings_with(engine):
    """Settings whose every role is served by ``engine`` (registered under a fresh name)."""
    name = f"scripted-{next(_names)}"
    register(name, lambda model="", **kw: engine)
    return Settings.from_dict({"profiles": {"p": {"engine": name}}})


def judge_config(tmp_path, engine: str, profile: str, model: str):
    """A models.yaml (in ``tmp_path``) whose one profile, the default, is the registered ``engine`` on ``model``."""
    cfg = tmp_path / "models.yaml"
    cfg.write_text(f"default_profile: {profile}\nprofiles:\n  {profile}: {{engine: {engine}, model: {model}}}\n")
    return cfg


def items(n=4, evidence=("Paris is the capital of France.",)):
    return [
        EvalItem(id=f"t:{i}", dataset="toy", claim=f"Claim number {i} says Paris is in France.", label=i % 2 == 0, group=f"t:{i}",
                 position=i, evidence=list(evidence))
        for i in range(n)
    ]


class LogprobEngine(FakeEngine):
    """Fake engine that also returns per-token logprobs: the decision token gets log(p), others 0."""

    def __init__(self, p, **kw):
        super().__init__(**kw)
        self.p = p

    def _complete(self, requests):
        out = super()._complete(requests)
        for req, res in zip(requests, out):
            if req.logprobs and res.error is None:
                toks = re.findall(r"\s*(?:\w+|[^\w\s])", res.text)
                assert "".join(toks) == res.text
                res.logprobs = [(t, math.log(self.p) if t.strip() in ("true", "false", "PASS", "FAIL") else 0.0)
                                for t in toks]
        return out


# ---------------------------------------------------------------- score mappings


def test_likert_mapping_five_is_low_hallucination():
    assert likert_score(5) == 0.0 and likert_score(1) == 1.0 and likert_score(3) == 0.5
    eng = FakeEngine()
    eng.enqueue({"explanation": "fine", "score": 5}, {"explanation": "bad", "score": 1},
                {"explanation": "so so", "score": 3}, {"explanation": "good", "score": 4})
    preds = get_verifier("judge-likert").predict(items(4), settings_with(eng))
    assert [(p.prediction, p.score) for p in preds] == [(False, 0.0), (True, 1.0), (True, 0.5), (False, 0.25)]
    assert eng.batch_sizes == [4]  # every item's request in one generate call


def test_prometheus_rubric_mapping():
    eng = FakeEngine()
    eng.enqueue({"feedback": "x", "score": 2}, {"feedback": "y", "score": 5})
    preds = get_verifier("prometheus").predict(items(2), settings_with(eng))
    assert [(p.prediction, p.score) for p in preds] == [(True, 0.75), (False, 0.0)]


def test_lynx_fail_is_hallucinated_with_token_probability():
    eng = LogprobEngine(0.8)
    eng.enqueue({"REASONING": "It adds a date.", "SCORE": "FAIL"}, {"REASONING": "It matches.", "SCORE": "PASS"})
    preds = get_verifier("lynx").predict(items(2), settings_with(eng))
    assert preds[0].prediction is True and preds[0].score == pytest.approx(0.8)
    assert preds[1].prediction is False and preds[1].score == pytest.approx(0.2)
    assert all(r.logprobs for r in eng.requests)
    # without logprobs the score is the hard decision
    eng = FakeEngine()
    eng.enqueue({"REASONING": "r", "SCORE": "FAIL"})
    assert get_verifier("lynx").predict(items(1), settings_with(eng))[0].score == 1.0


def test_selfcheck_token_probability_and_fallback():
    eng = LogprobEngine(0.9)
    eng.enqueue({"reasoning": "Contradicted by passage one.", "factuality": False},
                {"reasoning": "Supported by passage one.", "factuality": True})
    preds = get_verifier("selfcheck").predict(items(2), settings_with(eng))
    assert (preds[0].prediction, preds[0].score) == (True, pytest.approx(0.9))
    assert (preds[1].prediction, preds[1].score) == (False, pytest.approx(0.1))
    assert decision_score(True, None) == 1.0 and decision_score(False, None) == 0.0
    # a token probability below 0.5 (reported before the schema mask) never flips the decision
    assert decision_score(True, 1e-6) == 0.5 and decision_score(False, 0.3) == 0.5
    assert decision_score(True, 0.8) == pytest.approx(0.8) and decision_score(False, 0.8) == pytest.approx(0.2)


def test_value_token_prob_reads_the_decision_not_the_reasoning():
    text = '{"reasoning": "the word \\"factuality\\": true appears here", "factuality": false}'
    toks = re.findall(r"\s*(?:\w+|[^\w\s])", text)
    lps = [(t, math.log(0.6) if t.strip() == "false" else math.log(0.99)) for t in toks]
    assert value_token_prob(Result(text=text, logprobs=lps), "factuality") == pytest.approx(0.6)
    assert value_token_prob(Result(text=text, logprobs=None), "factuality") is None
    assert value_token_prob(Result(text=text, logprobs=[("x", 0.0)]), "factuality") is None  # key not in tokens
    # a multi-byte character decoded token by token does not shift the decision
    odd = [("{\"reasoning\": \"caf", 0.0), ("\ufffd", 0.0), ("\ufffd\", ", 0.0), ("\"factuality\": ", 0.0),
           ("true", math.log(0.7)), ("}", 0.0)]
    assert value_token_prob(Result(text="x", logprobs=odd), "factuality") == pytest.approx(0.7)


def test_selfcheck_3shot_adds_three_worked_examples():
    eng = FakeEngine()
    get_verifier("selfcheck-3shot").predict(items(1), settings_with(eng))
    msgs = eng.requests[0].messages
    assert [m["role"] for m in msgs] == ["system"] + ["user", "assistant"] * 3 + ["user"]
    assert all(json.loads(m["content"]) for m in msgs if m["role"] == "assistant")
    assert "Paris is the capital of France." in msgs[-1]["content"] and "Claim number 0 says" in msgs[-1]["content"]


def test_every_request_of_a_judge_carries_its_reply_shapes_schema_made_once():
    from halucheck.verifiers.judges import SelfCheckReply, reply_schema

    eng = FakeEngine()
    get_verifier("selfcheck").predict(items(3), settings_with(eng))
    schemas = [r.schema for r in eng.requests if r.tag == "eval:selfcheck"]
    assert len(schemas) == 3 and schemas[0] == SelfCheckReply.model_json_schema()
    assert all(s is reply_schema(SelfCheckReply) for s in schemas)  # one dict, not one build per request


def test_consistency_agreement_math():
    # greedy says hallucinated with token p=0.9; samples 2 of 3 hallucinated; reflection "correct"
    s = consistency_score(True, 0.9, [True, True, False], "correct")
    assert s == pytest.approx(0.7 * (0.9 + 1 + 1 + 0) / 4 + 0.3 * 1.0)
    # greedy says factual (P(halluc) 0.2), all samples factual, reflection "incorrect" -> reflected 1.0
    assert consistency_score(False, 0.8, [False] * 3, "incorrect") == pytest.approx(0.7 * 0.2 / 4 + 0.3)
    assert consistency_score(False, None, [False], "not sure") == pytest.approx(0.7 * 0 + 0.3 * 0.5)
    assert consistency_score(None, None, [True, False], None) == 0.5  # no greedy: samples alone
    assert consistency_score(None, None, [], None) is None


def test_consistency_batches_samples_then_reflection():
    def responder(req):
        if req.tag.endswith("reflect"):
            return {"reasoning": "ok", "rating": "correct"}
        return {"reasoning": "r", "factuality": req.sampling.temperature > 0}  # greedy: not factual, samples: factual

    eng = FakeEngine(responder=responder)
    released = []
    eng.release = lambda groups: released.append(list(groups))
    v = get_verifier("consistency", VerifierOptions(samples=3, seed=10))
    preds = v.predict(items(2), settings_with(eng))
    assert eng.batch_sizes == [2 * 4, 2]  # greedy + samples in one call, then all reflections in one
    sampled = [r for r in eng.requests[:8] if r.sampling.temperature > 0]
    assert len(sampled) == 6 and {r.sampling.seed for r in sampled} == {11, 12, 13}
    # a claim's greedy and sampled requests (one prompt) share a prefix group, released after the call
    greedy, rest = eng.requests[:2], eng.requests[2:8]
    assert greedy[0].prefix_group != greedy[1].prefix_group and None not in {g.prefix_group for g in greedy}
    assert [r.prefix_group for r in rest] == [greedy[0].prefix_group] * 3 + [greedy[1].prefix_group] * 3
    assert all(r.messages == g.messages for g, k in zip(greedy, (rest[:3], rest[3:])) for r in k)
    assert released == [[g.prefix_group for g in greedy]]
    expected = consistency_score(True, None, [False] * 3, "correct")
    assert [p.score for p in preds] == [pytest.approx(expected)] * 2
    assert all(p.prediction == (expected >= 0.5) for p in preds)


def test_debate_maps_verdict_confidence_to_score():
    t = Turn("S0", "initial", "o", False, 3)
    p = debate_score(Verdict(False, 3, 0.75, [t], rounds=1))
    assert (p.prediction, p.score) == (True, 0.75)
    assert p.detail["chain"][0]["role"] == "initial" and p.detail["rounds"] == 1  # the debate is kept
    p = debate_score(Verdict(True, 0, 0.75, [t]))
    assert (p.prediction, p.score) == (False, 0.25)
    undecided = debate_score(Verdict(None, None, 0.0, [], error="no agent gave a valid reply"))
    assert undecided.prediction is None and "valid reply" in undecided.error


def test_debate_verifier_runs_the_scheduler_with_the_items_evidence():
    # the first agent says "not factual"; both sides quote the item's passage (so each round asks the
    # Leader), and the Leader keeps the standing verdict (the schema's first winner, "trust")
    eng = FakeEngine(reply={"factuality": False, "error_severity": 4, "quotes": ["Paris is the capital of France."]})
    v = get_verifier("debate", VerifierOptions(debate=DebateConfig(min_rounds=2, max_rounds=2,
                                                                                leader_both_orders=False)))
    preds = v.predict(items(3), settings_with(eng))
    # no logprobs from the fake engine: sure turns, and the chain's fitted score of a sure "not factual"
    assert [p.prediction for p in preds] == [True] * 3 and len({p.score for p in preds}) == 1
    assert preds[0].score > 0.95
    assert len(eng.requests) == 3 * 7  # the first agent, then two rounds of Trust, Skeptic and Leader
    assert [[t["role"] for t in p.detail["chain"]] for p in preds] == [["initial"] + ["trust", "skeptic", "leader"] * 2] * 3  # S1: Trust first
    assert all(t["winner"] == "trust" for p in preds for t in p.detail["chain"] if t["role"] == "leader")
    assert all("Paris is the capital of France." in r.messages[1]["content"] for r in eng.requests)
    assert max(eng.batch_sizes) == 3  # the three debates advance together


@pytest.mark.parametrize("p, reached", [(0.6, 3), (0.99, 0)])
def test_cascade_sends_on_only_the_claims_inside_the_band(p, reached):
    # both sides quote the passage: every debate asks the Leader (first agent, two stances, Leader: 4 calls)
    eng = LogprobEngine(p, reply={"reasoning": "r", "factuality": False, "error_severity": 3,
                                  "quotes": ["Paris is the capital of France."]})
    v = get_verifier("selfcheck,debate", VerifierOptions(debate=DebateConfig(min_rounds=1, max_rounds=1, leader_both_orders=False),
                                                         band=(0.2, 0.8)))
    preds = v.predict(items(3), settings_with(eng))
    assert v.describe()["stages"] == {"selfcheck": {"claims": 3, "llm_calls": 3},
                                      **({"debate": {"claims": 3, "llm_calls": 3 * 4}} if reached else {})}
    assert len(eng.requests) == 3 + 4 * reached
    decided = [p.detail["verifier"] for p in preds]
    assert decided == ["debate" if reached else "selfcheck"] * 3
    assert all(p.prediction is True for p in preds)


def test_cascade_spelling_errors_name_the_fix():
    with pytest.raises(ConfigError, match="Did you mean 'debate'"):
        get_verifier("selfcheck,debat")
    with pytest.raises(ConfigError, match="selfcheck,debate"):
        get_verifier("selfcheck,")
    with pytest.raises(ConfigError, match="0 <= LO <= HI <= 1"):
        get_verifier("selfcheck,debate", VerifierOptions(band=(0.8, 0.2)))


def test_invalid_replies_make_the_item_missing():
    eng = FakeEngine(responder=lambda req: "not json at all")
    preds = get_verifier("selfcheck").predict(items(2), settings_with(eng))
    assert all(p.prediction is None and p.score is None and "JSON" in p.error for p in preds)


def test_text_of_keeps_the_question_for_qa_and_responses():
    qa = EvalItem("q:0", "halueval-qa", "Who? Bob.", False, "g", 0, question="Who?", answer="Bob.")
    resp = EvalItem("r:0", "factool-qa-response", "A long answer.", True, "g", 0, question="Q?", response="A long answer.")
    claim = EvalItem("c:0", "factool-qa", "One claim.", True, "g", 0, question="Q?", response="A long answer.")
    assert text_of(qa) == ("Who?", "Bob.") and text_of(resp) == ("Q?", "A long answer.")
    assert text_of(claim) == (None, "One claim.")


def test_unknown_verifier_suggests_a_name():
    with pytest.raises(ConfigError, match="Did you mean 'selfcheck'"):
        get_verifier("selfchek")
    assert set(VERIFIERS) == {"debate", "selfcheck", "selfcheck-3shot", "judge-likert", "prometheus", "lynx",
                              "consistency", "collab-cal", "nli", "direct", "probe", "arith", "citation", "code", "program",
                              "math", "source"}


# ---------------------------------------------------------------- nli


class FakeCrossEncoder:
    class config:
        id2label = {0: "contradiction", 1: "entailment", 2: "neutral"}

    num_labels = 3

    def predict(self, pairs, apply_softmax=False, **kw):
        return [[0.1, 0.8, 0.1] if "Paris" in premise and "France" in hyp else [0.7, 0.1, 0.2]
                for premise, hyp in pairs]


def test_nli_uses_max_entailment_over_passages(monkeypatch, tmp_path):
    from halucheck.verifiers import nli

    monkeypatch.setattr(nli, "load_cross_encoder", lambda path: FakeCrossEncoder())
    its = items(2, evidence=("Paris is in France.", "Berlin is in Germany."))
    its[1].claim = "Rome is in Italy."
    its[0].claim = "Paris is in France."
    preds = get_verifier("nli", VerifierOptions(nli_model=str(tmp_path))).predict(its, None)
    assert (preds[0].prediction, preds[0].score) == (False, pytest.approx(0.2))
    assert (preds[1].prediction, preds[1].score) == (True, pytest.approx(0.9))


def test_nli_without_a_model_says_how_to_get_one():
    with pytest.raises(ConfigError, match="PyPI.*--nli-model"):
        get_verifier("nli").preflight()


# ---------------------------------------------------------------- harness


def test_harness_writes_predictions_metrics_and_cost(tmp_path, toy_sets):
    eng = FakeEngine()
    eng.enqueue(*[{"explanation": "e", "score": s} for s in (1, 5, 2, 4, 3, 5, 1, 1)])
    out = tmp_path / "run"
    res = run_eval(["a", "b"], "judge-likert", settings_with(eng), out, limit=4, max_evidence=3)
    assert eng.batch_sizes == [8]  # both datasets' items in one call
    rows = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert len(rows) == 8 and rows[0]["id"] == "a:0"
    for r in rows:
        assert isinstance(r["label"], bool) and isinstance(r["prediction"], bool) and 0 <= r["score"] <= 1
    assert [r["score"] for r in rows[:2]] == [1.0, 0.0]
    m = json.loads((out / "metrics.json").read_text())
    assert set(m["results"]) == {"a", "b"} and m["results"]["a"]["n"] == 4
    auroc = m["results"]["a"]["metrics"]["auroc"]
    assert {"value", "ci_low", "ci_high"} <= set(auroc)
    cost = m["cost"]
    assert cost["llm_calls"] == 8 and cost["invalid_replies"] == 0 and cost["wall_time_s"] >= 0
    assert cost["prompt_tokens"] == sum(sum(len(x["content"].split()) for x in r.messages) for r in eng.requests)
    assert cost["completion_tokens"] > 0
    assert m["settings"]["max_evidence"] == 3 and m["verifier"] == "judge-likert/p" == res.metrics["verifier"]
    # every verifier saw the 3 selected passages, not 15
    assert all(r.messages[-1]["content"].count("passage") == 3 for r in eng.requests)


def test_harness_counts_retries_and_missing(tmp_path, toy_sets):
    eng = FakeEngine(responder=lambda req: "garbage")
    run_eval(["a"], "selfcheck", settings_with(eng), tmp_path / "r", limit=2)
    m = json.loads((tmp_path / "r" / "metrics.json").read_text())
    assert m["results"]["a"]["n_missing"] == 2
    assert m["cost"]["llm_calls"] == 2 * 3 and m["cost"]["invalid_replies"] == 2  # 1 try + 2 retries each


def test_select_evidence_keeps_relevant_passages_in_order():
    passages = ["The weather was mild.", "Irene Hervey was born in 1909.", "Film list follows.",
                "Hervey died in 1998 in California.", "Unrelated trivia."]
    assert select_evidence("Irene Hervey (1909-1998) was an actress.", passages, 2) == [passages[1], passages[3]]
    assert select_evidence("x", passages, 0) == passages and select_evidence("x", passages[:2], 5) == passages[:2]


# ---------------------------------------------------------------- CLI

CONFIG = """
default_profile: fake
profiles:
  fake:
    engine: fake
    reply: {factuality: false, error_severity: 4, quotes: ["passage 3 on the claim"]}
"""


@pytest.fixture
def config(tmp_path):
    p = tmp_path / "models.yaml"
    p.write_text(CONFIG)
    return p


def test_cli_eval_and_compare(tmp_path, config, toy_sets):
    d1, d2 = tmp_path / "debate", tmp_path / "selfcheck"
    r = runner.invoke(app, ["eval", "-d", "a", "-n", "4", "-v", "debate", "--config", str(config), "-o", str(d1),
                                "--min-rounds", "2", "--max-rounds", "2"])
    assert r.exit_code == 0, r.output
    assert "debate/fake" in r.stdout and (d1 / "predictions.jsonl").is_file()
    first = json.loads((d1 / "predictions.jsonl").read_text().splitlines()[0])
    # the first agent, then two rounds of Trust, Skeptic and the Leader asked in both orders (the default)
    assert first["detail"]["chain"][0]["state"] == "S0" and len(first["detail"]["chain"]) == 9
    r = runner.invoke(app, ["eval", "-d", "a", "-n", "4", "-v", "selfcheck", "--config", str(config), "-o", str(d2)])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["eval", "-d", "a", "-n", "4", "-v", "selfcheck,debate", "--band", "0,1", "--max-rounds", "2",
                            "--config", str(config), "-o", str(tmp_path / "cascade")])
    assert r.exit_code == 0, r.output
    # the debate's first agent asks selfcheck's own request (its reply is reused): then Trust, Skeptic and
    # a Leader, in both orders, that keeps the verdict (consensus after one round) for each item
    assert "cascade: selfcheck saw 4 of 4 items (4 LLM calls), then debate saw 4 of 4 items (16 LLM calls)" in r.stdout
    r = runner.invoke(app, ["eval", "--compare", str(d1), str(d2)])
    assert r.exit_code == 0, r.output
    lines = [line for line in r.stdout.splitlines() if line.startswith("|")]
    assert lines[0].startswith("| verifier | dataset") and "AUROC" in lines[0]
    assert len(lines) == 4 and "debate/fake" in lines[2] and "selfcheck/fake" in lines[3]


def test_cli_eval_errors_are_one_line(tmp_path, config):
    r = runner.invoke(app, ["eval", "-v", "nli", "-d", "wice", "--config", str(config)])
    assert r.exit_code == 1 and "PyPI" in r.output and len(r.output.strip().splitlines()) == 1
    r = runner.invoke(app, ["eval", "--config", str(config)])
    assert r.exit_code == 1 and "--dataset is required" in r.output
    r = runner.invoke(app, ["eval", "-d", "wice", "-v", "judge", "--config", str(config)])
    assert r.exit_code == 1 and "unknown verifier" in r.output
    r = runner.invoke(app, ["eval", "--compare"])
    assert r.exit_code == 1 and "needs run directories" in r.output
    r = runner.invoke(app, ["eval", "--compare", str(tmp_path / "nope")])
    assert r.exit_code == 1 and "not found" in r.output


def test_cli_eval_fails_when_no_item_got_a_prediction(tmp_path, toy_sets):
    cfg = tmp_path / "broken.yaml"
    cfg.write_text(CONFIG.replace('reply: {factuality: false', 'reply: {factuality: "maybe"'))
    out = tmp_path / "r"
    r = runner.invoke(app, ["eval", "-d", "a", "-n", "2", "-v", "selfcheck", "--config", str(cfg), "-o", str(out)])
    assert r.exit_code == 1
    err = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(err) == 1 and "2 of 2 items have no prediction" in err[0] and "schema" in err[0]
    assert (out / "predictions.jsonl").is_file()  # kept, to see what failed


def test_cli_eval_skip_scores_the_items_after_the_first_n(tmp_path, config, toy_sets):
    from halucheck.evaluation import read_predictions

    out = tmp_path / "r"
    first = runner.invoke(app, ["eval", "-d", "a", "-n", "2", "-v", "selfcheck", "--config", str(config), "-o", str(out)])
    assert first.exit_code == 0, first.output
    r = runner.invoke(app, ["eval", "-d", "a", "-n", "3", "--skip", "2", "-v", "selfcheck", "--config", str(config),
                            "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert [p["id"] for p in read_predictions(out)] == ["a:2", "a:3", "a:4"]
    assert "3 items; 3 LLM calls" in r.stdout  # none of the first run's replies was about these items
    assert json.loads((out / "metrics.json").read_text())["settings"]["skip"] == 2
    r = runner.invoke(app, ["eval", "-d", "a", "--skip", "6", "-v", "selfcheck", "--config", str(config)])
    assert r.exit_code == 1 and "lower --skip" in r.stderr
    for bad, said in ((["--data", str(tmp_path / "f.jsonl")], "--data file"), (["-d", "a", "--extraction"], "--extraction"),
                      (["-d", "a", "--skip", "-1"], "0 or more")):
        r = runner.invoke(app, ["eval", "--skip", "1", *bad, "--config", str(config)])
        assert r.exit_code == 1 and said in r.stderr, r.output


def test_cli_compare_common_scores_runs_on_shared_items(tmp_path, config, toy_sets):
    from halucheck.evaluation import read_predictions
    from halucheck.evaluation.report import score_predictions

    small, big = tmp_path / "small", tmp_path / "big"
    for out, n in ((small, "3"), (big, "6")):
        r = runner.invoke(app, ["eval", "-d", "a", "-n", n, "-v", "selfcheck", "--config", str(config), "-o", str(out)])
        assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["eval", "--compare", "--common", str(small), str(big)])
    assert r.exit_code == 0, r.output
    rows = [line.split(" | ") for line in r.stdout.splitlines() if line.startswith("| selfcheck")]
    assert [row[3] for row in rows] == ["3", "3"]  # n: the big run scored on the small run's 3 items
    assert "items every run has" in r.stdout
    first3 = [p for p in read_predictions(big)][:3]
    acc = score_predictions(first3, n_boot=50)["a"]["metrics"]["accuracy"]["value"]
    assert rows[1][5].strip("*").startswith(f"{acc:.3f}")
    r = runner.invoke(app, ["eval", "--compare", str(small), str(big)])
    assert [line.split(" | ")[3] for line in r.stdout.splitlines() if line.startswith("| selfcheck")] == ["3", "6"]


def test_a_second_run_reuses_the_replies_and_asks_nothing(tmp_path, toy_sets):
    out = tmp_path / "r"
    eng = FakeEngine(responder=lambda req: {"reasoning": "r", "factuality": "2" not in req.messages[-1]["content"]})
    first = run_eval(["a"], "selfcheck", settings_with(eng), out, limit=4)
    asked = len(eng.requests)
    assert asked == 4 and (out / "replies.duckdb").is_file() and first.metrics["cost"]["cached_replies"] == 0
    rows = (out / "predictions.jsonl").read_text()
    again = run_eval(["a"], "selfcheck", settings_with(eng), out, limit=4)
    assert len(eng.requests) == asked  # nothing asked again
    assert again.metrics["cost"]["cached_replies"] == 4 and again.metrics["cost"]["llm_calls"] == 0
    assert again.metrics["cost"]["prompt_tokens"] == 0 < first.metrics["cost"]["prompt_tokens"]
    assert (out / "predictions.jsonl").read_text() == rows
    run_eval(["a"], "selfcheck", settings_with(eng), out, limit=6)  # 2 new items: only they are asked
    assert len(eng.requests) == asked + 2
    run_eval(["a"], "selfcheck", settings_with(eng), tmp_path / "nc", limit=2, cache=False)
    assert not (tmp_path / "nc" / "replies.duckdb").exists()


def test_calibrate_then_eval_reports_before_and_after(tmp_path, monkeypatch, toy_sets):
    import re as _re

    monkeypatch.setenv("HALUCHECK_HOME", str(tmp_path / "home"))
    # an overconfident judge: Likert 1 (P = 1.0) for every even claim (hallucinated), 5 for odd ones, except
    # that it is wrong on claim 4 of each set
    def likert(request):
        i = int(_re.search(r"claim (\d+)", request.messages[-1]["content"]).group(1))
        return {"explanation": "e", "score": 1 if (i % 2 == 0) != (i == 4) else 5}

    register("likert-judge", lambda model="", **kw: FakeEngine(responder=likert))
    cfg = judge_config(tmp_path, "likert-judge", "j", "m1")
    r = runner.invoke(app, ["calibrate", "-d", "a", "-d", "b", "-v", "judge-likert", "--config", str(cfg),
                            "-o", str(tmp_path / "fit")])
    assert r.exit_code == 0, r.output
    assert "calibrator for judge-likert/j on 12 items" in r.stdout
    chance = _re.search(r"by chance: +on 12 items like these, calibrated scores show ECE ([0-9.]+) \(95 %: ([0-9.]+)\)",
                        r.stdout)
    assert chance and 0 < float(chance.group(1)) < float(chance.group(2))
    stored = tmp_path / "home" / "calibration" / "judge-likert--j.json"
    assert stored.is_file() and stored.with_suffix(".svg").is_file() and (tmp_path / "fit" / "reliability.svg").is_file()
    r = runner.invoke(app, ["eval", "-d", "c", "-v", "judge-likert", "--config", str(cfg), "-o", str(tmp_path / "ev")])
    assert r.exit_code == 0, r.output
    m = json.loads((tmp_path / "ev" / "metrics.json").read_text())
    after = m["calibration"]["results"]["c"]
    assert m["calibration"]["calibrated"]
    assert after["after"]["ece"]["value"] < after["before"]["ece"]["value"]
    assert after["after"]["brier"]["value"] < after["before"]["brier"]["value"]
    assert "ECE before | ECE after | ECE if calibrated" in r.stdout and "fitted on a, b (dev)" in r.stdout
    c = after["ece_if_calibrated"]["after"]  # its cell: mean (95 %: p95), p = p_value
    assert f"{c['mean']:.3f} (95 %: {c['p95']:.3f}), p = {c['p_value']:.2f}" in r.stdout
    # a calibrator is never applied to another model
    judge_config(tmp_path, "likert-judge", "j", "m2")
    r = runner.invoke(app, ["eval", "-d", "c", "-v", "judge-likert", "--config", str(cfg), "-o", str(tmp_path / "ev2")])
    assert r.exit_code == 1 and "m1" in r.stderr and "calibrate" in r.stderr
    # the test split is kept for reporting
    r = runner.invoke(app, ["calibrate", "-d", "a", "--split", "test", "-v", "judge-likert", "--config", str(cfg)])
    assert r.exit_code == 1 and "dev" in r.stderr


def test_named_calibrators_and_calibrator_files_in_calibrate_and_eval(tmp_path, monkeypatch, toy_sets):
    import re as _re

    monkeypatch.setenv("HALUCHECK_HOME", str(tmp_path / "home"))

    def likert(request):  # Likert 1 (P = 1.0) for even claims (hallucinated), 5 for odd ones; wrong on claim 4
        i = int(_re.search(r"claim (\d+)", request.messages[-1]["content"]).group(1))
        return {"explanation": "e", "score": 1 if (i % 2 == 0) != (i == 4) else 5}

    register("likert-judge", lambda model="", **kw: FakeEngine(responder=likert))
    cfg = judge_config(tmp_path, "likert-judge", "j", "m1")
    base = ["-v", "judge-likert", "--config", str(cfg)]
    r = runner.invoke(app, ["calibrate", "-d", "a", "-d", "b", "-d", "c", *base, "--name", "toys", "-o", str(tmp_path / "fit")])
    assert r.exit_code == 0, r.output
    store = tmp_path / "home" / "calibration"
    assert sorted(p.name for p in store.iterdir()) == ["judge-likert--j@toys.json", "judge-likert--j@toys.svg"]
    assert "with --calibration toys" in r.stdout
    copy = tmp_path / "fit" / "calibrator.json"
    assert copy.read_text() == (store / "judge-likert--j@toys.json").read_text() and copy.with_suffix(".svg").is_file()
    # the named one is used only when asked for
    r = runner.invoke(app, ["eval", "-d", "d", *base, "-o", str(tmp_path / "plain")])
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "plain" / "metrics.json").read_text())["calibration"] == {"calibrated": False}
    for choice, out in (("toys", "named"), (str(copy), "file")):
        r = runner.invoke(app, ["eval", "-d", "d", *base, "--calibration", choice, "-o", str(tmp_path / out)])
        assert r.exit_code == 0, r.output
        m = json.loads((tmp_path / out / "metrics.json").read_text())["calibration"]
        assert m["calibrated"] and m["name"] == "toys" and m["fitted_on"] == ["a", "b", "c"]
        assert m["file"].endswith("judge-likert--j@toys.json" if out == "named" else "calibrator.json")
        assert m["results"]["d"]["after"]["ece"]["value"] < m["results"]["d"]["before"]["ece"]["value"]
        assert "judge-likert/j `toys`: " in r.stdout and m["file"] in r.stdout
    r = runner.invoke(app, ["eval", "-d", "d", *base, "--calibration", "legal", "-o", str(tmp_path / "x")])
    assert r.exit_code == 1 and "no calibrator named 'legal'" in r.stderr and "stored: toys" in r.stderr
    r = runner.invoke(app, ["calibrate", "-d", "a", *base, "--name", "x.json"])
    assert r.exit_code == 1 and "plain name" in r.stderr
    # the model changed: its unnamed calibrator is refused by eval, yet calibrate refits it (it applies none)
    judge_config(tmp_path, "likert-judge", "j", "m2")
    r = runner.invoke(app, ["calibrate", "-d", "a", "-d", "b", *base, "-o", str(tmp_path / "fit2")])
    assert r.exit_code == 0, r.output
    judge_config(tmp_path, "likert-judge", "j", "m1")
    r = runner.invoke(app, ["calibrate", "-d", "a", "-d", "b", *base, "-o", str(tmp_path / "fit3")])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["eval", "-d", "d", *base, "--calibration", str(tmp_path / "fit2" / "calibrator.json"),
                            "-o", str(tmp_path / "y")])
    assert r.exit_code == 1 and "fitted on model m2, this run uses model m1" in r.stderr


def test_calibrate_refits_the_debate_score_and_the_debate_then_uses_it(tmp_path, monkeypatch, toy_sets):
    """`calibrate -v debate` fits the score's weights and threshold on the dev chains, stores them for the
    profile with their provenance, and the debate's later verdicts and P(hallucinated) are that score's."""
    from halucheck.verifiers.debate import score

    monkeypatch.setenv("HALUCHECK_HOME", str(tmp_path / "home"))

    def respond(request):  # a first agent right on every claim but claim 4; attacks with no checked quote
        role = request.tag.split(":")[1]
        if role == "initial":
            i = int(re.search(r"claim (\d+)", request.messages[-1]["content"]).group(1))
            return {"reasoning": "r", "factuality": (i % 2 == 1) != (i == 4)}
        if request.schema["title"] == "stance_factual":
            return {"quotes": ["nothing like this"], "argument": "a"}
        return {"finding": "contradicted", "quotes": ["nothing like this"], "argument": "a", "error_severity": 3}

    register("debate-judge", lambda model="", **kw: FakeEngine(responder=respond))
    cfg = judge_config(tmp_path, "debate-judge", "d", "m1")
    r = runner.invoke(app, ["calibrate", "-d", "a", "-d", "b", "-v", "debate", "--config", str(cfg),
                            "-o", str(tmp_path / "fit")])
    assert r.exit_code == 0, r.output
    stored = tmp_path / "home" / "calibration" / "debate-score--d.json"
    assert stored.is_file() and "debate score refitted on 12 chains" in r.stdout and str(stored) in r.stdout
    w = score.load_weights(stored)
    assert w.provenance["model"] == "m1" and w.provenance["split"] == "dev" and w.provenance["datasets"] == ["a", "b"]
    assert w.weights["first"] > 0  # the first agent is the only signal here
    r = runner.invoke(app, ["eval", "-d", "c", "-v", "debate", "--config", str(cfg), "-o", str(tmp_path / "ev")])
    assert r.exit_code == 0, r.output
    for row in (json.loads(line) for line in (tmp_path / "ev" / "predictions.jsonl").read_text().splitlines()):
        chain = score.turns_of(row["detail"]["chain"])
        p = w.score(score.features(chain))
        assert row["detail"]["p_hallucinated"] == pytest.approx(p, abs=1e-4)
        assert row["prediction"] is (p >= w.threshold)
    judge_config(tmp_path, "debate-judge", "d", "m2")
    r = runner.invoke(app, ["eval", "-d", "c", "-v", "debate", "--config", str(cfg), "-o", str(tmp_path / "ev2")])
    assert r.exit_code == 1 and "fitted on model m1" in r.stderr
