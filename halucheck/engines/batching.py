"""The embedded engine's running batch and the passes over it: :class:`DecodeBatch` (rows, logits, KV cache and
attention mask), prompt passes that reuse cached prefix KV, and decode steps, drafted and packed ones
included (:class:`BatchDecoding`, part of :class:`~halucheck.engines.transformers.TransformersEngine`)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from halucheck.engines.base import Request
from halucheck.engines.prefix_cache import Hit, group_of

if TYPE_CHECKING:
    from halucheck.engines.constrained import DecodeRow


@functools.cache
def _cache_name() -> str:
    """The name a causal LM's forward takes and returns the KV cache under: ``cache`` since transformers 5
    (which warns on the old ``past_key_values``, to be removed in 6.0), ``past_key_values`` before."""
    from transformers.modeling_outputs import CausalLMOutputWithPast

    return "cache" if "cache" in CausalLMOutputWithPast.__dataclass_fields__ else "past_key_values"


class DecodeBatch:
    """The running decode batch: its rows, their next-token logits (float32), KV cache and attention mask.
    Every row's tokens are right-aligned; the mask hides each row's left padding. The cache's layers are
    :class:`~halucheck.engines.decode_cache.DecodeLayer`: float32, with room to grow."""

    def __init__(self, rows: list["DecodeRow"], logits: Any, cache: Any, mask: Any) -> None:
        from halucheck.engines.decode_cache import DecodeLayer

        self.rows, self.logits, self.cache, self.mask = rows, logits, cache, mask
        self.holes = 0  # positions masked out by rejected drafts since the last compact()
        cache.layers = [layer if isinstance(layer, DecodeLayer) else DecodeLayer(layer.keys, layer.values)
                        for layer in cache.layers]

    def join(self, rows: list["DecodeRow"], logits: Any, cache: Any, mask: Any) -> None:
        """Add rows whose prompts were just computed (their logits, KV cache and mask)."""
        import torch
        from torch.nn.functional import pad

        width = max(self.mask.shape[1], mask.shape[1])
        for mine, theirs in zip(self.cache.layers, cache.layers):
            mine.join(theirs.keys, theirs.values, width)
        self.mask = torch.cat([pad(m, (width - m.shape[1], 0)) for m in (self.mask, mask)])
        fed = max(self.logits.shape[1], logits.shape[1])  # logits per row: one per token it was fed last
        self.logits = torch.cat([pad(x, (0, 0, fed - x.shape[1], 0)) for x in (self.logits, logits)])
        self.rows = self.rows + rows

    def reject(self, row: int, n: int) -> None:
        """Mask out the last ``n`` positions of a row: drafted tokens it did not choose. The holes stay in
        the cache until :meth:`compact` closes them up (the decode step calls it every step)."""
        if n:
            self.mask[row, -n:] = 0
            self.holes += n

    HOLES = 64

    def compact(self) -> None:
        """Move every row's kept positions together, right-aligned, when the holes rejected drafts left
        make the batch ``HOLES`` positions wider than its longest row (one copy of the cache)."""
        import torch

        if not self.holes:
            return
        counts = self.mask.sum(-1)
        width = int(counts.max())
        if self.mask.shape[1] - width < self.HOLES:
            return
        # per row: the columns it keeps, right-aligned in ``width``; its padding reads column 0 (masked)
        index = torch.zeros((len(self.rows), width), dtype=torch.long)
        for i in range(len(self.rows)):
            kept = self.mask[i].nonzero().squeeze(-1)
            index[i, width - kept.numel() :] = kept
        for layer in self.cache.layers:
            layer.gather(index)
        self.mask = (torch.arange(width) >= width - counts.unsqueeze(-1)).to(self.mask.dtype)
        self.holes = 0

    def select(self, keep: list[int]) -> None:
        """Keep these rows only, and drop the columns that are padding in every row left."""
        import torch

        index = torch.tensor(keep, dtype=torch.long)
        self.rows = [self.rows[i] for i in keep]
        self.logits = self.logits[index]
        self.cache.batch_select_indices(index)
        self.mask = self.mask[index]
        start = int(self.mask.any(dim=0).to(torch.int8).argmax())
        if start:
            self.mask = self.mask[:, start:]
            for layer in self.cache.layers:
                layer.drop_front(start)


def merge_passes(parts: list[tuple[Any, Any, Any]]) -> tuple[Any, Any, Any]:
    """One decode batch from several prompt passes' (logits, KV cache, mask): rows stacked in order, each
    pass's KV and mask left-padded to the widest pass (zeros, which the mask hides)."""
    import torch
    from torch.nn.functional import pad
    from transformers import DynamicCache

    width = max(mask.shape[1] for _, _, mask in parts)
    layers = []
    for layer in range(len(parts[0][1].layers)):
        layers.append(tuple(
            torch.cat([pad(getattr(c.layers[layer], kind), (0, 0, width - m.shape[1], 0)) for _, c, m in parts])
            for kind in ("keys", "values")
        ))
    mask = torch.cat([pad(m, (width - m.shape[1], 0)) for _, _, m in parts])
    return torch.cat([logits for logits, _, _ in parts]), DynamicCache(ddp_cache_data=layers), mask


class BatchDecoding:
    """The passes of :class:`~halucheck.engines.transformers.TransformersEngine` over its batch: prompt passes
    (:meth:`_prefill`, with prefix reuse) and decode steps (:meth:`_step`). Uses the engine's model
    (``hf_model``, ``pad_id``), its drafter (``drafter``, ``draft_tokens``), its prefix cache
    (``prefix_cache`` under ``_prefix_lock``), ``stats`` and ``_finish``, which answers a row's caller."""

    def _prefill(self, chunk: list["DecodeRow"]):
        """One forward pass over the chunk's prompts; returns the last position's logits (float32), the
        KV cache and the attention mask. Each row: ``[pad][its cached prefix, n tokens][pad][the rest of
        its prompt]`` (see ``halucheck.engines.transformers``); only the rest is computed."""
        import torch

        prefix_width = max(r.cached for r in chunk)
        width = prefix_width + max(len(r.input_ids) - r.cached for r in chunk)
        ids = torch.full((len(chunk), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(chunk), width), dtype=torch.long)
        for i, r in enumerate(chunk):
            n = r.cached
            rest = r.input_ids[n:]
            ids[i, prefix_width - n : prefix_width] = torch.tensor(r.input_ids[:n], dtype=torch.long)
            ids[i, width - len(rest) :] = torch.tensor(rest, dtype=torch.long)
            mask[i, prefix_width - n : prefix_width] = 1
            mask[i, width - len(rest) :] = 1
            self.prefilled_tokens += len(rest)
        past = self._batch_cache([r.hit for r in chunk], prefix_width) if prefix_width else None
        positions = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 0)  # pads count no position
        out = self._forward(ids[:, prefix_width:], mask, positions[:, prefix_width:], past)
        cache = getattr(out, _cache_name())
        self._keep_prefixes(chunk, cache, prefix_width, width)
        return out.logits[:, -1:, :].float(), cache, mask

    def _step(self, batch: "DecodeBatch") -> "DecodeBatch | None":
        """Choose every row's next token from its logits; rows that end (an end token or their own
        ``max_tokens``) leave the batch and are answered; the rest compute their next logits.

        With ``draft_tokens``, a greedy row also feeds the tokens its drafter expects next (see
        ``halucheck.engines.drafts``), and the next step reads one set of logits per fed token: each drafted
        token the row would have chosen itself is kept, the first one it would not is replaced by its own
        choice, and the rest are masked out of the cache (:meth:`DecodeBatch.reject`). The reply is the one
        plain decoding gives. When rows feed different numbers of tokens, only the fed ones are computed
        (:meth:`_packed_step`), not each row padded to the longest feed.

        A decode step reads every weight once whatever the rows, so more rows per step are cheaper per
        row: measured with the 1.5B on two cores, 1,000-token prompts, 264 / 313 / 415 / 721 ms per step at
        1 / 8 / 16 / 32 rows (``scripts/bench_decode_step.py``)."""
        import torch

        keep, feeds = [], []
        for i, row in enumerate(batch.rows):
            fed = len(row.draft) + 1
            for j in range(fed):
                token = row.choose(batch.logits[i, batch.logits.shape[1] - fed + j])
                if row.advance(token):
                    self._finish(row)
                    break
                if j < len(row.draft) and token == row.draft[j]:
                    self.stats.accepted += 1
                    continue  # its KV is in the cache already; the next logits follow it
                batch.reject(i, len(row.draft) - j)
                keep.append(i)
                feeds.append([token, *self._draft(row)])
                break
        if not keep:
            return None
        if len(keep) < len(batch.rows):
            batch.select(keep)
        batch.compact()
        for row, feed in zip(batch.rows, feeds):
            row.draft = feed[1:]
            self.stats.drafted += len(row.draft)
        width = max(len(f) for f in feeds)
        ids = torch.full((len(feeds), width), self.pad_id, dtype=torch.long)
        new = torch.zeros((len(feeds), width), dtype=batch.mask.dtype)
        for i, feed in enumerate(feeds):
            ids[i, width - len(feed) :] = torch.tensor(feed, dtype=torch.long)
            new[i, width - len(feed) :] = 1
        positions = batch.mask.sum(-1, keepdim=True) + new.cumsum(-1) - 1
        batch.mask = torch.cat([batch.mask, new], dim=1)
        if any(len(f) < width for f in feeds):  # some rows feed fewer tokens: run the fed ones only
            batch.logits = self._packed_step(batch, ids, positions, new)
            return batch
        out = self._forward(ids, batch.mask, positions.masked_fill(new == 0, 0), batch.cache, width)
        batch.logits = out.logits.float()
        return batch

    def _packed_step(self, batch: "DecodeBatch", ids, positions, new):
        """The decode step's forward over the fed tokens only, as one sequence (``decode_cache.Pack``);
        returns logits in the batch layout (rows x width x vocabulary; padding positions zero, never read)."""
        import torch

        from halucheck.engines.decode_cache import Pack, packed

        self.stats.packed += 1
        width, length = new.shape[1], batch.mask.shape[1]
        rows, cols = new.nonzero(as_tuple=True)  # row-major: each row's tokens in order
        causal = torch.ones((width, length), dtype=torch.bool).tril(length - width)
        pack = Pack(rows, cols, width, batch.mask.bool()[:, None, None, :] & causal)
        with packed(pack):
            # no attention mask: the model builds a small one for a single sequence, which the attention
            # ignores for ``pack.allowed``
            out = self.hf_model(input_ids=ids[rows, cols][None], position_ids=positions[rows, cols][None],
                                use_cache=True, logits_to_keep=0, **{_cache_name(): batch.cache})
        logits = torch.zeros((*new.shape, out.logits.shape[-1]), dtype=torch.float32)
        logits[rows, cols] = out.logits[0].float()
        return logits

    def _draft(self, row: "DecodeRow") -> list[int]:
        """The tokens the row's drafter expects after its reply so far (greedy rows only: a sampled row
        must draw its own tokens from its own generator)."""
        if self.drafter is None or row.sampling.temperature > 0:
            return []
        room = row.max_tokens - len(row.tokens) - 1
        return self.drafter.draft(row.kind, row.tokens, min(self.draft_tokens, room))

    def _forward(self, ids, mask, positions, cache, keep: int = 1):
        """One forward pass; only the last ``keep`` positions' logits are computed (a prompt's full logits
        would take gigabytes)."""
        kwargs = {_cache_name(): cache} if cache is not None else {}
        return self.hf_model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True,
                             logits_to_keep=keep, **kwargs)

    # -- prefix reuse ---------------------------------------------------------------------------
    def _cached_prefix(self, request: Request, input_ids: list[int]) -> Hit | None:
        """What the prefix cache serves of this request's prompt (its group's entry), or None."""
        group = group_of(request)
        if self.prefix_cache is None or not group:
            return None
        with self._prefix_lock:
            return self.prefix_cache.match(group, input_ids)

    def _batch_cache(self, hits: list[Hit | None], width: int) -> Any:
        """One DynamicCache for the chunk: each row's cached keys and values (shared start, then any
        extension) right-aligned in ``width`` positions (zeros before them, which the attention mask hides)."""
        from transformers import DynamicCache

        some = next(h for h in hits if h is not None).base
        k0 = some[0][0]
        heads, dim = k0.shape[0], k0.shape[2]
        layers = []
        for layer in range(len(some)):
            keys = k0.new_zeros((len(hits), heads, width, dim))
            values = k0.new_zeros((len(hits), heads, width, dim))
            for row, hit in enumerate(hits):
                start = width - (hit.tokens if hit else 0)
                for part, n in hit.pieces() if hit else ():
                    k, v = part[layer]
                    keys[row, :, start : start + n] = k[:, :n]
                    values[row, :, start : start + n] = v[:, :n]
                    start += n
            layers.append((keys, values))
        return DynamicCache(ddp_cache_data=layers)

    def _keep_prefixes(self, chunk: list["DecodeRow"], past: Any, prefix_width: int, width: int) -> None:
        """Keep what the group's next calls may reuse: a row without a cached part stores its whole prompt
        as its group's entry (the prompt is contiguous and ends at ``width``); a row that reused its
        group's shared start keeps its own tokens after it (any extension it reused, then what it
        computed) as an extension."""
        import torch

        cache = self.prefix_cache
        if cache is None or past is None:
            return
        for i, row in enumerate(chunk):
            group, hit = group_of(row.request), row.hit
            if not group or (hit is None and group in cache.entries):  # a miss keeps the group's entry
                continue
            if hit is not None:
                with self._prefix_lock:  # copy an extension's KV only when the cache will keep it
                    if not cache.wants(group, row.input_ids[: hit.n], row.input_ids[hit.n :]):
                        continue
            if hit is None:
                start = width - len(row.input_ids)
                spans = [(start, width)]
            else:
                spans = [(prefix_width - hit.m, prefix_width), (width - (len(row.input_ids) - hit.tokens), width)]
            layers = [(torch.cat([layer.keys[i, :, a:b] for a, b in spans], dim=1),  # (heads, tokens, dim)
                       torch.cat([layer.values[i, :, a:b] for a, b in spans], dim=1)) for layer in past.layers]
            with self._prefix_lock:
                if hit is None:
                    cache.store(group, row.input_ids, layers)
                else:
                    cache.extend(group, row.input_ids[: hit.n], row.input_ids[hit.n :], layers)
