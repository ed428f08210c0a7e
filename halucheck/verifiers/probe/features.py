"""One prompt pass, nothing decoded: the hidden states at the prompt's last token, from every layer, and the
logits of the reply's first token "Yes" / "No" (the direct verdict).

Only the embedded ``transformers`` engine gives hidden states; :func:`extractor_for` says so in one line for any
other engine. Passes are prefill only; a pass that starts like the previous one (the claims about one evidence
chunk) computes only what follows their common token prefix, from the previous pass's KV.

:class:`FeatureStore` keeps what a pass yields, keyed by content (model, :data:`~.prompt.RECIPE`, the prompt's
tokens; ``halucheck.store.features``): a killed extraction continues where it stopped, and a prompt seen before costs
nothing.
"""

from __future__ import annotations

import copy
import hashlib
import threading
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

# Fewer shared tokens than this are computed again rather than copied from the previous pass's KV.
MIN_REUSE = 32
YES, NO = "Yes", "No"


@dataclass(frozen=True)
class Features:
    """What one prompt pass yields. ``hidden``: (layers + 1, width) float16, the last prompt token's state after
    the embeddings (row 0) and after each layer; ``yes`` / ``no``: the first reply token's logits."""

    hidden: np.ndarray
    yes: float
    no: float
    tokens: int = 0
    cached: int = 0  # prompt tokens reused from the previous pass (0 when read from the store)

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


def default_store(model_id: str) -> Path:
    """``$HALUCHECK_HOME/features/<model>-<hash>.sqlite``: the store ``train`` and ``eval`` share for a model."""
    from halucheck.config import user_cache_dir

    return user_cache_dir() / "features" / f"{model_id.replace('@', '-')}.sqlite"


def unwrapped(engine: "Engine") -> "Engine":
    while hasattr(engine, "inner"):
        engine = engine.inner
    return engine


def extractor_for(engine: "Engine", store: FeatureStore | None = None, purpose: str = "-v probe") -> "Extractor":
    """The :class:`Extractor` on ``engine``'s model; ConfigError in one line when the engine cannot give hidden
    states (a server)."""
    inner = unwrapped(engine)
    if not hasattr(inner, "hf_model"):
        raise ConfigError(
            f"{purpose} reads the model's hidden states, which only the embedded transformers engine gives; the "
            f"{inner.name!r} engine does not. Use a profile with engine: transformers (e.g. -p cpu-1.5b), or "
            f"-v selfcheck on this one")
    return Extractor(inner, store)


class Extractor:
    """Prompt passes on an embedded engine's model (its weights and tokenizer, not its decode loop)."""

    def __init__(self, engine: "Engine", store: FeatureStore | None = None) -> None:
        self.engine = engine
        self.store = store
        self.model_id = model_identity(engine)
        tok = engine.tokenizer
        self.yes_id = tok.convert_tokens_to_ids(YES)
        self.no_id = tok.convert_tokens_to_ids(NO)
        self._last: tuple[list[int], object] | None = None  # the previous pass's tokens and KV
        self.passes = self.computed_tokens = self.reused_tokens = self.stored = 0
        self._lock = threading.Lock()

    def encode(self, messages: Sequence[dict]) -> list[int]:
        return self.engine._encode(messages)

    def features(self, prompts: Sequence[Sequence[dict]],
                 progress: Callable[[int, int], None] | None = None) -> list[Features]:
        """Features of each prompt (chat messages), in order; read from the store where it has them. Passes run
        in an order that puts prompts with the same start together; ``progress(done, total)`` after each."""
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
        computed: dict[str, Features] = {}
        for n in sorted(todo, key=lambda n: ids[n]):  # alike starts next to each other
            if keys[n] in computed:  # the same prompt twice in one call
                out[n] = computed[keys[n]]
            else:
                out[n] = computed[keys[n]] = self._pass(ids[n])
                if self.store is not None:
                    f = out[n]
                    self.store.put(keys[n], FeatureRow(f.hidden, f.yes, f.no, f.tokens))
                    self.stored += 1
            done += 1
            if progress:
                progress(done, len(ids))
        return out  # type: ignore[return-value]

    def _pass(self, ids: list[int]) -> Features:
        import torch

        model = self.engine.hf_model
        with self._lock, torch.inference_mode():
            torch.set_num_threads(self.engine.threads)
            past, start = None, 0
            if self._last is not None:
                prev_ids, prev_kv = self._last
                common = min(common_prefix(prev_ids, ids), len(ids) - 1)
                if common >= MIN_REUSE:
                    past = copy.deepcopy(prev_kv)
                    past.crop(common - past.get_seq_length())  # a negative count: the tokens to drop
                    start = common
            if past is None:
                from transformers import DynamicCache

                past = DynamicCache()
            out = model.model(input_ids=torch.tensor([ids[start:]]), cache=past, use_cache=True,
                              output_hidden_states=True)
            hidden = torch.stack([h[0, -1] for h in out.hidden_states]).float()
            logits = model.lm_head(out.last_hidden_state[:, -1]).float()[0]
            self._last = (ids, past)  # the cache object was filled in place
        self.passes += 1
        self.computed_tokens += len(ids) - start
        self.reused_tokens += start
        return Features(hidden.numpy().astype(np.float16), float(logits[self.yes_id]), float(logits[self.no_id]),
                        tokens=len(ids), cached=start)

    def forget(self) -> None:
        """Drop the previous pass's KV (its memory)."""
        self._last = None


__all__ = ["Extractor", "FeatureStore", "Features", "default_store", "extractor_for", "model_identity", "unwrapped"]
