"""The embedded engine's attention function: transformers' sdpa for prompt passes, and for decode steps (a
few query tokens per row against the running batch's float32 keys, packed steps included) a grouped
float32 matmul. Registered with transformers under :data:`ATTENTION` when the engine loads its model."""

from __future__ import annotations

ATTENTION = "halucheck_cpu"
DECODE_TOKENS = 16  # query tokens per row up to which a pass counts as a decode step (see _attention)


def register_attention() -> str:
    """Register :func:`_attention` with transformers (its masks are sdpa's) and return its name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    AttentionInterface.register(ATTENTION, _attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(ATTENTION, sdpa_mask)
    return ATTENTION


def _attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    """transformers' sdpa attention, except for a decode step (one query token per row, or a few when
    drafted tokens are checked, against the running batch's float32 keys): there, the query heads that
    share a key/value head are multiplied with it as one small matrix, in float32.

    Why: torch's CPU sdpa kernel (flash attention for CPU) is built for long queries; for one token it
    took 10.5 ms per layer with 8 rows of 1,000 cached tokens of the 1.5B (12 query heads, 2 key/value
    heads, bfloat16) on two cores, and this 2.1 ms, with a smaller error against a float32 reference
    (4.9e-4 vs 6.5e-4; ``scripts/bench_decode_step.py``). Returns (output as (batch, tokens, heads, dim),
    None), as sdpa's does."""
    from halucheck.engines.decode_cache import current_pack

    pack = current_pack()
    if pack is not None:  # a packed step: the fed tokens into the batch layout, attend, and packed again
        q = query.new_zeros((key.shape[0], query.shape[1], pack.width, query.shape[3]))
        q[pack.rows, :, pack.cols] = query[0].transpose(0, 1)
        out = _decode_attention(q, key, value, pack.allowed, scaling)
        return out[pack.rows, pack.cols].unsqueeze(0), None
    if query.shape[2] > DECODE_TOKENS:  # a prompt pass
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                      scaling=scaling, **kwargs)
    return _decode_attention(query, key, value, attention_mask, scaling), None


def _decode_attention(query, key, value, attention_mask, scaling):
    """:func:`_attention` for a few query tokens per row; returns (batch, tokens, heads, dim)."""
    import torch

    batch, heads, tokens, dim = query.shape
    kv_heads, length = key.shape[1], key.shape[2]
    groups = heads // kv_heads
    q = query.reshape(batch, kv_heads, groups * tokens, dim).float()
    scores = torch.matmul(q, key.float().transpose(-1, -2)) * (scaling if scaling is not None else dim**-0.5)
    scores = scores.view(batch, kv_heads, groups, tokens, length)
    if attention_mask is not None:  # sdpa's mask: (batch or 1, 1, >= tokens, >= length), True where allowed
        mask = attention_mask[:, :, -tokens:, :length].unsqueeze(2)
        if mask.dtype == torch.bool:
            scores.masked_fill_(~mask, float("-inf"))
        else:
            scores += mask
    elif tokens > 1:  # no mask given: causal over the new tokens
        causal = torch.ones(tokens, length, dtype=torch.bool).tril(length - tokens)
        scores.masked_fill_(~causal, float("-inf"))
    probs = scores.softmax(dim=-1).view(batch, kv_heads, groups * tokens, length)
    out = torch.matmul(probs, value.float()).to(query.dtype)
    return out.reshape(batch, heads, tokens, dim).transpose(1, 2).contiguous()
