"""How long `halucheck report` takes to rebuild results.jsonl from a run database of many claims.

    python scripts/bench_report.py --items 2000 --claims-per-item 5

Fills a synthetic run database (every claim with 3 queries, 10 evidence passages and a 7-turn debate)
and times ``build_results`` on it. Prints claims, rows and seconds.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from halucheck.reports import build_results
from halucheck.store.runstore import RunStore


def fill(store: RunStore, items: int, per_item: int) -> int:
    text = "Passage text about the instrument maker and its founding year, long enough to look real. " * 3
    its, cls, qs, ev, turns, vs = [], [], [], [], [], []
    for i in range(items):
        its.append((i, f"a{i}", i + 1, "Q?", "An answer. " * per_item, None, None, True))
        for c in range(per_item):
            cid = f"{i}:{c}"
            cls.append((cid, i, c, f"Claim {c} of answer {i}.", None, 11 * c, 11 * c + 10, True))
            qs += [(cid, q, f"query {q} for {cid}") for q in range(3)]
            ev += [(cid, r, f"doc{r}.md", 100 * r, 100 * r + 90, 1.0 / (r + 1), text) for r in range(10)]
            turns += [(cid, t, "S1", "trust", "An opinion of a few words.", t % 2 == 0, 2, None, 900, 40, 600, 1.5)
                      for t in range(7)]
            vs.append((cid, False, 3, 0.71, 2, False, None))
    store._tx([
        ("INSERT INTO items VALUES (?, ?, ?, ?, ?, ?, ?, ?)", its),
        ("INSERT INTO claims VALUES (?, ?, ?, ?, ?, ?, ?, ?)", cls),
        ("INSERT INTO queries VALUES (?, ?, ?)", qs),
        ("INSERT INTO evidence VALUES (?, ?, ?, ?, ?, ?, ?)", ev),
        ("INSERT INTO turns VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", turns),
        ("INSERT INTO verdicts VALUES (?, ?, ?, ?, ?, ?, ?)", vs),
    ])
    return len(cls)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--claims-per-item", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = RunStore(Path(tmp) / "run.duckdb")
        t0 = time.perf_counter()
        claims = fill(store, args.items, args.claims_per_item)
        t_fill = time.perf_counter() - t0
        t0 = time.perf_counter()
        results = build_results(store)
        t_build = time.perf_counter() - t0
        store.close()
    assert sum(len(r["claims"]) for r in results) == claims
    print(f"items {args.items}, claims {claims}, evidence rows {claims * 10}, turns {claims * 7}")
    print(f"fill {t_fill:.1f} s; build_results {t_build:.2f} s ({1e3 * t_build / claims:.3f} ms per claim)")


if __name__ == "__main__":
    main()
