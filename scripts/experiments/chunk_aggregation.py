"""How should the chunks' verdicts make the claim's? Offline, on the clean panel's dev items (every chunk in the
feature store; see early_exit.py), for `direct` and the shipped head (`probe`, which was not trained on the panel):
the claim's P(hallucinated) as the best-supporting chunk's (the minimum: as shipped), the chunk closest to the claim
in words, the mean, a soft minimum, and the chunk `direct` finds most supporting. Balanced accuracy (at each
verifier's threshold) and AUROC per set with several chunks, and the mean over all sets.

    python scripts/experiments/chunk_aggregation.py
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

MODEL = "qwen2.5-coder-1.5b-instruct"


def main() -> None:
    import numpy as np
    from early_exit import panel_chunk_scores

    from halucheck import weights
    from halucheck.evaluation.metrics import auroc, balanced_accuracy
    from halucheck.verifiers.probe.head import resolve
    from halucheck.verifiers.probe.prompt import closest
    from halucheck.verifiers.probe.verifier import DIRECT_THRESHOLD

    head = resolve(None, f"{MODEL}@{weights.spec_for(MODEL).sha256[:12]}")
    scored, missing = panel_chunk_scores(features=True)
    print(f"panel items {len(scored)} (without every pass stored: {missing})")
    ways = {
        "min (shipped)": lambda p, near, d: p.min(),
        "closest chunk": lambda p, near, d: p[near],
        "mean": lambda p, near, d: p.mean(),
        "direct's best chunk": lambda p, near, d: p[int(np.argmin(d))],
        "soft min (t=0.1)": lambda p, near, d: -0.1 * np.log(np.mean(np.exp(-p / 0.1))),
    }
    for verifier, threshold in (("direct", DIRECT_THRESHOLD), ("probe", 0.5)):
        rows = defaultdict(lambda: defaultdict(list))
        for item, case, parts, feats in scored:
            d = np.array([1.0 - f.p_supported for f in feats])  # direct's P of each chunk
            p = d if verifier == "direct" else head.p_hallucinated(feats)
            near = closest(parts, case.claim.statement)
            name = item.id.split(":", 1)[0]
            rows[name]["y"].append(bool(item.label))
            rows[name]["chunks"].append(len(parts))
            for way, f in ways.items():
                rows[name][way].append(float(f(p, near, d)))
        print(f"\n{verifier} (threshold {threshold}): BalAcc / AUROC")
        print(f"{'set':14} {'chunks':>6} " + " ".join(f"{w:>22}" for w in ways))
        means = defaultdict(list)
        for name, r in sorted(rows.items()):
            y = np.array(r["y"])
            cells = []
            for way in ways:
                s = np.array(r[way])
                b, a = balanced_accuracy(y, s >= threshold, s), auroc(y, None, s)
                means[way].append((b, a))
                cells.append(f"{b:10.3f} / {a:9.3f}")
            print(f"{name:14} {np.mean(r['chunks']):6.1f} " + " ".join(f"{c:>22}" for c in cells))
        print(f"{'mean':14} {'':6} " + " ".join(
            f"{np.mean([b for b, _ in means[w]]):10.3f} / {np.mean([a for _, a in means[w]]):9.3f}".rjust(22)
            for w in ways))


if __name__ == "__main__":
    main()
