"""The decode batch's KV layer: what transformers' DynamicLayer would hold, in float32, written in place."""

from __future__ import annotations

import torch

from halucheck.engines.decode_cache import DecodeLayer


def kv(rows: int, length: int) -> torch.Tensor:
    return torch.randn(rows, 2, length, 4).bfloat16()


def test_steps_append_in_place_past_the_room_and_match_concatenation():
    keys, values = kv(3, 5), kv(3, 5)
    layer = DecodeLayer(keys, values)
    ref_k, ref_v = keys.float(), values.float()
    for _ in range(DecodeLayer.ROOM + 3):  # grows once
        k, v = kv(3, 1), kv(3, 1)
        out_k, out_v = layer.update(k, v)
        ref_k, ref_v = torch.cat([ref_k, k.float()], dim=2), torch.cat([ref_v, v.float()], dim=2)
        assert torch.equal(out_k, ref_k) and torch.equal(out_v, ref_v)
    assert layer.get_seq_length() == 5 + DecodeLayer.ROOM + 3 and layer.keys.dtype == torch.float32


def test_join_right_aligns_both_sides_with_zero_padding_then_select_and_drop_front():
    layer = DecodeLayer(kv(2, 6), kv(2, 6))
    old = layer.keys.clone()
    new_k, new_v = kv(1, 9), kv(1, 9)
    layer.join(new_k, new_v, width=9)
    assert layer.keys.shape == (3, 2, 9, 4)
    assert torch.equal(layer.keys[:2, :, 3:], old) and not layer.keys[:2, :, :3].any()
    assert torch.equal(layer.keys[2], new_k[0].float()) and torch.equal(layer.values[2], new_v[0].float())
    layer.update(kv(3, 1), kv(3, 1))  # room left after a join
    layer.batch_select_indices(torch.tensor([2]))
    assert layer.keys.shape == (1, 2, 10, 4) and torch.equal(layer.keys[0, :, :9], new_k[0].float())
    layer.drop_front(4)
    assert layer.get_seq_length() == 6 and torch.equal(layer.keys[0, :, :5], new_k[0, :, 4:].float())


def test_gather_moves_each_rows_positions_and_leaves_room():
    layer = DecodeLayer(kv(2, 6), kv(2, 6))
    old_k, old_v = layer.keys.clone(), layer.values.clone()
    index = torch.tensor([[0, 1, 2, 5], [0, 3, 4, 5]])  # row 0 drops 3 and 4, row 1 drops 1 and 2
    layer.gather(index)
    assert layer.get_seq_length() == 4
    assert torch.equal(layer.keys[0], old_k[0][:, [0, 1, 2, 5]])
    assert torch.equal(layer.values[1], old_v[1][:, [0, 3, 4, 5]])
    layer.update(kv(2, 1), kv(2, 1))  # room left after a gather
    assert layer.get_seq_length() == 5
