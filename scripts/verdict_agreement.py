#!/usr/bin/env python
"""How often two runs of ``halucheck eval`` on the same items give the same verdict (e.g. the same model with
int8 and float32 weights), per dataset and over all, with each run's balanced accuracy and the paired
bootstrap interval of their difference (the same resamples for both runs, grouped as the harness groups):

    halucheck eval -d factcheck-gpt -d halueval-qa -n 100 -p cpu-1.5b-int8 -o runs/int8
    halucheck eval -d factcheck-gpt -d halueval-qa -n 100 -p cpu-1.5b-f32 --config f32.yaml -o runs/f32
    python scripts/verdict_agreement.py runs/int8 runs/f32

Items with no verdict in either run are counted apart, never as agreeing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from halucheck.evaluation.metrics import balanced_accuracy, bootstrap_indices, percentile_ci  # noqa: E402


def _predictions(run: Path) -> dict[str, dict]:
    path = run / "predictions.jsonl"
    if not path.is_file():
        sys.exit(f"{path} not found: give the run directories `halucheck eval -o` wrote")
    return {p["id"]: p for p in map(json.loads, path.read_text().splitlines())}


def agreement(a: dict[str, dict], b: dict[str, dict], ids: list[str]) -> dict:
    both = [i for i in ids if a[i]["prediction"] is not None and b[i]["prediction"] is not None]
    same = sum(a[i]["prediction"] == b[i]["prediction"] for i in both)
    y = np.array([a[i]["label"] for i in both], dtype=bool)
    pa = np.array([a[i]["prediction"] for i in both], dtype=bool)
    pb = np.array([b[i]["prediction"] for i in both], dtype=bool)
    groups = [a[i].get("group") or i for i in both]
    diffs = [balanced_accuracy(y[k], pa[k], None) - balanced_accuracy(y[k], pb[k], None)
             for k in bootstrap_indices(len(both), groups)]
    # which run was right where they differ: a systematic shift shows as many flips one way
    a_right = sum(pa[k] == y[k] and pb[k] != y[k] for k in range(len(both)))
    b_right = sum(pb[k] == y[k] and pa[k] != y[k] for k in range(len(both)))
    return {"n": len(ids), "decided_in_both": len(both), "same": same, "agreement": same / len(both) if both else None,
            "balacc_a": balanced_accuracy(y, pa, None), "balacc_b": balanced_accuracy(y, pb, None),
            "diff_ci": percentile_ci(diffs), "a_right": a_right, "b_right": b_right}


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit("usage: python scripts/verdict_agreement.py RUN_A RUN_B")
    a_dir, b_dir = map(Path, sys.argv[1:])
    a, b = _predictions(a_dir), _predictions(b_dir)
    common = [i for i in a if i in b]
    if not common:
        sys.exit(f"{a_dir} and {b_dir} share no item ids: run both on the same sets, split and --limit")
    sets = sorted({a[i]["dataset"] for i in common})
    print(f"A = {a_dir}, B = {b_dir}; {len(common)} items in both")
    print("| dataset | items | decided in both | same verdict | BalAcc A | BalAcc B | A - B, 95 % paired interval "
          "| only A right | only B right |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, ids in [(s, [i for i in common if a[i]["dataset"] == s]) for s in sets] + [("all", common)]:
        r = agreement(a, b, ids)
        lo, hi = r["diff_ci"]
        share = "–" if r["agreement"] is None else f"{r['agreement']:.1%}"
        print(f"| {name} | {r['n']} | {r['decided_in_both']} | {r['same']} ({share}) | "
              f"{r['balacc_a']:.3f} | {r['balacc_b']:.3f} | {r['balacc_a'] - r['balacc_b']:+.3f} [{lo:+.3f}, {hi:+.3f}] | "
              f"{r['a_right']} | {r['b_right']} |")


if __name__ == "__main__":
    main()
