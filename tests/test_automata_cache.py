"""The on-disk cache of Outlines indexes: built once, read back identical, rebuilt when damaged."""

from __future__ import annotations

import pytest

pytest.importorskip("outlines_core")

from outlines_core import Index, Vocabulary  # noqa: E402

from halucheck.engines.automata_cache import AutomataCache  # noqa: E402

VOCAB = {"x": [1], "y": [2], "t": [3], "f": [4]}
REGEX = r"[xy]{0,3}(t|f)"


def build_counting(calls: list):
    def build(regex: str) -> Index:
        calls.append(regex)
        return Index(regex, Vocabulary(9, VOCAB))

    return build


def walk(index: Index, tokens: list[int]) -> list[list[int]]:
    """The allowed tokens at each state along ``tokens``."""
    state, seen = index.get_initial_state(), []
    for tok in tokens:
        seen.append(sorted(index.get_allowed_tokens(state)))
        state = index.get_next_state(state, tok)
    return seen


def test_an_index_is_built_once_and_read_back_the_same(tmp_path):
    calls: list = []
    first = AutomataCache(tmp_path).get(REGEX, "tok-a", build_counting(calls))
    again = AutomataCache(tmp_path)  # a new process: nothing in memory
    second = again.get(REGEX, "tok-a", build_counting(calls))
    assert calls == [REGEX] and again.hits == 1 and again.misses == 0
    assert walk(second, [1, 2, 3]) == walk(first, [1, 2, 3])
    assert second.is_final_state(second.get_next_state(second.get_initial_state(), 4))


def test_another_tokenizer_or_regex_gets_its_own_entry(tmp_path):
    calls: list = []
    cache = AutomataCache(tmp_path)
    cache.get(REGEX, "tok-a", build_counting(calls))
    cache.get(REGEX, "tok-b", build_counting(calls))
    cache.get(r"[xy](t|f)", "tok-a", build_counting(calls))
    assert len(calls) == 3 and len(list(tmp_path.glob("*.index"))) == 3


def test_a_damaged_file_is_rebuilt_and_replaced(tmp_path):
    calls: list = []
    cache = AutomataCache(tmp_path)
    cache.get(REGEX, "tok-a", build_counting(calls))
    path = cache.path(REGEX, "tok-a")
    path.write_bytes(path.read_bytes()[:7])  # truncated
    index = AutomataCache(tmp_path).get(REGEX, "tok-a", build_counting(calls))
    assert len(calls) == 2 and walk(index, [1]) == [[1, 2, 3, 4]]
    assert AutomataCache(tmp_path).get(REGEX, "tok-a", build_counting(calls)) is not None and len(calls) == 2


def test_an_unwritable_folder_only_costs_the_rebuild(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    calls: list = []
    index = AutomataCache(blocker / "sub").get(REGEX, "tok-a", build_counting(calls))
    assert calls == [REGEX] and walk(index, [1]) == [[1, 2, 3, 4]]
