"""Repetition controls: what each engine is asked to apply, and how the transformers engine applies them
(only inside free text, never to a verdict's tokens, log-probabilities taken before them)."""

from __future__ import annotations

import math

import pytest
import torch

from halucheck.engines import Request, SamplingParams
from halucheck.engines import ngrams
from halucheck.engines import transformers as tf
from halucheck.engines.openai_server import OpenAIServerEngine

MSG = ({"role": "user", "content": "x"},)


def test_penalties_follow_vllm_definitions():
    s = SamplingParams(repetition_penalty=2.0, frequency_penalty=0.5, presence_penalty=0.25)
    p = tf._Penalties(s, prompt=[1])  # token 1 in the prompt, tokens 2, 2 in the reply
    p.add(2)
    p.add(2)
    row = torch.tensor([1.0, 4.0, -2.0, 3.0])
    p.apply(row, None)
    # token 1: prompt only -> repetition penalty only (positive logit divided)
    # token 2: reply twice -> repetition (negative logit multiplied) then 2 * 0.5 + 0.25
    assert row.tolist() == pytest.approx([1.0, 2.0, -4.0 - 1.25, 3.0])


def test_no_repeat_ngram_bans_the_continuation_of_a_seen_ngram():
    p = tf._Penalties(SamplingParams(no_repeat_ngram_size=3), prompt=[5, 6, 7, 5])
    p.add(6)  # history ... 5, 6: the 3-gram (5, 6, 7) is in the prompt, so 7 is banned next
    row = torch.zeros(10)
    p.apply(row, None)
    assert row[7] == float("-inf") and torch.isfinite(row[[0, 5, 6, 8]]).all()


def test_no_repeat_ngram_never_bans_every_allowed_token():
    p = tf._Penalties(SamplingParams(no_repeat_ngram_size=2), prompt=[3, 4])
    p.add(3)  # (3, 4) seen: 4 would be banned, but the schema allows only 4
    allowed = torch.zeros(6, dtype=torch.bool)
    allowed[4] = True
    row = torch.full((6,), float("-inf"))
    row[4] = 1.0
    p.apply(row, allowed)
    assert row[4] == 1.0


def _guides(regex: str | None, sampling: SamplingParams, prompt: list[int]):
    from outlines_core import Index, Vocabulary

    vocab = Vocabulary(9, {"x": [1], "y": [2], "t": [3], "f": [4]})
    index = Index(regex, vocab) if regex else None
    return tf._RowGuides(indexes=[index], max_tokens=[10], eos_ids=[9], prompt_width=len(prompt),
                         want_logprobs=[True], sampling=[sampling], prompts=[prompt])


def test_penalties_apply_in_free_text_only_and_logprobs_come_before_them(monkeypatch):
    monkeypatch.setattr(ngrams, "FREE_TEXT_MIN_TOKENS", 3)
    s = SamplingParams(presence_penalty=5.0)
    # free text: x or y, then a two-way verdict t / f; the reply so far said "x" and "t"... here: "x"
    g = _guides(r"[xy]{0,4}(t|f)", s, prompt=[0])
    scores = torch.zeros(1, 10)
    g(torch.tensor([[0]]), scores.clone())  # step 0: allowed x, y, t, f (4 >= 3: free text)
    out = g(torch.tensor([[0, 1]]), torch.zeros(1, 10))  # the reply said "x": x is penalised
    assert out[0, 1] == pytest.approx(-5.0) and out[0, 2] == 0.0
    # logprobs recorded for this step are those before the penalty: uniform over the 4 allowed tokens
    assert g._last_logprobs[0, 1].item() == pytest.approx(math.log(1 / 4))

    # a verdict position (2 tokens allowed) is never penalised, even for a token already said
    g = _guides(r"(t|f)", s, prompt=[0])
    g.penalties[0].add(3)
    out = g(torch.tensor([[0]]), torch.zeros(1, 10))
    assert out[0, 3] == 0.0 and out[0, 4] == 0.0 and out[0, 1] == float("-inf")


def test_server_request_carries_the_penalties(monkeypatch):
    eng = OpenAIServerEngine(model="m", check=False)
    body = eng.body(Request(MSG, sampling=SamplingParams(repetition_penalty=1.1, frequency_penalty=0.3,
                                                          presence_penalty=0.2, no_repeat_ngram_size=6)))
    assert (body["repetition_penalty"], body["frequency_penalty"], body["presence_penalty"]) == (1.1, 0.3, 0.2)
    assert body["vllm_xargs"] == {"no_repeat_ngram_size": 6}  # for halucheck's vLLM logits processor
    plain = eng.body(Request(MSG))
    assert not {"repetition_penalty", "frequency_penalty", "presence_penalty", "vllm_xargs"} & set(plain)
    eng.close()


def test_server_reply_cut_at_max_tokens_is_marked_capped():
    from halucheck.engines.openai_server import _parse_completion

    def completion(reason):
        return {"choices": [{"message": {"content": "{"}, "finish_reason": reason}], "usage": {}}

    assert _parse_completion(completion("length")).capped
    assert not _parse_completion(completion("stop")).capped
