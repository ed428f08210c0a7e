"""How much weight the head should give the direct verdict's margin, chosen on dev by leaving one dataset out.

    python scripts/experiments/probe_margin.py [--profile cpu-1.5b]

The head's features are the chosen layers' hidden states (1,536 numbers a layer) and the direct verdict's margin
(one number), standardised and fitted with one L2 penalty: the margin is one feature among ~1,500 and the penalty
shrinks it like any other. Multiplying the standardised margin by k lowers its penalty by k², so k chooses how much
the head leans on the direct verdict (k = 0: hidden states only; large k: the margin unpenalised). Also scored: the
margin alone (a threshold fitted per fold) and the hidden states alone. Reads the dev passes from the model's
feature store (run `scripts/train_default_head.py extract` first); prints LODO BalAcc per set and the mean.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

WEIGHTS = (0.0, 1.0, 3.0, 10.0, 30.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="cpu-1.5b")
    args = ap.parse_args()
    from train_default_head import TRAIN_SETS

    from halucheck.config import Settings
    from halucheck.engines.pool import EnginePool
    from halucheck.evaluation.heads import gather, item_examples
    from halucheck.verifiers.probe.features import FeatureStore, default_store, extractor_for
    from halucheck.verifiers.probe.head import Head, resolve
    from halucheck.verifiers.probe.training import C_CHOICES, balanced_accuracy, folds, parts

    with EnginePool(Settings.load(profile=args.profile)) as engines:
        ex = extractor_for(engines.engine_for("initial"))
        ex.store = FeatureStore(default_store(ex.model_id, ex.precision))
        shipped = resolve(None, ex.model_id)
        exs = item_examples(gather(list(TRAIN_SETS), [], TRAIN_SETS).items, ex)
    if ex.passes:
        sys.exit(f"{ex.passes} dev passes were not in the store: run scripts/train_default_head.py extract first")
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    X = np.stack([Head.vector(e.representative, shipped.layers) for e in exs])
    y = np.array([e.label for e in exs], dtype=int)
    names = [d for d in parts(exs) if d != "all"]
    print(f"{len(exs)} dev examples, layers {list(shipped.layers)}; LODO BalAcc (threshold 0 / 0.5)")
    print("| features | C | " + " | ".join(names) + " | mean |\n|" + "---|" * (len(names) + 3))

    def report(label: str, C: float | str, z: np.ndarray) -> None:
        per = {d: balanced_accuracy(y[m], z[m] >= 0) for d, m in parts(exs).items()}
        mean = np.nanmean([per[d] for d in names])
        print(f"| {label} | {C} | " + " | ".join(f"{per[d]:.2f}" for d in names) + f" | **{mean:.3f}** |", flush=True)

    z = np.zeros(len(exs))  # the margin alone: one-feature logistic regression per fold
    for part in folds(exs):
        train = np.setdiff1d(np.arange(len(exs)), part)
        lr = LogisticRegression(class_weight="balanced").fit(X[train, -1:], y[train])
        z[part] = lr.decision_function(X[part, -1:])
    report("margin alone", "-", z)
    for k in WEIGHTS:
        for C in C_CHOICES:
            z = np.zeros(len(exs))
            for part in folds(exs):
                train = np.setdiff1d(np.arange(len(exs)), part)
                sc = StandardScaler().fit(X[train])
                Z = (X - sc.mean_) / np.where(sc.scale_ > 0, sc.scale_, 1.0)
                Z[:, -1] *= k
                lr = LogisticRegression(C=C, class_weight="balanced", max_iter=2000).fit(Z[train], y[train])
                z[part] = lr.decision_function(Z[part])
            report(f"states + {k:g}x margin" if k else "states alone", C, z)


if __name__ == "__main__":
    main()
