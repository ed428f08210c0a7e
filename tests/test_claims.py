"""Rules of the claim stage that need no model."""

from __future__ import annotations

import pytest

from halucheck.claims import is_short_answer


@pytest.mark.parametrize("answer", ["Paris.", "1889", "About 340 people.", "Six reference solutions.",
                                    "Tampere, Finland.", "In 2009.", "Gustave Eiffel and his company"])
def test_an_answer_that_is_no_statement_is_checked_with_its_question(answer):
    assert is_short_answer(answer)


@pytest.mark.parametrize("answer", ["Varenholt employs about 340 people.", "It makes enzyme kits.",
                                    "The Eiffel Tower is in Paris.", "Aino Lehtola founded it.",
                                    "Helena Virtanen runs it.",
                                    "Varenholt sensors have a five-year warranty that also covers frost damage.",
                                    "Paris. It has 2 million people.",
                                    "one two three four five six seven eight nine"])
def test_a_statement_goes_to_claim_extraction_however_short(answer):
    assert not is_short_answer(answer)


@pytest.mark.parametrize("raw, query", [
    ("Eiffel Tower location. Is this claim true?", "Eiffel Tower location"),
    ("Eiffel Tower Berlin - is the statement false", "Eiffel Tower Berlin"),
    ("Where is the Eiffel Tower?", "Where is the Eiffel Tower"),
    ("Varenholt revenue 2023", "Varenholt revenue 2023"),
    ("Is this claim true?", ""),
])
def test_queries_lose_questions_about_truth(raw, query):
    from halucheck.claims import search_query

    assert search_query(raw) == query


def test_make_queries_keeps_search_words_and_always_the_claim():
    from halucheck.claims import make_queries
    from halucheck.engines.fake import FakeEngine

    engine = FakeEngine(responder=lambda r: {"queries": ["Is this claim true?", "Varenholt founding year. Is it correct?"]})
    (out,) = make_queries(engine, ["Varenholt was founded in 2009."])
    assert out.value == ["Varenholt founding year", "Varenholt was founded in 2009."]


def test_an_answers_claims_are_kept_once_with_their_first_sentence():
    from halucheck.claims import select, units

    (s1, _), (s2, _) = units("Jack Dorsey is the CEO of Twitter. He co-founded Square.")
    found = [("Jack Dorsey is the CEO of Twitter.", s1), ("Jack Dorsey co-founded Square.", s2),
             ("jack dorsey is the CEO of  Twitter", s2)]  # extracted again from the context
    assert select(found) == found[:2]
