"""The prefix KV cache's bookkeeping: what a group's entry holds, byte bound, LRU order, release.

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
    assert cache.match("claim", a) == (None, 0)  # nothing yet
    cache.store("claim", a, kv(a))
    entry, n = cache.match("claim", b)
    assert n == 20 and entry.tokens == a[:20]
    keys, values = entry.layers[0]
    assert keys.shape == (HEADS, 20, DIM) and keys[0, :, 0].tolist() == a[:20] and values[1, 19, 3] == -a[19]
    assert cache.bytes == nbytes(20)  # the tail's memory was given back
    c = a[:20] + [7, 7, 7]
    assert cache.match("claim", c)[1] == 20  # a third call reuses the whole shared part
    assert (cache.hits, cache.misses, cache.reused_tokens) == (2, 1, 40)


def test_the_last_prompt_token_is_always_computed():
    cache = PrefixCache(max_bytes=10**6, min_tokens=4)
    a = list(range(10))
    cache.store("g", a, kv(a))
    entry, n = cache.match("g", a)  # the same prompt again (a retry)
    assert n == 9 and len(entry.tokens) == 9


def test_too_little_in_common_is_a_miss_and_other_groups_are_not_read():
    cache = PrefixCache(max_bytes=10**6, min_tokens=8)
    a = list(range(20))
    cache.store("g", a, kv(a))
    assert cache.match("g", a[:5] + [99] * 10) == (None, 0)  # 5 shared < 8
    assert cache.match("other", a) == (None, 0)  # same tokens, other group: never shared
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
