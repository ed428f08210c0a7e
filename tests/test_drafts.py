"""The n-gram drafter of the embedded engine's speculative decoding (no model needed)."""

from halucheck.engines.drafts import NGramDrafter


def test_drafts_follow_the_likeliest_continuation_of_the_same_kind():
    d = NGramDrafter(n=2, min_count=2, min_share=0.6)
    for _ in range(3):
        d.learn("leader", [1, 2, 3, 4, 5])
    d.learn("leader", [1, 2, 3, 9])
    assert d.draft("leader", [1, 2], 8) == [3, 4, 5]  # 4 followed (2, 3) three times in four
    assert d.draft("leader", [1, 2], 2) == [3, 4]
    assert d.draft("leader", [], 1) == [1]  # a reply's start is a context too
    assert d.draft("skeptic", [1, 2], 8) == []  # another kind of reply learned nothing
    assert d.draft("leader", [7, 7], 8) == []


def test_an_unsure_context_drafts_nothing():
    d = NGramDrafter(n=1, min_count=2, min_share=0.6)
    d.learn("k", [1, 2])
    assert d.draft("k", [1], 4) == []  # seen once: below min_count
    d.learn("k", [1, 3])
    d.learn("k", [1, 2])
    d.learn("k", [1, 3])
    assert d.draft("k", [1], 4) == []  # 2 and 3 each half the time: below min_share
    d.learn("k", [1, 2])
    assert d.draft("k", [1], 4) == [2]  # 3 of 5
