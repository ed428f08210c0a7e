"""Math answers through `halucheck run`, as a user would check them: no flag, no evidence but the question.

    python scripts/experiments/math_run_set.py write --split dev --limit 40 --out /tmp/math-dev.jsonl
    halucheck run --input /tmp/math-dev.jsonl -p cpu-1.5b -o runs/math-dev
    python scripts/experiments/math_run_set.py score runs/math-dev /tmp/math-dev.jsonl

``write`` takes FacTool's math responses (``../shared/datasets/factool/math.jsonl``, the split by position as
SPLITS.md says) as run input: id, question, answer. ``score`` reads the run's results.jsonl against the
labels and prints the false-alarm rate on the right answers (the share reported hallucinated), the share of
wrong answers caught, what decided each flag, and the answers left undecided.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from halucheck.evaluation import load


def write(args) -> None:
    items = load("factool-math-response", split=args.split, limit=args.limit)
    with open(args.out, "w", encoding="utf-8") as fh:
        for it in items:
            fh.write(json.dumps({"id": it.id, "question": it.question, "answer": it.response,
                                 "hallucinated": it.label}, ensure_ascii=False) + "\n")
    print(f"{len(items)} answers ({sum(it.label for it in items)} labelled wrong) -> {args.out}")


def score(args) -> None:
    labels = {json.loads(line)["id"]: json.loads(line)["hallucinated"]
              for line in Path(args.input).read_text(encoding="utf-8").splitlines() if line.strip()}
    results = [json.loads(line) for line in (Path(args.run) / "results.jsonl").read_text().splitlines()]
    right = [r for r in results if labels.get(r["id"]) is False]
    wrong = [r for r in results if labels.get(r["id"]) is True]
    flagged_right = [r for r in right if r["hallucinated"] is True]
    caught = [r for r in wrong if r["hallucinated"] is True]
    undecided = [r for r in results if r["hallucinated"] is None]
    by = Counter(c.get("verifier") for r in flagged_right for c in r["claims"] if c["factuality"] is False)
    basis = Counter(c.get("basis") for r in results for c in r["claims"])
    closed = [c for r in results for c in r["claims"] if c.get("basis") == "closed-book" and c["factuality"] is False]
    print(f"right answers: {len(right)}; reported hallucinated: {len(flagged_right)} "
          f"(false-alarm rate {len(flagged_right) / max(1, len(right)):.3f}); false claims in them by verifier: "
          f"{dict(by)}")
    print(f"wrong answers: {len(wrong)}; caught: {len(caught)} (recall {len(caught) / max(1, len(wrong)):.3f})")
    print(f"undecided answers: {len(undecided)}; claims by basis: {dict(basis)}; "
          f"closed-book false claims: {len(closed)}, highest confidence "
          f"{max((c['confidence'] for c in closed), default=0):.2f}")
    for r in flagged_right:
        for c in r["claims"]:
            if c["factuality"] is False:
                print(f"  false alarm {r['id']}: [{c.get('verifier')}/{c.get('basis')}] {c['text'][-120:]!r}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("--split", default="dev")
    w.add_argument("--limit", type=int)
    w.add_argument("--out", required=True)
    s = sub.add_parser("score")
    s.add_argument("run")
    s.add_argument("input")
    args = ap.parse_args()
    {"write": write, "score": score}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
