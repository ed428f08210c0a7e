"""The debate's chain statistics: copies, loops, caps, flips (evaluation/chains.py)."""

import pytest

from halucheck.evaluation.chains import chain_stats, has_loop, is_copy
from halucheck.evaluation.report import score_predictions


def turn(role, opinion, factuality=True, tokens=10, **kw):
    return {"role": role, "opinion": opinion, "factuality": factuality, "completion_tokens": tokens, **kw}


def row(chain, prediction, label, ds="wice"):
    return {"id": str(id(chain)), "dataset": ds, "label": label, "prediction": prediction,
            "score": float(prediction), "detail": {"chain": chain}}


def test_copy_is_60_percent_of_4grams_from_one_earlier_turn():
    a = "the tower stands in paris and not in berlin at all"
    assert is_copy("the tower stands in paris and not in berlin today", [a])  # 6 of 7 4-grams
    assert not is_copy("passage two names paris as the city of the tower", [a])
    # spread over two earlier turns, but 60 % of neither: not a copy
    half1, half2 = "one two three four five x", "y six seven eight nine ten"
    assert not is_copy("one two three four five six seven eight nine ten", [half1, half2])
    assert not is_copy("too short", [a])


def test_loop_is_a_sentence_of_six_words_twice():
    s = "The claim is only partially true, as it is not in Berlin."
    assert has_loop(f"{s} {s}")
    assert not has_loop("It is true. It is true.")  # four words: not a loop
    assert not has_loop("Passage 1 says Paris. Passage 2 says the tower opened in 1889.")


def test_chain_stats_counts_copies_loops_caps_and_flips():
    loop = "Passage one says the tower is in Paris. Passage one says the tower is in Paris."
    rows = [
        # initial says factual, the debate flips to hallucinated, label hallucinated: a right flip
        row([turn("initial", "The passages put the tower in Paris, France.", True),
             turn("skeptic", "Passage one contradicts the claimed city.",
                  False, tokens=30, capped=True),
             turn("trust", "The passages put the tower in Paris, France, they say.", False),  # a copy
             turn("leader", loop, False, repaired="severity 0 -> 1")],
            prediction=True, label=True),
        # no flip; one error turn (not an opinion, counted as a turn)
        row([turn("initial", "Nothing in the evidence mentions it.", False),
             turn("skeptic", "", None, error="bad reply")], prediction=True, label=False),
        # a wrong flip
        row([turn("initial", "Supported by passage two of the evidence.", False)], prediction=False, label=True),
    ]
    s = chain_stats(rows)
    assert s["turns"] == 7 and s["debates"] == 3
    assert s["copy_rate"] == pytest.approx(1 / 3, abs=1e-4)  # 3 valid turns after a first one, 1 copy
    assert s["loop_rate"] == pytest.approx(1 / 7, abs=1e-4) and s["cap_rate"] == pytest.approx(1 / 7, abs=1e-4)
    assert (s["flips_right"], s["flips_wrong"], s["repaired"]) == (1, 1, 1)
    assert s["completion_tokens_per_turn"] == pytest.approx(90 / 7, abs=0.05)


def test_restating_the_claim_is_told_from_copying_another_agent():
    claim = "Barack Obama served two terms from 2009 to 2017."
    chain = [turn("initial", "Passage 1 states that Barack Obama served two terms from 2009 to 2017.", True),
             # the same claim restated with other words around it: a copy by 4-grams, not beyond the claim
             turn("trust", "Every passage agrees Barack Obama served two terms from 2009 to 2017.", True),
             # the first agent's own framing repeated: a copy either way
             turn("leader", "Passage 1 states that Barack Obama served two terms from 2009 to 2017, yes.", True)]
    with_claim = chain_stats([{**row(chain, prediction=False, label=False), "claim": claim}])
    assert with_claim["copy_rate"] == 1.0 and with_claim["copy_rate_beyond_claim"] == 0.5
    assert "copy_rate_beyond_claim" not in chain_stats([row(chain, prediction=False, label=False)])


def test_score_predictions_adds_the_debate_section_only_for_chains():
    rows = [row([turn("initial", "a b c d e")], True, True), row([turn("initial", "f g h i j")], False, False)]
    assert "debate" in score_predictions(rows, n_boot=10)["wice"]
    plain = [{k: v for k, v in r.items() if k != "detail"} for r in rows]
    assert "debate" not in score_predictions(plain, n_boot=10)["wice"]


def test_chain_stats_count_quote_checks_voids_walkovers_flip_directions_and_order_agreement():
    q = lambda v: {"text": "x y z", "verified": v}  # noqa: E731
    flipped = [turn("initial", "fine", True),
               turn("skeptic", "no", False, quotes=[q(True), q(False)], finding="contradicted"),
               turn("trust", "yes", True, quotes=[q(True)]),
               turn("leader", "a", False, winner="skeptic", p_factual=0.2),
               turn("leader", "b", True, winner="trust", p_factual=0.6)]  # the same round, other order
    walkover = [turn("initial", "fine", False),
                turn("trust", "no", False, quotes=[q(True)], finding="not stated"),
                turn("skeptic", "yes", True, quotes=[q(False)], void=True),
                turn("leader", "stays", False, winner="trust", p_factual=None, tokens=0)]
    s = chain_stats([row(flipped, True, True), row(walkover, True, False)])
    assert (s["quotes"], s["verified_quote_share"]) == (5, 0.6)
    assert (s["stances"], s["void_share"]) == (4, 0.25)
    assert (s["leader_calls"], s["walkovers"]) == (2, 1)
    assert (s["leader_order_agreement"], s["leader_order_pairs"]) == (0.0, 1)
    assert s["flips"] == {"to_hallucinated": {"right": 1, "wrong": 0}, "to_factual": {"right": 0, "wrong": 0}}
