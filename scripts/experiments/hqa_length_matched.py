#!/usr/bin/env python
"""HaluEval-QA, length-matched: test items chosen so that every answer word count holds as many hallucinated as right
answers, so that answer length (which alone reaches AUROC ~0.975 on this set) cannot separate them.

    python scripts/experiments/hqa_length_matched.py build runs/hqa-lm [-n 40]   # runs/hqa-lm/items.jsonl
    halucheck eval --data runs/hqa-lm/items.jsonl -v direct -p cpu-1.5b -o runs/hqa-lm/direct
    halucheck eval --data runs/hqa-lm/items.jsonl -v probe -p cpu-1.5b -o runs/hqa-lm/probe
    python scripts/experiments/hqa_length_matched.py score runs/hqa-lm direct probe

``score`` prints, per run, the AUROC over (hallucinated, right) pairs of the same word count (the length-matched
AUROC of `halucheck.evaluation.metrics.length_controlled`) and balanced accuracy, with 95 % bootstrap intervals
over rows.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def build(folder: Path, n: int) -> None:
    """Per word count, as many right as hallucinated answers (the first by position), from the shortest counts up, until
    ``n`` of each class."""
    from halucheck.evaluation.datasets import load

    items = load("halueval-qa", "test")
    by_words: dict[int, tuple[list, list]] = {}
    for it in items:
        by_words.setdefault(it.meta["answer_words"], ([], []))[int(it.label)].append(it)
    chosen = []
    for words in sorted(by_words):
        right, wrong = by_words[words]
        k = min(len(right), len(wrong), n - len(chosen) // 2)
        chosen += right[:k] + wrong[:k]
    folder.mkdir(parents=True, exist_ok=True)
    out = [{"id": it.id, "group": it.group, "question": it.question, "claim": it.answer, "evidence": list(it.evidence),
            "hallucinated": it.label, "words": it.meta["answer_words"]} for it in chosen]
    (folder / "items.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in out), "utf-8")
    strata = sorted({r["words"] for r in out})
    print(f"{len(out)} of {len(items)} test items written to {folder / 'items.jsonl'}: {len(out) // 2} of each class, "
          f"answer word counts {strata}")


def score(folder: Path, runs: list[str]) -> None:
    import numpy as np

    from halucheck.evaluation.metrics import bootstrap_indices, percentile_ci, stratified_auroc

    items = {r["id"]: r for r in map(json.loads, (folder / "items.jsonl").read_text("utf-8").splitlines())}
    for name in runs:
        preds = [json.loads(line) for line in (folder / name / "predictions.jsonl").read_text("utf-8").splitlines()]
        by = {p["id"].split(":", 2)[-1]: p for p in preds}  # "data:<file>:<id>"
        keys = [k for k in items if k in by]
        y = np.array([items[k]["hallucinated"] for k in keys], dtype=int)
        s = np.array([by[k]["score"] for k in keys], dtype=float)
        p = np.array([bool(by[k]["prediction"]) for k in keys], dtype=int)
        w = np.array([items[k]["words"] for k in keys])
        groups = [items[k]["group"] for k in keys]

        def balacc(i):
            return 0.5 * (p[i][y[i] == 1].mean() + (1 - p[i][y[i] == 0]).mean())

        boots = bootstrap_indices(len(y), groups)
        auc, pairs = stratified_auroc(y, s, w)
        lo, hi = percentile_ci([stratified_auroc(y[i], s[i], w[i])[0] for i in boots])
        blo, bhi = percentile_ci([balacc(i) for i in boots])
        print(f"{name}: {len(keys)} items, {pairs} matched pairs; length-matched AUROC {auc:.3f} [{lo:.3f}, {hi:.3f}]; "
              f"BalAcc {balacc(np.arange(len(y))):.3f} [{blo:.3f}, {bhi:.3f}]")


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "build":
        build(Path(sys.argv[2]), int(sys.argv[sys.argv.index("-n") + 1]) if "-n" in sys.argv else 40)
    elif len(sys.argv) >= 4 and sys.argv[1] == "score":
        score(Path(sys.argv[2]), sys.argv[3:])
    else:
        sys.exit(__doc__)
