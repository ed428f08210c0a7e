"""One prompt pass, nothing decoded: the hidden states at the prompt's last token, from every layer, and the
logits of the reply's first token "Yes" / "No" (the direct verdict).

Only the embedded ``transformers`` engine gives hidden states; :func:`extractor_for` says so in one line for any
other engine. Passes are prefill only and batched: prompts are sorted so that alike starts are neighbours, and
up to ``batch`` of them (at most :data:`BATCH_TOKENS` tokens to compute) run in one forward pass. Their common
token prefix (the instructions; the evidence chunk, when several claims share it) is computed once, from the
previous batch's KV where that starts the same way, and each prompt's own rest follows it, right-padded: a
token attends only to the tokens before it (causal attention), so padding after a prompt's last token changes
nothing it computes, and its features are read at its own last token.

:class:`FeatureStore` keeps what a pass yields, keyed by content (model, :data:`~.prompt.RECIPE`, the prompt's
tokens; ``halucheck.store.features``): a killed extraction continues where it stopped, and a prompt seen before costs
nothing.
"""

from __future__ import annotations

import copy
import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from halucheck.engines.prefix_cache import common_prefix
from halucheck.errors import ConfigError
from halucheck.store.features import FeatureRow, FeatureStore
from halucheck.verifiers.probe.prompt import RECIPE

if TYPE_CHECKING:
    from halucheck.engines.base import Engine

# Fewer shared tokens than this are computed again rather than copied from a kept pass's KV.
MIN_REUSE = 32
# The KV of recent one-prompt passes kept for a question that goes on from one of them (the severity of a claim
# found unsupported goes on from its deciding pass: :meth:`Extractor.reply_logits`); the oldest dropped first.
KEEP_BYTES = 512 * 2**20
# Prompts per forward pass on a GPU, and the most tokens a pass computes past their shared start (bounds its
# activations).
BATCH = 8
BATCH_TOKENS = 4096
YES, NO = "Yes", "No"


@dataclass(frozen=True)
class Features:
    """What one prompt pass yields. ``hidden``: (layers + 1, width) float16, the last prompt token's state after
    the embeddings (row 0) and after each layer; ``yes`` / ``no``: the first reply token's logits."""

    hidden: np.ndarray
    yes: float
    no: float
    tokens: int = 0
    cached: int = 0  # prompt tokens reused from a kept pass (0 when read from the store)
    error: str | None = None  # the pass decided nothing (a server's reply failed: verifiers/probe/remote.py)

    @property
    def margin(self) -> float:
        """log P(Yes) - log P(No)."""
        return float(self.yes - self.no)

    @property
    def p_supported(self) -> float:
        """P(Yes) / (P(Yes) + P(No)): the direct verdict."""
        return float(1.0 / (1.0 + np.exp(-self.margin)))


def model_identity(engine: "Engine") -> str:
    """``name@sha256-prefix`` of the weights an engine runs (the shipped models' GGUF checksum; for a local folder, a
    hash of its config and file sizes): a head fitted on one model's states is refused by another."""
    from halucheck import weights

    name = engine.model
    try:
        return f"{name}@{weights.spec_for(name).sha256[:12]}"
    except Exception:  # a local folder: what it is made of
        path = Path(getattr(engine, "path", name))
        digest = hashlib.sha256()
        for f in sorted(path.glob("*")) if path.is_dir() else []:
            digest.update(f.name.encode())
            digest.update(str(f.stat().st_size).encode())
            if f.name == "config.json":
                digest.update(f.read_bytes())
        return f"{path.name}@{digest.hexdigest()[:12]}"


def default_store(model_id: str, precision: str) -> Path:
    """``$HALUCHECK_HOME/features/<model>-<hash>-<precision>.sqlite``: the store ``train`` and ``eval`` share for a
    model run in one precision (``int8``, ``bfloat16``, ``float32``: the same prompt's hidden states differ in their
    last bits between them, so one precision never reads another's)."""
    from halucheck.config import user_cache_dir

    return user_cache_dir() / "features" / f"{model_id.replace('@', '-')}-{precision}.sqlite"


def unwrapped(engine: "Engine") -> "Engine":
    while hasattr(engine, "inner"):
        engine = engine.inner
    return engine


def extractor_for(engine: "Engine", store: FeatureStore | None = None, purpose: str = "-v probe") -> "Extractor":
    """The :class:`Extractor` on ``engine``'s model; ConfigError in one line when the engine cannot give hidden
    states (a server)."""
    inner = unwrapped(engine)
    if not hasattr(inner, "hf_model"):
        raise no_hidden_states(purpose, inner.name)
    return Extractor(inner, store)


def no_hidden_states(purpose: str, engine: str) -> ConfigError:
    """The one-line error for a verifier that reads hidden states on an engine that gives none."""
    return ConfigError(
        f"{purpose} reads the model's hidden states, which only the embedded transformers engine gives; the "
        f"{engine!r} engine does not. Use a profile with engine: transformers (e.g. -p cpu-1.5b), or "
        f"-v direct (read from the server's token log-probabilities) or -v selfcheck on this one")


class Extractor:
    """Prompt passes on an embedded engine's model (its weights and tokenizer, not its decode loop)."""

    serves_replies = False  # (:class:`~halucheck.verifiers.probe.remote.RemotePasses`: a server's replies)

    def __init__(self, engine: "Engine", store: FeatureStore | None = None, batch: int | None = None) -> None:
        """``batch``: prompts per forward pass; default :data:`BATCH` on a GPU and 1 on a CPU, where a 400-token
        prompt already fills the cores and a batch's right padding is work thrown away (18 prompts on 2 cores:
        99.1 s batched by 8 against 87.3 s one at a time, ``scripts/bench_extraction.py``)."""
        self.engine = engine
        if batch is None:
            device = getattr(getattr(engine, "hf_model", None), "device", None)
            batch = BATCH if getattr(device, "type", "cpu") != "cpu" else 1
        self.batch = max(1, int(batch))
        self.store = store
        self.precision = str(getattr(engine, "dtype", "float32"))  # what the default store is kept per
        self.model_id = model_identity(engine)
        tok = engine.tokenizer
        self.yes_id = tok.convert_tokens_to_ids(YES)
        self.no_id = tok.convert_tokens_to_ids(NO)
        # the KV of recent passes' prompts (a batch's: its shared start), newest last: tokens -> (KV, bytes)
        self._kept: OrderedDict[tuple[int, ...], tuple[object, int]] = OrderedDict()
        self._kept_bytes = 0
        self.passes = self.computed_tokens = self.reused_tokens = self.stored = 0
        self._lock = threading.Lock()

    def encode(self, messages: Sequence[dict]) -> list[int]:
        return self.engine._encode(messages)

    def features(self, prompts: Sequence[Sequence[dict]],
                 progress: Callable[[int, int], None] | None = None) -> list[Features]:
        """Features of each prompt (chat messages), in order; read from the store where it has them. Passes run
        in an order that puts prompts with the same start together; ``progress(done, total)`` after each batch."""
        ids = [self.encode(m) for m in prompts]
        keys = [FeatureStore.key(f"{self.model_id}|{RECIPE}", i) for i in ids]
        out: list[Features | None] = [None] * len(ids)
        known = {k: Features(r.hidden, r.yes, r.no, r.tokens) for k, r in self.store.get(keys).items()} \
            if self.store is not None else {}
        todo = []
        for n, k in enumerate(keys):
            if k in known:
                out[n] = known[k]
            else:
                todo.append(n)
        done = len(ids) - len(todo)
        if progress:
            progress(done, len(ids))
        first: dict[str, int] = {}  # the same prompt twice in one call is computed once
        for n in sorted(todo, key=lambda n: ids[n]):  # alike starts next to each other
            first.setdefault(keys[n], n)
        for batch in self._batches([ids[n] for n in first.values()], list(first.values())):
            for n, f in zip(batch, self._passes([ids[n] for n in batch])):
                out[n] = f
                if self.store is not None:
                    self.store.put(keys[n], FeatureRow(f.hidden, f.yes, f.no, f.tokens))
                    self.stored += 1
            done += len(batch)
            if progress:
                progress(done, len(ids))
        repeats = [n for n, k in enumerate(keys) if out[n] is None]
        for n in repeats:
            out[n] = out[first[keys[n]]]
        if progress and repeats:
            progress(len(ids), len(ids))
        return out  # type: ignore[return-value]

    def _batches(self, ids: list[list[int]], order: list[int]) -> list[list[int]]:
        """``order`` (prompt numbers, sorted by their tokens ``ids``) cut into batches of at most ``self.batch``
        neighbours that share one start (the first two's common prefix) and whose own parts past it come to at most
        :data:`BATCH_TOKENS` tokens."""
        out: list[list[int]] = []
        current: list[int] = []
        start: list[int] = []
        longest = 0
        for n, t in zip(order, ids):
            if current:
                shared = min(len(start), common_prefix(start, t))
                wide = max(longest, len(t))
                keeps = len(current) == 1 or shared == len(start)  # a batch's shared start never shrinks: the
                # claims about one chunk go together, and a prompt on another chunk starts a batch of its own
                if keeps and len(current) < self.batch and (len(current) + 1) * (wide - shared) <= BATCH_TOKENS:
                    current.append(n)
                    start, longest = start[:shared], wide
                    continue
                out.append(current)
            current, start, longest = [n], list(t), len(t)
        if current:
            out.append(current)
        return out

    def _passes(self, batch: list[list[int]]) -> list[Features]:
        """One forward pass over ``batch``: their shared start once (from a kept pass's KV as far as it goes), then
        each prompt's own rest, right-padded. One prompt alone: all of it but its last token is its shared start, so
        the next pass that starts like it reuses it all, and its KV is kept (:meth:`_keep`)."""
        import torch

        model = self.engine.hf_model
        shared = min(min(common_prefix(batch[0], t) for t in batch), min(len(t) for t in batch) - 1)
        head = batch[0][:shared]
        with self._lock, torch.inference_mode():
            torch.set_num_threads(self.engine.threads)
            past, start = self._reusable(head if len(batch) > 1 else batch[0][:-1])
            if len(batch) == 1:
                out = model.model(input_ids=torch.tensor([batch[0][start:]]), cache=past, use_cache=True,
                                  output_hidden_states=True)
                states = [torch.stack([h[0, -1] for h in out.hidden_states])]
                lasts = out.last_hidden_state[:, -1]
                self._keep(batch[0], past)  # the cache object was filled in place
            else:
                if shared > start:  # the rest of the shared start, once
                    model.model(input_ids=torch.tensor([head[start:]]), cache=past, use_cache=True)
                if shared:
                    self._keep(head, copy.deepcopy(past))
                if shared:
                    past.batch_repeat_interleave(len(batch))
                else:
                    past = None
                rests = [t[shared:] for t in batch]
                width = max(len(r) for r in rests)
                pad = self.engine.pad_id if getattr(self.engine, "pad_id", None) is not None else 0
                ids = torch.tensor([r + [pad] * (width - len(r)) for r in rests])
                out = model.model(input_ids=ids, cache=past, use_cache=past is not None, output_hidden_states=True)
                states = [torch.stack([h[i, len(r) - 1] for h in out.hidden_states]) for i, r in enumerate(rests)]
                lasts = torch.stack([out.last_hidden_state[i, len(r) - 1] for i, r in enumerate(rests)])
            hidden = torch.stack(states).float()  # (prompts, layers + 1, width)
            logits = model.lm_head(lasts).float()
        computed = sum(len(t) for t in batch) - start - (len(batch) - 1) * shared
        self.passes += len(batch)
        self.computed_tokens += computed
        self.reused_tokens += sum(len(t) for t in batch) - computed
        reused = [start] + [shared] * (len(batch) - 1)  # the first computes the shared start, the others reuse it
        return [Features(h.numpy().astype(np.float16), float(lg[self.yes_id]), float(lg[self.no_id]),
                         tokens=len(t), cached=c) for h, lg, t, c in zip(hidden, logits, batch, reused)]

    def replies_logits(self, conversations: Sequence[Sequence[dict]],
                       answers: Sequence[str]) -> list[tuple[np.ndarray, int, int]]:
        """:meth:`reply_logits` of each conversation, one after another (each may reuse the kept KV)."""
        return [self.reply_logits(messages, answers) for messages in conversations]

    def reply_logits(self, messages: Sequence[dict], answers: Sequence[str]) -> tuple[np.ndarray, int, int]:
        """One pass over ``messages`` (nothing decoded, nothing stored): the logits of ``answers`` (each one token) as
        the reply's first token, the prompt's length in tokens and how many of them were reused. A conversation that
        goes on from an earlier pass's prompt (its question, the model's answer, a next question) reuses that pass's
        KV while it is kept (:data:`KEEP_BYTES`), so only what follows it is computed."""
        import torch

        ids = self.encode(messages)
        with self._lock, torch.inference_mode():
            torch.set_num_threads(self.engine.threads)
            past, start = self._reusable(ids[:-1])
            out = self.engine.hf_model.model(input_ids=torch.tensor([ids[start:]]), cache=past, use_cache=True)
            logits = self.engine.hf_model.lm_head(out.last_hidden_state[:, -1]).float()[0]
        self.passes += 1
        self.computed_tokens += len(ids) - start
        self.reused_tokens += start
        return logits[self.engine.tokenizer.convert_tokens_to_ids(list(answers))].numpy(), len(ids), start

    def _reusable(self, ids: Sequence[int]):
        """A fresh copy of the kept KV that shares the longest token prefix with ``ids`` (the newest on a tie), cut to
        that prefix, and its length; an empty cache and 0 when none shares :data:`MIN_REUSE`."""
        from transformers import DynamicCache

        best, kv = 0, None
        for tokens, (cache, _) in reversed(self._kept.items()):
            n = common_prefix(tokens, ids)
            if n > best:
                best, kv = n, cache
        if kv is None or best < MIN_REUSE:
            return DynamicCache(), 0
        past = copy.deepcopy(kv)
        past.crop(best - past.get_seq_length())  # a negative count: the tokens to drop
        return past, best

    def _keep(self, ids: Sequence[int], kv) -> None:
        """Keep ``kv`` (the whole prompt ``ids``'s) for a later question that goes on from it, within
        :data:`KEEP_BYTES`, dropping the oldest first. The object is never changed again: reuse copies it."""
        size = sum(t.numel() * t.element_size() for layer in kv.layers for t in (layer.keys, layer.values)
                   if t is not None)
        key = tuple(ids)
        if key in self._kept:
            self._kept_bytes -= self._kept.pop(key)[1]
        self._kept[key] = (kv, size)
        self._kept_bytes += size
        while self._kept_bytes > KEEP_BYTES and self._kept:
            self._kept_bytes -= self._kept.popitem(last=False)[1][1]

    def forget(self) -> None:
        """Drop the KV kept of earlier passes (their memory): what follows is computed as if it came first."""
        self._kept.clear()
        self._kept_bytes = 0


__all__ = ["Extractor", "FeatureStore", "Features", "default_store", "extractor_for", "model_identity",
           "no_hidden_states", "unwrapped"]
