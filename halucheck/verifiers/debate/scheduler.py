"""Drive many claim debates at once, handing the engines full batches.

Each debate is sequential (one agent after another), so throughput comes from keeping many debates in
flight. Two ways to drive them, chosen from the engines serving the roles:

* batch engines (``vllm-local``, ``fake``): lock-step — every in-flight debate has exactly
  one ready call. Several batches' worth of debates are kept in flight and each engine gets its
  longest-waiting calls in full chunks of ``max_batch``: with only one batch in flight, debates that reach
  consensus early would leave the next batches half empty while the long debates run out.
* streaming engines (``engine.streaming`` is True: ``vllm`` servers, and ``transformers``, whose decode loop
  batches continuously): each call is sent on its own, up to the engine's concurrency bound (``max_batch``);
  the moment one returns, its debate's next call is sent (the engine's continuous batching does the
  rest), and a debate that ends frees its slot at once.

Every job given is debated: identical claims are taken once before they reach a verifier
(:func:`halucheck.records.unique_cases`, by the pipeline).
"""

from __future__ import annotations

import time
from collections import defaultdict, deque
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Callable, Generator, Sequence

from halucheck.verifiers.debate.agents import AgentCall, Agents, turn_from_result
from halucheck.verifiers.debate.rounds import DebateConfig, debate
from halucheck.verifiers.debate.score import ScoreWeights
from halucheck.records import Case, Claim, Evidence, Turn, Verdict

# Debates kept in flight per batch slot of a batch engine. With one batch's worth, debates that finish
# early leave batches half empty: 256 claims at max_batch 64 took 44 engine steps for 2305 calls; with 4,
# 37 steps, the minimum (scripts/bench_debate.py). A debate then waits ~4 steps between its calls.
IN_FLIGHT_PER_SLOT = 4


DebateJob = Case  # one claim to debate with its evidence


@dataclass
class RunStats:
    """Accounting for one scheduler run."""

    claims: int = 0
    debates: int = 0
    llm_calls: int = 0
    steps: int = 0
    batch_sizes: list[int] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    wall_s: float = 0.0

    def to_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k != "batch_sizes"}
        d["mean_batch"] = round(sum(self.batch_sizes) / len(self.batch_sizes), 2) if self.batch_sizes else 0
        return d


class _Debate:
    """One in-flight debate: its generator and the call it is waiting on."""

    def __init__(self, slot: int, job: DebateJob, cfg: DebateConfig, weights: ScoreWeights | None = None) -> None:
        self.slot, self.job = slot, job
        self.group = job.key()  # its calls' prefix group (they share system prompt, evidence, claim)
        self.gen: Generator[AgentCall, Turn, Verdict] = debate(job.claim, job.evidence, cfg, weights)
        self.call: AgentCall | None = next(self.gen)
        self.verdict: Verdict | None = None
        self.turns = 0

    def advance(self, turn: Turn) -> None:
        self.turns += 1
        try:
            self.call = self.gen.send(turn)
        except StopIteration as stop:
            self.call, self.verdict = None, stop.value


class Scheduler:
    """Runs debates for many claims concurrently through ``agents``' engines.

    ``max_in_flight`` bounds the debates in flight (default: ``IN_FLIGHT_PER_SLOT`` times the largest engine
    ``max_batch`` for batch engines; the engines' ``max_batch``, their concurrency bound, for servers).
    ``on_verdict(index, verdict)`` is called as each claim finishes (for stores and progress bars), and
    ``on_turn(turns)`` after every agent turn with the number of turns its debate has had so far.
    """

    def __init__(self, agents: Agents, cfg: DebateConfig = DebateConfig(), max_in_flight: int | None = None,
                 on_verdict: Callable[[int, Verdict], None] | None = None,
                 on_turn: Callable[[int], None] | None = None, weights: ScoreWeights | None = None) -> None:
        self.agents, self.cfg, self.weights = agents, cfg, weights
        self.max_in_flight = max_in_flight
        self.on_verdict = on_verdict
        self.on_turn = on_turn
        self.stats = RunStats()

    def run(self, jobs: Sequence[DebateJob]) -> list[Verdict]:
        t0 = time.perf_counter()
        jobs = list(jobs)
        self.stats = RunStats(claims=len(jobs), debates=len(jobs))
        verdicts: list[Verdict | None] = [None] * len(jobs)

        def finish(d: _Debate) -> None:
            self.agents.release(d.group)
            verdicts[d.slot] = d.verdict
            if self.on_verdict:
                self.on_verdict(d.slot, d.verdict)

        engines = self.agents.engines_in_use()
        widest = max(e.max_batch for e in engines)
        queue = deque(range(len(jobs)))
        if all(getattr(e, "streaming", False) for e in engines):
            self._run_streaming(jobs, queue, self.max_in_flight or widest, finish)
        else:
            self._run_lockstep(jobs, queue, self.max_in_flight or IN_FLIGHT_PER_SLOT * widest, finish)
        self.stats.wall_s = time.perf_counter() - t0
        return verdicts  # type: ignore[return-value]

    def _start(self, jobs, queue: deque, active: dict, limit: int) -> list[_Debate]:
        """Start queued debates up to ``limit`` in flight; returns the new ones, in queue order."""
        new = []
        while queue and len(active) < limit:
            i = queue.popleft()
            active[i] = d = _Debate(i, jobs[i], self.cfg, self.weights)
            new.append(d)
        return new

    def _record(self, d: _Debate, result) -> Turn:
        turn = turn_from_result(d.call, result, d.job.claim, d.job.evidence)
        self.stats.llm_calls += result.attempts
        if result.attempts:  # a reply from the run's cache spent nothing now (its turn keeps its counts)
            self.stats.prompt_tokens += result.prompt_tokens
            self.stats.completion_tokens += result.completion_tokens
            self.stats.cached_tokens += result.cached_tokens
        if self.on_turn:
            self.on_turn(d.turns + 1)
        return turn

    def _run_lockstep(self, jobs, queue: deque, limit: int, finish) -> None:
        active: dict[int, _Debate] = {}
        waiting: dict[object, deque[_Debate]] = defaultdict(deque)  # engine -> debates, longest-waiting first
        since: dict[int, int] = {}  # debate slot -> step at which its call became ready

        def ready(d: _Debate) -> None:
            since[d.slot] = self.stats.steps
            waiting[self.agents.engine_for(d.call.role)].append(d)

        def start() -> None:
            for d in self._start(jobs, queue, active, limit):
                ready(d)

        start()
        while active:
            # a full chunk first; among engines with one (or, in the tail, none), the longest-waiting call
            engine = max((e for e in waiting if waiting[e]),
                         key=lambda e: (len(waiting[e]) >= e.max_batch, -since[waiting[e][0].slot]))
            group = [waiting[engine].popleft() for _ in range(min(len(waiting[engine]), engine.max_batch))]
            requests = [self.agents.request(d.job.claim, d.job.evidence, d.call, d.group) for d in group]
            self.stats.steps += 1
            self.stats.batch_sizes.append(len(requests))
            for d, result in zip(group, engine.generate(requests)):
                d.advance(self._record(d, result))
                if d.call is None:
                    del active[d.slot], since[d.slot]
                    finish(d)
                else:
                    ready(d)
            start()

    def _run_streaming(self, jobs, queue: deque, limit: int, finish) -> None:
        active: dict[int, _Debate] = {}
        running: dict[Future, _Debate] = {}
        with ThreadPoolExecutor(max_workers=limit) as pool:

            def submit(d: _Debate) -> None:
                engine = self.agents.engine_for(d.call.role)
                request = self.agents.request(d.job.claim, d.job.evidence, d.call, d.group)
                running[pool.submit(lambda: engine.generate([request])[0])] = d

            for d in self._start(jobs, queue, active, limit):
                submit(d)
            while running:
                done, _ = wait(list(running), return_when=FIRST_COMPLETED)
                for fut in done:
                    d = running.pop(fut)
                    self.stats.steps += 1
                    self.stats.batch_sizes.append(1)
                    d.advance(self._record(d, fut.result()))
                    if d.call is None:
                        del active[d.slot]
                        finish(d)
                        for new in self._start(jobs, queue, active, limit):
                            submit(new)
                    else:
                        submit(d)


def run_sequential(jobs: Sequence[DebateJob], agents: Agents, cfg: DebateConfig = DebateConfig()) -> list[Verdict]:
    """The naive loop: one claim at a time, one call at a time (the reference for the scheduler)."""
    verdicts = []
    for job in jobs:
        d = _Debate(0, job, cfg)
        while d.call is not None:
            engine = agents.engine_for(d.call.role)
            result = engine.generate([agents.request(job.claim, job.evidence, d.call, d.group)])[0]
            d.advance(turn_from_result(d.call, result, job.claim, job.evidence))
        agents.release(d.group)
        verdicts.append(d.verdict)
    return verdicts


def check_claim(claim: Claim, evidence: Sequence[Evidence], agents: Agents,
                cfg: DebateConfig = DebateConfig()) -> Verdict:
    """Verify a single claim (what `halucheck check` does)."""
    return run_sequential([DebateJob(claim, tuple(evidence))], agents, cfg)[0]
