"""The transformers engine on the real 0.5B model: batched, schema-constrained, in order.

Slow (a minute or more on 2 cores); skipped when the model's weight packages are not installed.
"""

from __future__ import annotations

import math

import jsonschema
import pytest

from halucheck import weights

MODEL = "qwen2.5-coder-0.5b-instruct"

pytestmark = pytest.mark.slow

SCHEMA = {
    "type": "object",
    "properties": {
        "opinion": {"type": "string", "maxLength": 200},
        "factuality": {"type": "boolean"},
        "error_severity": {"type": "integer", "minimum": 0, "maximum": 5},
    },
    "required": ["opinion", "factuality", "error_severity"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def engine():
    if weights.status(MODEL) == "not installed":
        pytest.skip(f"{MODEL} weights are not installed (halucheck models pull {MODEL})")
    from halucheck.engines import create_engine

    eng = create_engine("transformers", model=MODEL, max_batch=8)
    yield eng
    eng.close()


def judge(claim: str) -> tuple[dict, ...]:
    return (
        {"role": "system", "content": "You check claims. Reply with JSON only."},
        {
            "role": "user",
            "content": f"Claim: {claim}\nIs the claim factually correct? Give a one-sentence opinion, "
            "factuality (true/false) and error_severity from 0 (none) to 5 (severe).",
        },
    )


def test_batch_with_schema_is_valid_and_in_order(engine):
    from halucheck.engines import Request, SamplingParams

    claims = [
        "Paris is the capital of France.",
        "The Moon is made of green cheese and orbits Mars every 3 days.",
        "Water boils at 100 degrees Celsius at sea level.",
    ]
    requests = [
        Request(messages=judge(c), schema=SCHEMA, sampling=SamplingParams(max_tokens=96)) for c in claims
    ]
    # Order must survive the engine's sort by length: an unconstrained echo request in the middle
    # of the same batch tells the rows apart.
    echo = Request(
        messages=({"role": "user", "content": "Reply with exactly the word: banana"},),
        sampling=SamplingParams(max_tokens=8),
        logprobs=True,
    )
    results = engine.generate([requests[0], echo, requests[1], requests[2]])
    assert len(results) == 4
    for res in (results[0], results[2], results[3]):
        assert res.ok, res.error
        assert res.attempts == 1, "constrained decoding should be valid on the first try"
        jsonschema.validate(res.parsed, SCHEMA)
        assert res.prompt_tokens > 0 and res.completion_tokens > 0 and res.latency_s > 0
    assert "banana" in results[1].text.lower()
    assert results[1].logprobs and all(lp <= 0 for _, lp in results[1].logprobs)
    assert "".join(t for t, _ in results[1].logprobs) == results[1].text
    # Different prompts, different token counts: each result is its own request's.
    prompt_lengths = [r.prompt_tokens for r in results]
    assert prompt_lengths[1] < min(prompt_lengths[0], prompt_lengths[2], prompt_lengths[3])
    assert prompt_lengths[2] > prompt_lengths[0]  # the longer claim has the longer prompt


def test_logprobs_are_those_of_the_constrained_distribution(engine):
    """The model wants "banana"; the schema allows only true/false. Greedy picks the likeliest allowed
    token, so after the mask its probability is at least 1/(allowed tokens), far above its raw one."""
    from halucheck.engines import Request, SamplingParams

    req = Request(
        messages=({"role": "user", "content": "Reply with exactly the word: banana"},),
        schema={"type": "boolean"},
        sampling=SamplingParams(max_tokens=4),
        logprobs=True,
    )
    [res] = engine.generate([req])
    assert res.ok and res.parsed in (True, False), res.error
    lps = [lp for _, lp in res.logprobs]
    # raw, "true"/"false" after this prompt are far below 1/16; constrained, the reply (a few allowed
    # splits of one of two words) keeps a sizeable share
    assert lps and sum(lps) > math.log(1 / 16), lps
    assert lps[-1] > -1e-3, lps  # the word's last piece is forced once its start is chosen


def test_max_tokens_caps_each_row(engine):
    from halucheck.engines import Request, SamplingParams

    count = ({"role": "user", "content": "Count from 1 to 100, comma separated."},)
    short = Request(messages=count, sampling=SamplingParams(max_tokens=5))
    longer = Request(messages=count, sampling=SamplingParams(max_tokens=9))
    a, b = engine.generate([short, longer])
    assert a.completion_tokens == 5 and b.completion_tokens == 9
    assert b.text.startswith(a.text)  # same greedy path, cut at each row's own cap
