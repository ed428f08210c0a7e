"""The embedded CPU engine: transformers generation with continuous batching, and JSON-schema-constrained
decoding by Outlines (outlines_core's regex index and guides).

How requests run: one decode loop per engine (a thread, :meth:`TransformersEngine._serve`) keeps a batch
of up to ``max_batch`` rows. Every step it first admits waiting requests into the free rows — their
prompts, rendered with the model's chat template, are computed in left-padded passes of ``prefill_batch``
rows (one forward pass each) and their KV joined to the running batch's — then decodes one token for
every row (our own loop, not ``generate``). A row that ends leaves the batch that step and its caller has
the reply at once, so a debate's next call can join the batch while the others are still decoding
(``streaming = True``: the debate scheduler sends each call on its own, as to a vLLM server). Requests
with different schemas, sampling settings, or none share a batch: each row keeps its own Outlines guide,
repetition controls and random generator. The running batch keeps its KV in float32 layers with room to
grow (``halucheck.engines.decode_cache``), so a step neither copies nor converts the cache.

Prefix reuse: requests that share a ``prefix_group`` (a debate's calls about one claim) reuse the KV
of their common token prefix (system prompt, evidence, claim) from the group's earlier calls, and past
it the KV of an earlier call they go on like (the same role asked again)
(``halucheck.engines.prefix_cache``). In a prompt chunk, each row's cached prefix is left-padded to the
longest one, and the rest of its prompt follows after its own padding:
``[pad][cached prefix][pad][rest of the prompt]``; the attention mask hides both pads and the
positions count only unmasked tokens, so every row computes exactly what it would alone. Rows without
a hit have an empty prefix, which is plain left padding. Calls of one group that arrive together
(collab-cal's agents, every one asked at once) would each compute the shared start: the first is
admitted and the others wait one step (:meth:`TransformersEngine._defer_siblings`), then reuse it.

Greedy when temperature is 0; otherwise sampling, seeded per request as vLLM's: a seed reproduces its
request's sample whatever else shares the batch.
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
import threading
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

from halucheck.engines import ngrams
from halucheck.engines.base import Engine, Request, Result
from halucheck.engines.drafts import NGramDrafter
from halucheck.engines.index_cache import IndexCache
from halucheck.engines.prefix_cache import Hit, PrefixCache
from halucheck.errors import ConfigError, EngineError, HalucheckError

DEFAULT_MODEL = "qwen2.5-coder-1.5b-instruct"
# JSON whitespace allowed between tokens. Outlines' default allows any run of spaces and newlines, and
# small models then fill max_tokens with newlines; one optional space keeps replies compact and valid.
DEFAULT_WHITESPACE = r"[ ]?"
# Bytes of prefix KV kept between calls. The 1.5B model keeps 28 KiB per token in bfloat16, so a debate's
# ~1,000-token shared prefix takes ~28 MiB, ~42 MiB with its calls' own parts (16 debates peaked at 670 MiB):
# 2 GiB holds ~48 debates in flight (the scheduler keeps max_batch, 16).
DEFAULT_PREFIX_CACHE_MB = 2048


class TransformersEngine(Engine):
    """transformers + Outlines on the CPU (``engine: transformers`` in models.yaml).

    Options: ``max_batch`` (rows decoded together, default 16; the debate scheduler keeps as many debates
    in flight), ``prefill_batch`` (rows per prompt pass, default 8: bounds the pass's activation memory),
    ``threads`` (torch threads, default: the cores this process may use), ``dtype`` (load dtype; default:
    as saved, except that bfloat16 or float16 weights load in float32 on a CPU without native matmuls for
    them, see :func:`load_dtype`), ``whitespace_pattern`` (regex for JSON whitespace), ``prefix_cache_mb``
    (KV of shared prompt prefixes kept between calls, in MiB; 0 turns reuse off), ``draft_tokens`` (tokens
    drafted per greedy row and step for speculative decoding, see ``halucheck.engines.drafts``; 0, the
    default, turns it off). ``model`` is a known
    model name (see ``halucheck.weights``) or a local transformers folder.
    """

    name = "transformers"
    streaming = True  # each call may come on its own: the decode loop joins it to the running batch

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        max_batch: int = 16,
        prefill_batch: int = 8,
        threads: int | None = None,
        dtype: str | None = None,
        whitespace_pattern: str = DEFAULT_WHITESPACE,
        prefix_cache_mb: float = DEFAULT_PREFIX_CACHE_MB,
        draft_tokens: int = 0,
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
        if not 0 <= int(draft_tokens) < DECODE_TOKENS:
            raise ConfigError(f"draft_tokens must be 0 (off) to {DECODE_TOKENS - 1}, not {draft_tokens!r}")
        self.draft_tokens = int(draft_tokens)
        self.drafter = NGramDrafter() if self.draft_tokens else None
        self.stats = LoopStats()
        self.whitespace_pattern = whitespace_pattern
        self._indexes: dict[str, Any] = {}  # schema JSON -> outlines_core Index (built once per schema)
        self._vocabulary = None
        self._tok_key: str | None = None
        self.index_cache = IndexCache()
        self.load_seconds = 0.0
        self.threads = int(threads) if threads else _usable_cores()
        # the decode loop's inbox: (request, future, time queued); see _serve
        self._waiting: deque[tuple[Request, Future, float]] = deque()
        self._deferred: set[Future] = set()  # put back once to reuse a sibling's prefix (_defer_siblings)
        self._wake = threading.Condition()
        self._worker: threading.Thread | None = None
        self._closed = False
        self._prefix_lock = threading.Lock()  # release() comes from the callers' threads
        self._load(dtype)

    # -- loading --------------------------------------------------------------------------------
    def _load(self, dtype: str | None) -> None:
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
        torch.set_num_threads(self.threads)
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
        """Hand the requests to the decode loop and wait for their replies (in input order). A request
        that cannot be prepared (a schema Outlines cannot compile) fails alone."""
        futures = self._submit(requests)
        results = []
        for future in futures:
            try:
                results.append(future.result())
            except HalucheckError as exc:
                results.append(Result(error=str(exc)))
        return results

    def _submit(self, requests: Sequence[Request]) -> list[Future]:
        """Queue requests for the decode loop (started on first use); all at once, so the loop admits
        them together."""
        futures = [Future() for _ in requests]
        with self._wake:
            if self._closed:
                raise EngineError("the transformers engine was closed; create a new one")
            if self._worker is None:
                self._worker = threading.Thread(target=self._serve, name="halucheck-decode", daemon=True)
                self._worker.start()
            now = time.perf_counter()
            self._waiting.extend((r, f, now) for r, f in zip(requests, futures))
            self._wake.notify()
        return futures

    def _serve(self) -> None:
        """The decode loop (one thread per engine): admit waiting requests into the running batch while it
        has room, then decode one token for every row; a row that ends leaves the batch and its caller
        gets the reply at once."""
        import torch

        torch.set_num_threads(self.threads)  # OpenMP's thread count is per calling thread
        batch: _Batch | None = None
        with torch.inference_mode():
            while True:
                with self._wake:
                    while not self._waiting and batch is None and not self._closed:
                        self._wake.wait()
                    if self._closed:
                        break
                    room = self.max_batch - (len(batch.rows) if batch else 0)
                    taken = [self._waiting.popleft() for _ in range(min(room, len(self._waiting)))]
                try:
                    taken = self._defer_siblings(taken)
                    if taken:
                        t0 = time.perf_counter()
                        self.stats.admit(len(taken))
                        batch = self._admit(batch, taken)
                        self.stats.admit_s += time.perf_counter() - t0
                    if batch is not None:
                        t0 = time.perf_counter()
                        self.stats.step(len(batch.rows))  # before its rows are answered: callers see it
                        batch = self._step(batch)
                        self.stats.step_s += time.perf_counter() - t0
                except Exception as exc:  # the batch is lost (e.g. out of memory): every caller in it hears why
                    _fail([f for _, f, _ in taken] + [r.future for r in (batch.rows if batch else [])], exc)
                    batch = None
        _fail([r.future for r in (batch.rows if batch else [])],
              EngineError("the transformers engine was closed while decoding"))

    def _defer_siblings(self, taken: list[tuple[Request, Future, float]]) -> list[tuple[Request, Future, float]]:
        """Of the taken requests of one prefix group whose shared start is not cached yet, admit the first
        and put the others back at the head of the queue, once: admitted together, each would compute the
        shared start again; a step later they reuse the KV the first one stored."""
        if self.prefix_cache is None or len(taken) < 2:
            self._deferred.difference_update(f for _, f, _ in taken)
            return taken
        with self._prefix_lock:
            cached = set(self.prefix_cache.entries)
        first: set[str] = set()
        keep, later = [], []
        for item in taken:
            group, future = item[0].prefix_group, item[1]
            if group and group not in cached and future not in self._deferred:
                if group in first:
                    later.append(item)
                    continue
                first.add(group)
            keep.append(item)
        self._deferred.difference_update(f for _, f, _ in keep)
        if later:
            self._deferred.update(f for _, f, _ in later)
            self.stats.deferred += len(later)
            with self._wake:
                self._waiting.extendleft(reversed(later))
        return keep

    def _admit(self, batch: "_Batch | None", taken: list[tuple[Request, Future, float]]) -> "_Batch | None":
        """Prepare the taken requests, compute their prompts in passes of ``prefill_batch`` rows (most
        tokens to compute first) and join them to the running batch (or start one)."""
        rows = []
        for request, future, since in taken:
            try:
                rows.append(self._row(request, future, since))
            except Exception as exc:  # this request only (e.g. a schema Outlines cannot compile)
                future.set_exception(exc)
        rows.sort(key=lambda r: len(r.input_ids) - r.cached, reverse=True)  # rows computing as many tokens together
        parts = [self._prefill(rows[i : i + self.prefill_batch]) for i in range(0, len(rows), self.prefill_batch)]
        if not parts:
            return batch
        new = parts[0] if len(parts) == 1 else _merge(parts)
        if batch is None:
            return _Batch(rows, *new)
        batch.join(rows, *new)
        return batch

    def _row(self, request: Request, future: Future, since: float) -> "_Row":
        input_ids = self._encode(request.messages)
        hit = self._cached_prefix(request, input_ids)
        return _Row(
            request, input_ids, hit, future, since,
            index=self._index_for(request.schema) if request.schema else None,
            eos_ids=self.eos_ids,
            seen=input_ids if request.avoid is None else self._tokens(request.avoid),
            quote=self._tokens(request.quote) if request.quote else [],
        )

    def _encode(self, messages: Sequence[dict]) -> list[int]:
        text = self.tokenizer.apply_chat_template(
            [dict(m) for m in messages], tokenize=False, add_generation_prompt=True
        )
        # The template already holds any BOS/special tokens; adding them again would double them.
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def _tokens(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"] if text else []

    def _prefill(self, chunk: list["_Row"]):
        """One forward pass over the chunk's prompts; returns the last position's logits (float32), the
        KV cache and the attention mask. Each row: ``[pad][its cached prefix, n tokens][pad][the rest of
        its prompt]`` (see the module doc); only the rest is computed."""
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

    def _step(self, batch: "_Batch") -> "_Batch | None":
        """Choose every row's next token from its logits; rows that end (an end token or their own
        ``max_tokens``) leave the batch and are answered; the rest compute their next logits.

        With ``draft_tokens``, a greedy row also feeds the tokens its drafter expects next (see
        ``halucheck.engines.drafts``), and the next step reads one set of logits per fed token: each drafted
        token the row would have chosen itself is kept, the first one it would not is replaced by its own
        choice, and the rest are masked out of the cache (:meth:`_Batch.reject`). The reply is the one
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

    def _packed_step(self, batch: "_Batch", ids, positions, new):
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

    def _draft(self, row: "_Row") -> list[int]:
        """The tokens the row's drafter expects after its reply so far (greedy rows only: a sampled row
        must draw its own tokens from its own generator)."""
        if self.drafter is None or row.sampling.temperature > 0:
            return []
        room = row.max_tokens - len(row.tokens) - 1
        return self.drafter.draft(row.kind, row.tokens, min(self.draft_tokens, room))

    def _finish(self, row: "_Row") -> None:
        """Answer the row's caller."""
        result = Result(
            text=self.tokenizer.decode(row.tokens, skip_special_tokens=True),
            prompt_tokens=len(row.input_ids),
            cached_tokens=row.cached,
            completion_tokens=len(row.tokens) + row.ended,  # a generated end token counts
            latency_s=time.perf_counter() - row.since,
            capped=not row.ended,
        )
        if row.request.logprobs:
            result.logprobs = [(self.tokenizer.decode([t]), lp) for t, lp in zip(row.tokens, row.logprobs)]
        if self.drafter is not None and row.ended:
            self.drafter.learn(row.kind, row.tokens)
        row.future.set_result(result)

    def _forward(self, ids, mask, positions, cache, keep: int = 1):
        """One forward pass; only the last ``keep`` positions' logits are computed (a prompt's full logits
        would take gigabytes)."""
        kwargs = {_cache_name(): cache} if cache is not None else {}
        return self.hf_model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True,
                             logits_to_keep=keep, **kwargs)

    # -- prefix reuse ---------------------------------------------------------------------------
    def _cached_prefix(self, request: Request, input_ids: list[int]) -> Hit | None:
        """What the prefix cache serves of this request's prompt (its group's entry), or None."""
        if self.prefix_cache is None or not request.prefix_group:
            return None
        with self._prefix_lock:
            return self.prefix_cache.match(request.prefix_group, input_ids)

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

    def _keep_prefixes(self, chunk: list["_Row"], past: Any, prefix_width: int, width: int) -> None:
        """Keep what the group's next calls may reuse: a row without a cached part stores its whole prompt
        as its group's entry (the prompt is contiguous and ends at ``width``); a row that reused its
        group's shared start keeps its own tokens after it (any extension it reused, then what it
        computed) as an extension."""
        import torch

        cache = self.prefix_cache
        if cache is None or past is None:
            return
        for i, row in enumerate(chunk):
            group, hit = row.request.prefix_group, row.hit
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

    def release(self, groups) -> None:
        """Forget the cached prefixes of these groups (their calls are over)."""
        if self.prefix_cache is not None:
            with self._prefix_lock:
                for group in groups:
                    self.prefix_cache.release(group)

    def close(self) -> None:
        """Stop the decode loop (callers still waiting hear so), drop the model, the schema indexes and the
        cached prefixes."""
        with self._wake:
            self._closed = True
            self._wake.notify()
            waiting, self._waiting = list(self._waiting), deque()
        _fail([f for _, f, _ in waiting], EngineError("the transformers engine was closed before this request ran"))
        if self._worker is not None and self._worker is not threading.current_thread():
            self._worker.join()
        for attr in ("hf_model", "tokenizer"):
            if hasattr(self, attr):
                delattr(self, attr)
        self._indexes.clear()
        if self.prefix_cache is not None:
            self.prefix_cache = PrefixCache(self.prefix_cache.max_bytes)
        import gc

        gc.collect()


@dataclass
class LoopStats:
    """What the decode loop spent its time on: admissions (prompt passes and joining the running batch) and
    decode steps, with the rows each step decoded (a step's token per row; the ending token included).
    Counts are taken as an admission or step begins, seconds as it ends. ``scripts/bench_debate.py`` prints
    them: with few debates in flight, ``rows_per_step`` well below ``max_batch`` says the run waits on its
    longest debates (their calls are sequential), not on the machine."""

    admissions: int = 0
    admitted: int = 0
    admit_s: float = 0.0
    steps: int = 0
    step_rows: int = 0
    step_s: float = 0.0
    drafted: int = 0  # tokens drafted (draft_tokens > 0), and of those the rows kept
    accepted: int = 0
    packed: int = 0  # steps whose rows fed different numbers of tokens, run packed (no padding computed)
    deferred: int = 0  # requests put back a step to reuse the prompt start a sibling computes (same group)

    def admit(self, requests: int) -> None:
        self.admissions += 1
        self.admitted += requests

    def step(self, rows: int) -> None:
        self.steps += 1
        self.step_rows += rows

    def to_dict(self) -> dict:
        return {**{k: round(v, 1) if isinstance(v, float) else v for k, v in asdict(self).items()},
                "rows_per_step": round(self.step_rows / max(1, self.steps), 2),
                "ms_per_step": round(1000 * self.step_s / max(1, self.steps), 1)}


def _fail(futures: Sequence[Future], exc: BaseException) -> None:
    """Tell every caller still waiting on these futures that its request failed, and why."""
    for future in futures:
        if not future.done():
            future.set_exception(exc)


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
DECODE_TOKENS = 16  # query tokens per row up to which a pass counts as a decode step (see _attention)


def _register_attention() -> str:
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


@functools.cache
def _bit_shifts():
    import torch

    return torch.arange(32, dtype=torch.int32)


def _usable_cores() -> int:
    if hasattr(os, "sched_getaffinity"):  # the cores this process may run on (containers, taskset)
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


class _Batch:
    """The running decode batch: its rows, their next-token logits (float32), KV cache and attention mask.
    Every row's tokens are right-aligned; the mask hides each row's left padding. The cache's layers are
    :class:`~halucheck.engines.decode_cache.DecodeLayer`: float32, with room to grow."""

    def __init__(self, rows: list["_Row"], logits: Any, cache: Any, mask: Any) -> None:
        from halucheck.engines.decode_cache import DecodeLayer

        self.rows, self.logits, self.cache, self.mask = rows, logits, cache, mask
        self.holes = 0  # positions masked out by rejected drafts since the last compact()
        cache.layers = [layer if isinstance(layer, DecodeLayer) else DecodeLayer(layer.keys, layer.values)
                        for layer in cache.layers]

    def join(self, rows: list["_Row"], logits: Any, cache: Any, mask: Any) -> None:
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


class _Row:
    """One request being decoded: its Outlines guide (or none), repetition controls and sampling, the
    tokens and log-probabilities so far, and the future its caller waits on.

    Log-probabilities are taken after the schema mask and before temperature and repetition penalties, as
    vLLM computes them (its grammar bitmask is applied to the logits its sampler reads; its default
    logprobs are the raw ones). Sampling is seeded per request, as vLLM's: the same seed gives the same
    sample whatever else is in the batch.
    """

    def __init__(self, request: Request, input_ids: list[int], hit: Hit | None, future: Future,
                 since: float, index: Any = None, eos_ids: Sequence[int] = (), seen: Sequence[int] = (),
                 quote: Sequence[int] = ()) -> None:
        """``seen``: the tokens its repetition controls count as already said (the prompt, or the text the
        request asked to avoid); ``quote``: the tokens its repetition controls let it repeat; ``hit``: what
        the prefix cache serves of its prompt."""
        import torch
        from outlines_core import Guide

        self.request, self.input_ids, self.hit = request, input_ids, hit
        self.cached = hit.tokens if hit else 0  # leading prompt tokens served from the prefix cache
        self.future, self.since = future, since
        self.eos_ids = set(eos_ids)
        s = request.sampling
        self.sampling = s
        self.max_tokens = max(1, s.max_tokens)
        self.guide = Guide(index) if index is not None else None
        self.penalties = _Penalties(s, seen, quote) if s.penalized else None
        self.generator = None
        if s.temperature > 0 and s.seed is not None:
            self.generator = torch.Generator().manual_seed(int(s.seed))
        self.tokens: list[int] = []
        self.logprobs: list[float] = []
        self.draft: list[int] = []  # tokens fed after the last one chosen, awaiting the model's check
        self.kind = (request.tag, json.dumps(request.schema) if request.schema else "")  # for the drafter
        self.ended = False
        self._bitmask = None
        self._last_logprobs = None  # log-softmax of the last processed scores, when logprobs are wanted

    def process(self, scores):
        """Mask and penalise one row of logits in place and return it."""
        import torch
        from outlines_core.kernels.torch import allocate_token_bitmask, fill_next_token_bitmask

        allowed = None
        if self.guide is not None:
            if self._bitmask is None:
                self._bitmask = allocate_token_bitmask(scores.shape[0])
            fill_next_token_bitmask(self.guide, self._bitmask)
            allowed = _allowed(self._bitmask, scores.shape[0])
            scores.masked_fill_(~allowed, float("-inf"))
        self._last_logprobs = torch.log_softmax(scores, dim=-1) if self.request.logprobs else None
        # repetition controls shape free text only (see engines/ngrams.py), never a verdict's tokens
        if self.penalties is not None and (allowed is None or int(allowed.sum()) >= ngrams.FREE_TEXT_MIN_TOKENS):
            self.penalties.apply(scores, allowed)
        return scores

    def choose(self, scores) -> int:
        """The next token: the likeliest allowed one (greedy), or a sample after temperature and top-p
        (nucleus) filtering, as transformers' warpers do."""
        import torch

        scores = self.process(scores)
        s = self.sampling
        if s.temperature <= 0:
            return int(scores.argmax())
        scores = scores / s.temperature
        if s.top_p < 1.0:
            ordered, order = torch.sort(scores, descending=False)
            drop = ordered.softmax(dim=-1).cumsum(dim=-1) <= (1 - s.top_p)
            drop[-1] = False  # the most likely token always stays
            scores = scores.masked_fill(drop.scatter(0, order, drop), float("-inf"))
        return int(torch.multinomial(scores.softmax(dim=-1), num_samples=1, generator=self.generator))

    def advance(self, token: int) -> bool:
        """The row wrote ``token`` (chosen from its last processed scores); True when it is done."""
        if token in self.eos_ids:
            self.ended = True
            return True
        if self._last_logprobs is not None:
            self.logprobs.append(float(self._last_logprobs[token]))
        if self.penalties is not None:
            self.penalties.add(token)
        if self.guide is not None:
            self.guide.advance(token_id=token, return_tokens=False)
        self.tokens.append(token)
        return len(self.tokens) >= self.max_tokens


def _allowed(bitmask, vocab_size: int):
    """A guide's bitmask (32 tokens per int32) as a boolean row. Done eagerly: outlines_core's own kernel
    is a torch.compile function, which costs seconds of C++ compilation per process on the CPU and a
    compiler on the machine, to save a fraction of a millisecond per step."""
    import torch

    bits = (bitmask[0].unsqueeze(-1) >> _bit_shifts()) & 1
    allowed = bits.bool().view(-1)
    # Logit rows may be wider than the tokenizer's vocabulary (padding ids): those stay banned.
    if allowed.numel() < vocab_size:
        allowed = torch.cat([allowed, allowed.new_zeros(vocab_size - allowed.numel())])
    return allowed[:vocab_size]


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
