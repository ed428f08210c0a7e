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

    from halucheck.engines.transformers import _attention

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
