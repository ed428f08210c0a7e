"""`--verifier arith`: calculations evaluated by the arithmetic checker, the FacTool math sets, `eval` end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from halucheck.verifiers.tools.arith import P_RIGHT, P_ROUNDED, P_WRONG, ArithVerifier, severity_of
from halucheck.cli import app
from halucheck.evaluation import harness, load
from halucheck.evaluation.verifiers import case_of
from halucheck.records import Case, Claim, Verdict
from halucheck.verifiers import get_verifier

runner = CliRunner()


def given(expression: str, claimed: str, text: str = "a labelled calculation", **meta) -> Case:
    return Case(Claim(text), meta={"expression": expression, "claimed": claimed, **meta})


def written(text: str) -> Case:
    return Case(Claim(text))


def one(check: Case) -> Verdict:
    (verdict,) = ArithVerifier().verify([check])
    return verdict


# ---------------------------------------------------------------- the verifier


def test_registered_and_needs_no_model():
    v = get_verifier("arith")
    assert isinstance(v, ArithVerifier)
    assert v.name == "arith" and v.uses_llm is False and v.least_calls() == 0


def test_a_right_calculation_is_factual():
    v = one(given("48 x 125", "6,000"))
    assert (v.factuality, v.error_severity, v.error) == (True, 0, None)
    assert v.p_hallucinated == P_RIGHT and v.confidence == pytest.approx(1 - P_RIGHT)
    assert v.verifier == "arith"
    (turn,) = v.chain
    assert (turn.state, turn.role, turn.verifier) == ("S0", "initial", "arith")
    assert (turn.factuality, turn.error_severity) == (True, 0)
    assert turn.opinion == "48 x 125 = 6000 (claimed 6,000; right)"


def test_a_result_rounded_to_a_whole_number_is_factual_but_unsure():
    v = one(written("A third quit: (1/3) * 6537761 = 2179253 elves."))
    assert v.factuality is True and v.p_hallucinated == P_ROUNDED and v.confidence == pytest.approx(1 - P_ROUNDED)
    assert "rounded to a whole number" in v.chain[0].opinion
    # an approximate claim within its own stated precision is plainly right, not a whole-number rounding
    v = one(given("4987 x 1", "5000", approximate=True))
    assert v.p_hallucinated == P_RIGHT and "right to the precision stated" in v.chain[0].opinion


def test_a_wrong_calculation_says_by_how_much():
    v = one(given("48 x 125", "5800"))
    assert (v.factuality, v.error_severity) == (False, 2)
    assert v.p_hallucinated == P_WRONG and v.confidence == pytest.approx(P_WRONG)
    assert v.chain[0].opinion == "48 x 125 = 6000 (claimed 5800; off by 3.33 %)"
    assert (v.chain[0].factuality, v.chain[0].error_severity) == (False, 2)
    d = v.to_dict()
    assert d["factuality"] is False and d["verifier"] == "arith" and d["chain"][0]["verifier"] == "arith"


@pytest.mark.parametrize("expression, claimed, severity", [
    ("100 + 1", "100.5", 1),     # 0.5 %
    ("10 * 10", "99", 2),        # exactly 1 %: the next band
    ("10 * 10", "91", 2),        # 9 %
    ("10 * 10", "90", 3),        # exactly 10 %
    ("10 * 10", "60", 3),        # 40 %
    ("10 * 10", "250", 4),       # 150 %
    ("10 * 10", "1000", 5),      # 900 %: an order of magnitude
    ("2 + 3", "-5", 5),          # the wrong sign: 200 %
    ("5 - 5", "1", 5),           # the value is 0: infinite relative error
])
def test_severity_grows_with_the_relative_error(expression, claimed, severity):
    v = one(given(expression, claimed))
    assert v.factuality is False and v.error_severity == severity


def test_severity_bands():
    assert [severity_of(x) for x in (0.0, 0.009, 0.01, 0.099, 0.1, 0.49, 0.5, 1.99, 2.0, float("inf"))] == \
        [1, 1, 2, 2, 3, 3, 4, 4, 5, 5]


def test_rounding_the_claim_states_is_right_and_said_so():
    v = one(given("60444034 / 12", "5037002.83"))
    assert v.factuality is True
    assert v.chain[0].opinion == "60444034 / 12 ≈ 5037002.83333 (claimed 5037002.83; right to the precision stated)"
    assert one(given("4987 x 1", "5000", approximate=True)).factuality is True
    assert one(given("4987 x 1", "5000")).factuality is False


def test_meta_wins_over_the_text():
    assert one(given("2 + 2", "4", text="2 + 2 = 5")).factuality is True


def test_calculations_found_in_the_text_all_must_be_right():
    v = one(written("So 48 × 125 = 6000 apples, and 6000 / 4 = 1500 per crate."))
    assert (v.factuality, v.error_severity) == (True, 0)
    assert v.chain[0].opinion == ("[1] 48 × 125 = 6000 (claimed 6000; right) "
                                  "[2] 6000 / 4 = 1500 (claimed 1500; right)")
    v = one(written("First 2 + 2 = 4, then 10 * 10 = 105, and 3 * 3 = 90."))
    assert v.factuality is False and v.p_hallucinated == P_WRONG
    assert v.error_severity == 5  # the worst wrong one (900 %), not the first (5 %)
    assert "[2] 10 * 10 = 100 (claimed 105; off by 5 %)" in v.chain[0].opinion
    assert len(v.chain) == 1


def test_no_calculation_found_is_a_failed_verdict():
    v = one(written("The Eiffel Tower is 330 m tall and opened in 1889."))
    assert v.factuality is None and v.p_hallucinated is None
    assert v.error == "no calculation found in the claim" and v.verifier == "arith"


@pytest.mark.parametrize("expression, error", [
    ("__import__('os').system('true')", "only sqrt, abs, round may be called"),
    ("5x + 16094295 - 3x", "unparseable"),
    ("x + 5", "names are not allowed"),
    ("9**9**9", "too large"),
])
def test_unsafe_or_unparseable_expressions_fail_with_the_evaluators_error(expression, error):
    v = one(given(expression, "1"))
    assert v.factuality is None and v.error_severity is None and v.p_hallucinated is None
    assert error in v.error and expression in v.error
    assert v.chain and v.chain[0].error == v.error and not v.chain[0].ok


def test_a_wrong_result_decides_even_beside_one_that_cannot_be_evaluated():
    v = one(written("Here 1/0 = 3 and 2 + 2 = 5."))
    assert v.factuality is False and v.error_severity == 3
    assert "cannot evaluate: division by zero" in v.chain[0].opinion
    v = one(written("Here 1/0 = 3 and 2 + 2 = 4."))
    assert v.factuality is None and "division by zero" in v.error


def test_half_given_meta_is_an_error():
    v = one(Case(Claim("2 + 2 = 4"), meta={"expression": "2 + 2"}))
    assert v.factuality is None and "not both" in v.error


def test_verdicts_are_reported_as_decided_and_costed():
    checks = [given("2 + 2", "4"), written("no numbers"), given("2 + 2", "5")]
    seen = []
    v = ArithVerifier()
    out = v.verify(checks, None, on_verdict=lambda i, verdict: seen.append((i, verdict.factuality)))
    assert seen == [(0, True), (1, None), (2, False)]
    assert [o.factuality for o in out] == [True, None, False]
    cost = v.costs["arith"]
    assert cost.claims == 3 and cost.llm_calls == 0 and cost.wall_s >= 0


# ---------------------------------------------------------------- the FacTool math sets


def calc(expression: str, answer: str, label) -> dict:
    return {"label": label, "claim": {"math_calculation": expression, "calculated_answer": answer}}


# Positions 0-5; position 4 is the test split. Response 3 has no calculation in its text; response 5's
# truncated result was accepted by its annotators (as in the real file): a whole number of people, rounded down.
MATH = [
    {"prompt": "Apples?", "response": "48 x 125 = 6000 apples. Then 6000 / 4 = 1500.", "label": True, "answer": "1500",
     "claims": [calc("48 x 125", "6000", True), calc("6000 / 4", "1500", True)]},
    {"prompt": "Tiles?", "response": "First 2 + 3 = 5, so 5 x 10 = 60.", "label": False, "answer": "50",
     "claims": [calc("2 + 3", "5", True), calc("5 x 10", "60", False), calc("5x", "5x", "null")]},
    {"prompt": "Cost?", "response": "Let x be the cost. Then 3x = 12, and 4 * 2 = 9.", "label": False, "answer": "8",
     "claims": [calc("3x", "12", True), calc("4 * 2", "9", False)]},
    {"prompt": "Word?", "response": "The answer is seven.", "label": True, "answer": "7", "claims": []},
    {"prompt": "Square?", "response": "10 * 10 = 1000", "label": False, "answer": "100",
     "claims": [calc("10 * 10", "1000", False)]},
    {"prompt": "People?", "response": "(1/3) * 6537761 = 2179253 people.", "label": True, "answer": "2179253",
     "claims": [calc("1/3 * 6537761", "2179253", True)]},
]


@pytest.fixture
def math_root(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "datasets"
    (root / "factool").mkdir(parents=True)
    with open(root / "factool" / "math.jsonl", "w", encoding="utf-8") as fh:
        for r in MATH:
            fh.write(json.dumps({**r, "entry_point": None}) + "\n")
    monkeypatch.setenv("HALUCHECK_DATASETS", str(root))
    return root


def test_claim_level_items(math_root):
    items = load("factool-math", split="all")
    assert [i.id for i in items] == ["factool-math:0:0", "factool-math:0:1", "factool-math:1:0", "factool-math:1:1",
                                     "factool-math:2:0", "factool-math:2:1", "factool-math:4:0", "factool-math:5:0"]
    assert [i.label for i in items] == [False, False, False, True, False, True, True, False]
    wrong = items[3]
    assert wrong.claim == "5 x 10 = 60" and wrong.meta["expression"] == "5 x 10" and wrong.meta["claimed"] == "60"
    assert wrong.group == "factool-math:1" and wrong.position == 1 and wrong.question is None
    assert wrong.meta["response_label"] is True
    assert [i.id for i in load("factool-math", split="test")] == ["factool-math:4:0"]
    assert all(i.split == "dev" for i in load("factool-math"))
    # the verifier sees the labelled calculation, not text to search
    assert case_of(wrong).meta["expression"] == "5 x 10" and case_of(wrong).claim.question is None


def test_response_level_items(math_root):
    items = load("factool-math-response", split="all")
    assert [i.id for i in items] == [f"factool-math-response:{p}" for p in range(6)]
    assert [i.label for i in items] == [False, True, True, False, True, False]
    item = items[1]
    assert item.claim == item.response == MATH[1]["response"] and item.question == "Tiles?"
    assert "expression" not in item.meta and "claimed" not in item.meta
    assert item.meta["calculations"][1] == ["5 x 10", "60"] and item.meta["claim_labels"] == [True, False, None]
    check = case_of(item)
    assert check.claim.text == MATH[1]["response"] and check.claim.question == "Tiles?"
    assert [i.position for i in load("factool-math-response", split="test")] == [4]


def test_arith_on_the_sets(math_root):
    v = ArithVerifier()
    claims = load("factool-math", split="all")
    verdicts = v.verify([case_of(i) for i in claims])
    assert [None if d.factuality is None else not d.factuality for d in verdicts] == \
        [False, False, False, True, None, True, True, False]
    responses = load("factool-math-response", split="all")
    verdicts = v.verify([case_of(i) for i in responses])
    assert [None if d.factuality is None else not d.factuality for d in verdicts] == \
        [False, True, True, None, True, False]
    assert verdicts[3].error == "no calculation found in the claim"
    assert "[2] 5 x 10 = 50 (claimed 60; off by 20 %)" in verdicts[1].chain[0].opinion


def by_id_prediction(out: Path, item: str):
    rows = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    return next(row["prediction"] for row in rows if row["id"] == item)


def test_cli_eval_end_to_end(math_root, tmp_path, monkeypatch):
    monkeypatch.setattr(harness, "N_BOOT", 50)
    out = tmp_path / "run"
    r = runner.invoke(app, ["eval", "-d", "factool-math", "-d", "factool-math-response", "-v", "arith",
                            "--split", "dev", "-o", str(out), "--config", str(tmp_path / "no-models.yaml")])
    assert r.exit_code == 0, r.output
    assert "0 LLM calls" in r.stdout
    m = json.loads((out / "metrics.json").read_text())
    assert m["verifier"] == "arith" and m["split"] == "dev" and m["cost"]["llm_calls"] == 0
    assert m["settings"]["verifier"] == "arith" and "profile" not in m["settings"]
    # claims (dev): 7 items (response 3 has none), "3x = 12" cannot be evaluated; 1:1 and 2:1 caught, 5:0 (a
    # result rounded down to whole people) right as its annotators say: P 1, R 1
    c = m["results"]["factool-math"]
    assert (c["n"], c["n_positive"], c["n_missing"]) == (6, 2, 1)
    assert c["metrics"]["precision"]["value"] == pytest.approx(1.0)
    assert c["metrics"]["recall"]["value"] == pytest.approx(1.0)
    assert c["metrics"]["f1"]["value"] == pytest.approx(1.0)
    # responses (dev): 0, 1, 2, 3, 5; 3 has no calculation (missing); 5 right as labelled
    res = m["results"]["factool-math-response"]
    assert (res["n"], res["n_positive"], res["n_missing"]) == (4, 2, 1)
    assert res["metrics"]["precision"]["value"] == pytest.approx(1.0)
    assert res["metrics"]["recall"]["value"] == pytest.approx(1.0)
    assert by_id_prediction(out, "factool-math:5:0") is False
    rows = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    by_id = {row["id"]: row for row in rows}
    assert by_id["factool-math:1:1"]["prediction"] is True and by_id["factool-math:1:1"]["score"] == P_WRONG
    assert by_id["factool-math:0:0"]["prediction"] is False and by_id["factool-math:0:0"]["score"] == P_RIGHT
    assert by_id["factool-math:2:0"]["prediction"] is None and "unparseable" in by_id["factool-math:2:0"]["error"]
    assert by_id["factool-math-response:3"]["error"] == "no calculation found in the claim"
    assert by_id["factool-math-response:1"]["detail"]["chain"][0]["verifier"] == "arith"
    assert not any(row["id"].startswith("factool-math:4") for row in rows)  # test split left out


def test_a_listed_calculation_the_finder_does_not_read_is_checked_as_expression_and_result():
    from halucheck.records import Case, Claim

    [wrong, right, prose] = ArithVerifier().verify([
        Case(Claim("2*(5364765) + 16094295 = 26823826", None, "calculation")),
        Case(Claim("2*(5364765) + 16094295 = 26823825", None, "calculation")),
        Case(Claim("It costs about 2(5) = 10 dollars", None, "knowledge"))])  # not a listed calculation
    assert wrong.factuality is False and right.factuality is True
    assert prose.factuality is None and "no calculation found" in prose.error
