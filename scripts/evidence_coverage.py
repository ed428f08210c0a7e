"""How much of each named set's evidence a verifier reads: the share of evidence characters (white space aside) in
what the chunking judges (`direct`, `probe`: every chunk) and in what the single judges are shown (the top
sentences, `halucheck eval`'s select_evidence).

    python scripts/evidence_coverage.py [--split dev] [-n 200]
"""

from __future__ import annotations

import argparse
import re

SETS = ["factcheck-gpt", "wice", "halueval-qa", "summedits", "begin", "faithdial", "q2", "contract-nli"]


def _chars(texts) -> int:
    return sum(len(re.sub(r"\s+", "", t)) for t in texts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--split", default="dev")
    ap.add_argument("-n", type=int, default=200, help="first N items of each set")
    args = ap.parse_args()
    from halucheck.evaluation.datasets import load
    from halucheck.evaluation.harness import select_evidence
    from halucheck.verifiers.probe.prompt import chunks

    print("| set | items | evidence chars | chunks per item | judged by direct/probe | shown to selfcheck |")
    print("|---|---|---|---|---|---|")
    for name in SETS:
        items = load(name, args.split, limit=args.n)
        total = sum(_chars(it.evidence) for it in items)
        parts = [chunks(it.evidence) for it in items]
        judged = sum(_chars(c.text for c in p) for p in parts)
        shown = sum(_chars(select_evidence(it.claim, it.evidence)) for it in items)
        print(f"| {name} | {len(items)} | {total:,} | {sum(map(len, parts)) / len(items):.1f} | "
              f"{100 * judged / total:.1f} % | {100 * shown / total:.1f} % |")


if __name__ == "__main__":
    main()
