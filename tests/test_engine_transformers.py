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


def test_weights_load_in_a_dtype_this_cpu_multiplies_natively(engine):
    import torch

    from halucheck.engines import int8
    from halucheck.engines.loading import native_half_types

    if "bfloat16" in native_half_types():
        assert engine.dtype == "bfloat16" and engine.hf_model.lm_head.weight.dtype == torch.bfloat16
    else:  # no native bfloat16 matmul (an AVX2-only CPU): int8 where torch runs its int8 kernels, else float32
        assert engine.dtype == ("int8" if int8.available() is None else "float32")
        if engine.dtype == "float32":
            assert engine.hf_model.lm_head.weight.dtype == torch.float32
        else:
            assert engine.hf_model.lm_head.qweight.dtype == torch.int8


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


def test_max_tokens_caps_each_row_and_a_finished_row_leaves_the_batch(engine, monkeypatch):
    from halucheck.engines import Request, SamplingParams

    rows: list[int] = []
    forward = engine._forward
    monkeypatch.setattr(engine, "_forward", lambda ids, *a: rows.append(ids.shape[0]) or forward(ids, *a))
    count = ({"role": "user", "content": "Count from 1 to 100, comma separated."},)
    short = Request(messages=count, sampling=SamplingParams(max_tokens=5))
    longer = Request(messages=count, sampling=SamplingParams(max_tokens=9))
    monkeypatch.setattr(engine, "stats", type(engine.stats)())
    a, b = engine.generate([short, longer])
    assert a.completion_tokens == 5 and b.completion_tokens == 9 and a.capped and b.capped
    assert b.text.startswith(a.text)  # same greedy path, cut at each row's own cap
    # the prompt pass and 4 steps with both rows; the short row is done after its 5th token
    assert rows == [2] * 5 + [1] * 4
    # the loop's own account: one admission of two requests; 9 steps choosing 5 + 9 tokens (the last step
    # chooses the long row's 9th token and needs no forward pass)
    st = engine.stats
    assert (st.admissions, st.admitted, st.steps, st.step_rows) == (1, 2, 9, 14)
    assert st.to_dict()["rows_per_step"] == round(14 / 9, 2)


# -- prefix KV reuse --------------------------------------------------------------------------------

_SCHEMAS: dict[str, dict] = {}  # a debate request's reply schema, by its last message (see _schemas)


def _debate_requests(max_tokens: int, rounds: int = 1):
    """The debate's own requests for three claims with 1, 3 and 5 passages, past its first agent (which is
    selfcheck's request, with a prompt of its own): each claim's Trust stance first, then its Skeptic stance
    and its Leader in both orders (nine requests, three groups, all sharing the claim's system prompt,
    evidence and text); with ``rounds=2`` a second state after the verdict moved (nine more, each going on
    like its role's earlier call for a while)."""
    from dataclasses import replace

    from halucheck.engines import SamplingParams
    from halucheck.engines.fake import FakeEngine
    from halucheck.records import Claim, Evidence, Quote, Turn
    from halucheck.verifiers.debate.agents import AgentCall, Agents

    claims = [
        ("The Eiffel Tower is in Berlin.",
         ["The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France."]),
        ("Water boils at 90 C at sea level.",
         ["At sea level water boils at 100 degrees Celsius.",
          "The boiling point falls with altitude; at 2,000 m it is about 93 C.",
          "Salt raises the boiling point slightly."]),
        ("The Nile is the longest river.",
         ["The Nile is a major north-flowing river in northeastern Africa, about 6,650 km long.",
          "The Amazon is the largest river by discharge volume.",
          "Some measurements suggest the Amazon is longer than the Nile.",
          "The Nile flows into the Mediterranean Sea.", "Its basin covers eleven countries."]),
    ]
    agents = Agents(engine=FakeEngine())
    first, later = [], []
    for i, (text, passages) in enumerate(claims):
        claim, evidence = Claim(text), tuple(Evidence(p) for p in passages)
        sides = (Turn("S1", "trust", "Passage 1 backs it.", True, 0, finding="supported",
                      quotes=(Quote(passages[0], True, 1),)),
                 Turn("S1", "skeptic", "Passage 1 says otherwise.", False, 3, finding="contradicted",
                      quotes=(Quote(passages[-1], True, len(passages)),)))
        first.append(agents.request(claim, evidence, AgentCall("trust", "S1", argues=True), group=f"claim-{i}"))
        later += [agents.request(claim, evidence, call, group=f"claim-{i}") for call in (
            AgentCall("skeptic", "S1", argues=False),
            AgentCall("leader", "S1", sides, argues=True),
            AgentCall("leader", "S1", sides, argues=True, swapped=True))]
    if rounds == 2:
        for i, (text, passages) in enumerate(claims):
            claim, evidence = Claim(text), tuple(Evidence(p) for p in passages)
            sides = (Turn("S2", "trust", "Passage 1 backs it.", True, 0, finding="supported",
                          quotes=(Quote(passages[0], True, 1),)),
                     Turn("S2", "skeptic", "The last passage says otherwise, read again.", False, 2,
                          finding="contradicted", quotes=(Quote(passages[-1], True, len(passages)),)))
            later += [agents.request(claim, evidence, call, group=f"claim-{i}") for call in (
                AgentCall("skeptic", "S2", argues=False),  # the same stance task: its role text again
                AgentCall("leader", "S2", sides, argues=True),  # the same stances until the Skeptic's argument
                AgentCall("leader", "S2", sides, argues=True, swapped=True))]
    for r in first + later:
        _SCHEMAS[r.messages[-1]["content"]] = r.schema
    # free text, greedy, short: what is compared is the tokens, and prefill is what reuse saves
    plain = lambda r: replace(r, schema=None, sampling=SamplingParams(max_tokens=max_tokens))  # noqa: E731
    return [plain(r) for r in first], [plain(r) for r in later]


def test_debate_calls_share_a_token_prefix_after_the_chat_template():
    """The system prompt, evidence and claim come first in every call about a claim, so after the real chat
    template and tokenizer each call's token ids start with those of that shared text."""
    if weights.status(MODEL) == "not installed":
        pytest.skip(f"{MODEL} weights are not installed (halucheck models pull {MODEL})")
    import os.path

    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(weights.resolve(MODEL))
    first, later = _debate_requests(8)
    for group in range(3):
        calls = [first[group], *later[3 * group : 3 * group + 3]]
        texts = [tok.apply_chat_template(list(r.messages), tokenize=False, add_generation_prompt=True) for r in calls]
        claim_line = texts[0].index("[text]: ")
        shared_text = texts[0][: texts[0].index("\n", claim_line)]  # up to the end of the claim line
        assert all(t.startswith(shared_text) for t in texts)
        ids = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
        shared = tok(shared_text, add_special_tokens=False)["input_ids"]
        common = len(os.path.commonprefix(ids))
        assert common >= len(shared) - 1, (common, len(shared))  # at most the boundary token merges
        assert all(i[: len(shared) - 1] == shared[:-1] for i in ids)


@pytest.fixture(scope="module")
def engine32():
    """float32: greedy replies are then the same whichever way the prompt's KV was computed (in bfloat16,
    rounding differs with the shape of the computation: batch, padding, cached or not)."""
    if weights.status(MODEL) == "not installed":
        pytest.skip(f"{MODEL} weights are not installed (halucheck models pull {MODEL})")
    from halucheck.engines import create_engine

    eng = create_engine("transformers", model=MODEL, max_batch=16, dtype="float32")
    yield eng
    eng.close()


def test_prefix_reuse_gives_the_same_greedy_tokens(engine32):
    """Nine requests of three claims (different evidence lengths) in one batch: each row's cached prefix
    is padded into one batch cache; the generated token ids equal those of the same batch computed in full."""
    engine = engine32
    first, later = _debate_requests(24)
    captured: list = []
    finish = engine._finish

    def recording(row):
        captured.append(row.tokens)
        finish(row)

    engine._finish = recording
    cache = engine.prefix_cache
    rows: list[int] = []
    forward = engine._forward
    engine._forward = lambda ids, *a: rows.append(ids.shape[0]) or forward(ids, *a)
    try:
        engine.generate(first)  # stores each claim's prompt
        assert len(cache) == 3
        captured.clear()
        rows.clear()
        before = engine.prefilled_tokens
        with_reuse = engine.generate(later)
        prefilled_with, tokens_with = engine.prefilled_tokens - before, sorted(captured)

        engine.prefix_cache = None
        captured.clear()
        before = engine.prefilled_tokens
        without = engine.generate(later)
        prefilled_without, tokens_without = engine.prefilled_tokens - before, sorted(captured)
    finally:
        del engine._finish, engine._forward
        engine.prefix_cache = cache

    assert rows[:3] == [8, 1, 9] and len(tokens_with) == 9  # prompt passes of 8 and 1, then nine rows decoding
    assert tokens_with == tokens_without
    assert [r.text for r in with_reuse] == [r.text for r in without]
    # every later call reused its claim's shared start; the two others' are kept apart
    assert all(r.cached_tokens > 100 for r in with_reuse) and all(r.cached_tokens == 0 for r in without)
    assert len({r.cached_tokens for r in with_reuse}) == 3
    assert prefilled_with == sum(r.prompt_tokens - r.cached_tokens for r in with_reuse)
    # (about 0.54 with the debate's stances and Leaders: a Leader's two stances are its own text)
    assert prefilled_with < 0.6 * prefilled_without
    engine.release(["claim-0", "claim-1"])
    assert list(cache.entries) == ["claim-2"]


def test_calls_of_one_stage_reuse_its_system_prompt_across_claims(engine32):
    """Requests without a prefix group (a stage's calls about different claims: the same system prompt and
    instructions) reuse the KV of what they share; the greedy replies equal those computed in full (float32)."""
    from halucheck.engines.base import Request, SamplingParams
    from halucheck.engines.prefix_cache import group_of

    engine = engine32
    system = {"role": "system", "content": "You check statements. " * 12 + "Answer in one short sentence."}
    requests = [Request(messages=(system, {"role": "user", "content": f"Is it true that {c}?"}),
                        sampling=SamplingParams(max_tokens=8))
                for c in ("water boils at 100 C at sea level", "the moon is made of cheese", "Paris is in France")]
    cache = engine.prefix_cache
    engine.prefix_cache = type(cache)(cache.max_bytes)  # this test's own, empty
    try:
        with_reuse = engine.generate(requests)
        stage = engine.prefix_cache.entries[group_of(requests[0])]
        engine.prefix_cache = None
        without = engine.generate(requests)
    finally:
        engine.prefix_cache = cache
    assert [r.text for r in with_reuse] == [r.text for r in without]
    # the first call stored its prompt; the two later ones (sent together: they waited for it) reused the shared start
    assert with_reuse[0].cached_tokens == 0 and all(r.cached_tokens > 60 for r in with_reuse[1:])
    assert len(stage.tokens) == with_reuse[1].cached_tokens and stage.extensions == []
    assert all(r.cached_tokens == 0 for r in without)


def test_calls_of_one_group_sent_together_wait_for_the_first_to_store_its_prefix(engine32):
    """Nine requests of three groups sent at once with nothing cached (collab-cal's agents): the first of
    each group is admitted, the others wait a step and reuse its prompt start; the greedy tokens equal
    those computed in full. A request is held back once only: when the first's prompt is not kept (a
    cache too small), the others run without it rather than wait again."""
    from halucheck.engines.prefix_cache import PrefixCache

    engine = engine32
    _, later = _debate_requests(24)
    cache = engine.prefix_cache
    engine.release([f"claim-{i}" for i in range(3)])
    stats = engine.stats
    try:
        engine.stats = type(stats)()
        before = engine.prefilled_tokens
        with_reuse = engine.generate(later)
        prefilled_with, deferred = engine.prefilled_tokens - before, engine.stats.deferred
        engine.prefix_cache = None
        before = engine.prefilled_tokens
        without = engine.generate(later)
        prefilled_without = engine.prefilled_tokens - before
        engine.prefix_cache, engine.stats = PrefixCache(1), type(stats)()  # keeps nothing
        too_small = engine.generate(later)
        deferred_once = engine.stats.deferred
    finally:
        engine.prefix_cache, engine.stats = cache, stats
    assert deferred == 6 and sorted(r.cached_tokens > 100 for r in with_reuse) == [False] * 3 + [True] * 6
    # 0.69 measured: three of the nine computed in full, and a Leader's two stances are its own text
    assert prefilled_with < 0.75 * prefilled_without
    assert [r.text for r in with_reuse] == [r.text for r in without]
    assert deferred_once == 6 and all(r.ok and r.cached_tokens == 0 for r in too_small)
    assert [r.text for r in too_small] == [r.text for r in without]
    assert not engine._deferred
    engine.release([f"claim-{i}" for i in range(3)])


def test_a_role_asked_again_reuses_its_earlier_call_with_the_same_greedy_tokens(engine32):
    """Past the shared start: each role's second-round call goes on like its first-round call (role text,
    the first opinion) and reuses that part's KV too; the token ids equal those computed in full."""
    engine = engine32
    first, later = _debate_requests(12, rounds=2)
    cache = engine.prefix_cache
    engine.release([f"claim-{i}" for i in range(3)])
    captured: list = []
    finish = engine._finish

    def recording(row):
        captured.append((row.request.messages[-1]["content"], row.tokens))
        finish(row)

    engine._finish = recording
    try:
        engine.generate(first)
        engine.generate(later[:9])  # the shared starts, and each role's own part as an extension
        starts = {g: len(e.tokens) for g, e in cache.entries.items()}
        assert all(len(e.extensions) == 4 for e in cache.entries.values())  # the first call's, and 3 roles'
        hits_before = cache.extension_hits
        captured.clear()
        with_reuse = engine.generate(later[9:])
        tokens_with = sorted(captured)
        engine.prefix_cache = None
        captured.clear()
        without = engine.generate(later[9:])
        tokens_without = sorted(captured)
    finally:
        del engine._finish
        engine.prefix_cache = cache
    assert cache.extension_hits - hits_before == 9
    for request, result in zip(later[9:], with_reuse):
        assert result.cached_tokens > starts[request.prefix_group] + 16  # the role's text at least
    assert tokens_with == tokens_without
    assert [r.text for r in with_reuse] == [r.text for r in without]
    engine.release([f"claim-{i}" for i in range(3)])
    assert cache.bytes == 0


def test_prompt_passes_join_into_one_decode_with_the_same_greedy_tokens(engine32, monkeypatch):
    """Nine requests in prompt passes of 4, 4 and 1 rows (different widths) are decoded as one batch of
    nine; the token ids equal those of one prompt pass of nine."""
    engine = engine32
    _, later = _debate_requests(12)
    rows: list[int] = []
    forward = engine._forward
    monkeypatch.setattr(engine, "_forward", lambda ids, *a: rows.append(ids.shape[0]) or forward(ids, *a))
    monkeypatch.setattr(engine, "prefix_cache", None)

    monkeypatch.setattr(engine, "prefill_batch", 4)
    joined = engine.generate(later)
    assert rows[:4] == [4, 4, 1, 9]  # three prompt passes, then every row decodes in one step
    rows.clear()
    monkeypatch.setattr(engine, "prefill_batch", 16)
    single = engine.generate(later)
    assert rows[:2] == [9, 9]
    assert [r.text for r in joined] == [r.text for r in single]
    assert all(r.completion_tokens > 0 for r in joined)


def test_a_request_joins_the_running_batch_and_leaves_it_alone(engine32, monkeypatch):
    """Continuous batching: a request sent while another is decoding has its prompt computed and joins the
    running batch (decode steps of two rows), is answered as soon as it ends while the first goes on, and
    both get the same greedy tokens as alone."""
    import threading

    from halucheck.engines import Request, SamplingParams

    engine = engine32
    count = lambda n: Request(messages=({"role": "user", "content": f"Count from {n} to 200, comma separated."},),  # noqa: E731
                              sampling=SamplingParams(max_tokens=40))
    short = Request(messages=({"role": "user", "content": "Name one colour. One word."},),
                    sampling=SamplingParams(max_tokens=12))
    monkeypatch.setattr(engine, "prefix_cache", None)
    alone_long, alone_short = engine.generate([count(1)])[0], engine.generate([short])[0]

    rows: list[int] = []
    finished: list[str] = []
    started = threading.Event()
    forward, finish = engine._forward, engine._finish

    def counting(ids, *a):
        rows.append(ids.shape[0])
        if len(rows) == 5:  # the long request has decoded a few tokens alone
            started.set()
        return forward(ids, *a)

    monkeypatch.setattr(engine, "_forward", counting)
    monkeypatch.setattr(engine, "_finish", lambda row: finished.append(row.request.messages[0]["content"]) or finish(row))
    first = engine._submit([count(1)])[0]
    assert started.wait(120)
    [second] = engine._submit([short])
    joined_short = second.result(300)
    assert not first.done(), "the short request is answered while the long one is still decoding"
    joined_long = first.result(300)

    assert rows[:5] == [1] * 5 and rows[5] == 1  # the long one alone, then the short one's prompt pass
    assert 2 in rows[6:] and rows[-1] == 1  # both decode together; the long one ends alone
    assert finished == [short.messages[0]["content"], count(1).messages[0]["content"]]
    assert joined_long.text == alone_long.text and joined_short.text == alone_short.text
    assert joined_long.completion_tokens == 40 and joined_long.capped


def test_close_answers_every_waiting_caller():
    if weights.status(MODEL) == "not installed":
        pytest.skip(f"{MODEL} weights are not installed (halucheck models pull {MODEL})")
    from halucheck.engines import Request, SamplingParams, create_engine
    from halucheck.errors import EngineError

    eng = create_engine("transformers", model=MODEL, max_batch=1, prefix_cache_mb=0)
    ask = Request(messages=({"role": "user", "content": "Count to 500."},), sampling=SamplingParams(max_tokens=200))
    futures = eng._submit([ask, ask])  # one decodes, one waits for room
    eng.close()
    assert all(f.done() for f in futures)
    assert all(isinstance(f.exception(), EngineError) for f in futures)
    [after] = eng.generate([ask])  # an engine failure is the request's error, not a crash
    assert "closed" in after.error


def test_a_failure_reaches_its_callers_and_the_decode_loop_goes_on(engine, monkeypatch):
    """A request that cannot be prepared fails alone (its result says why); a failed forward pass raises in
    the callers of its batch instead of leaving them waiting; the next request is served as before."""
    from halucheck.engines import Request, SamplingParams
    from halucheck.errors import EngineError

    ask = Request(messages=({"role": "user", "content": "Say yes."},), sampling=SamplingParams(max_tokens=3))
    odd = Request(messages=ask.messages, schema={"type": "string", "pattern": "x"}, sampling=ask.sampling)
    index_for = engine._index_for

    def refuse(schema):
        if schema.get("pattern") == "x":
            raise EngineError("Outlines cannot compile this JSON schema: test")
        return index_for(schema)

    monkeypatch.setattr(engine, "_index_for", refuse)
    bad, good = engine.generate([odd, ask])
    assert "cannot compile" in bad.error and good.ok and good.completion_tokens > 0

    prefill = engine._prefill
    monkeypatch.setattr(engine, "_prefill", lambda chunk: (_ for _ in ()).throw(RuntimeError("out of memory")))
    with pytest.raises(RuntimeError, match="out of memory"):
        engine.generate([ask])
    monkeypatch.setattr(engine, "_prefill", prefill)
    [again] = engine.generate([ask])
    assert again.ok and again.text == good.text


def test_drafted_tokens_give_the_same_greedy_replies(engine32, monkeypatch):
    """Speculative decoding: twelve debate requests (four reply schemas, three claims) decoded plainly, then
    again with a drafter that learned the plain replies and drafts eagerly (every context it saw), so some
    drafts are kept and others rejected, and the holes they leave are closed up (``HOLES`` lowered). The
    replies and their log-probabilities are the plain ones, in fewer decode steps; steps whose rows feed
    different numbers of tokens run packed (``decode_cache.Pack``) and give the same."""
    from dataclasses import replace

    from halucheck.engines import SamplingParams
    from halucheck.engines.decode_cache import DecodeLayer
    from halucheck.engines.drafts import NGramDrafter
    from halucheck.engines.batching import DecodeBatch

    engine = engine32
    first, later = _debate_requests(1)
    requests = [replace(r, schema=s, logprobs=True, sampling=SamplingParams(max_tokens=48))
                for r, s in zip(first + later, _schemas(first + later))]
    monkeypatch.setattr(engine, "prefix_cache", None)
    learned: list = []
    finish = engine._finish
    monkeypatch.setattr(engine, "_finish", lambda row: learned.append((row.kind, list(row.tokens))) or finish(row))

    steps = engine.stats.steps
    plain = engine.generate(requests)
    plain_steps = engine.stats.steps - steps

    drafter = NGramDrafter(n=2, min_count=1, min_share=0.0)
    for kind, tokens in learned:
        drafter.learn(kind, tokens)
    gathers: list[int] = []
    gather = DecodeLayer.gather
    monkeypatch.setattr(DecodeLayer, "gather", lambda self, index: gathers.append(index.shape[1]) or gather(self, index))
    monkeypatch.setattr(DecodeBatch, "HOLES", 4)
    monkeypatch.setattr(engine, "drafter", drafter)
    monkeypatch.setattr(engine, "draft_tokens", 4)
    before = (engine.stats.steps, engine.stats.drafted, engine.stats.accepted, engine.stats.packed)
    drafted = engine.generate(requests)
    steps, n_drafted, n_accepted, n_packed = (a - b for a, b in zip(
        (engine.stats.steps, engine.stats.drafted, engine.stats.accepted, engine.stats.packed), before))

    assert [r.text for r in drafted] == [r.text for r in plain]
    assert [r.completion_tokens for r in drafted] == [r.completion_tokens for r in plain]
    for d, p in zip(drafted, plain):
        assert [t for t, _ in d.logprobs] == [t for t, _ in p.logprobs]
        assert max(abs(a - b) for (_, a), (_, b) in zip(d.logprobs, p.logprobs)) < 1e-3
    assert 0 < n_accepted < n_drafted  # some drafts kept, some rejected
    assert steps < plain_steps
    assert gathers, "rejected drafts' holes were closed up at least once"
    assert 0 < n_packed < steps  # rows feeding different numbers of tokens ran packed, the others padded


def _schemas(requests):
    """Each debate request's reply schema (``_debate_requests`` strips it from the request)."""
    return [_SCHEMAS[r.messages[-1]["content"]] for r in requests]


def test_int8_weights_give_the_float32_replies_on_a_quarter_of_the_bytes(engine32):
    """``dtype: int8``: every linear layer's weight int8 (engines/int8.py); greedy replies stay float32's and
    schema-constrained replies valid."""
    import torch

    from halucheck.engines import Request, SamplingParams, create_engine, int8
    from halucheck.engines.int8 import DYNAMIC, WEIGHT, Int8Linear

    engine = create_engine("transformers", model=MODEL, max_batch=8, dtype="int8")
    try:
        assert engine.dtype == "int8"
        layers = [m for m in engine.hf_model.modules() if isinstance(m, Int8Linear)]
        assert not [m for m in engine.hf_model.modules() if type(m) is torch.nn.Linear]
        kinds = {DYNAMIC, WEIGHT} if int8.int_mm_faster() else {WEIGHT}  # where _int_mm is slower: weight only
        assert {m.mode for m in layers} == kinds and isinstance(engine.hf_model.lm_head, Int8Linear)
        float_bytes = 4 * sum(m.weight.numel() for m in engine32.hf_model.modules() if type(m) is torch.nn.Linear)
        assert sum(m.qweight.numel() for m in layers) == float_bytes // 4
        asks = ["Reply with exactly the word: banana", "What is 12 times 12? Reply with the number only.",
                "Name the capital of France in one word.", "Write a Python function that returns the square of x.",
                "In one sentence: what does the Eiffel Tower stand in?", "List three primary colours, comma-separated."]
        requests = [Request(messages=({"role": "user", "content": a},), logprobs=True,
                            sampling=SamplingParams(max_tokens=24)) for a in asks]
        ours, reference = engine.generate(requests), engine32.generate(requests)
        assert sum(a.text == b.text for a, b in zip(ours, reference)) >= 5, [r.text for r in ours]
        for a, b in zip(ours, reference):  # the first token's probability, as float32 gives it
            assert abs(math.exp(a.logprobs[0][1]) - math.exp(b.logprobs[0][1])) < 0.05
        judged = engine.generate([Request(messages=judge("The Eiffel Tower is in Berlin."), schema=SCHEMA,
                                          sampling=SamplingParams(max_tokens=64))])
        jsonschema.validate(judged[0].parsed, SCHEMA)
    finally:
        engine.close()
