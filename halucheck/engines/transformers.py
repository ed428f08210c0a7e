"""The embedded CPU engine: transformers generation, batched, with JSON-schema-constrained decoding by
Outlines (outlines_core's regex index and guides).

How a batch runs: requests are rendered with the model's chat template, grouped by sampling mode
(greedy, or temperature/top_p/seed), sorted by prompt length (so little padding is wasted) and cut into
batches of ``max_batch``. A batch's prompts are computed in left-padded chunks of ``prefill_batch`` rows
(one forward pass each), joined into one batch and decoded together, a token per step, by our own loop
(:meth:`TransformersEngine._decode`), in which a row leaves the batch as soon as it ends. Requests with
different schemas, or none, share a batch: each row keeps its own Outlines guide. Results come back in
input order.

Prefix reuse: requests that share a ``prefix_group`` (a debate's calls about one claim) reuse the KV
of their common token prefix (system prompt, evidence, claim) from the group's earlier calls
(``halucheck.engines.prefix_cache``). In a prompt chunk, each row's cached prefix is left-padded to the
longest one, and the rest of its prompt follows after its own padding:
``[pad][cached prefix][pad][rest of the prompt]``; the attention mask hides both pads and the
positions count only unmasked tokens, so every row computes exactly what it would alone. Rows without
a hit have an empty prefix, which is plain left padding.

Greedy when temperature is 0; otherwise sampling, seeded per batch: a seed reproduces a
batch, and requests sharing a seed in one batch still get different samples (they are different rows).
Per-token logprobs, when asked for, are those of the constrained distribution (after the schema mask,
before temperature), as vLLM computes them: a token the schema forces has log-probability 0.
"""

from __future__ import annotations

import os
import sys

# Both must be set before torch is imported. PASSIVE: OpenMP threads sleep instead of spinning between
# the many small ops of CPU decoding; spinning threads on shared cores slow everyone (us included).
# Measured on 2 busy cores, 0.5B, JSON schema: with torch imported first (spinning) 0.47 tok/s at
# batch 1 and 3.0 at batch 8; with PASSIVE 2.6 and 12.3.
_TORCH_FIRST = "torch" in sys.modules and "OMP_WAIT_POLICY" not in os.environ
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # weights are local folders; never reach for a hub

import functools
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from halucheck.engines import ngrams
from halucheck.engines.base import Engine, Request, Result
from halucheck.engines.index_cache import IndexCache
from halucheck.engines.prefix_cache import PrefixCache
from halucheck.errors import ConfigError, EngineError

DEFAULT_MODEL = "qwen2.5-coder-1.5b-instruct"
# JSON whitespace allowed between tokens. Outlines' default allows any run of spaces and newlines, and
# small models then fill max_tokens with newlines; one optional space keeps replies compact and valid.
DEFAULT_WHITESPACE = r"[ ]?"
# Bytes of prefix KV kept between calls. The 1.5B model keeps 28 KiB per token in bfloat16, so a debate's
# ~1,000-token shared prefix takes ~28 MiB and 2 GiB holds ~70 debates in flight (4 x max_batch is 64).
DEFAULT_PREFIX_CACHE_MB = 2048


@dataclass
class _Prepared:
    index: int  # position in the caller's list
    request: Request
    input_ids: list[int]


class TransformersEngine(Engine):
    """transformers + Outlines on the CPU (``engine: transformers`` in models.yaml).

    Options: ``max_batch`` (requests decoded together, default 16: what the scheduler hands over at
    once), ``prefill_batch`` (rows per prompt pass, default 8: bounds the pass's activation memory),
    ``threads`` (torch threads, default: the cores this process may use), ``dtype`` (load dtype; default:
    as saved, except that bfloat16 or float16 weights load in float32 on a CPU without native matmuls for
    them, see :func:`load_dtype`), ``whitespace_pattern`` (regex for JSON whitespace), ``prefix_cache_mb``
    (KV of shared prompt prefixes kept between calls, in MiB; 0 turns reuse off). ``model`` is a known
    model name (see ``halucheck.weights``) or a local transformers folder.
    """

    name = "transformers"

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        max_batch: int = 16,
        prefill_batch: int = 8,
        threads: int | None = None,
        dtype: str | None = None,
        whitespace_pattern: str = DEFAULT_WHITESPACE,
        prefix_cache_mb: float = DEFAULT_PREFIX_CACHE_MB,
        **options: Any,
    ) -> None:
        super().__init__(model=model or DEFAULT_MODEL, **options)
        self.max_batch = max(1, int(max_batch))
        self.prefill_batch = max(1, int(prefill_batch))
        mb = float(prefix_cache_mb)
        if mb < 0:
            raise ConfigError(f"prefix_cache_mb must be 0 (off) or more, not {prefix_cache_mb!r}")
        self.prefix_cache = PrefixCache(int(mb * 2**20)) if mb > 0 else None
        self.prefilled_tokens = 0  # prompt tokens computed (not served from the prefix cache)
        self.whitespace_pattern = whitespace_pattern
        self._indexes: dict[str, Any] = {}  # schema JSON -> outlines_core Index (built once per schema)
        self._vocabulary = None
        self._tok_key: str | None = None
        self.index_cache = IndexCache()
        self.load_seconds = 0.0
        self._load(threads, dtype)

    # -- loading --------------------------------------------------------------------------------
    def _load(self, threads: int | None, dtype: str | None) -> None:
        from halucheck import weights

        path = weights.resolve(self.model)  # ModelNotInstalled / ConfigError: the user can fix those
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:  # pragma: no cover - both are package dependencies
            raise EngineError(
                f"the transformers engine needs torch and transformers ({exc}); run `pip install halucheck`"
            ) from None

        if _TORCH_FIRST:  # too late to change it now: OpenMP read the environment when torch loaded
            import warnings

            warnings.warn(
                "torch was imported before halucheck.engines.transformers, so OMP_WAIT_POLICY=PASSIVE "
                "is not in effect and CPU generation may be several times slower; set OMP_WAIT_POLICY="
                "PASSIVE in the environment or import halucheck first",
                RuntimeWarning,
                stacklevel=3,
            )
        # Default: every core this process may run on. More threads than cores only adds contention.
        torch.set_num_threads(int(threads) if threads else _usable_cores())
        if dtype and not isinstance(getattr(torch, dtype, None), torch.dtype):
            raise ConfigError(
                f"dtype {dtype!r} is not a torch dtype; use bfloat16 or float32 (or leave it out)"
            )
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # our own progress bars tell the story; no "Loading weights" bar
        t0 = time.perf_counter()
        chosen = load_dtype(dtype, _saved_dtype(path), _native_half_types())
        kwargs = {"dtype": getattr(torch, chosen) if chosen != "auto" else "auto",
                  "attn_implementation": _register_attention()}
        self.hf_model = AutoModelForCausalLM.from_pretrained(path, **kwargs).eval()
        self.dtype = str(self.hf_model.dtype).removeprefix("torch.")
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.load_seconds = time.perf_counter() - t0
        self.path = path

        gen = self.hf_model.generation_config
        eos = gen.eos_token_id if gen.eos_token_id is not None else self.tokenizer.eos_token_id
        eos_list = list(eos) if isinstance(eos, (list, tuple)) else [eos]
        if self.tokenizer.eos_token_id is not None and self.tokenizer.eos_token_id not in eos_list:
            eos_list.append(self.tokenizer.eos_token_id)
        self.eos_ids: list[int] = [int(e) for e in eos_list if e is not None]
        if not self.eos_ids:
            raise EngineError(
                f"model {self.model!r} defines no end-of-sequence token; it cannot be used here"
            )
        pad = self.tokenizer.pad_token_id
        self.pad_id: int = int(pad) if pad is not None else self.eos_ids[0]

    def _index_for(self, schema: dict) -> Any:
        """The outlines_core Index for ``schema``: kept in memory, and on disk (``index_cache``) keyed by
        the tokenizer, the regex and the outlines_core version, since building one costs 10-15 s on
        two cores for a debate reply and every process would pay it again."""
        # Keep the caller's property order in the regex: it is the order the model writes the fields
        # in (an opinion before the verdict lets the model reason first).
        key = json.dumps(schema)
        if key not in self._indexes:
            from outlines_core.json_schema import build_regex_from_schema

            try:
                regex = build_regex_from_schema(key, self.whitespace_pattern)
            except Exception as exc:  # a schema Outlines cannot express is the caller's bug, said plainly
                raise EngineError(f"Outlines cannot compile this JSON schema: {exc}") from None
            self._indexes[key] = self.index_cache.get(regex, self._tokenizer_key(), self._build_index)
        return self._indexes[key]

    def _build_index(self, regex: str) -> Any:
        from outlines_core import Index

        if self._vocabulary is None:
            self._vocabulary = self._build_vocabulary()
        return Index(regex, self._vocabulary)

    def _tokenizer_key(self) -> str:
        """A fingerprint of what an Index depends on besides its regex: the vocabulary and end tokens."""
        if self._tok_key is None:
            import hashlib

            vocab = sorted(self.tokenizer.get_vocab().items())
            self._tok_key = hashlib.sha256(json.dumps([vocab, self.eos_ids]).encode()).hexdigest()
        return self._tok_key

    def _build_vocabulary(self) -> Any:
        """Outlines' vocabulary (token string -> ids) with every end token removed: only the guide's
        final state may end a reply."""
        from outlines.backends.outlines_core import OutlinesCoreBackend
        from outlines.models.transformers import TransformerTokenizer

        wrapped = TransformerTokenizer(self.tokenizer)
        vocab = OutlinesCoreBackend.create_outlines_core_vocabulary(
            self.tokenizer.get_vocab(),
            self.eos_ids[0],
            self.tokenizer.convert_ids_to_tokens(self.eos_ids[0]),
            wrapped.convert_token_to_string,
        )
        for eos in self.eos_ids[1:]:
            text = wrapped.convert_token_to_string(self.tokenizer.convert_ids_to_tokens(eos))
            try:
                vocab.remove(text)
            except Exception:  # not in the vocabulary under that string: nothing to remove
                pass
        return vocab

    # -- generation -----------------------------------------------------------------------------
    def _complete(self, requests: Sequence[Request]) -> list[Result]:
        prepared = [
            _Prepared(i, r, self._encode(r.messages)) for i, r in enumerate(requests)
        ]
        groups: dict[tuple, list[_Prepared]] = {}
        for p in prepared:
            groups.setdefault(_sampling_key(p.request), []).append(p)
        results: list[Result | None] = [None] * len(requests)
        for key, members in groups.items():
            # Longest first: similar lengths share a prompt pass, and memory peaks on the first one.
            members.sort(key=lambda p: len(p.input_ids), reverse=True)
            for start in range(0, len(members), self.max_batch):
                batch = members[start : start + self.max_batch]
                for p, res in zip(batch, self._generate_batch(batch, key)):
                    results[p.index] = res
        return results  # type: ignore[return-value]

    def _encode(self, messages: Sequence[dict]) -> list[int]:
        text = self.tokenizer.apply_chat_template(
            [dict(m) for m in messages], tokenize=False, add_generation_prompt=True
        )
        # The template already holds any BOS/special tokens; adding them again would double them.
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def _tokens(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"] if text else []

    def _generate_batch(self, batch: list[_Prepared], key: tuple) -> list[Result]:
        """Prompt passes of ``prefill_batch`` rows, then one decode of the whole batch."""
        import torch

        cached = [self._cached_prefix(p) for p in batch]
        max_tokens = [max(1, p.request.sampling.max_tokens) for p in batch]
        guide = _RowGuides(
            indexes=[self._index_for(p.request.schema) if p.request.schema else None for p in batch],
            eos_ids=self.eos_ids,
            want_logprobs=[p.request.logprobs for p in batch],
            sampling=[p.request.sampling for p in batch],
            prompts=[p.input_ids if p.request.avoid is None else self._tokens(p.request.avoid) for p in batch],
            quotes=[self._tokens(p.request.quote) if p.request.quote else [] for p in batch],
        )
        t0 = time.perf_counter()
        with torch.inference_mode():
            parts = [self._prefill(batch[i : i + self.prefill_batch], cached[i : i + self.prefill_batch])
                     for i in range(0, len(batch), self.prefill_batch)]
            logits, cache, mask = parts[0] if len(parts) == 1 else _merge(parts)
            del parts
            tokens, ended = self._decode(logits, cache, mask, guide, _Sampler(key), max_tokens)
        elapsed = time.perf_counter() - t0

        results = []
        for row, p in enumerate(batch):
            res = Result(
                text=self.tokenizer.decode(tokens[row], skip_special_tokens=True),
                prompt_tokens=len(p.input_ids),
                cached_tokens=cached[row][1],
                completion_tokens=len(tokens[row]) + ended[row],  # a generated end token counts
                latency_s=elapsed,
                capped=not ended[row],
            )
            if p.request.logprobs:
                res.logprobs = [
                    (self.tokenizer.decode([tok]), lp) for tok, lp in zip(tokens[row], guide.logprobs[row])
                ]
            results.append(res)
        return results

    def _prefill(self, chunk: list[_Prepared], cached: list[tuple[Any, int]]):
        """One forward pass over the chunk's prompts; returns the last position's logits (float32), the
        KV cache and the attention mask. Each row: ``[pad][its cached prefix, n tokens][pad][the rest of
        its prompt]`` (see the module doc); only the rest is computed."""
        import torch

        prefix_width = max(n for _, n in cached)
        width = prefix_width + max(len(p.input_ids) - n for p, (_, n) in zip(chunk, cached))
        ids = torch.full((len(chunk), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(chunk), width), dtype=torch.long)
        for row, (p, (_, n)) in enumerate(zip(chunk, cached)):
            rest = p.input_ids[n:]
            ids[row, prefix_width - n : prefix_width] = torch.tensor(p.input_ids[:n], dtype=torch.long)
            ids[row, width - len(rest) :] = torch.tensor(rest, dtype=torch.long)
            mask[row, prefix_width - n : prefix_width] = 1
            mask[row, width - len(rest) :] = 1
            self.prefilled_tokens += len(rest)
        past = self._batch_cache(cached, prefix_width) if prefix_width else None
        positions = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 0)  # pads count no position
        out = self._forward(ids[:, prefix_width:], mask, positions[:, prefix_width:], past)
        cache = getattr(out, _cache_name())
        self._keep_prefixes(chunk, cached, cache, width)
        return out.logits[:, -1, :].float(), cache, mask

    def _decode(self, logits, cache, mask, guide: "_RowGuides", sampler: "_Sampler",
                max_tokens: list[int]) -> tuple[list[list[int]], list[bool]]:
        """Generate every row until it writes an end token or spends its ``max_tokens``, starting from
        the prompts' last ``logits`` and their ``cache`` and ``mask``; returns each row's tokens (without
        the end token) and whether it ended by itself.

        A row leaves the batch the step it finishes (its KV and mask rows are dropped). A decode step reads
        every weight once whatever the rows, so more rows per step are cheaper per row: measured with the
        1.5B on two cores, 1,000-token prompts, 264 / 313 / 415 / 721 ms per step at 1 / 8 / 16 / 32 rows
        (``scripts/bench_decode_step.py``).
        """
        import torch

        tokens: list[list[int]] = [[] for _ in max_tokens]
        ended = [False] * len(max_tokens)
        active = list(range(len(max_tokens)))  # the batch row of each row still decoding
        while True:
            scores = guide.process(active, logits)
            chosen = sampler(scores).tolist()
            guide.advance(active, chosen)
            keep = []
            for i, (row, tok) in enumerate(zip(active, chosen)):
                if tok in self.eos_ids:
                    ended[row] = True
                    continue
                tokens[row].append(tok)
                if len(tokens[row]) < max_tokens[row]:
                    keep.append(i)
            if not keep:
                return tokens, ended
            if len(keep) < len(active):
                index = torch.tensor(keep, dtype=torch.long)
                cache.batch_select_indices(index)
                mask = mask[index]
                active = [active[i] for i in keep]
                chosen = [chosen[i] for i in keep]
            mask = torch.cat([mask, mask.new_ones((len(active), 1))], dim=1)
            step = torch.tensor(chosen, dtype=torch.long).unsqueeze(1)
            logits = self._forward(step, mask, mask.sum(-1, keepdim=True) - 1, cache).logits[:, -1, :].float()

    def _forward(self, ids, mask, positions, cache):
        """One forward pass; only the last position's logits are computed (a prompt's full logits would
        take gigabytes)."""
        kwargs = {_cache_name(): cache} if cache is not None else {}
        return self.hf_model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True,
                             logits_to_keep=1, **kwargs)

    # -- prefix reuse ---------------------------------------------------------------------------
    def _cached_prefix(self, p: _Prepared) -> tuple[Any, int]:
        """The prefix cache's entry for this request's group and the tokens it serves, or (None, 0)."""
        if self.prefix_cache is None or not p.request.prefix_group:
            return None, 0
        return self.prefix_cache.match(p.request.prefix_group, p.input_ids)

    def _batch_cache(self, cached: list[tuple[Any, int]], width: int) -> Any:
        """One DynamicCache for the chunk: each row's cached keys and values right-aligned in ``width``
        positions (zeros before them, which the attention mask hides)."""
        from transformers import DynamicCache

        some = next(entry for entry, _ in cached if entry is not None)
        k0 = some.layers[0][0]
        heads, dim = k0.shape[0], k0.shape[2]
        layers = []
        for layer in range(len(some.layers)):
            keys = k0.new_zeros((len(cached), heads, width, dim))
            values = k0.new_zeros((len(cached), heads, width, dim))
            for row, (entry, n) in enumerate(cached):
                if entry is not None:
                    k, v = entry.layers[layer]
                    keys[row, :, width - n :] = k[:, :n]
                    values[row, :, width - n :] = v[:, :n]
            layers.append((keys, values))
        return DynamicCache(ddp_cache_data=layers)

    def _keep_prefixes(self, chunk: list[_Prepared], cached: list[tuple[Any, int]], past: Any, width: int) -> None:
        """Store the prompt KV of each grouped row that had no entry: its group's next call shares it.
        Such a row's prompt is contiguous and ends at ``width`` (it had no cached part)."""
        if self.prefix_cache is None or past is None:
            return
        for row, (p, (entry, _)) in enumerate(zip(chunk, cached)):
            group = p.request.prefix_group
            if entry is not None or not group or group in self.prefix_cache.entries:
                continue
            start = width - len(p.input_ids)
            layers = [(layer.keys[row, :, start:width].clone(), layer.values[row, :, start:width].clone())
                      for layer in past.layers]
            self.prefix_cache.store(group, p.input_ids, layers)

    def release(self, groups) -> None:
        """Forget the cached prefixes of these groups (their calls are over)."""
        if self.prefix_cache is not None:
            for group in groups:
                self.prefix_cache.release(group)

    def close(self) -> None:
        """Drop the model, the schema indexes and the cached prefixes."""
        for attr in ("hf_model", "tokenizer"):
            if hasattr(self, attr):
                delattr(self, attr)
        self._indexes.clear()
        if self.prefix_cache is not None:
            self.prefix_cache = PrefixCache(self.prefix_cache.max_bytes)
        import gc

        gc.collect()


def _merge(parts: list[tuple[Any, Any, Any]]) -> tuple[Any, Any, Any]:
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


ATTENTION = "halucheck_cpu"


def _register_attention() -> str:
    """Register :func:`_attention` with transformers (its masks are sdpa's) and return its name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    AttentionInterface.register(ATTENTION, _attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(ATTENTION, sdpa_mask)
    return ATTENTION


def _attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    """transformers' sdpa attention, except for one query token (a decode step): there, the query heads
    that share a key/value head are multiplied with it as one small matrix, in float32.

    Why: torch's CPU sdpa kernel (flash attention for CPU) is built for long queries; for one token it
    took 10.5 ms per layer with 8 rows of 1,000 cached tokens of the 1.5B (12 query heads, 2 key/value
    heads, bfloat16) on two cores, and this 2.1 ms, with a smaller error against a float32 reference
    (4.9e-4 vs 6.5e-4; ``scripts/bench_decode_step.py``). Returns (output as (batch, 1, heads, dim), None), as sdpa's does."""
    import torch

    if query.shape[2] != 1:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                      scaling=scaling, **kwargs)
    batch, heads, _, dim = query.shape
    kv_heads, length = key.shape[1], key.shape[2]
    q = query.reshape(batch, kv_heads, heads // kv_heads, dim).float()
    scores = torch.matmul(q, key.float().transpose(-1, -2)) * (scaling if scaling is not None else dim**-0.5)
    if attention_mask is not None:  # sdpa's mask: (batch or 1, 1, 1, >= length), True where allowed
        mask = attention_mask[:, :, -1:, :length]
        if mask.dtype == torch.bool:
            scores.masked_fill_(~mask, float("-inf"))
        else:
            scores += mask
    out = torch.matmul(scores.softmax(dim=-1), value.float()).to(value.dtype)
    return out.reshape(batch, heads, 1, dim).transpose(1, 2).contiguous(), None


def load_dtype(requested: str | None, saved: str | None, native: set[str]) -> str:
    """The dtype to load weights in: ``requested`` (models.yaml's ``dtype``) if given; else float32 when the
    weights are saved in a half type this CPU has no native matmul for (``native``, from
    :func:`_native_half_types`), else ``"auto"`` (as saved).

    Why: without AVX-512 (e.g. an AVX2-only AMD EPYC), torch multiplies bfloat16 matrices in a generic
    loop; measured on 2 such cores, a 1536 x 8960 layer ran at 0.8 GFLOP/s in bfloat16 and 82 GFLOP/s in
    float32 (512 rows; 11 vs 0.8 at one row), so a debate call took minutes instead of seconds. float32
    doubles the weights' memory (1.5B: 6.2 GB instead of 3.1 GB) and the KV per token."""
    if requested:
        return requested
    if saved in ("bfloat16", "float16") and saved not in native:
        return "float32"
    return "auto"


def _saved_dtype(path) -> str | None:
    """The dtype a model folder's config.json says its weights are in (``dtype`` or ``torch_dtype``)."""
    try:
        config = json.loads((Path(path) / "config.json").read_text())
    except (OSError, ValueError):
        return None
    value = config.get("dtype") or config.get("torch_dtype")
    return value if isinstance(value, str) else None


def _native_half_types() -> set[str]:
    """The half types this CPU multiplies natively (oneDNN: AVX-512 or AMX); without them torch falls back
    to a slow generic kernel. Unknown (an older torch without the check): assume native, load as saved."""
    import torch

    native = set()
    for name, check in (("bfloat16", "_is_mkldnn_bf16_supported"), ("float16", "_is_mkldnn_fp16_supported")):
        try:
            if getattr(torch.ops.mkldnn, check)():
                native.add(name)
        except (AttributeError, RuntimeError):
            native.add(name)
    return native


@functools.cache
def _cache_name() -> str:
    """The name a causal LM's forward takes and returns the KV cache under: ``cache`` since transformers 5
    (which warns on the old ``past_key_values``, to be removed in 6.0), ``past_key_values`` before."""
    from transformers.modeling_outputs import CausalLMOutputWithPast

    return "cache" if "cache" in CausalLMOutputWithPast.__dataclass_fields__ else "past_key_values"


def _usable_cores() -> int:
    if hasattr(os, "sched_getaffinity"):  # the cores this process may run on (containers, taskset)
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def _sampling_key(request: Request) -> tuple:
    """Requests that can share one ``generate`` call (transformers takes one sampling setting per
    call); max_tokens is per row and does not split groups."""
    s = request.sampling
    if s.temperature <= 0:
        return ("greedy",)
    return ("sample", float(s.temperature), float(s.top_p), s.seed)


class _RowGuides:
    """Each row's own Outlines guide (or none) and repetition controls, applied to that row's logits at
    every step, and the chosen tokens' log-probabilities.

    Rows are the batch's rows; each call names the rows its logits belong to, in order (rows
    that finished have left the batch). Log-probabilities are taken after the schema mask and before
    temperature and repetition penalties, as vLLM computes them (its grammar bitmask is applied to the
    logits its sampler reads; its default logprobs are the raw ones).
    """

    def __init__(
        self,
        indexes: list[Any],
        eos_ids: list[int],
        want_logprobs: list[bool],
        sampling: list[Any] | None = None,
        prompts: list[list[int]] | None = None,
        quotes: list[list[int]] | None = None,
    ) -> None:
        """``prompts``: per row, the tokens its repetition controls count as already seen (the prompt,
        or the text the request asked to avoid); ``quotes``: the tokens its repetition controls let it repeat."""
        from outlines_core import Guide

        self.eos_ids = eos_ids
        self.want = want_logprobs
        self.rows = len(indexes)
        self.sampling = sampling or [None] * self.rows
        self.penalties = [_Penalties(s, prompt, quote) if s is not None and s.penalized else None
                          for s, prompt, quote in zip(self.sampling, prompts or [[]] * self.rows,
                                                      quotes or [[]] * self.rows)]
        self.guides: list[Any] = [Guide(ix) if ix is not None else None for ix in indexes]
        self.logprobs: list[list[float]] = [[] for _ in range(self.rows)]
        self._last_logprobs = None  # (rows, vocab) log-softmax of the last processed step, if wanted
        self._bitmask = None
        self._shifts = None

    def process(self, rows: list[int], scores):
        """Mask and penalise ``scores`` in place (``scores[i]`` are row ``rows[i]``'s logits) and return them."""
        import torch
        from outlines_core.kernels.torch import allocate_token_bitmask, fill_next_token_bitmask

        if self._bitmask is None:
            self._bitmask = allocate_token_bitmask(scores.shape[1])
        free: list[Any] = [None] * len(rows)  # rows in free text: their allowed-token mask (or True)
        for i, row in enumerate(rows):
            guide = self.guides[row]
            allowed = None
            if guide is not None:
                fill_next_token_bitmask(guide, self._bitmask)
                allowed = self._allowed(scores.shape[1])
                scores[i].masked_fill_(~allowed, float("-inf"))
            # repetition controls shape free text only (see engines/ngrams.py), never a verdict's tokens
            if self.penalties[row] is not None and (allowed is None or int(allowed.sum()) >= ngrams.FREE_TEXT_MIN_TOKENS):
                free[i] = True if allowed is None else allowed
        self._last_logprobs = None
        if any(self.want[row] for row in rows):
            self._last_logprobs = torch.log_softmax(scores, dim=-1)
        for i, allowed in enumerate(free):
            if allowed is not None:
                self.penalties[rows[i]].apply(scores[i], None if allowed is True else allowed)
        return scores

    def advance(self, rows: list[int], chosen: list[int]) -> None:
        """Row ``rows[i]`` wrote ``chosen[i]`` (from the scores of the last :meth:`process`)."""
        for i, (row, tok) in enumerate(zip(rows, chosen)):
            if tok in self.eos_ids:
                continue
            if self.want[row] and self._last_logprobs is not None:
                self.logprobs[row].append(float(self._last_logprobs[i, tok]))
            if self.penalties[row] is not None:
                self.penalties[row].add(tok)
            if self.guides[row] is not None:
                self.guides[row].advance(token_id=tok, return_tokens=False)

    def _allowed(self, vocab_size: int):
        """The guide's bitmask (32 tokens per int32) as a boolean row. Done eagerly: outlines_core's
        own kernel is a torch.compile function, which costs seconds of C++ compilation per process on
        the CPU and a compiler on the machine, to save a fraction of a millisecond per step."""
        import torch

        if self._shifts is None:
            self._shifts = torch.arange(32, dtype=torch.int32)
        bits = (self._bitmask[0].unsqueeze(-1) >> self._shifts) & 1
        allowed = bits.bool().view(-1)
        # Logit rows may be wider than the tokenizer's vocabulary (padding ids): those stay banned.
        if allowed.numel() < vocab_size:
            allowed = torch.cat([allowed, allowed.new_zeros(vocab_size - allowed.numel())])
        return allowed[:vocab_size]


class _Sampler:
    """Picks each row's next token from its processed logits: the most likely one (greedy), or a sample
    after temperature and top-p (nucleus) filtering, as transformers' warpers do. The seed is set once
    per chunk, so a seed reproduces a batch."""

    def __init__(self, key: tuple) -> None:
        import torch

        self.greedy = key[0] == "greedy"
        if not self.greedy:
            _, self.temperature, self.top_p, seed = key
            if seed is not None:
                torch.manual_seed(seed)

    def __call__(self, scores):
        import torch

        if self.greedy:
            return scores.argmax(dim=-1)
        scores = scores / self.temperature
        if self.top_p < 1.0:
            ordered, order = torch.sort(scores, descending=False)
            cumulative = ordered.softmax(dim=-1).cumsum(dim=-1)
            drop = cumulative <= (1 - self.top_p)
            drop[:, -1] = False  # the most likely token always stays
            scores = scores.masked_fill(drop.scatter(1, order, drop), float("-inf"))
        return torch.multinomial(scores.softmax(dim=-1), num_samples=1).squeeze(1)


class _Penalties:
    """One row's repetition controls (see ``SamplingParams``): what the row has seen and said so far."""

    def __init__(self, sampling: Any, prompt: Sequence[int], quote: Sequence[int] = ()) -> None:
        self.rep = float(sampling.repetition_penalty)
        self.freq = float(sampling.frequency_penalty)
        self.pres = float(sampling.presence_penalty)
        # tokens the reply may quote (the claim, the passages' names and numbers) are never penalised:
        # pushed off "2009" or "340", a small model writes "2008" or "341" and argues from it
        self.free: frozenset[int] = frozenset(quote)
        self.seen: set[int] = set(prompt) - self.free  # prompt and reply: what repetition_penalty counts
        self.counts: dict[int, int] = {}  # reply only: what frequency/presence penalties count
        n = int(sampling.no_repeat_ngram_size)
        self.ngrams = ngrams.NGramBan(n, prompt, quote) if n > 0 else None

    def add(self, token: int) -> None:
        if token not in self.free:
            self.seen.add(token)
            self.counts[token] = self.counts.get(token, 0) + 1
        if self.ngrams is not None:
            self.ngrams.extend([token])

    def apply(self, row, allowed) -> None:
        """Penalise ``row`` (one row of logits) in place; ``allowed``: the schema's mask, or None."""
        import torch

        if self.rep != 1.0 and self.seen:
            idx = torch.tensor(sorted(self.seen), dtype=torch.long)
            idx = idx[idx < row.shape[0]]
            vals = row[idx]
            row[idx] = torch.where(vals > 0, vals / self.rep, vals * self.rep)
        if (self.freq or self.pres) and self.counts:
            idx = torch.tensor(list(self.counts), dtype=torch.long)
            counts = torch.tensor(list(self.counts.values()), dtype=row.dtype)
            keep = idx < row.shape[0]
            row[idx[keep]] -= self.freq * counts[keep] + self.pres
        if self.ngrams is not None:
            self.ngrams.apply(row, allowed)
