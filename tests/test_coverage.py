"""Coverage: which words of an answer its claims state, and what is highlighted as not checked."""

from __future__ import annotations

from halucheck.claims import locate, sentences
from halucheck.coverage import FILLER, NOT_CHECKED, SUBJECTIVE, measure
from halucheck.reports import highlight


def located(answer: str, claims: list[str]) -> list[tuple[str, int, int]]:
    return [(c, *locate(c, answer)) for c in claims]


def kinds(answer, cov):
    return {answer[g.start:g.end]: g.kind for g in cov.gaps}


def test_a_dropped_clause_is_not_checked_and_never_green():
    answer = "In 2023 Varenholt reported revenue of 48 million euros, up 12 percent from 2022."
    claims = located(answer, ["Varenholt reported revenue of 48 million euros in 2023."])
    cov = measure(answer, claims)
    assert kinds(answer, cov) == {"12 percent from 2022": NOT_CHECKED}
    assert 0 < cov.checked_share < 1
    pieces = highlight(answer, [{"span": list(cov.spans[0]), "factuality": True}], [g.to_dict(answer) for g in cov.gaps])
    by_text = {p["text"]: p["kind"] for p in pieces}
    assert by_text["12 percent from 2022"] == "unchecked"
    assert all(p["kind"] != "true" for p in pieces if "12" in p["text"] or "2022" in p["text"])
    assert any(p["kind"] == "true" and "48 million" in p["text"] for p in pieces)


def test_two_claims_of_one_sentence_are_highlighted_apart():
    answer = "The AquaProbe 3 runs for 30 hours on one charge and weighs 410 grams."
    claims = located(answer, ["The AquaProbe 3 runs for 30 hours on one charge.", "The AquaProbe 3 weighs 410 grams."])
    cov = measure(answer, claims)
    assert cov.not_checked() == [] and cov.checked_share == 1.0
    runs, weighs = (answer[s:e] for s, e in cov.spans)
    assert runs == "runs for 30 hours on one charge" and weighs == "weighs 410 grams"
    pieces = highlight(answer, [{"span": list(cov.spans[0]), "factuality": True},
                                {"span": list(cov.spans[1]), "factuality": False}], [])
    by_text = {p["text"]: p["kind"] for p in pieces}
    assert by_text["weighs 410 grams"] == "false" and by_text["runs for 30 hours on one charge"] == "true"


def test_a_claim_alone_in_its_sentence_spans_the_sentence():
    answer = "Varenholt employs about 340 people. Most work in Oulu."
    cov = measure(answer, located(answer, ["Varenholt employs about 340 people."]))
    assert answer[slice(*cov.spans[0])] == "Varenholt employs about 340 people."
    assert kinds(answer, cov) == {"Most work in Oulu": NOT_CHECKED}  # a whole sentence without a claim ("Most" says how many)


def test_dialogue_is_subjective_and_a_lone_adverb_is_filler():
    answer = ("Happy to help! Interestingly, a CalibraKit contains six reference solutions. "
              "Let me know if you need anything else.")
    cov = measure(answer, located(answer, ["A CalibraKit contains six reference solutions."]))
    got = kinds(answer, cov)
    assert got.pop("Interestingly") == FILLER
    assert set(got.values()) == {SUBJECTIVE} and cov.not_checked() == []


def test_an_answer_without_claims_is_not_checked_at_all():
    answer = "Stockholm opened in 2014."
    cov = measure(answer, [])
    assert cov.checked_share == 0.0 and [answer[g.start:g.end] for g in cov.not_checked()] == ["Stockholm opened in 2014"]


def test_decimal_numbers_do_not_end_a_sentence():
    assert [s.text for s in sentences("Revenue was 4.2 million euros. Version 1.5 shipped!")] == [
        "Revenue was 4.2 million euros.", "Version 1.5 shipped!"]


def test_a_title_before_a_name_does_not_end_a_sentence_and_other_abbreviations_still_may():
    assert [s.text for s in sentences("As Prof. Helen Marsh said, Dr. Watson left, e.g. by train. He was Jr. "
                                      "He met the Dr.\nNext.")] == [
        "As Prof. Helen Marsh said, Dr. Watson left, e.g. by train.", "He was Jr.", "He met the Dr.", "Next."]


def test_initials_and_a_cases_v_before_a_name_do_not_end_a_sentence():
    assert [s.text for s in sentences("Sandra Day O'Connor is a female U.S. Supreme Court justice. She moved to the "
                                      "U.K. in 1990. NYSRPA v. Bruen was decided in 2022. I am A. Smith. It has vitamin C.\nNext.")] == [
        "Sandra Day O'Connor is a female U.S. Supreme Court justice.", "She moved to the U.K. in 1990.",
        "NYSRPA v. Bruen was decided in 2022.", "I am A. Smith.", "It has vitamin C.", "Next."]


def test_passages_the_agents_cited_are_counted():
    from halucheck.records import Evidence, Quote, Turn
    from halucheck.reports import cited

    ev = [Evidence("a", source="/c/a.md"), Evidence("b", source="/c/b.md"), Evidence("c", source="/c/c.md")]
    chain = [Turn(state="S0", role="initial", opinion="Passage [2] says so.", factuality=True, error_severity=0),
             # a verified quote counts for its passage, once per turn
             Turn(state="S2", role="skeptic", opinion="no", factuality=False, error_severity=2, finding="contradicted",
                  quotes=(Quote("a a a", True, 1), Quote("c c c", True, 3), Quote("a a", True, 1))),
             Turn(state="S2", role="trust", opinion="yes", factuality=True, error_severity=0, finding="supported",
                  quotes=(Quote("a a a", True, 1), Quote("b b b", False, why="not in the passages word for word"))),
             # a "not stated" quote that passage [2] states is not verified: it cites nothing
             Turn(state="S1", role="trust", opinion="no", factuality=False, error_severity=2, finding="not stated",
                  quotes=(Quote("x y", False, 2, why="passage [2] states it"), Quote("z w", True)), void=False),
             Turn(state="S2", role="leader", opinion="{", factuality=None, error_severity=None, error="invalid JSON")]
    assert [e["cited_by"] for e in cited(ev, chain)] == [2, 0, 1]
    assert [e["cited_by"] for e in cited(ev, [])] == [0, 0, 0]


def test_words_that_change_a_statement_are_never_stop_words():
    from halucheck.text import stop_words

    for word in ("not", "never", "two", "first", "before", "most", "too", "without"):
        assert word not in stop_words()
    for word in ("the", "and", "which", "is", "sure"):
        assert word in stop_words()
