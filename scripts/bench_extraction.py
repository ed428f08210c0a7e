#!/usr/bin/env python
"""Prompt passes of `direct` / `probe` one at a time vs batched: passes a second, prompt tokens computed, and how
far the batched features are from the one-at-a-time ones (the direct margin, the verdict at its threshold, the
hidden states), on the same prompts in one run (no feature store: every pass is computed).

    python scripts/bench_extraction.py [-p cpu-1.5b] [-d contract-nli,summedits,wice] [-n 6] [--batch 1,8]

The prompts are those `-v direct` makes for the first N dev items of each set (every chunk of each item's
evidence), in the order the extractor sorts them (alike starts together).
"""

from __future__ import annotations

import argparse
import json
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-p", "--profile", default="cpu-1.5b")
    ap.add_argument("-d", "--datasets", default="contract-nli,summedits,wice")
    ap.add_argument("-n", type=int, default=6, help="first N dev items of each set")
    ap.add_argument("--batch", default="1,8", help="batch sizes to compare; the first is the reference")
    args = ap.parse_args()

    import numpy as np

    from halucheck.config import Settings
    from halucheck.engines.pool import EnginePool
    from halucheck.evaluation.datasets import load
    from halucheck.evaluation.verifiers import case_of
    from halucheck.verifiers.probe.features import Extractor, unwrapped
    from halucheck.verifiers.probe.verifier import DIRECT_THRESHOLD, prompts_of

    prompts = [p for name in args.datasets.split(",") for it in load(name, "dev", limit=args.n)
               for p in prompts_of(case_of(it))[1]]
    sizes = [int(b) for b in args.batch.split(",")]
    with EnginePool(Settings.load(profile=args.profile)) as engines:
        engine = unwrapped(engines.engine_for("initial"))
        Extractor(engine, batch=1).features(prompts[:1])  # warm-up: first-call costs out of the timings
        runs = {}
        for b in sizes:
            ex = Extractor(engine, batch=b)
            t0 = time.perf_counter()
            feats = ex.features(prompts)
            runs[b] = (time.perf_counter() - t0, ex, feats)
    ref_s, ref_ex, ref = runs[sizes[0]]
    margin = np.array([f.margin for f in ref])
    print(f"{len(prompts)} prompts ({args.datasets}, first {args.n} dev items each), profile {args.profile}")
    print("| batch | seconds | passes/s | tokens computed | of all | max abs margin diff | verdicts changed | "
          "max abs hidden diff (last layer) |")
    print("|---|---|---|---|---|---|---|---|")
    rows = []
    for b in sizes:
        s, ex, feats = runs[b]
        m = np.array([f.margin for f in feats])
        p_ref, p = 1 / (1 + np.exp(-margin)), 1 / (1 + np.exp(-m))
        changed = int(((p_ref < DIRECT_THRESHOLD) != (p < DIRECT_THRESHOLD)).sum())
        hidden = max(float(np.abs(a.hidden[-1].astype(np.float32) - r.hidden[-1].astype(np.float32)).max())
                     for a, r in zip(feats, ref))
        total = sum(f.tokens for f in feats)
        row = {"batch": b, "seconds": round(s, 1), "passes_per_s": round(len(prompts) / s, 3),
               "computed_tokens": ex.computed_tokens, "all_tokens": total,
               "max_margin_diff": round(float(np.abs(m - margin).max()), 4), "verdicts_changed": changed,
               "max_hidden_diff": round(hidden, 4), "speedup": round(ref_s / s, 3)}
        rows.append(row)
        print(f"| {b} | {s:.1f} | {len(prompts) / s:.3f} | {ex.computed_tokens:,} | "
              f"{100 * ex.computed_tokens / total:.0f} % | {row['max_margin_diff']} | {changed} of {len(prompts)} | "
              f"{row['max_hidden_diff']} |")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
