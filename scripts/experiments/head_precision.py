#!/usr/bin/env python
"""Does a head fitted on one precision's passes read another's? The same dev items' passes in bfloat16 (read from
that precision's feature store, where `train_default_head.py extract` put them) and in int8 (the `cpu-1.5b-int8`
profile: computed here, into the int8 store), scored by the shipped head and by `direct`: how far the decision
values and P move, and how many verdicts change.

    python scripts/experiments/head_precision.py [-n 96]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))


def passes(profile: str, items):
    from halucheck.config import Settings
    from halucheck.engines.pool import EnginePool
    from halucheck.evaluation.heads import item_examples
    from halucheck.evaluation.progress import Progress
    from halucheck.verifiers.probe.features import FeatureStore, default_store, extractor_for

    with EnginePool(Settings.load(profile=profile)) as engines:
        ex = extractor_for(engines.engine_for("initial"), purpose="extraction")
        ex.store = FeatureStore(default_store(ex.model_id, ex.precision))
        exs = item_examples(items, ex, Progress(f"{profile} ({ex.precision})"))
        print(f"{profile}: {ex.precision}, {ex.passes} passes computed now", flush=True)
    return exs, ex.model_id


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=96, help="dev items, spread over the training sets")
    args = ap.parse_args()

    import numpy as np
    from train_default_head import TRAIN_SETS

    from halucheck.evaluation.heads import gather
    from halucheck.verifiers.probe.head import resolve
    from halucheck.verifiers.probe.verifier import Direct, Probe

    items = gather(list(TRAIN_SETS), [], TRAIN_SETS).items
    step = max(1, len(items) // args.n)
    items = items[::step][:args.n]
    bf, model = passes("cpu-1.5b", items)
    i8, _ = passes("cpu-1.5b-int8", items)
    head = resolve(None, model)
    print(f"shipped head: fitted {head.meta.get('fitted')}, layers {head.layers}, C {head.meta.get('C')}")
    pb = head.p_hallucinated([e.representative for e in bf])
    pi = head.p_hallucinated([e.representative for e in i8])
    db = np.array([1 - e.representative.p_supported for e in bf])
    di = np.array([1 - e.representative.p_supported for e in i8])
    y = np.array([e.label for e in bf])
    for name, a, b, t in (("probe", pb, pi, Probe.threshold), ("direct", db, di, Direct.threshold)):
        agree = float(np.mean((a >= t) == (b >= t)))
        acc_b, acc_i = (float(np.mean((x >= t) == y)) for x in (a, b))
        print(f"{name}: {len(y)} items, verdicts the same {agree:.3f}, |P bf16 - P int8| median "
              f"{np.median(np.abs(a - b)):.3f}, 90th pct {np.percentile(np.abs(a - b), 90):.3f}, correlation "
              f"{np.corrcoef(a, b)[0, 1]:.3f}; accuracy bf16 {acc_b:.3f}, int8 {acc_i:.3f}")


if __name__ == "__main__":
    main()
