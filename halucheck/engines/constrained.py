"""Constrained decoding in the embedded engine, row by row: the Outlines index of each JSON schema (built
on the tokenizer's vocabulary, kept in memory and on disk), and :class:`DecodeRow`, one request being decoded:
its guide's token mask, its repetition controls (:class:`_Penalties`), its log-probabilities and the
choice of its next token (greedy or seeded sampling)."""

from __future__ import annotations

import functools
import json
from concurrent.futures import Future
from typing import Any, Sequence

from halucheck.engines import ngrams
from halucheck.engines.base import Request
from halucheck.engines.prefix_cache import Hit
from halucheck.errors import EngineError


class SchemaIndexes:
    """The schema side of :class:`~halucheck.engines.transformers.TransformersEngine`: an outlines_core
    Index per JSON schema. Uses the engine's ``tokenizer``, ``eos_ids``, ``whitespace_pattern`` and
    ``automata_cache``, and keeps what it built in ``_indexes``, ``_vocabulary`` and ``_tok_key``."""

    def _index_for(self, schema: dict) -> Any:
        """The outlines_core Index for ``schema``: kept in memory, and on disk (``automata_cache``) keyed by
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
            self._indexes[key] = self.automata_cache.get(regex, self._tokenizer_key(), self._build_index)
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


@functools.cache
def _bit_shifts():
    import torch

    return torch.arange(32, dtype=torch.int32)


class DecodeRow:
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
