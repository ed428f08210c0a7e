"""``no_repeat_ngram_size`` for vLLM, which has no such sampling parameter: a logits processor that vLLM
loads by name and applies to the requests that ask for it.

    vllm serve MODEL --logits-processors halucheck.engines.vllm_ngram:NoRepeatNGram   (scripts/serve_vllm.sh)
    vllm.LLM(..., logits_processors=[NoRepeatNGram])                                   (vllm-local engine)

A request asks through its extra arguments: ``vllm_xargs: {"no_repeat_ngram_size": 6}`` in a server
request, ``SamplingParams(extra_args={"no_repeat_ngram_size": 6})`` in process; with
``"no_repeat_text": TEXT`` the ban covers that text and the reply instead of the whole prompt
(``Request.avoid``), and ``"no_repeat_quote": TEXT`` names text the reply may still quote
(``Request.quote``). vLLM applies custom
processors after the structured-output mask and computes its default (raw) logprobs before them, so
the ban sees only what the schema allows and the reported logprobs are unchanged by it, as in the
transformers engine. Imported only by vLLM: this module needs vllm installed.
"""

from __future__ import annotations

from vllm import SamplingParams
from vllm.v1.sample.logits_processor import AdapterLogitsProcessor

from halucheck.engines.ngrams import NGramBan, free_text

XARG = "no_repeat_ngram_size"
TEXT_XARG = "no_repeat_text"
QUOTE_XARG = "no_repeat_quote"


class _Request:
    """One request's ban; vLLM passes the prompt and the (growing) list of output tokens."""

    def __init__(self, n: int, avoid: list[int] | None = None, quote: list[int] | None = None) -> None:
        self.n = n
        self.avoid = avoid
        self.quote = quote or []
        self.ban: NGramBan | None = None
        self.seen = 0

    def __call__(self, prompt_ids: list[int], output_ids: list[int], logits):
        if self.ban is None:
            self.ban = NGramBan(self.n, prompt_ids if self.avoid is None else self.avoid, self.quote)
        self.ban.extend(output_ids[self.seen:])
        self.seen = len(output_ids)
        if free_text(logits):
            self.ban.apply(logits)
        return logits


class NoRepeatNGram(AdapterLogitsProcessor):
    """vLLM logits processor: never continue an n-gram of the prompt (or of the request's
    ``no_repeat_text``) or of the reply, inside free text."""

    def __init__(self, vllm_config, device, is_pin_memory) -> None:
        super().__init__(vllm_config, device, is_pin_memory)
        self._config = vllm_config
        self._tokenizer = None

    def _encode(self, text: str) -> list[int]:
        if self._tokenizer is None:
            from vllm.tokenizers import cached_tokenizer_from_config

            self._tokenizer = cached_tokenizer_from_config(self._config.model_config)
        return list(self._tokenizer.encode(text, add_special_tokens=False)) if text else []

    @classmethod
    def validate_params(cls, params: SamplingParams) -> None:
        n = (params.extra_args or {}).get(XARG)
        if n is not None and (not isinstance(n, int) or n < 0):
            raise ValueError(f"{XARG} must be a non-negative integer, got {n!r}")

    def is_argmax_invariant(self) -> bool:
        return False  # it changes which token greedy decoding picks

    def new_req_logits_processor(self, params: SamplingParams):
        args = params.extra_args or {}
        n = args.get(XARG)
        if not n:
            return None
        text, quote = args.get(TEXT_XARG), args.get(QUOTE_XARG)
        return _Request(int(n), None if text is None else self._encode(str(text)),
                        self._encode(str(quote)) if quote else None)
