"""The extractor's recall of human-extracted claims: the match rule, the scores, the loaders."""

from __future__ import annotations

import re

import pytest

from halucheck.evaluation.extraction import MATCH_F1, Response, extract, load_responses, score, similarity
from halucheck.prompts import read_field


def test_similarity_is_content_word_f1():
    assert similarity("Douglas served on the Supreme Court from 1939 to 1975.",
                      "William O. Douglas served on the Supreme Court until 1975.") == pytest.approx(10 / 13)  # "until" counts
    assert similarity("The tower is in Paris.", "The tower is in Berlin.") == pytest.approx(0.5)
    assert similarity("It is what it is.", "Paris is big.") == 0.0  # no content word in the first


def test_recall_and_precision_count_matches_per_response():
    a = Response("a", "x", "q", "", ["Paris is the capital of France.", "Paris has 2 million people."], 0,
                 extracted=["Paris is France's capital.", "The Louvre is in Paris."])
    b = Response("b", "x", "q", "", ["Oulu lies in Finland."], 1, extracted=["Oulu is a city in Finland."])
    s = score([a, b], n_boot=50)
    assert (s["gold_claims"], s["extracted_claims"]) == (3, 3)
    assert s["recall"] == pytest.approx(2 / 3, abs=1e-4) and s["precision"] == pytest.approx(2 / 3, abs=1e-4)
    assert s["recall_ci"][0] <= s["recall"] <= s["recall_ci"][1]
    assert similarity("The Louvre is in Paris.", "Paris has 2 million people.") < MATCH_F1


def test_extract_runs_the_claim_stage_of_run():
    from halucheck.engines.fake import FakeEngine

    def split(request):
        text = read_field(request.messages[-1]["content"], "text", last=True)
        return {"claims": [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s]}

    long = Response("l", "x", "Who?", "Ada Lovelace wrote the first program. She was born in 1815.", [], 0)
    short = Response("s", "x", "Where is the Louvre?", "Paris.", [], 1)
    extract(FakeEngine(responder=split), [long, short])
    assert long.extracted == ["Ada Lovelace wrote the first program.", "She was born in 1815."]
    assert short.extracted == ["Where is the Louvre? Paris."]  # no statement: question + answer, as in run


@pytest.mark.parametrize("name", ["factcheck-gpt", "factool-qa"])
def test_loaders_follow_the_split_and_carry_gold_claims(name):
    from halucheck.errors import HalucheckError

    try:
        dev, test = load_responses(name, "dev"), load_responses(name, "test")
    except HalucheckError as exc:
        pytest.skip(str(exc))
    assert dev and test and all(r.position % 5 == 4 for r in test) and all(r.position % 5 != 4 for r in dev)
    assert all(r.gold and r.text and r.question for r in dev + test)
