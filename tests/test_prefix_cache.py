"""The prefix KV cache's bookkeeping: what a group's entry and its extensions hold, byte bound, LRU order,
release.

(The engine's use of it, with real greedy replies compared, is in test_engine_transformers.py.)
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from halucheck.engines.prefix_cache import PrefixCache  # noqa: E402

LAYERS, HEADS, DIM = 2, 2, 4


def kv(tokens: list[int]) -> list[tuple]:
    """Per layer (keys, values) of shape (heads, tokens, dim), each position holding its token id, so a
    test can see which positions an entry kept."""
    t = torch.tensor(tokens, dtype=torch.float32).view(1, -1, 1).expand(HEADS, -1, DIM).contiguous()
    return [(t.clone(), -t.clone()) for _ in range(LAYERS)]


def nbytes(n_tokens: int) -> int:
    return LAYERS * 2 * HEADS * n_tokens * DIM * 4


def test_first_call_stores_second_keeps_the_common_prefix():
    cache = PrefixCache(max_bytes=10**6, min_tokens=4)
    a = list(range(100, 130))  # 30 tokens: 20 shared, then this call's own
    b = a[:20] + list(range(500, 512))
    assert cache.match("claim", a) is None  # nothing yet
    cache.store("claim", a, kv(a))
    hit = cache.match("claim", b)
    assert (hit.n, hit.m, hit.tokens) == (20, 0, 20) and cache.entries["claim"].tokens == a[:20]
    keys, values = hit.base[0]
    assert keys.shape == (HEADS, 20, DIM) and keys[0, :, 0].tolist() == a[:20] and values[1, 19, 3] == -a[19]
    # the first call's own 10 tokens are kept as an extension, in copies (the 30-token tensors are freed)
    (tail,) = cache.entries["claim"].extensions
    assert tail.tokens == a[20:] and tail.layers[0][0][0, :, 0].tolist() == a[20:]
    assert cache.bytes == nbytes(30) == cache.entries["claim"].nbytes
    c = a[:20] + [7, 7, 7]
    assert cache.match("claim", c).tokens == 20  # a third call reuses the whole shared part
    assert (cache.hits, cache.misses, cache.extension_hits, cache.reused_tokens) == (2, 1, 0, 40)


def test_a_call_that_goes_on_like_an_earlier_one_reuses_its_part_too():
    """One level past the shared start: the longest match among the earlier calls' own parts."""
    cache = PrefixCache(max_bytes=10**6, min_tokens=4)
    shared = list(range(100, 120))
    skeptic, trust = shared + list(range(200, 210)), shared + list(range(300, 306))
    cache.store("claim", skeptic, kv(skeptic))
    hit = cache.match("claim", trust + [1])  # the start shrinks to the shared 20; skeptic's 10 are kept
    assert hit.tokens == 20
    cache.extend("claim", shared, trust[20:] + [1], kv(trust[20:] + [1]))
    again = skeptic[:28] + [9, 9]  # the skeptic asked again: 8 of its own tokens in common
    hit = cache.match("claim", again)
    assert (hit.n, hit.m) == (20, 8) and cache.extension_hits == 1
    assert [p[0][0][0, :, 0].tolist()[:n] for p, n in hit.pieces()] == [shared, skeptic[20:28]]
    # too little past the start (3 < 4 tokens) is the shared start only; the last token is always computed
    assert cache.match("claim", trust[:23] + [5, 5]).m == 0
    assert cache.match("claim", trust + [1]).m == 6  # its own part, not the last token
    # an extension is only kept on top of the start it followed, and never twice; `wants` says so before
    # the caller copies its KV
    refused = [("claim", shared[:10], list(range(50, 60))), ("claim", shared, skeptic[20:25]),
               ("claim", shared, [8, 8, 8]), ("other", shared, list(range(50, 60)))]
    assert [cache.wants(*r) for r in refused] == [False] * 4 and cache.wants("claim", shared, [8] * 4)
    for group, start, tokens in refused:
        cache.extend(group, start, tokens, kv(tokens))
    assert len(cache.entries["claim"].extensions) == 2
    # the shared start shrinks: the extensions went on from its old end, so they go
    cache.match("claim", shared[:12] + [4] * 10)
    entry = cache.entries["claim"]
    assert [e.tokens for e in entry.extensions] == [shared[12:]] and cache.bytes == entry.nbytes == nbytes(20)


def test_extensions_per_group_are_bounded_newest_kept():
    cache = PrefixCache(max_bytes=10**6, min_tokens=4, max_extensions=2)
    shared = list(range(20))
    cache.store("g", shared, kv(shared))
    for first in (100, 200, 300):
        own = list(range(first, first + 5))
        cache.extend("g", shared, own, kv(own))
    assert [e.tokens[0] for e in cache.entries["g"].extensions] == [200, 300]
    assert cache.bytes == nbytes(30)
    cache.release("g")
    assert cache.bytes == 0


def test_the_last_prompt_token_is_always_computed():
    cache = PrefixCache(max_bytes=10**6, min_tokens=4)
    a = list(range(10))
    cache.store("g", a, kv(a))
    hit = cache.match("g", a)  # the same prompt again (a retry)
    assert hit.tokens == 9 and len(cache.entries["g"].tokens) == 9


def test_too_little_in_common_is_a_miss_and_other_groups_are_not_read():
    cache = PrefixCache(max_bytes=10**6, min_tokens=8)
    a = list(range(20))
    cache.store("g", a, kv(a))
    assert cache.match("g", a[:5] + [99] * 10) is None  # 5 shared < 8
    assert cache.match("other", a) is None  # same tokens, other group: never shared
    assert cache.entries["g"].tokens == a  # a miss does not shrink the entry


def test_bounded_in_bytes_least_recently_used_out_first():
    cache = PrefixCache(max_bytes=nbytes(50), min_tokens=4)
    for g in ("a", "b"):
        cache.store(g, list(range(20)), kv(list(range(20))))
    cache.match("a", list(range(20)) + [1])  # "a" used last: "b" is now the oldest
    cache.store("c", list(range(20)), kv(list(range(20))))
    assert list(cache.entries) == ["a", "c"] and cache.evictions == 1
    assert cache.bytes == 2 * nbytes(20) <= cache.max_bytes
    cache.store("huge", list(range(60)), kv(list(range(60))))  # larger than the whole budget: not kept
    assert "huge" not in cache.entries


def test_release_frees_the_group():
    cache = PrefixCache(max_bytes=10**6, min_tokens=4)
    cache.store("g", list(range(20)), kv(list(range(20))))
    cache.release("g")
    cache.release("never-seen")
    assert len(cache) == 0 and cache.bytes == 0


def test_a_request_without_a_group_is_in_its_stages_group():
    from halucheck.engines.base import Request
    from halucheck.engines.prefix_cache import STAGE, group_of

    sys_a = {"role": "system", "content": "You extract claims."}
    one = Request(messages=(sys_a, {"role": "user", "content": "answer one"}))
    two = Request(messages=(sys_a, {"role": "user", "content": "answer two"}))
    other = Request(messages=({"role": "system", "content": "You judge."}, {"role": "user", "content": "x"}))
    assert group_of(one) == group_of(two) and group_of(one).startswith(STAGE) and group_of(other) != group_of(one)
    assert group_of(Request(messages=({"role": "user", "content": "no system prompt"},))) is None
    assert group_of(Request(messages=one.messages, prefix_group="claim-7")) == "claim-7"  # an explicit group wins


def test_a_stage_group_keeps_only_what_all_its_calls_share():
    """Every call of a stage reuses the shared start (system prompt, instructions); the rest of each call is its own
    and is not kept as an extension (it would only hold memory)."""
    from halucheck.engines.prefix_cache import STAGE

    cache = PrefixCache(max_bytes=10**6, min_tokens=4)
    group = STAGE + "extract"
    shared = list(range(100, 120))
    a, b, c = shared + list(range(200, 230)), shared + list(range(300, 330)), shared + list(range(400, 405))
    cache.store(group, a, kv(a))
    hit = cache.match(group, b)
    assert hit.tokens == 20 and cache.entries[group].tokens == shared
    assert cache.entries[group].extensions == [] and cache.bytes == nbytes(20)
    assert not cache.wants(group, shared, b[20:])  # nothing of b's own part is copied for keeping
    assert cache.match(group, c).tokens == 20
