"""Rules of the claim stage that need no model."""

from __future__ import annotations

import pytest

from halucheck.claims import is_short_answer, units


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


def test_a_stages_cost_counts_the_prompt_tokens_the_engine_served_from_its_prefix_cache():
    from halucheck.claims import cost_of, make_queries
    from halucheck.engines.fake import FakeEngine

    class Caching(FakeEngine):  # reports, as the transformers engine does, the prompt tokens it reused
        def _complete(self, requests):
            results = super()._complete(requests)
            for r in results:
                r.cached_tokens = r.prompt_tokens - 3
            return results

    engine = Caching(responder=lambda r: {"queries": ["Varenholt founding year", "Varenholt staff"]})
    outs = make_queries(engine, ["Varenholt was founded in 2009.", "Varenholt employs 340 people."])
    cost = cost_of(outs, 1.0, 0)
    assert cost.llm_calls == 2 and cost.prompt_tokens > 6
    assert cost.cached_tokens == cost.prompt_tokens - 6


def test_an_answers_claims_are_kept_once_with_their_first_sentence():
    from halucheck.claims import select, units

    (s1, _), (s2, _) = units("Jack Dorsey is the CEO of Twitter. He co-founded Square.")
    found = [("Jack Dorsey is the CEO of Twitter.", s1), ("Jack Dorsey co-founded Square.", s2),
             ("jack dorsey is the CEO of  Twitter", s2)]  # extracted again from the context
    assert select(found) == found[:2]


def test_a_100000_character_word_is_cut_like_many_words():
    from halucheck.inputs import MAX_ANSWER_WORDS, truncation_point
    from halucheck.text import MAX_WORD_CHARS

    blob = "Paris is in France. " + "x" * 100_000 + " The end."
    pieces = [seg for seg, _ in units(blob)]
    assert pieces[0].text == "Paris is in France." and pieces[-1].text.endswith("The end.")
    assert max(len(seg.text) for seg in pieces) <= 80 * MAX_WORD_CHARS  # no 100k-character claim piece
    huge = "Paris is in France. " + "x" * 400_000  # 6,250 words of 64 characters: past the answer's cap
    cut = truncation_point(huge)
    assert cut == len("Paris is in France. ") + (MAX_ANSWER_WORDS - 4) * MAX_WORD_CHARS
    assert truncation_point("word " * 10) is None


def test_a_math_answer_keeps_only_its_premises_as_claims_for_a_model():
    from halucheck.claims import Segment, math_claims, sentences

    question = "A shop sells 12 pens a day at $1.50 each. How much does it earn in 30 days?"
    answer = "It sells 12 pens a day. Each pen costs $1.50, so a day brings 18 dollars. 18 x 30 = 540. It earns $540."
    segs = sentences(answer)
    found = [("The shop sells 12 pens a day.", segs[0]), ("A pen costs $1.50.", segs[1]),
             ("A day brings 18 dollars.", segs[1]), ("18 x 30 = 540.", segs[2]), ("The shop earns $540.", segs[3]),
             ("The shop sells pens.", Segment("It sells pens.", 0, 14))]
    kept, derived, result = math_claims(question, answer, found)
    # the premises (numbers all in the question) stay; the derived step (18), the calculation and the
    # sentence of the final result are left to the calculation and program checks
    assert [c for c, _ in kept] == ["The shop sells 12 pens a day.", "A pen costs $1.50.", "The shop sells pens."]
    assert derived == [] and answer[result.start:result.end] == "$540"
    # with evidence of its own to search (a corpus, a context), a derived step stays a knowledge claim
    _, derived, _ = math_claims(question, answer, found, keep_derived=True)
    assert [c for c, _ in derived] == ["A day brings 18 dollars."]


@pytest.mark.parametrize("text, working", [
    ("Simplifying the left side of the equation, we get:", True),
    ("Let's start by finding how much laundry David does.", True),
    ("To find the difference, we need to subtract James' hours from Harry's.", True),
    ("The weight of the boxes will be 15x.", True),
    ("How many dollars are the boots?", True),
    ("Their total age now is 162.", False),
    ("Raymond does half as much laundry as Sarah.", False),
    ("Mrs. X bought 3 cars.", False),
    ("We need 3 eggs for each cake.", False),
])
def test_the_working_of_a_math_answer_is_no_claim(text, working):
    from halucheck.claims import is_working

    assert is_working(text) is working


@pytest.mark.parametrize("sentence, simple", [
    ("The Limnos Station is powered by a small wind turbine.", True),
    ("Varenholt employs about 340 people.", True),
    ("Argentina has won the FIFA world cup once.", True),
    ("It opened in Stockholm in 2014.", False),  # needs the sentences before it
    ("Varenholt makes sensors and calibration kits.", False),  # two claims
    ("The AquaProbe 3, launched in 2021, weighs 410 grams.", False),
    ("Paris.", False),  # no statement
    ("Varenholt employs about 340 people", False),  # not ended: a cut answer
    ("I think Varenholt employs about 340 people.", False),  # a person speaking
    ("Varenholt employs about 340 people in Tampere and roughly 60 more in Oulu today.", False),
])
def test_a_simple_statement_is_one_claim_as_it_stands(sentence, simple):
    from halucheck.claims import is_simple_statement

    assert is_simple_statement(sentence) is simple


def test_a_simple_sentence_is_its_own_claim_and_the_others_are_extracted_in_the_answers_order():
    from halucheck.claims import claims_of_answers
    from halucheck.engines.fake import FakeEngine

    engine = FakeEngine(responder=lambda r: {"claims": ["Varenholt was founded in 2009 by Aino Lehtola."]})
    answer = ("Varenholt was founded in 2009, by Aino Lehtola. The Limnos Station is powered by a small wind turbine.")
    made, _ = claims_of_answers([("Tell me about Varenholt.", answer, None)], engine, engine, subjective_filter="off")
    extract_calls = [r for r in engine.requests if r.tag == "claims:extract"]
    assert len(extract_calls) == 1 and "founded" in extract_calls[0].messages[-1]["content"]
    claims = made[0].claims
    assert [c.text for c in claims] == ["Varenholt was founded in 2009 by Aino Lehtola.",
                                        "The Limnos Station is powered by a small wind turbine."]
    assert answer[claims[1].start:claims[1].end] == "The Limnos Station is powered by a small wind turbine."
    assert claims[1].question is None and claims[1].kind == "knowledge"


def test_a_question_the_model_returns_as_a_claim_is_dropped():
    from halucheck.claims import extract_claims
    from halucheck.engines.fake import FakeEngine

    engine = FakeEngine(responder=lambda r: {"claims": ["What does a CalibraKit contain?",
                                                        "A CalibraKit contains six reference solutions.",
                                                        "a  calibrakit contains six reference solutions."]})
    out = extract_claims(engine, ["Happy to help! A CalibraKit contains six reference solutions."])
    assert out[0].value == ["A CalibraKit contains six reference solutions."]


def test_small_talk_reaches_neither_the_subjective_filter_nor_the_extractor():
    from halucheck.claims import claims_of_answers
    from halucheck.engines.fake import FakeEngine

    engine = FakeEngine(responder=lambda r: {"claims": ["A CalibraKit contains six reference solutions.",
                                                        "A CalibraKit keeps for 18 months."]})
    answer = ("Happy to help! A CalibraKit contains six reference solutions and keeps for 18 months. "
              "Let me know if you need anything else.")
    made, _ = claims_of_answers([("What does a CalibraKit contain?", answer, None)], engine, engine)
    assert [r.tag for r in engine.requests] == ["claims:extract"]  # one call; none for the closers
    assert "Happy" not in engine.requests[0].messages[-1]["content"]
    assert [answer[c.start:c.end] for c in made[0].claims] == [
        "A CalibraKit contains six reference solutions and keeps for 18 months."] * 2
    # an answer that still speaks to the reader once its small talk is out goes through the filter, sentence by sentence
    engine = FakeEngine(responder=lambda r: {"response": "Varenholt employs about 340 people."}
                        if r.tag == "claims:filter" else {"claims": ["Varenholt employs about 340 people."]})
    claims_of_answers([(None, "Happy to help! I think Varenholt employs about 340 people, as you asked.", None)],
                      engine, engine)
    assert [r.tag for r in engine.requests] == ["claims:filter", "claims:extract"]
