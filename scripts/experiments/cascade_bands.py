"""Replay a cascade's bands from two eval runs on the same items, without a model call.

    python scripts/experiments/cascade_bands.py CASCADE_RUN DEBATE_RUN [--bands 0.2-0.8,0-0.5,...]

CASCADE_RUN: a `halucheck eval -v selfcheck,debate` run (each prediction's chain starts with the first
verifier's turn, whose p_factual gives its P(hallucinated)); DEBATE_RUN: the debate alone on the same items.
For each band a claim takes the debate's prediction when the first verifier's P(hallucinated) is inside the
band, else the first verifier's. Prints balanced accuracy, AUROC and LLM calls (one per first-stage claim
plus the debate's turns) per dataset and overall.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def rows(folder: str) -> dict[str, dict]:
    return {r["id"]: r for r in map(json.loads, (Path(folder) / "predictions.jsonl").open())}


def balanced_accuracy(pairs) -> float:
    pos = [p for p, label in pairs if label]
    neg = [p for p, label in pairs if not label]
    return ((sum(pos) / len(pos) if pos else 0.0) + (sum(not p for p in neg) / len(neg) if neg else 0.0)) / 2


def auroc(pairs) -> float:
    pos = [s for s, label in pairs if label]
    neg = [s for s, label in pairs if not label]
    if not pos or not neg:
        return float("nan")
    return sum((a > b) + 0.5 * (a == b) for a in pos for b in neg) / (len(pos) * len(neg))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cascade")
    ap.add_argument("debate")
    ap.add_argument("--bands", default="0.2-0.8,0.1-0.9,0.01-0.99,0.5-1,0-0.5,0-1")
    args = ap.parse_args()
    first, deb = rows(args.cascade), rows(args.debate)
    ids = [i for i in first if i in deb and first[i]["detail"]]
    p_first = {i: 1.0 - first[i]["detail"]["chain"][0]["p_factual"] for i in ids}
    bands = [tuple(float(x) for x in b.split("-")) for b in args.bands.split(",")]
    print(f"{len(ids)} items in both runs")
    for ds in sorted({i.split(":")[0] for i in ids}) + [None]:
        sel = [i for i in ids if ds is None or i.startswith(ds + ":")]
        print(f"\n{ds or 'all'} ({len(sel)} items)")
        turns = {i: len(deb[i]["detail"]["chain"]) for i in sel}
        print(f"  first alone:  BalAcc {balanced_accuracy([(p_first[i] >= 0.5, first[i]['label']) for i in sel]):.3f} "
              f"AUROC {auroc([(p_first[i], first[i]['label']) for i in sel]):.3f} calls {len(sel)}")
        print(f"  debate alone: BalAcc {balanced_accuracy([(deb[i]['prediction'], deb[i]['label']) for i in sel]):.3f} "
              f"AUROC {auroc([(deb[i]['score'], deb[i]['label']) for i in sel]):.3f} calls {sum(turns.values())}")
        for lo, hi in bands:
            sent = [i for i in sel if lo <= p_first[i] <= hi]
            pred = [((deb[i]["prediction"], deb[i]["score"]) if i in sent else (p_first[i] >= 0.5, p_first[i]))
                    for i in sel]
            labels = [first[i]["label"] for i in sel]
            print(f"  band {lo:g}-{hi:g}: debated {len(sent)}, calls {len(sel) + sum(turns[i] for i in sent)}, "
                  f"BalAcc {balanced_accuracy([(p, lab) for (p, _), lab in zip(pred, labels)]):.3f} "
                  f"AUROC {auroc([(s, lab) for (_, s), lab in zip(pred, labels)]):.3f}")


if __name__ == "__main__":
    main()
