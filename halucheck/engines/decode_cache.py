"""The KV cache layer of the embedded engine's running decode batch (imported when a batch first decodes:
it needs transformers)."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

import torch
from transformers.cache_utils import DynamicLayer


@dataclass
class Pack:
    """A decode step whose rows feed different numbers of tokens, run as one packed sequence.

    Rows feed ``width`` positions at most (their token and its drafts); in the batch's layout each row's
    tokens are right-aligned in a block of ``width`` new columns and the rest of its block is padding.
    Computing that padding costs as much as real tokens (the 1.5B on two cores, 10 rows of 1,000 cached
    tokens: 289 ms a step at one token per row, 662 ms at five), so the step runs the fed tokens only, as
    one sequence of ``R`` tokens: token ``r`` belongs to row ``rows[r]`` and goes to column ``cols[r]`` of
    its block. :class:`DecodeLayer` writes each token's keys and values into its row, the engine's
    attention scatters the queries back into the batch layout, attends with ``allowed`` (batch x 1 x
    width x length: the row's mask, causal over the block) and packs the outputs again.
    """

    rows: torch.Tensor
    cols: torch.Tensor
    width: int
    allowed: torch.Tensor


_local = threading.local()  # the decode loop's thread sets it around a packed step


@contextmanager
def packed(pack: Pack) -> Iterator[None]:
    """Within this block, the cache layers and the engine's attention treat the forward as ``pack``."""
    _local.pack = pack
    try:
        yield
    finally:
        _local.pack = None


def current_pack() -> Pack | None:
    return getattr(_local, "pack", None)


class DecodeLayer(DynamicLayer):
    """One layer's keys and values of a decode batch, kept in float32 with room for ``ROOM`` more tokens.

    Why: transformers' DynamicLayer concatenates every new token onto the whole cache (a copy of it per
    step and layer), and the engine's one-token attention multiplies in float32, so bfloat16 keys were
    converted again at every step. Here a step writes its token in place and nothing is converted:
    measured on two cores, 16 rows x 1,500 cached tokens of the 1.5B, the conversion alone took ~5 ms of
    a ~10-14 ms attention per layer. The price is twice the bfloat16 memory for the KV of the rows being
    decoded (prefix-cache entries stay in the model's dtype). bfloat16 keys are exact in float32, so every
    result is the one the bfloat16 cache gave.
    """

    ROOM = 64

    def __init__(self, keys: torch.Tensor, values: torch.Tensor) -> None:
        super().__init__()
        self.is_initialized, self.device, self.dtype = True, keys.device, torch.float32
        self.length = keys.shape[2]
        self._keys, self._values = self._grown(keys.float()), self._grown(values.float())
        self._views()

    def _grown(self, kv: torch.Tensor) -> torch.Tensor:
        """``kv``'s first ``length`` positions in a new buffer with ``ROOM`` more."""
        out = kv.new_empty((*kv.shape[:2], self.length + self.ROOM, kv.shape[3]))
        out[:, :, : self.length] = kv[:, :, : self.length]
        return out

    def _views(self) -> None:
        self.keys = self._keys[:, :, : self.length]
        self.values = self._values[:, :, : self.length]

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any):
        pack = current_pack()
        n = key_states.shape[2] if pack is None else pack.width
        if self.length + n > self._keys.shape[2]:
            self._keys, self._values = self._grown(self._keys), self._grown(self._values)
        if pack is None:
            self._keys[:, :, self.length : self.length + n] = key_states
            self._values[:, :, self.length : self.length + n] = value_states
        else:  # (1, heads, R, dim) packed tokens into their rows' blocks; the padding zeroed (masked, finite)
            self._keys[:, :, self.length : self.length + n] = 0
            self._values[:, :, self.length : self.length + n] = 0
            self._keys[pack.rows, :, self.length + pack.cols] = key_states[0].transpose(0, 1).float()
            self._values[pack.rows, :, self.length + pack.cols] = value_states[0].transpose(0, 1).float()
        self.length += n
        self._views()
        return self.keys, self.values

    def join(self, keys: torch.Tensor, values: torch.Tensor, width: int) -> None:
        """Append rows (new prompts' keys and values, right-aligned), everything right-aligned in ``width``
        positions; one copy of the old rows, padding zeroed (the mask hides it, but it must be finite)."""
        self._keys = self._joined(self.keys, keys, width)
        self._values = self._joined(self.values, values, width)
        self.length = width
        self._views()

    def _joined(self, mine: torch.Tensor, theirs: torch.Tensor, width: int) -> torch.Tensor:
        heads, dim = mine.shape[1], mine.shape[3]
        out = mine.new_empty((mine.shape[0] + theirs.shape[0], heads, width + self.ROOM, dim))
        for rows, part in ((slice(0, mine.shape[0]), mine), (slice(mine.shape[0], None), theirs)):
            pad = width - part.shape[2]
            out[rows, :, :pad] = 0
            out[rows, :, pad:width] = part
        return out

    def gather(self, index: torch.Tensor) -> None:
        """Rebuild the layer from ``index`` (rows x new length): row ``i``'s position ``j`` becomes its old
        position ``index[i, j]``."""
        self.length = index.shape[1]
        idx = index[:, None, :, None].expand(-1, self._keys.shape[1], -1, self._keys.shape[3])
        self._keys = self._grown(torch.gather(self._keys, 2, idx))
        self._values = self._grown(torch.gather(self._values, 2, idx))
        self._views()

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        self._keys, self._values = self._keys[indices], self._values[indices]
        self._views()

    def drop_front(self, n: int) -> None:
        """Forget the first ``n`` positions (padding in every row)."""
        self._keys, self._values = self._keys[:, :, n:], self._values[:, :, n:]
        self.length -= n
        self._views()


__all__ = ["DecodeLayer", "Pack", "current_pack", "packed"]
