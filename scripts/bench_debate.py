#!/usr/bin/env python
"""Debate throughput: the scheduler vs the naive one-claim-at-a-time loop, and the prompt layout.

Engines (``--engine``):

``fake-batch``
    A fake engine whose latency models a batching engine: each engine step (one ``generate`` of a
    batch of B requests, B <= ``--capacity``) sleeps ``a + b * B`` seconds. For N in ``--claims``, the
    same N claims are debated by the naive loop (``run_sequential``) and by the ``Scheduler``; the
    verdicts must be identical. Printed per N: claims/s of both, the speedup, and utilisation.

    Definitions (C = capacity, K = LLM calls of the run, L = calls of the longest debate):

    * ideal time        = ceil(K / C) * a + K * b: the same K calls executed in full batches of C;
    * bound time        = max(ceil(K / C), L) * a + K * b: the least time any schedule can take, as a
                          debate's calls are sequential (L steps at least); equals the ideal once K >= L*C;
    * achieved time     = the scheduler's wall time (engine steps + host work: prompt rendering, reply
                          validation, debate bookkeeping), measured;
    * engine time       = time spent inside the engine's steps, measured;
    * utilisation       = ideal time / achieved time (the headline figure);
    * utilisation_bound = bound time / achieved time;
    * batching          = ideal time / engine time (how full the batches were, host time left out);
    * host time         = achieved - engine time, with ``valid s`` = the part spent validating replies
                          against the JSON schema (``halucheck.engines.base.validate_reply``).

    The time scale is ~10x below a real server's (so the naive loop over 256 claims takes ~4 minutes,
    not 40), so host time per call weighs ~10x more here than it would in production.

    Defaults and why: a = 0.1 s, b = 0.0015 s model one agent turn (~150 generated tokens) on a GPU
    server, scaled down ~10x in time: a 7B model decodes at ~7 ms/step at batch 1, so a fixed ~1 s per
    turn, while each extra sequence in the batch adds prefill of its uncached prompt and its KV reads,
    ~15 ms per turn; a batch of 64 then costs ~2x a single request, as measured on vLLM servers. C = 64
    is the in-flight bound of the shipped ``vllm`` profile (vLLM's own max_num_seqs is 256, so 64 does
    not flatter the batching). Debate lengths vary as they do in a real run: a deterministic responder
    (``Responder``) makes 55% of claims reach consensus at the first allowed state (7 calls), 20% one
    state later (10 calls), and 25% run to ``max_rounds`` (13 calls; 15% never agree).

``transformers``
    A real model on this CPU (``--profile cpu-0.5b``): the same N claims, sequential vs batched, in
    one process (model loaded once), with the token accounting the engine reports. Keep N and
    ``--max-rounds``/``--max-tokens`` small: ~10 s per call on 2 cores. Also prints the prefix layout
    measurement below with the model's tokenizer.

``transformers --compare-prefix-reuse``
    The same N claims debated by the Scheduler twice in one process, the engine's prefix KV reuse off,
    then on (``halucheck.engines.prefix_cache``); each role's sampling from models.yaml (greedy, with its
    repetition controls and max_tokens), as ``halucheck run`` debates. Prints prompt tokens actually prefilled,
    claims/s, peak RSS of each run (sampled from /proc every 0.1 s) and the cache's peak size, and
    whether every reply matched the reply to the same prompt (token ids) in the other run. The JSON line
    holds ``prefill_ratio`` (prefilled with reuse / without), ``wall_speedup`` (claims/s with / without)
    and ``identical``.

``vllm``
    A running vLLM OpenAI-compatible server (``--profile vllm``, base_url from the profile): the same
    claims at each concurrency in ``--concurrency`` (default 1,16).

``--layout-only``
    Prompt tokens per claim that a prefix cache can reuse, for our layout (system + evidence + claim
    first, the role's text and the previous opinions last) vs the naive layout (the role persona first,
    evidence after, as the paper's prompts are written). For every call of a claim's chain, the
    reusable tokens = the longest common token prefix (chat template applied) with an earlier call of
    the same claim; "across the run" also counts earlier calls of other claims (a shared prefix
    cache, as vLLM's). Claims: Factcheck-GPT dev claims with their 5 evidence passages; chains from the
    deterministic responder.

The last line printed is one JSON object with the figures.

Examples::

    python scripts/bench_debate.py --engine fake-batch
    python scripts/bench_debate.py --engine fake-batch --in-flight 64   # one batch in flight (old default)
    python scripts/bench_debate.py --layout-only --tokenizer qwen2.5-coder-0.5b-instruct
    python scripts/bench_debate.py --engine transformers --profile cpu-0.5b --claims 8 --max-rounds 1
    python scripts/bench_debate.py --engine transformers --profile cpu-1.5b --claims 16 --compare-prefix-reuse
    python scripts/bench_debate.py --engine vllm --profile vllm --claims 8 --max-rounds 0
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from halucheck.verifiers.debate import Agents, DebateConfig, DebateJob, Scheduler, debate, run_sequential  # noqa: E402
from halucheck.verifiers.debate import agents as agent_prompts  # noqa: E402
from halucheck.verifiers.debate.agents import AgentCall  # noqa: E402
from halucheck.engines.base import Request, SamplingParams  # noqa: E402
from halucheck.engines.fake import FakeEngine  # noqa: E402
from halucheck.records import Claim, Evidence  # noqa: E402

TURN = re.compile(r"\[t=(\d+)\]")


# -- claims and a deterministic responder ------------------------------------------------------------


def load_claims(n: int, evidence_words: int | None = None, passages: int | None = None) -> list[DebateJob]:
    """``n`` distinct Factcheck-GPT dev claims with their evidence passages (synthetic if the datasets
    are not there). ``evidence_words`` trims each passage, ``passages`` keeps the first few."""
    try:
        from halucheck.evaluation.datasets import load

        items = load("factcheck-gpt", split="dev")
    except Exception:  # no datasets folder: synthetic claims with ~90 words of evidence each
        items = []
    jobs, seen = [], set()
    for it in items:
        if it.claim in seen:
            continue
        seen.add(it.claim)
        ev = it.evidence[:passages] if passages else it.evidence
        if evidence_words:
            ev = [" ".join(e.split()[:evidence_words]) for e in ev]
        jobs.append(DebateJob(Claim(it.claim), tuple(Evidence(e) for e in ev)))
        if len(jobs) == n:
            return jobs
    for i in range(len(jobs), n):
        text = f"Item {i} was first described in {1800 + i % 200} by a committee of {i % 17 + 3} members."
        ev = " ".join(f"Record {i} notes detail {k} of the committee's report." for k in range(10))
        jobs.append(DebateJob(Claim(text), (Evidence(ev),)))
    return jobs


class Responder:
    """A reply that depends only on the request, shaped like a real debate.

    Each claim (hashed) gets a base verdict and the state from which its Skeptic stops dissenting:
    55% at once (consensus at the first state allowed by min_rounds), 20% one state later, 10% two
    states later, 15% never. The turn number travels in the opinion text ("[t=N]"), as an agent only
    sees the previous opinions. Opinions are ~60 words, like a real four-sentence opinion.
    """

    def __call__(self, request: Request) -> dict:
        user = request.messages[-1]["content"]
        claim = user.split("[text]: ", 1)[1].split("\n", 1)[0]
        h = int(hashlib.sha256(claim.encode()).hexdigest(), 16)
        base = h % 10 < 6
        u = (h >> 8) % 100
        agree = 2 if u < 55 else 3 if u < 75 else 4 if u < 85 else 99
        seen = [int(m) for m in TURN.findall(user)]
        t = max(seen) + 1 if seen else 0
        state = (t + 2) // 3  # S0 is turn 0; the k-th state holds turns 3k-2 .. 3k
        role = request.tag.split(":")[-1]
        fact = (not base) if (role == "skeptic" and state < agree) else base
        words = claim.split()
        filler = " ".join(words[(i * 7) % len(words)] for i in range(55))
        return {"opinion": f"[t={t}] {role}: {filler}", "factuality": fact,
                "error_severity": 0 if fact else 1 + h % 5}


class ValidationTimer:
    """Times ``halucheck.engines.base.validate_reply`` (every reply is validated there), to show how much
    of the host time per call it takes. Measurement only: the function itself is called unchanged."""

    def __init__(self):
        import halucheck.engines.base as base

        self.base, self.original, self.seconds = base, base.validate_reply, 0.0

        def timed(text, schema):
            t0 = time.perf_counter()
            try:
                return self.original(text, schema)
            finally:
                self.seconds += time.perf_counter() - t0

        base.validate_reply = timed

    def close(self):
        self.base.validate_reply = self.original


class TimedFake(FakeEngine):
    """The fake engine, also timing the engine steps (to split achieved time into engine and host)."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.busy_s = 0.0

    def _complete(self, requests):
        t0 = time.perf_counter()
        try:
            return super()._complete(requests)
        finally:
            self.busy_s += time.perf_counter() - t0


# -- fake-batch --------------------------------------------------------------------------------------


def bench_fake(args) -> dict:
    cfg = DebateConfig(min_rounds=args.min_rounds, max_rounds=args.max_rounds)
    a, b, cap = args.a, args.b, args.capacity
    all_jobs = load_claims(max(args.claims), passages=args.passages)
    print(f"fake-batch engine: step = {a} + {b} * batch s, capacity {cap}; "
          f"debate min_rounds={cfg.min_rounds} max_rounds={cfg.max_rounds}; "
          f"scheduler in-flight bound: {args.in_flight or 'default'}")
    head = (f"{'claims':>6} {'calls':>6} {'L':>3} {'seq c/s':>8} {'sched c/s':>9} {'speedup':>8} {'steps':>6} "
            f"{'mean B':>7} {'ideal s':>8} {'bound s':>8} {'achvd s':>8} {'engine s':>8} {'host s':>7} {'valid s':>7} "
            f"{'util':>5} {'u_bnd':>5} {'batch':>5}")
    print(head)
    out: dict = {"engine": "fake-batch", "a": a, "b": b, "capacity": cap, "in_flight": args.in_flight,
                 "min_rounds": cfg.min_rounds, "max_rounds": cfg.max_rounds}
    for n in args.claims:
        jobs = all_jobs[:n]
        seq_engine = TimedFake(responder=Responder(), max_batch=cap, step_latency=[a, b])
        t0 = time.perf_counter()
        seq = run_sequential(jobs, Agents(engine=seq_engine), cfg)
        seq_s = time.perf_counter() - t0

        engine = TimedFake(responder=Responder(), max_batch=cap, step_latency=[a, b])
        sched = Scheduler(Agents(engine=engine), cfg, max_in_flight=args.in_flight)
        timer = ValidationTimer()
        t0 = time.perf_counter()
        got = sched.run(jobs)
        wall = time.perf_counter() - t0
        timer.close()
        if [v.to_dict() for v in got] != [v.to_dict() for v in seq]:
            raise SystemExit("the scheduler's verdicts differ from the sequential loop's")

        st = sched.stats
        k, longest = st.llm_calls, max(len(v.chain) for v in got)
        ideal = math.ceil(k / cap) * a + k * b
        bound = max(math.ceil(k / cap), longest) * a + k * b
        row = {
            "calls": k, "longest": longest, "seq_claims_s": n / seq_s, "sched_claims_s": n / wall,
            "speedup": seq_s / wall, "steps": st.steps, "mean_batch": k / st.steps,
            "ideal_s": ideal, "bound_s": bound, "achieved_s": wall, "engine_s": engine.busy_s,
            "host_s": wall - engine.busy_s, "validate_s": timer.seconds, "utilisation": ideal / wall, "utilisation_bound": bound / wall,
            "batching": ideal / engine.busy_s,
        }
        print(f"{n:>6} {k:>6} {longest:>3} {row['seq_claims_s']:>8.2f} {row['sched_claims_s']:>9.2f} "
              f"{row['speedup']:>7.1f}x {st.steps:>6} {row['mean_batch']:>7.1f} {ideal:>8.2f} {bound:>8.2f} "
              f"{wall:>8.2f} {engine.busy_s:>8.2f} {row['host_s']:>7.2f} {timer.seconds:>7.2f} {row['utilisation']:>5.2f} "
              f"{row['utilisation_bound']:>5.2f} {row['batching']:>5.2f}", flush=True)
        for key in ("speedup", "utilisation", "utilisation_bound", "batching", "seq_claims_s", "sched_claims_s"):
            out[f"{key}_{n}"] = round(row[key], 3)
        out[f"host_ms_per_call_{n}"] = round(1000 * row["host_s"] / k, 3)
        out[f"validate_ms_per_call_{n}"] = round(1000 * timer.seconds / k, 3)
    return out


# -- prompt layout -----------------------------------------------------------------------------------


def ours_messages(claim: Claim, evidence, call: AgentCall) -> tuple[dict, ...]:
    """The messages the debate sends (S0: selfcheck's request)."""
    return Agents(engine=FakeEngine()).request(claim, evidence, call).messages


def naive_messages(claim: Claim, evidence, call: AgentCall) -> tuple[dict, ...]:
    """The same text as ``build_messages``, in the paper's order: the role's task first, then the
    instructions, then claim and evidence (and, for the Leader, the stances)."""
    ours = ours_messages(claim, evidence, call)
    if call.role == "initial":  # S0 is selfcheck's request, laid out as selfcheck lays it out
        return ours
    shared = agent_prompts.load_prompts("debate")["shared"].render(
        evidence=[e.text for e in evidence], question=claim.question, text=claim.text)
    system, user = ours[0]["content"], ours[1]["content"]
    task = user[len(shared):].strip()
    return ({"role": "system", "content": task + "\n\n" + system}, {"role": "user", "content": shared})


def chains(jobs, cfg: DebateConfig) -> list[list[tuple[AgentCall, Claim, tuple]]]:
    """Every claim's chain of calls, driven by the deterministic responder."""
    from halucheck.verifiers.debate.agents import turn_from_result

    engine = FakeEngine(responder=Responder())
    agents = Agents(engine=engine)
    out = []
    for job in jobs:
        gen = debate(job.claim, job.evidence, cfg)
        calls, call = [], next(gen)
        try:
            while True:
                calls.append((call, job.claim, job.evidence))
                result = engine.generate([agents.request(job.claim, job.evidence, call)])[0]
                call = gen.send(turn_from_result(call, result, job.claim, job.evidence))
        except StopIteration:
            pass
        out.append(calls)
    return out


def longest_common_prefix(ids, earlier: list) -> int:
    """The longest common prefix (in tokens) of ``ids`` with any of the ``earlier`` token arrays."""
    import numpy as np

    best = 0
    for e in earlier:
        n = min(len(ids), len(e))
        diff = np.flatnonzero(ids[:n] != e[:n])
        best = max(best, int(diff[0]) if len(diff) else n)
    return best


def load_tokenizer(name: str):
    from transformers import AutoTokenizer

    path = Path(name)
    if not path.is_dir():
        from halucheck import weights

        path = weights.resolve(name)
    return AutoTokenizer.from_pretrained(str(path))


def bench_layout(args, tokenizer) -> dict:
    cfg = DebateConfig()  # the paper's settings (min 2, max 4 states), whatever the timed run used
    jobs = load_claims(args.layout_claims)  # full evidence (5 passages, ~460 words), as a real run has
    all_chains = chains(jobs, cfg)

    def tokens(messages):
        import numpy as np

        ids = tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=True)
        return np.asarray(ids["input_ids"] if hasattr(ids, "keys") else ids)

    out = {"layout_claims": len(jobs), "calls_per_claim": round(statistics.mean(map(len, all_chains)), 2)}
    print(f"\nprompt layout: {len(jobs)} Factcheck-GPT dev claims, {out['calls_per_claim']} calls per claim, "
          f"tokenizer {getattr(tokenizer, 'name_or_path', '?')}")
    print(f"{'layout':>8} {'prompt tok/claim':>17} {'reusable in claim':>18} {'fresh in claim':>15} "
          f"{'reusable in run':>16} {'fresh in run':>13}")
    for layout, build in (("ours", ours_messages), ("naive", naive_messages)):
        seen_run: list = []
        total = reuse_claim = reuse_run = 0
        for chain in all_chains:
            seen_claim: list = []
            for call, claim, evidence in chain:
                ids = tokens(build(claim, evidence, call))
                total += len(ids)
                reuse_claim += longest_common_prefix(ids, seen_claim)
                reuse_run += longest_common_prefix(ids, seen_run)
                seen_claim.append(ids)
                seen_run.append(ids)
        n = len(all_chains)
        row = {"prompt": total / n, "reuse_claim": reuse_claim / n, "reuse_run": reuse_run / n}
        print(f"{layout:>8} {row['prompt']:>17.0f} {row['reuse_claim']:>18.0f} {row['prompt'] - row['reuse_claim']:>15.0f} "
              f"{row['reuse_run']:>16.0f} {row['prompt'] - row['reuse_run']:>13.0f}")
        for key, v in row.items():
            out[f"{key}_tokens_per_claim_{layout}"] = round(v, 1)
    for scope in ("claim", "run"):
        ours, naive = out[f"reuse_{scope}_tokens_per_claim_ours"], out[f"reuse_{scope}_tokens_per_claim_naive"]
        fresh_o = out["prompt_tokens_per_claim_ours"] - ours
        fresh_n = out["prompt_tokens_per_claim_naive"] - naive
        out[f"reuse_ratio_{scope}"] = round(ours / naive, 2) if naive else None
        out[f"fresh_ratio_{scope}"] = round(fresh_n / fresh_o, 2) if fresh_o else None
        print(f"reusable tokens per claim, within the {scope}: ours {ours:.0f} vs naive {naive:.0f} "
              f"({out[f'reuse_ratio_{scope}']}x); tokens left to prefill: ours {fresh_o:.0f} vs naive "
              f"{fresh_n:.0f} ({out[f'fresh_ratio_{scope}']}x fewer)")
    return out


# -- real engines ------------------------------------------------------------------------------------


def run_pair(label_a, run_a, label_b, run_b, n) -> tuple[dict, list, list]:
    """Time two runs by wall clock and by this process's CPU time (all threads). On shared cores the
    wall clock also measures the neighbours' load; CPU seconds measure the work itself."""
    rows, results = {}, []
    for label, fn in ((label_a, run_a), (label_b, run_b)):
        t0, c0 = time.perf_counter(), time.process_time()
        verdicts, stats = fn()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        rows[label] = {"wall_s": wall, "cpu_s": cpu, "claims_s": n / wall, "claims_cpu_s": n / cpu, **stats}
        results.append(verdicts)
        print(f"{label:>12}: {wall:8.1f} s wall, {cpu:8.1f} s CPU  {n / wall:.4f} claims/s  "
              f"{n / cpu:.4f} claims/CPU-s  {json.dumps(stats)}", flush=True)
    return rows, results[0], results[1]


class _PeakRSS:
    """The largest resident set size seen while the block runs (sampled from /proc every 0.1 s)."""

    def __enter__(self):
        import threading

        self.peak, self._stop = _rss(), threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def _watch(self):
        while not self._stop.wait(0.1):
            self.peak = max(self.peak, _rss())

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss())


def _rss() -> int:
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))
    except (OSError, StopIteration):  # not Linux: no figure
        return 0


def compare_prefix_reuse(args, engine, agents, cfg, jobs, n) -> dict:
    """The Scheduler over the same claims with the engine's prefix reuse off, then on (one process)."""
    from halucheck.engines.prefix_cache import PrefixCache

    # every reply's text keyed by its prompt's token ids, so a reply is compared with the reply to the same
    # prompt, whatever batch it ran in
    generated: dict[tuple, list] = {}
    finish = engine._finish

    def recording(row):
        generated.setdefault(tuple(row.input_ids), []).append(engine.tokenizer.decode(row.tokens))
        finish(row)

    engine._finish = recording
    cache = engine.prefix_cache or PrefixCache(2048 * 2**20)
    runs = {}
    for label, prefix_cache in (("no reuse", None), ("reuse", cache)):
        engine.prefix_cache = prefix_cache
        if engine.drafter is not None:  # each run drafts from its own replies only
            engine.drafter = type(engine.drafter)()
        generated.clear()
        prefilled0 = engine.prefilled_tokens
        engine.stats = type(engine.stats)()
        sched = Scheduler(agents, cfg, max_in_flight=args.in_flight)
        with _PeakRSS() as rss:
            t0 = time.perf_counter()
            verdicts = sched.run(jobs)
            wall = time.perf_counter() - t0
        st = sched.stats
        runs[label] = {"wall_s": round(wall, 1), "claims_s": n / wall, "calls": st.llm_calls, "steps": st.steps,
                       "prompt_tokens": st.prompt_tokens, "prefilled_tokens": engine.prefilled_tokens - prefilled0,
                       "completion_tokens": st.completion_tokens, "peak_rss_mib": round(rss.peak / 2**20),
                       "loop": engine.stats.to_dict(),
                       "replies": dict(generated), "verdicts": [v.factuality for v in verdicts]}
        print(f"{label:>9}: {wall:8.1f} s  {n / wall:.4f} claims/s  calls {st.llm_calls}  "
              f"prompt tokens {st.prompt_tokens}  prefilled {runs[label]['prefilled_tokens']}  "
              f"completion {st.completion_tokens}  peak RSS {runs[label]['peak_rss_mib']} MiB\n"
              f"{'':>11}decode loop: {json.dumps(runs[label]['loop'])}", flush=True)
    del engine._finish
    off, on = runs["no reuse"], runs["reuse"]
    if not off["replies"] or not on["replies"]:
        raise SystemExit("no reply was recorded: the engine's _finish was not called; fix the recording")
    # once a reply differs, that debate's later prompts differ too: compare replies to the same prompt, and
    # count the prompts only one run sent apart
    common = off["replies"].keys() & on["replies"].keys()
    differ = sum(off["replies"][k] != on["replies"][k] for k in common)
    one_run_only = len(off["replies"].keys() ^ on["replies"].keys())
    identical = differ == 0 and one_run_only == 0
    out = {"prefill_ratio": round(on["prefilled_tokens"] / max(1, off["prefilled_tokens"]), 3),
           "wall_speedup": round(on["claims_s"] / off["claims_s"], 2), "identical": identical,
           "replies_differing": differ, "prompts_in_both": len(common), "prompts_in_one_run_only": one_run_only,
           "same_verdicts": sum(a == b for a, b in zip(off["verdicts"], on["verdicts"])),
           "cache_hits": cache.hits, "cache_extension_hits": cache.extension_hits, "cache_peak_mib": round(cache.peak_bytes / 2**20, 1),
           "cache_evictions": cache.evictions,
           "dtype": str(next(engine.hf_model.parameters()).dtype).removeprefix("torch."),
           **{f"{k}_{tag}": r[k] for tag, r in (("off", off), ("on", on))
              for k in ("claims_s", "wall_s", "prefilled_tokens", "prompt_tokens", "peak_rss_mib", "calls", "loop")}}
    out["claims_s_off"], out["claims_s_on"] = round(off["claims_s"], 4), round(on["claims_s"], 4)
    print(f"prefix reuse: {out['prefill_ratio']} of the prompt tokens prefilled, {out['wall_speedup']}x claims/s, "
          f"replies identical: {identical} ({differ} of the {len(common)} prompts both runs sent got another reply; "
          f"{one_run_only} prompts sent by one run only), cache peak "
          f"{out['cache_peak_mib']} MiB for {min(n, args.in_flight or engine.max_batch)} debates in flight, "
          f"load average now {os.getloadavg()[0]:.1f}", flush=True)
    return out


def bench_transformers(args) -> dict:
    from halucheck.config import Settings
    from halucheck.engines.pool import EnginePool

    cfg = DebateConfig(min_rounds=args.min_rounds, max_rounds=args.max_rounds)
    n = args.claims[0]
    jobs = load_claims(n, evidence_words=args.evidence_words, passages=args.passages)
    settings = Settings.load(args.config, profile=args.profile)
    engines = EnginePool(settings)
    engine = engines.engine_for("initial")
    sampling = SamplingParams(temperature=0.0, max_tokens=args.max_tokens)
    agents = Agents(engine=engine, sampling=sampling)
    print(f"transformers: profile {args.profile}, model {settings.profile_for('initial').model}, "
          f"max_batch {engine.max_batch}, {n} claims, {args.passages} passage(s) of <= {args.evidence_words} words, "
          f"min_rounds={cfg.min_rounds} max_rounds={cfg.max_rounds} max_tokens={args.max_tokens}, "
          f"torch threads {_threads()}", flush=True)
    t0 = time.perf_counter()
    engine.generate([Request(messages=({"role": "user", "content": "Say hi."},),
                             sampling=SamplingParams(max_tokens=2))])
    print(f"model load + warm-up: {time.perf_counter() - t0:.1f} s", flush=True)
    if args.compare_prefix_reuse:  # each role's sampling as models.yaml sets it, as `halucheck run` debates
        out = {"engine": "transformers", "profile": args.profile, "claims": n, "sampling": "models.yaml",
               "min_rounds": cfg.min_rounds, "max_rounds": cfg.max_rounds,
               **compare_prefix_reuse(args, engine, Agents(engines), cfg, jobs, n)}
        engines.close()
        return out

    def tally(verdicts) -> dict:
        turns = [t for v in verdicts for t in v.chain]
        return {"calls": len(turns), "prompt_tokens": sum(t.prompt_tokens for t in turns),
                "cached_tokens": sum(t.cached_tokens for t in turns),
                "completion_tokens": sum(t.completion_tokens for t in turns),
                "valid": sum(t.ok for t in turns)}

    def sequential():
        v = run_sequential(jobs, agents, cfg)
        return v, tally(v)

    def batched():
        s = Scheduler(agents, cfg)
        v = s.run(jobs)
        return v, {**tally(v), "steps": s.stats.steps, "mean_batch": s.stats.to_dict()["mean_batch"]}

    rows, seq, bat = run_pair("sequential", sequential, "batched", batched, n)
    same = sum(x.factuality == y.factuality for x, y in zip(seq, bat))
    speedup = rows["sequential"]["wall_s"] / rows["batched"]["wall_s"]
    speedup_cpu = rows["sequential"]["cpu_s"] / rows["batched"]["cpu_s"]
    per_claim = {k: round(rows["batched"][k] / n, 1) for k in ("prompt_tokens", "completion_tokens", "calls")}
    print(f"batched vs sequential: {speedup:.2f}x by wall clock, {speedup_cpu:.2f}x by CPU time; same verdict "
          f"on {same}/{n} claims; per claim (batched): {json.dumps(per_claim)}; load average now "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    out = {"engine": "transformers", "profile": args.profile, "claims": n, "max_tokens": args.max_tokens,
           "min_rounds": cfg.min_rounds, "max_rounds": cfg.max_rounds, "speedup": round(speedup, 2),
           "speedup_cpu": round(speedup_cpu, 2),
           "seq_claims_s": round(rows["sequential"]["claims_s"], 4),
           "batched_claims_s": round(rows["batched"]["claims_s"], 4),
           "seq_claims_cpu_s": round(rows["sequential"]["claims_cpu_s"], 4),
           "batched_claims_cpu_s": round(rows["batched"]["claims_cpu_s"], 4), "same_verdicts": same,
           "per_claim": per_claim}
    out.update(bench_layout(args, load_tokenizer(settings.profile_for("initial").model)))
    engines.close()
    return out


def bench_vllm(args) -> dict:
    from halucheck.config import Settings
    from halucheck.engines import create_engine

    cfg = DebateConfig(min_rounds=args.min_rounds, max_rounds=args.max_rounds)
    n = args.claims[0]
    jobs = load_claims(n, evidence_words=args.evidence_words, passages=args.passages)
    prof = Settings.load(args.config, profile=args.profile).profile(args.profile)
    if args.base_url:
        prof.options["base_url"] = args.base_url
    sampling = SamplingParams(temperature=0.0, max_tokens=args.max_tokens)
    out = {"engine": "vllm", "profile": args.profile, "claims": n, "max_tokens": args.max_tokens,
           "min_rounds": cfg.min_rounds, "max_rounds": cfg.max_rounds}
    print(f"vllm: {prof.options.get('base_url')} model {prof.model!r}, {n} claims, min_rounds={cfg.min_rounds} "
          f"max_rounds={cfg.max_rounds} max_tokens={args.max_tokens}", flush=True)
    rates = {}
    for c in args.concurrency:
        engine = create_engine(prof.engine, model=prof.model, **{**prof.options, "max_concurrency": c})
        mode = "streaming" if getattr(engine, "streaming", False) else "lock-step"
        sched = Scheduler(Agents(engine=engine, sampling=sampling), cfg, max_in_flight=c)
        t0 = time.perf_counter()
        verdicts = sched.run(jobs)
        wall = time.perf_counter() - t0
        st = sched.stats.to_dict()
        rates[c] = n / wall
        print(f"concurrency {c:>3} ({mode}): {wall:8.1f} s  {n / wall:.4f} claims/s  calls {st['llm_calls']} "
              f"prompt {st['prompt_tokens']} cached {st['cached_tokens']} completion {st['completion_tokens']} "
              f"valid {sum(t.ok for v in verdicts for t in v.chain)}", flush=True)
        out[f"claims_s_c{c}"] = round(n / wall, 4)
        out[f"cached_tokens_c{c}"] = st["cached_tokens"]
        out[f"prompt_tokens_c{c}"] = st["prompt_tokens"]
        engine.close()
    lo, hi = min(rates), max(rates)
    out[f"speedup_c{hi}_vs_c{lo}"] = round(rates[hi] / rates[lo], 2)
    print(f"concurrency {hi} vs {lo}: {rates[hi] / rates[lo]:.2f}x")
    return out


def _threads() -> int:
    try:
        import torch

        return torch.get_num_threads()
    except Exception:
        return os.cpu_count() or 0


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", choices=["fake-batch", "transformers", "vllm"], default="fake-batch")
    ap.add_argument("--profile", help="models.yaml profile (default cpu-0.5b for transformers, vllm for vllm)")
    ap.add_argument("--config", help="models.yaml path (default: the usual lookup)")
    ap.add_argument("--claims", default=None, help="claim counts, comma-separated (fake-batch: 1,16,64,256; "
                    "real engines: one count, default 8)")
    ap.add_argument("--a", type=float, default=0.1, help="fake step cost: fixed seconds per step")
    ap.add_argument("--b", type=float, default=0.0015, help="fake step cost: seconds per request in the batch")
    ap.add_argument("--capacity", type=int, default=64, help="the fake engine's max batch")
    ap.add_argument("--in-flight", type=int, default=None, help="Scheduler max_in_flight (default: its own)")
    ap.add_argument("--min-rounds", type=int, default=2)
    ap.add_argument("--max-rounds", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=160, help="real engines: max tokens per reply")
    ap.add_argument("--evidence-words", type=int, default=None, help="trim each evidence passage to N words")
    ap.add_argument("--passages", type=int, default=None, help="keep the first N evidence passages")
    ap.add_argument("--concurrency", default="1,16", help="vllm: concurrency levels, comma-separated")
    ap.add_argument("--base-url", help="vllm: the server's URL (default: the profile's base_url)")
    ap.add_argument("--compare-prefix-reuse", action="store_true",
                    help="transformers: the Scheduler with the engine's prefix KV reuse off, then on")
    ap.add_argument("--layout-only", action="store_true", help="only the prompt-layout token measurement")
    ap.add_argument("--layout-claims", type=int, default=64, help="claims for the layout measurement")
    ap.add_argument("--tokenizer", default="qwen2.5-coder-0.5b-instruct",
                    help="--layout-only: a known model name (converted) or a model folder")
    args = ap.parse_args(argv)
    default_claims = "1,16,64,256" if args.engine == "fake-batch" and not args.layout_only else "8"
    args.claims = [int(x) for x in (args.claims or default_claims).split(",")]
    args.concurrency = [int(x) for x in args.concurrency.split(",")]
    args.profile = args.profile or {"transformers": "cpu-0.5b", "vllm": "vllm"}.get(args.engine)

    from halucheck.errors import HalucheckError

    try:
        if args.layout_only:
            out = {"engine": "layout", **bench_layout(args, load_tokenizer(args.tokenizer))}
        elif args.engine == "fake-batch":
            out = bench_fake(args)
        elif args.engine == "transformers":
            out = bench_transformers(args)
        else:
            out = bench_vllm(args)
    except HalucheckError as exc:  # a model not installed, a server not up: one line, how to fix it
        raise SystemExit(f"error: {exc}") from None
    print(json.dumps(out))


if __name__ == "__main__":
    main()
