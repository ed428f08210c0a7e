"""End to end on a real model (Qwen2.5-Coder-0.5B-Instruct on the CPU). Asserts structure and the
chain rules, never the model's opinion. Runs in CI (the model is a test dependency)."""

import json
import os
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from halucheck.cli import app

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def check_chain(chain, min_rounds, max_rounds):
    """The debate's rules on a real chain: S0 gives the standing verdict; each round Trust defends it and the
    Skeptic attacks it in the state the policy picks (S2, Skeptic first, after "factual"), each with checked
    quotes; the Leader's winner (or a walkover when the attack has no verified quote) sets the next standing
    verdict. Returns the final standing verdict."""
    assert chain[0]["state"] == "S0" and chain[0]["role"] == "initial" and chain[0]["factuality"] is not None
    standing, rounds, k = chain[0]["factuality"], 0, 1
    while k < len(chain):
        state = chain[k]["state"]
        assert state == ("S2" if standing else "S1")
        sides = chain[k:k + 2]
        assert [t["role"] for t in sides] == (["skeptic", "trust"] if state == "S2" else ["trust", "skeptic"])
        by_role = {t["role"]: t for t in sides}
        for role, t in by_role.items():
            assert t["factuality"] in (None, standing if role == "trust" else not standing)
            for q in t.get("quotes", []):
                assert isinstance(q["verified"], bool) and q["text"]
            if t["factuality"] is not None:
                assert (t["error_severity"] == 0) == t["factuality"] and t["opinion"].strip()
                assert t.get("void", False) == (not any(q["verified"] for q in t["quotes"]))
        k += 2
        leaders = []
        while k < len(chain) and chain[k]["role"] == "leader" and chain[k]["state"] == state:
            leaders.append(chain[k])
            k += 1
        assert leaders
        counts = {r: t["factuality"] is not None and not t.get("void") for r, t in by_role.items()}
        trust_ok = by_role["trust"]["factuality"] is not None
        if not (counts["skeptic"] and trust_ok):  # no call: a void attack fails, a failed defence loses
            assert len(leaders) == 1 and leaders[0]["p_factual"] is None and leaders[0]["completion_tokens"] == 0
            assert leaders[0]["winner"] == ("trust" if not counts["skeptic"] else "skeptic")
        for t in leaders:
            if t["factuality"] is not None:
                assert t["winner"] in ("trust", "skeptic")
                assert t["factuality"] == (standing if t["winner"] == "trust" else not standing)
        decided = [t for t in leaders if t["factuality"] is not None]
        if len({t["factuality"] for t in decided}) == 1:  # one winner named: the verdict is the winner's
            standing = decided[0]["factuality"]
        elif decided:  # the two orders disagree: their mean P(factual), a tie to the defender
            p = sum(t["p_factual"] for t in decided) / len(decided)
            standing = standing if (p if standing else 1 - p) >= 0.5 else not standing
        rounds += 1
    assert min_rounds <= rounds <= max_rounds
    return standing


def assert_scored(verdict: dict, standing: bool) -> None:
    """The verdict is the fitted score's: P(hallucinated) of the chain's features, the standing verdict the
    rules above give among them, against the score's threshold (the shipped weights: no refit in the tests)."""
    from halucheck.verifiers.debate import score

    weights = score.shipped()
    p = weights.score(score.features(score.turns_of(verdict["chain"]), standing))
    assert verdict["p_hallucinated"] == pytest.approx(p, abs=1e-3)
    assert verdict["factuality"] == (p < weights.threshold)


def test_check_with_the_default_verifier_end_to_end(model_ready):
    """The default (selfcheck): one call, its reasoning as the one turn, a decision and its token's probability."""
    r = CliRunner().invoke(app, ["check", "The Eiffel Tower is in Berlin.", "--evidence",
                                 "The Eiffel Tower is a wrought-iron lattice tower in Paris, France.",
                                 "--profile", "cpu-0.5b", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["verifier"] == "selfcheck" and len(out["chain"]) == 1 and out["chain"][0]["opinion"].strip()
    assert out["factuality"] in (True, False) and 0.0 <= out["p_hallucinated"] <= 1.0
    assert (out["p_hallucinated"] <= 0.5) if out["factuality"] else (out["p_hallucinated"] >= 0.5)
    # severity: 0 when factual; a claim found not factual is graded 1-5 by one short constrained call
    assert out["error_severity"] == 0 if out["factuality"] else out["error_severity"] in (1, 2, 3, 4, 5)


def test_check_direct_end_to_end_with_its_severity_from_the_pass(model_ready):
    """`direct`: one prompt pass, nothing decoded; a flagged claim graded 1-5 from the same pass's conversation."""
    r = CliRunner().invoke(app, ["check", "The Eiffel Tower is in Berlin.", "--evidence",
                                 "The Eiffel Tower is a wrought-iron lattice tower in Paris, France.",
                                 "--profile", "cpu-0.5b", "--json", "-v", "direct"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    turn = out["chain"][0]
    assert out["verifier"] == "direct" and len(out["chain"]) == 1 and turn["chunk"]["of"] == 1
    assert turn["completion_tokens"] == 0  # nothing decoded, the grade included
    assert out["error_severity"] == 0 if out["factuality"] else out["error_severity"] in (1, 2, 3, 4, 5)


def test_check_debate_end_to_end(model_ready):
    r = CliRunner().invoke(app, ["check", "The Eiffel Tower is in Berlin.", "--evidence",
                                 "The Eiffel Tower is a wrought-iron lattice tower in Paris, France.",
                                 "--profile", "cpu-0.5b", "--json", "-v", "debate", "--max-rounds", "3"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    standing = check_chain(out["chain"], 1, 3)
    assert_scored(out, standing)
    assert 0.0 <= out["confidence"] <= 1.0 and 0.0 <= out["p_hallucinated"] <= 1.0
    p_h = out["p_hallucinated"]
    assert out["confidence"] == pytest.approx(p_h if out["factuality"] is False else 1 - p_h, abs=1e-3)
    # constrained decoding: every turn parsed and validated
    assert all(t["factuality"] is not None for t in out["chain"])


def test_run_end_to_end_on_demo_corpus(model_ready, tmp_path):
    answers = tmp_path / "answers.jsonl"
    lines = (REPO / "corpora/demo/answers.jsonl").read_text().splitlines()
    answers.write_text("\n".join([lines[3], lines[8]]) + "\n")  # a short QA answer and a chatty one
    r = CliRunner().invoke(app, ["run", "--corpus", str(REPO / "corpora/demo/docs"), "--input", str(answers),
                                 "--out", str(tmp_path / "run"), "--profile", "cpu-0.5b", "-v", "debate", "--min-rounds", "1",
                                 "--max-rounds", "1", "--index", str(tmp_path / "index.duckdb"), "--quiet"])
    assert r.exit_code == 0, r.output
    results = [json.loads(l) for l in (tmp_path / "run/results.jsonl").read_text().splitlines()]
    assert [x["id"] for x in results] == ["q04", "q09"]
    for x in results:
        assert isinstance(x["hallucinated"], bool) and x["claims"]
        assert x["hallucinated"] == any(c["factuality"] is False for c in x["claims"])
        assert 0.0 <= x["coverage"]["checked_share"] <= 1.0
        for c in x["claims"]:
            assert_scored(c, check_chain(c["chain"], 1, 1))
            # the model's queries are search queries, not questions about the claim's truth (the 0.5B
            # often writes the claim itself, which is searched anyway)
            assert c["queries"] and all(q.strip() for q in c["queries"])
            written = [q for q in c["queries"] if q != c["text"]]
            assert all(not q.rstrip().endswith("?") for q in written)
            assert not any(re.search(r"\b(true|false)\W*$", q, re.IGNORECASE) for q in written)
            assert c["evidence"] and all(e["source"].endswith((".md", ".txt", ".html")) for e in c["evidence"])
            for e in c["evidence"]:  # offsets point at the quoted text in the source file
                if e["source"].endswith((".md", ".txt")):
                    quoted = Path(e["source"]).read_text()[e["start"]:e["end"]]
                    assert " ".join(quoted.split()) == " ".join(e["text"].split())
    assert (tmp_path / "run/report.html").read_text().count('class="claim"') == sum(len(x["claims"]) for x in results)
