"""The batched scheduler: same verdicts as the sequential loop, bounded, robust."""

import threading
import time
from collections import Counter

import pytest

from halucheck.verifiers.debate import Agents, DebateConfig, DebateJob, Scheduler, run_sequential
from halucheck.engines.fake import FakeEngine
from halucheck.records import Claim, Evidence
from halucheck.prompts import read_field, read_statement


def deterministic(request):
    """A reply that depends only on the request, so that debates differ: the first agent's verdict, whether
    a stance quotes its passage (verified) or words no passage holds (void), and the Leader's winner all
    follow a hash of the prompt (the Leader's holds the standing verdict and both stances)."""
    user = request.messages[-1]["content"]
    role = request.tag.split(":")[1]
    h = sum(map(ord, user)) + len(role) + len(read_statement(user))
    if role == "initial":
        return {"reasoning": f"initial {h % 97}", "factuality": h % 3 != 0}
    if role == "leader":
        return {"reason": f"leader {h % 97}", "winner": "skeptic" if h % 3 == 0 else "trust"}
    quote = read_field(user, "1") if h % 4 else "words that no passage holds"
    return {"finding": "contradicted", "quotes": [quote], "argument": f"{role} {h % 97}", "error_severity": h % 5 + 1}


def calls(verdict):
    """The engine calls a debate made: every turn but the rounds decided without a Leader call."""
    return sum(not (t.role == "leader" and t.ok and t.p_factual is None) for t in verdict.chain)


def varied_enough(verdicts):
    """The debates took every path: Leader calls, walkovers (a void side), a second round, both verdicts."""
    chains = [t for v in verdicts for t in v.chain]
    assert any(t.role == "leader" and t.p_factual is not None for t in chains)
    assert any(t.role == "leader" and t.p_factual is None for t in chains)
    assert any(t.winner == "skeptic" for t in chains) and any(v.rounds > 1 for v in verdicts)
    assert {v.factuality for v in verdicts} == {True, False}


def jobs(n):
    return [DebateJob(Claim(f"Claim number {i} about item {i * 7 % 13}."), (Evidence(f"Evidence {i % 5}."),))
            for i in range(n)]


def as_dicts(verdicts):
    return [v.to_dict() for v in verdicts]


def test_same_verdicts_as_sequential_loop():
    cfg = DebateConfig(min_rounds=1, max_rounds=3)
    seq = run_sequential(jobs(40), Agents(engine=FakeEngine(responder=deterministic)), cfg)
    engine = FakeEngine(responder=deterministic, max_batch=16)
    sched = Scheduler(Agents(engine=engine), cfg)
    batched = sched.run(jobs(40))
    varied_enough(seq)
    assert as_dicts(batched) == as_dicts(seq)
    assert max(engine.batch_sizes) == 16 and sched.stats.llm_calls == sum(calls(v) for v in seq)
    assert sched.stats.llm_calls == len(engine.requests)
    assert sched.stats.to_dict()["mean_batch"] > 8
    # lock-step batching: far fewer engine steps than calls
    assert len(engine.batch_sizes) < sched.stats.llm_calls / 8


def test_in_flight_bound_is_respected():
    engine = FakeEngine(responder=deterministic, max_batch=64)
    Scheduler(Agents(engine=engine), DebateConfig(), max_in_flight=5).run(jobs(30))
    assert max(engine.batch_sizes) == 5


def test_engine_error_in_one_debate_does_not_stall_the_others():
    def flaky(request):
        if "Claim number 3 " in request.messages[1]["content"]:
            return RuntimeError("CUDA out of memory")
        return deterministic(request)

    verdicts = Scheduler(Agents(engine=FakeEngine(responder=flaky, max_batch=8)), DebateConfig()).run(jobs(12))
    assert verdicts[3].factuality is None and "CUDA out of memory" in verdicts[3].error
    assert all(v.factuality is not None for i, v in enumerate(verdicts) if i != 3)


def test_identical_claims_are_taken_once_before_the_verifier():
    """The scheduler debates every job it is given; identical claims are taken once before (unique_cases)."""
    from halucheck.records import unique_cases

    same = jobs(3) * 4  # 12 jobs, 3 distinct
    unique = unique_cases(same)
    assert unique.cases == same[:3] and unique.of == [[0, 3, 6, 9], [1, 4, 7, 10], [2, 5, 8, 11]]
    engine = FakeEngine(responder=deterministic, max_batch=16)
    seen = []
    sched = Scheduler(Agents(engine=engine), DebateConfig(), on_verdict=lambda i, v: seen.append(i))
    verdicts = sched.run(unique.cases)
    assert sched.stats.debates == 3 and sorted(seen) == [0, 1, 2]
    assert len(engine.requests) == sum(calls(v) for v in verdicts) > 3 * 3  # Leader calls too


class FakeServer(FakeEngine):
    """A streaming engine (like the vLLM server client) that records its peak concurrency."""

    streaming = True

    def __init__(self, **kw):
        super().__init__(**kw)
        self.lock, self.now, self.peak = threading.Lock(), 0, 0

    def _complete(self, requests):
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        time.sleep(0.002)
        try:
            return super()._complete(requests)
        finally:
            with self.lock:
                self.now -= 1


def test_streaming_engine_same_verdicts_and_bounded_concurrency():
    cfg = DebateConfig(min_rounds=1, max_rounds=3)
    seq = run_sequential(jobs(30), Agents(engine=FakeEngine(responder=deterministic)), cfg)
    server = FakeServer(responder=deterministic, max_batch=6)
    got = Scheduler(Agents(engine=server), cfg).run(jobs(30))
    assert as_dicts(got) == as_dicts(seq)
    assert 1 < server.peak <= 6


def varied(n):
    """Claims whose debates run 7, 10 or 13 calls (the Skeptic wins 0 or 1, 2 or 4 rounds)."""
    return [DebateJob(Claim(f"Varied claim {i}."), (Evidence(f"Evidence for claim {i}."),)) for i in range(n)]


def dissenting():
    """A responder for varied(): both sides quote their passage (so every round asks the Leader), and the
    Leader sides with the Skeptic in a claim's first k rounds, k = 0, 1, 2 or 4 by claim: 7, 7, 10 and 13
    calls with min_rounds=2, max_rounds=4. A debate's calls come one after another, so counting its
    Leader calls gives the round, however the debates are batched."""
    rounds = Counter()

    def responder(request):
        user = request.messages[-1]["content"]
        i = int(read_statement(user).split("Varied claim ")[1].split(".")[0])
        role = request.tag.split(":")[1]
        if role == "initial":
            return {"reasoning": "r", "factuality": True}
        if role == "leader":
            rounds[i] += 1
            return {"reason": f"round {rounds[i]}", "winner": "skeptic" if rounds[i] <= (0, 1, 2, 4)[i % 4] else "trust"}
        return {"finding": "contradicted", "quotes": [read_field(user, "1")], "argument": role, "error_severity": 2}

    return responder


def test_several_batches_in_flight_keep_batches_full():
    cfg = DebateConfig(min_rounds=2, max_rounds=4, leader_both_orders=False)  # a Leader call is a round
    seq = run_sequential(varied(96), Agents(engine=FakeEngine(responder=dissenting())), cfg)
    assert {len(v.chain) for v in seq} == {7, 10, 13} and all(calls(v) == len(v.chain) for v in seq)  # no walkover

    one = FakeEngine(responder=dissenting(), max_batch=16)  # one batch's worth of debates in flight
    Scheduler(Agents(engine=one), cfg, max_in_flight=16).run(varied(96))
    engine = FakeEngine(responder=dissenting(), max_batch=16)
    sched = Scheduler(Agents(engine=engine), cfg)  # default: several batches' worth
    assert as_dicts(sched.run(varied(96))) == as_dicts(seq)

    made = sum(calls(v) for v in seq)
    assert max(engine.batch_sizes) == 16 and sum(engine.batch_sizes) == made
    assert len(engine.batch_sizes) < len(one.batch_sizes)
    # only the tail (after the last debate started) may see partial batches
    assert sum(b < 16 for b in engine.batch_sizes) < sum(b < 16 for b in one.batch_sizes)
    assert len(engine.batch_sizes) <= -(-made // 16) + 2


def test_longest_waiting_calls_go_first():
    engine = FakeEngine(responder=deterministic, max_batch=4)
    Scheduler(Agents(engine=engine), DebateConfig()).run(jobs(20))
    # 4 batches' worth (16 debates) start at once; each is served once before any is served twice
    first = engine.requests[:16]
    assert {r.tag for r in first} == {"debate:initial"}
    assert len({r.messages[1]["content"] for r in first}) == 16
    assert engine.requests[16].tag != "debate:initial"


class TwoEngines(Agents):
    """Initial and Leader on one engine, Trust and Skeptic on another."""

    def __init__(self, a, b):
        super().__init__(engine=a)
        self.a, self.b = a, b

    def engine_for(self, role):
        return self.a if role in ("initial", "leader") else self.b


def test_roles_on_different_engines_get_their_own_batches():
    cfg = DebateConfig(min_rounds=1, max_rounds=3)
    seq = run_sequential(jobs(30), Agents(engine=FakeEngine(responder=deterministic)), cfg)
    a = FakeEngine(responder=deterministic, max_batch=8)
    b = FakeEngine(responder=deterministic, max_batch=5)
    got = Scheduler(TwoEngines(a, b), cfg).run(jobs(30))
    varied_enough(seq)
    assert as_dicts(got) == as_dicts(seq)
    assert max(a.batch_sizes) == 8 and max(b.batch_sizes) == 5
    assert {r.tag for r in a.requests} == {"debate:initial", "debate:leader"}
    assert {r.tag for r in b.requests} == {"debate:trust", "debate:skeptic"}


def test_server_engine_is_driven_by_streaming():
    from halucheck.engines.openai_server import OpenAIServerEngine

    assert OpenAIServerEngine.streaming is True


class _Releasing(FakeEngine):
    """Records each request's prefix group, and when each group is released (after how many calls)."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.groups, self.released = [], {}

    def generate(self, requests):
        self.groups += [r.prefix_group for r in requests]
        return super().generate(requests)

    def release(self, groups):
        for g in groups:
            self.released[g] = len(self.groups)


@pytest.mark.parametrize("batched", [True, False])
def test_a_debates_calls_share_a_prefix_group_released_when_it_ends(batched):
    js = jobs(6)
    engine = _Releasing(responder=deterministic, max_batch=4)
    agents, cfg = Agents(engine=engine), DebateConfig(min_rounds=1, max_rounds=2)
    verdicts = Scheduler(agents, cfg).run(js) if batched else run_sequential(js, agents, cfg)
    keys = [j.key() for j in js]
    # the first agent's call is selfcheck's request (its own prompt, shared with -v selfcheck): no group;
    # every stance and Leader call of a debate shares the claim's prompt start, and so its group
    firsts = [g for r, g in zip(engine.requests, engine.groups) if r.tag == "debate:initial"]
    assert firsts == [None] * len(js)
    assert set(engine.groups) - {None} == set(keys) and set(engine.released) == set(keys)
    for key, v in zip(keys, verdicts):
        assert engine.groups.count(key) == calls(v) - 1 >= 2
        last_call = max(i for i, g in enumerate(engine.groups) if g == key)
        assert engine.released[key] > last_call  # released after its last call
        assert key not in engine.groups[engine.released[key]:]  # ... and never used again
