#!/usr/bin/env python
"""collab-cal on the embedded engine: the same claims with the prompt-prefix reuse off, then on (one process).

collab-cal asks all agents of a claim at once, and their prompts share system prompt, evidence and claim
(each step's calls of a claim form one prefix group); ``--verifier consistency`` measures the consistency
verifier instead, whose greedy and sampled requests about a claim send one prompt (one group). Without
reuse every call computes its whole prompt; with it the engine admits a group's first call, keeps its
prompt's KV, and the others (held back one step) compute only what follows the shared start. Prints, per
run: wall time, prompt tokens sent and actually computed, the decode loop's counters (``deferred``: calls
held back a step), and at the end the share of prompt tokens computed with reuse, the speedup, and how many
verdicts agree (bfloat16 sums in another order may move a sampled first answer; float32 gives the same
replies).

    OMP_WAIT_POLICY=PASSIVE python scripts/bench_collab.py --profile cpu-1.5b -n 6
    OMP_WAIT_POLICY=PASSIVE python scripts/bench_collab.py --profile cpu-1.5b -n 6 --verifier consistency

Claims: the first ``-n`` Factcheck-GPT dev items (synthetic ones when the datasets are not there).
"""

from __future__ import annotations

import argparse
import json
import os
import time


def load_checks(n: int):
    from halucheck.records import Case, Claim, Evidence

    try:
        from halucheck.evaluation.datasets import load

        items = load("factcheck-gpt", split="dev")[:n]
    except Exception:  # no datasets folder
        items = []
    checks = [Case(Claim(it.claim), tuple(Evidence(e) for e in it.evidence)) for it in items]
    for i in range(len(checks), n):
        ev = " ".join(f"Record {i} notes detail {k} of the committee's report." for k in range(10))
        checks.append(Case(Claim(f"Item {i} was first described in {1800 + i} by a committee."), (Evidence(ev),)))
    return checks


def innermost(engine):
    while hasattr(engine, "inner"):
        engine = engine.inner
    return engine


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profile", default="cpu-1.5b")
    ap.add_argument("--config", default=None)
    ap.add_argument("-n", type=int, default=6, help="claims")
    ap.add_argument("--verifier", default="collab-cal", choices=("collab-cal", "consistency"))
    args = ap.parse_args(argv)

    from halucheck.config import Settings
    from halucheck.engines.pool import EnginePool
    from halucheck.engines.prefix_cache import PrefixCache
    from halucheck.verifiers import VerifierOptions, get_verifier

    engines = EnginePool(Settings.load(args.config, profile=args.profile))
    engine = innermost(engines.engine_for("initial"))
    if not hasattr(engine, "prefix_cache"):
        raise SystemExit(f"profile {args.profile!r} does not use the embedded transformers engine; pick cpu-1.5b")
    checks = load_checks(args.n)
    cache = engine.prefix_cache or PrefixCache(2048 * 2**20)
    runs = {}
    for label, prefix_cache in (("no reuse", None), ("reuse", cache)):
        engine.prefix_cache = prefix_cache
        if engine.drafter is not None:  # each run drafts from its own replies only
            engine.drafter = type(engine.drafter)()
        engine.stats = type(engine.stats)()
        prefilled0 = engine.prefilled_tokens
        verifier = get_verifier(args.verifier, VerifierOptions())
        t0 = time.perf_counter()
        verdicts = verifier.verify(checks, engines)
        wall = time.perf_counter() - t0
        cost = verifier.costs[args.verifier]
        runs[label] = {"wall_s": round(wall, 1), "calls": cost.llm_calls, "prompt_tokens": cost.prompt_tokens,
                       "prefilled_tokens": engine.prefilled_tokens - prefilled0, "loop": engine.stats.to_dict(),
                       "p": [v.p_hallucinated for v in verdicts]}
        r = runs[label]
        print(f"{label:>9}: {wall:7.1f} s  calls {r['calls']}  prompt tokens {r['prompt_tokens']}  "
              f"computed {r['prefilled_tokens']}  decode loop {json.dumps(r['loop'])}", flush=True)
    off, on = runs["no reuse"], runs["reuse"]
    out = {"verifier": args.verifier, "claims": len(checks), "profile": args.profile, "dtype": engine.dtype,
           "prefill_ratio": round(on["prefilled_tokens"] / max(1, off["prefilled_tokens"]), 3),
           "wall_speedup": round(off["wall_s"] / max(1e-9, on["wall_s"]), 2),
           "same_verdicts": sum((a is None) == (b is None) and (a is None or (a >= 0.5) == (b >= 0.5))
                                for a, b in zip(off["p"], on["p"])),
           "cache_hits": cache.hits, "cache_peak_mib": round(cache.peak_bytes / 2**20, 1),
           "load_average": round(os.getloadavg()[0], 1), "off": off, "on": on}
    print(f"prefix reuse: {out['prefill_ratio']} of the prompt tokens computed, {out['wall_speedup']}x faster, "
          f"{out['same_verdicts']} of {len(checks)} verdicts the same", flush=True)
    print(json.dumps(out))
    engines.close()  # stops the engine's decode thread before the interpreter does


if __name__ == "__main__":
    main()
