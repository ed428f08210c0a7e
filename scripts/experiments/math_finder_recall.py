#!/usr/bin/env python
"""How many of FacTool math's labelled calculations `find_calculations` recovers from the responses.

`factool-math-response` (and `halucheck run`) give the `arith` verifier a whole response, and the
deterministic finder `halucheck.kinds.calculations.find_calculations` stands in for FacTool's model-based extraction. This
script reads all 100 responses of `factool/math.jsonl` and, for each human-labelled calculation (label true or
false; the "null" ones are left out), asks whether the finder found a calculation in the same response whose
expression has the same value. Calculations whose labelled expression cannot be evaluated (algebra such as
`5x + 16094295 - 3x`, or words) cannot be matched: recall is given over the evaluable ones and over all.
Exits 0 with a note when the dataset is absent.

    python scripts/experiments/math_finder_recall.py [--data ../shared/datasets] [--misses]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from halucheck.arithmetic import ArithError, evaluate  # noqa: E402
from halucheck.kinds.calculations import find_calculations  # noqa: E402
from halucheck.errors import InputError  # noqa: E402
from halucheck.evaluation.datasets import dataset_root, split_of  # noqa: E402


def _value(expression: str):
    try:
        return evaluate(expression).value
    except ArithError:
        return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", help="the datasets folder (default: $HALUCHECK_DATASETS or shared/datasets above)")
    ap.add_argument("--misses", action="store_true", help="print every labelled calculation the finder missed")
    args = ap.parse_args()
    try:
        path = dataset_root(args.data) / "factool" / "math.jsonl"
    except InputError as exc:
        print(f"note: {exc}")
        return
    if not path.is_file():
        print(f"note: {path} is absent")
        return
    rows = [json.loads(line) for line in path.open(encoding="utf-8") if line.strip()]

    # per split and overall: labelled, evaluable, found, responses, responses with nothing found, found calcs
    keys = ("labelled", "evaluable", "found", "responses", "nothing_found", "found_calculations", "found_matching")
    stats = {s: dict.fromkeys(keys, 0) for s in ("dev", "test", "all")}
    for pos, r in enumerate(rows):
        found = find_calculations(r["response"])
        found_values = [_value(c.expression) for c in found]
        labelled_values = []
        for s in (split_of(pos), "all"):
            stats[s]["responses"] += 1
            stats[s]["nothing_found"] += not found
            stats[s]["found_calculations"] += len(found)
        for c in r["claims"]:
            if not isinstance(c["label"], bool):
                continue
            expression = c["claim"]["math_calculation"]
            value = _value(expression)
            labelled_values.append(value)
            hit = value is not None and value in found_values
            for s in (split_of(pos), "all"):
                stats[s]["labelled"] += 1
                stats[s]["evaluable"] += value is not None
                stats[s]["found"] += hit
            if args.misses and not hit:
                why = "not evaluable" if value is None else "not found"
                print(f"  miss {pos} ({why}): {expression} = {c['claim']['calculated_answer']}")
        matching = sum(v is not None and v in labelled_values for v in found_values)
        for s in (split_of(pos), "all"):
            stats[s]["found_matching"] += matching

    print(f"find_calculations on {path} ({len(rows)} responses); a labelled calculation is recovered when a "
          "calculation found in its response has an expression of the same value\n")
    print("| split | responses | none found | labelled | evaluable | recovered | recall (evaluable) | recall (all) "
          "| found | found matching a labelled one |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for s in ("dev", "test", "all"):
        t = stats[s]
        print(f"| {s} | {t['responses']} | {t['nothing_found']} | {t['labelled']} | {t['evaluable']} | {t['found']} "
              f"| {t['found'] / max(t['evaluable'], 1):.3f} | {t['found'] / max(t['labelled'], 1):.3f} "
              f"| {t['found_calculations']} | {t['found_matching']} |")


if __name__ == "__main__":
    main()
