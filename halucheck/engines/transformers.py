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

Prefix reuse: requests that share a ``prefix_group`` (a debate's calls about one claim; without one, every call
of a stage: the same system prompt, ``prefix_cache.group_of``) reuse the KV
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

The parts: ``halucheck.engines.batching`` (the running batch, prompt passes and decode steps),
``halucheck.engines.constrained`` (schema indexes, and each row's mask, repetition controls and token
choice), ``halucheck.engines.attention`` (the decode-step attention) and ``halucheck.engines.loading``
(load dtype and threads).
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

import threading
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

from halucheck.engines.attention import DECODE_TOKENS, register_attention
from halucheck.engines.automata_cache import AutomataCache
from halucheck.engines.base import Engine, Request, Result
from halucheck.engines.batching import BatchDecoding, DecodeBatch, merge_passes
from halucheck.engines.constrained import DecodeRow, SchemaIndexes
from halucheck.engines.drafts import NGramDrafter
from halucheck.engines.loading import load_dtype, native_half_types, returned_to_the_system, saved_dtype, usable_cores
from halucheck.engines.prefix_cache import PrefixCache, group_of
from halucheck.errors import ConfigError, EngineError, HalucheckError

DEFAULT_MODEL = "qwen2.5-coder-1.5b-instruct"
# JSON whitespace allowed between tokens. Outlines' default allows any run of spaces and newlines, and
# small models then fill max_tokens with newlines; one optional space keeps replies compact and valid.
DEFAULT_WHITESPACE = r"[ ]?"
# Bytes of prefix KV kept between calls. The 1.5B model keeps 28 KiB per token in bfloat16, so a debate's
# ~1,000-token shared prefix takes ~28 MiB, ~42 MiB with its calls' own parts (16 debates peaked at 670 MiB):
# 2 GiB holds ~48 debates in flight (the scheduler keeps max_batch, 16).
DEFAULT_PREFIX_CACHE_MB = 2048


class TransformersEngine(SchemaIndexes, BatchDecoding, Engine):
    """transformers + Outlines on the CPU (``engine: transformers`` in models.yaml).

    Options: ``max_batch`` (rows decoded together, default 16; the debate scheduler keeps as many debates
    in flight), ``prefill_batch`` (rows per prompt pass, default 8: bounds the pass's activation memory),
    ``threads`` (torch threads, default: the cores this process may use), ``dtype`` (load dtype; default:
    as saved, except that bfloat16 or float16 weights load as ``int8`` (float32 where torch has no int8
    kernels) on a CPU without native matmuls for them, see :func:`load_dtype`; ``int8``: int8 linear
    weights, see ``halucheck.engines.int8``),
    ``whitespace_pattern`` (regex for JSON whitespace), ``prefix_cache_mb`` (KV of shared prompt prefixes
    kept between calls, in MiB; 0 turns reuse off), ``draft_tokens`` (tokens drafted per greedy row and step
    for speculative decoding, see ``halucheck.engines.drafts``; 0, the default, turns it off). ``model`` is a
    known model name (see ``halucheck.weights``) or a local transformers folder.
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
        self.automata_cache = AutomataCache()
        self.load_seconds = 0.0
        self.threads = int(threads) if threads else usable_cores()
        # the decode loop's inbox: (request, future, time queued); see _serve
        self._waiting: deque[tuple[Request, Future, float]] = deque()
        self._deferred: set[Future] = set()  # put back once to reuse a sibling's prefix (_defer_siblings)
        self._wake = threading.Condition()
        self._worker: threading.Thread | None = None
        self._closed = False
        self._prefix_lock = threading.Lock()  # release() comes from the callers' threads
        with returned_to_the_system():  # the memory loading frees goes back (see loading.returned_to_the_system)
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
        if dtype and dtype != "int8" and not isinstance(getattr(torch, dtype, None), torch.dtype):
            raise ConfigError(
                f"dtype {dtype!r} is not a torch dtype; use int8, bfloat16 or float32 (or leave it out)"
            )
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # our own progress bars tell the story; no "Loading weights" bar
        t0 = time.perf_counter()
        native = native_half_types()
        from halucheck.engines import int8

        why = int8.available()
        chosen = load_dtype(dtype, saved_dtype(path), native, int8_ok=why is None)
        if chosen == "int8" and why is not None:
            raise ConfigError(f"dtype int8: {why}")
        loaded = {"auto": "auto", "int8": torch.bfloat16}.get(chosen) or getattr(torch, chosen)
        kwargs = {"dtype": loaded, "attn_implementation": register_attention()}
        wide = torch.bfloat16 if "bfloat16" in native else torch.float32
        # int8: the linear layers' weights to int8, the rest bfloat16 (engines/int8.py), tensor by tensor from the
        # file where its names are the modules' (else loaded whole, then converted)
        built = int8.load(Path(path), wide, attn_implementation=kwargs["attn_implementation"]) \
            if chosen == "int8" else None
        if built is not None:
            self.hf_model = built[0]
        else:
            self.hf_model = AutoModelForCausalLM.from_pretrained(path, **kwargs).eval()
            if chosen == "int8":
                int8.quantize(self.hf_model, wide=wide)
        self.dtype = "int8" if chosen == "int8" else str(self.hf_model.dtype).removeprefix("torch.")
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
        batch: DecodeBatch | None = None
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
            group, future = group_of(item[0]), item[1]
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

    def _admit(self, batch: "DecodeBatch | None", taken: list[tuple[Request, Future, float]]) -> "DecodeBatch | None":
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
        new = parts[0] if len(parts) == 1 else merge_passes(parts)
        if batch is None:
            return DecodeBatch(rows, *new)
        batch.join(rows, *new)
        return batch

    def _row(self, request: Request, future: Future, since: float) -> "DecodeRow":
        input_ids = self._encode(request.messages)
        hit = self._cached_prefix(request, input_ids)
        return DecodeRow(
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

    def _finish(self, row: "DecodeRow") -> None:
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
