"""A math answer's premise that its question states is factual without a model; one that changes a word or a
number of the question is left to the run's verifier."""

import pytest

from halucheck.records import Case, Claim, Evidence
from halucheck.verifiers.tools.premise import restated

DYLAN = ("Dylan needed chicken sausages and fish sausages to make sausage buns at a party. He bought 8885928 chicken "
         "sausages and 6 more fish sausages than chicken sausages. How many sausages did Dylan buy in all?")
FLOORS = ("Richard lives in an apartment building with 6762883 floors. Each floor contains 8 units, and 3/4 of the "
          "building is occupied. What's the total number of unoccupied units In the building?")
FIELD = ("John has 10 hectares of a pineapple field. There are 986886 pineapples per hectare. How many pineapples can "
         "John harvest within a year?")


def check(text, question):
    return restated(Case(Claim(text, None, "premise"), (Evidence(question, source="question"),)))


@pytest.mark.parametrize("text, question, sentence", [
    ("He bought 8885928 chicken sausages.", DYLAN, "He bought 8885928 chicken sausages and 6 more"),
    ("Dylan bought 8885928 + 6 fish sausages.", DYLAN, "He bought 8885928"),  # "he" named, numbers given
    ("Total number of floors = 6762883", FLOORS, "apartment building with 6762883 floors"),
    ("Each floor contains 8 units.", FLOORS, "Each floor contains 8 units"),
    ("Number of pineapples in one hectare = 986886", FIELD, "986886 pineapples per hectare"),  # a rate's unit
])
def test_a_premise_the_question_states_is_factual_with_the_sentence_as_its_trace(text, question, sentence):
    v = check(text, question)
    assert v is not None and v.factuality is True and v.p_hallucinated == pytest.approx(0.05)
    assert v.verifier == "question" and sentence in v.chain[0].opinion


@pytest.mark.parametrize("text", [
    "He bought 8885929 chicken sausages.",  # a changed number
    "He bought 8885928 beef sausages.",  # a word the question does not have
    "Dylan bought 6 fewer fish sausages than chicken sausages.",
    "He bought 8885928 chicken sausages per day.",  # "per" names a rate's unit, but "day" is not in the question
])
def test_a_premise_that_changes_the_question_goes_to_the_verifier(text):
    assert check(text, DYLAN) is None
