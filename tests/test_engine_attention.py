"""The embedded engine's decode-step attention equals transformers' sdpa attention (float32, with padding)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


class _Module(torch.nn.Module):
    num_key_value_groups = 6
    is_causal = True


@pytest.mark.parametrize("padded", [True, False])
def test_decode_attention_matches_sdpa(padded):
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from halucheck.engines.attention import _attention

    g = torch.Generator().manual_seed(0)
    batch, heads, kv_heads, length, dim = 3, 12, 2, 40, 16
    query = torch.randn(batch, heads, 1, dim, generator=g)
    key = torch.randn(batch, kv_heads, length, dim, generator=g)
    value = torch.randn(batch, kv_heads, length, dim, generator=g)
    mask = None
    if padded:  # rows with 0, 7 and 25 left pads, as sdpa's mask: True where a key may be attended
        mask = torch.ones(batch, 1, 1, length, dtype=torch.bool)
        for row, pads in enumerate((0, 7, 25)):
            mask[row, :, :, :pads] = False
    ours, _ = _attention(_Module(), query, key, value, mask, scaling=dim**-0.5)
    ref, _ = sdpa_attention_forward(_Module(), query, key, value, mask, scaling=dim**-0.5)
    assert ours.shape == ref.shape == (batch, 1, heads, dim)
    assert torch.allclose(ours, ref, atol=1e-5)
    if padded:  # the padding really is ignored: changing what sits under it changes nothing
        key[1, :, :7] = 100.0
        again, _ = _attention(_Module(), query, key, value, mask, scaling=dim**-0.5)
        assert torch.allclose(again, ours, atol=1e-6)


def test_checking_drafted_tokens_matches_sdpa_with_holes_in_the_rows():
    """Several query tokens per row (a token and its drafts), causal among themselves, over keys with left
    padding and with holes where rejected drafts were masked out: equal to sdpa with the same mask."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from halucheck.engines.attention import _attention

    g = torch.Generator().manual_seed(1)
    batch, heads, kv_heads, length, dim, tokens = 2, 12, 2, 30, 16, 4
    query = torch.randn(batch, heads, tokens, dim, generator=g)
    key = torch.randn(batch, kv_heads, length, dim, generator=g)
    value = torch.randn(batch, kv_heads, length, dim, generator=g)
    allowed = torch.ones(batch, length, dtype=torch.bool)
    allowed[0, :5] = False  # left padding
    allowed[1, 12:15] = False  # a hole: three rejected drafts
    allowed[1, length - tokens : length - 2] = False  # row 1 was fed 2 tokens, left-padded to 4
    causal = torch.ones(tokens, length, dtype=torch.bool).tril(length - tokens)
    mask = (allowed[:, None, None, :] & causal[None, None]).clone()
    mask[1, :, :2, :] = True  # the padding queries of row 1 may see anything (their output is unused)
    mask[1, :, :2, 20:] = False
    ours, _ = _attention(_Module(), query, key, value, mask, scaling=dim**-0.5)
    ref, _ = sdpa_attention_forward(_Module(), query, key, value, mask, scaling=dim**-0.5)
    assert ours.shape == ref.shape == (batch, tokens, heads, dim)
    assert torch.allclose(ours, ref, atol=1e-5)
    key[1, :, 12:15] = 100.0  # what sits in the hole changes nothing the row's real queries read
    again, _ = _attention(_Module(), query, key, value, mask, scaling=dim**-0.5)
    assert torch.allclose(again[0], ours[0], atol=1e-6) and torch.allclose(again[1, 2:], ours[1, 2:], atol=1e-6)
