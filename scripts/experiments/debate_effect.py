"""What the debate did, from a `halucheck eval -v debate` run: where it changed the first opinion, and
whether that helped.

    python scripts/experiments/debate_effect.py runs/eval/debate-0.5b [--baseline runs/eval/selfcheck-0.5b]

Per dataset: claims, LLM turns per claim, states run, unanimous debates, debates whose final verdict
differs from the initial agent's (S0), and of those how many the change made right or wrong; the
accuracy of the initial opinion alone against the debate's. With --baseline (another eval run), how
often the two agree on the shared items and the accuracy of each where they disagree.
"""

from __future__ import annotations

import argparse
from collections import defaultdict

from halucheck.evaluation import read_predictions


def summarise(rows: list[dict]) -> dict:
    n = turns = states = unanimous = changed = fixed = broke = init_right = final_right = 0
    for r in rows:
        d = r.get("detail") or {}
        chain = d.get("chain") or []
        if r.get("prediction") is None or not chain:
            continue
        n += 1
        turns += len(chain)
        states += d.get("rounds", 0)
        opinions = {t.get("factuality") for t in chain if t.get("factuality") is not None}
        unanimous += len(opinions) == 1
        first = next((t for t in chain if t.get("state") == "S0" and t.get("factuality") is not None), None)
        if first is None:
            continue
        initial_halluc = not first["factuality"]
        label, final = bool(r["label"]), bool(r["prediction"])
        init_right += initial_halluc == label
        final_right += final == label
        if initial_halluc != final:
            changed += 1
            fixed += final == label
            broke += initial_halluc == label
    return {
        "claims": n,
        "turns/claim": round(turns / n, 2) if n else None,
        "states/claim": round(states / n, 2) if n else None,
        "unanimous": unanimous,
        "changed S0": changed,
        "changed, now right": fixed,
        "changed, now wrong": broke,
        "acc S0": round(init_right / n, 3) if n else None,
        "acc debate": round(final_right / n, 3) if n else None,
    }


def agreement(rows: list[dict], other: list[dict]) -> dict:
    base = {r["id"]: r for r in other if r.get("prediction") is not None}
    both = [(r, base[r["id"]]) for r in rows if r.get("prediction") is not None and r["id"] in base]
    disagree = [(a, b) for a, b in both if a["prediction"] != b["prediction"]]
    return {
        "shared": len(both),
        "agree": len(both) - len(disagree),
        "disagree: debate right": sum(a["prediction"] == a["label"] for a, _ in disagree),
        "disagree: baseline right": sum(b["prediction"] == b["label"] for _, b in disagree),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", help="a debate eval run directory")
    ap.add_argument("--baseline", help="another eval run directory to compare verdicts with")
    args = ap.parse_args()
    rows = read_predictions(args.run)
    other = read_predictions(args.baseline) if args.baseline else None
    by_ds: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_ds[r["dataset"]].append(r)
    for ds, rs in by_ds.items():
        s = summarise(rs)
        if other is not None:
            s.update(agreement(rs, [o for o in other if o["dataset"] == ds]))
        print(f"{ds}: " + ", ".join(f"{k} {v}" for k, v in s.items()))


if __name__ == "__main__":
    main()
