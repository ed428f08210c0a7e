"""Quote checks (verifiers/debate/quotes.py): verbatim up to case, spacing, punctuation and accents;
"not stated" verified only when the span is the claim's and no passage sentence holds its content words."""

import pytest

from halucheck.verifiers.debate.quotes import (QUOTE_CHARS, check_not_stated, check_quotes, find_in_passages, is_void, normalise,
                                               supports)

PASSAGES = ["The Eiffel Tower, completed in 1889, stands on the Champ de Mars in Paris.",
            "Gustave Eiffel\u2019s company designed and built the tower. It is 330 metres tall."]


def test_normalise_drops_case_punctuation_accents_and_spacing():
    assert normalise("  Caf\u00e9 \u201cRoyal\u201d \u2013 Z\u00fcrich!\n") == "cafe royal zurich"
    assert normalise("\uff26\uff55\uff4c\uff4c\uff57\uff49\uff44\uff54\uff48") == "fullwidth"  # NFKC


@pytest.mark.parametrize("quote", [
    "completed in 1889, stands on the Champ de Mars",
    "COMPLETED IN 1889 stands on the champ-de-mars",
    "Gustave Eiffel's company designed and built the tower",  # straight for curly apostrophe
    "It is  330\nmetres tall",
])
def test_a_quote_differing_only_in_form_is_verified_with_its_passage(quote):
    check = find_in_passages(quote, PASSAGES)
    assert check.verified and check.passage in (1, 2)


@pytest.mark.parametrize("quote, why", [
    ("completed in 1887, stands on the Champ de Mars", "not in the passages word for word"),  # one changed number
    ("the tower stands in Berlin", "not in the passages word for word"),
    ("in Paris", "shorter than 3 words"),
    ("Eiffel Tower stands", "not in the passages word for word"),  # words of the passage, not in its order
    ("", "empty quote"),
])
def test_a_changed_invented_or_trivial_quote_is_not_verified(quote, why):
    check = find_in_passages(quote, PASSAGES)
    assert not check.verified and check.why == why


def test_whole_words_only():
    assert not find_in_passages("ompleted in 1889", PASSAGES).verified


def test_supports_means_one_sentence_holds_every_content_word():
    assert supports(PASSAGES[0], "completed in 1889")
    assert supports(PASSAGES[1], "designed by Eiffel's company")  # "designed", "eiffel", "company"
    assert supports(PASSAGES[0], "the tower was completed")  # "completed" matches; stems of 5 letters
    assert not supports(PASSAGES[0], "completed in 1887")  # numbers digit for digit
    # the words are in the passage, but not in one sentence
    assert not supports(PASSAGES[1], "Eiffel's company made a tower 330 metres tall")


def test_not_stated_is_verified_only_for_the_claims_own_unsupported_words():
    claim = "The Eiffel Tower was completed in 1889 and painted gold."
    ok = check_not_stated("painted gold", claim, PASSAGES)
    assert ok.verified and ok.passage is None
    stated = check_not_stated("completed in 1889", claim, PASSAGES)
    assert not stated.verified and stated.passage == 1 and "passage [1] states it" in stated.why
    foreign = check_not_stated("painted silver", claim, PASSAGES)
    assert not foreign.verified and foreign.why == "not a part of the text checked"
    assert not check_not_stated("and the", claim, PASSAGES).verified  # no content word


def test_a_stance_is_void_only_without_any_verified_quote():
    finding, checks = check_quotes("contradicted", ["completed in 1889, stands on", "it is in Berlin now"], "x", PASSAGES)
    assert finding == "contradicted" and [c.verified for c in checks] == [True, False] and not is_void(checks)
    assert is_void(check_quotes("contradicted", ["it is in Berlin now"], "x", PASSAGES)[1])
    assert not is_void(check_quotes("not stated", ["painted gold"], "It was painted gold.", PASSAGES)[1])


def test_a_contradicted_stance_quoting_the_text_is_checked_as_not_stated():
    claim = "The tower was painted gold in 1889."
    finding, checks = check_quotes("contradicted", ["painted gold"], claim, PASSAGES)
    assert finding == "not stated" and checks[0].verified
    finding, checks = check_quotes("contradicted", ["The tower was painted gold in 1889."], claim, PASSAGES)
    assert finding == "not stated" and checks[0].verified  # no sentence holds "painted", "gold" and "1889"
    finding, checks = check_quotes("contradicted", ["painted silver"], claim, PASSAGES)
    assert finding == "contradicted" and not checks[0].verified  # neither a passage's words nor the text's


def test_a_quote_cut_at_the_schema_bound_may_end_mid_word():
    passage = "word " * 120 + "presidency ends here"
    quote = ("word " * 120 + "presid")[:QUOTE_CHARS]
    assert len(quote) == QUOTE_CHARS and find_in_passages(quote, [passage]).verified
    assert not find_in_passages(("word " * 30) + "presid", [passage]).verified  # not cut: whole words only
