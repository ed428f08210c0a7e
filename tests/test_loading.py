"""How the embedded engine's loading treats the C allocator (halucheck/engines/loading.py)."""

import pytest

from halucheck.engines import loading


class FakeLibc:
    def __init__(self):
        self.calls = []

    def mallopt(self, param, value):
        self.calls.append(("mallopt", param, value))
        return 1

    def malloc_trim(self, pad):
        self.calls.append(("malloc_trim", pad))
        return 1


def test_while_loading_large_blocks_get_pages_of_their_own_and_afterwards_the_free_pages_go_back(monkeypatch):
    libc = FakeLibc()
    monkeypatch.setattr(loading, "_glibc", lambda: libc)
    with loading.returned_to_the_system():
        assert libc.calls == [("mallopt", loading.M_MMAP_THRESHOLD, 4 << 20)]
    assert libc.calls[1:] == [("mallopt", loading.M_MMAP_THRESHOLD, 32 << 20), ("malloc_trim", 0)]
    # a load that fails leaves the allocator as a run expects it too
    libc.calls.clear()
    with pytest.raises(RuntimeError), loading.returned_to_the_system():
        raise RuntimeError("no weights")
    assert libc.calls[-2:] == [("mallopt", loading.M_MMAP_THRESHOLD, 32 << 20), ("malloc_trim", 0)]


def test_without_glibc_nothing_is_changed(monkeypatch):
    monkeypatch.setattr(loading, "_glibc", lambda: None)
    with loading.returned_to_the_system():
        pass


def test_glibc_is_found_on_a_glibc_system():
    import platform

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("not a glibc system")
    libc = loading._glibc()
    assert libc is not None and libc.mallopt(loading.M_MMAP_THRESHOLD, loading.RUN_MMAP_THRESHOLD) == 1
