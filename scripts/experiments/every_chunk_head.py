#!/usr/bin/env python
"""Which chunks should the head learn from? Measured on dev with leave-one-dataset-out, scored as `-v probe` scores a
claim at run time: every chunk of its evidence, the lowest P(hallucinated) deciding.

The shipped head learns from one chunk an item, the one that shares the most words with the claim (one pass an
item). At run time it reads every chunk and the best-supporting one decides, so on long evidence (WiCE, ContractNLI,
Factcheck-GPT) it is asked something it never learned: to tell "this chunk does not support it" from "no chunk
does". Recipes compared, each for the head's layer choices and C (the same grid as `train`'s):

- ``closest``: the chunk closest to the claim in words (as shipped);
- ``most supporting``: the chunk the direct verdict finds most supporting (``halucheck train --every-chunk``);
- ``every chunk of the unsupported``: a hallucinated claim is supported by none of its chunks, so each of them is an
  example of "not supported"; a supported claim gives its most-supporting chunk.

Held-out score of an item: the decision value of every one of its chunks from a head fitted without its set, the
lowest deciding (threshold 0: the fitted head's own), beside `direct`'s (the lowest P over the chunks, its shipped
threshold). Each recipe is also scored a second way: the head asked only at the chunk `direct` finds most
supporting (the head judges, `direct` picks the chunk). The training sample is `scripts/train_default_head.py`'s;
passes not in the feature store are computed (every chunk of every item: resumable, as `extract` is).

    python scripts/experiments/every_chunk_head.py [--scale 1]
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

RECIPES = ("closest", "most supporting", "every chunk of the unsupported")


def rows(exs, near, recipe):
    """(example index, chunk index) of each training row of ``recipe``."""
    out = []
    for n, e in enumerate(exs):
        best = max(range(len(e.chunks)), key=lambda k: e.chunks[k].margin)
        if recipe == "closest":
            out.append((n, near[n]))
        elif recipe == "most supporting" or not e.label:
            out.append((n, best))
        else:
            out += [(n, k) for k in range(len(e.chunks))]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=1.0)
    args = ap.parse_args()

    import numpy as np
    from train_default_head import PROFILE, TRAIN_SETS

    from halucheck.config import Settings
    from halucheck.engines.pool import EnginePool
    from halucheck.evaluation.heads import engine_layers, gather, item_examples
    from halucheck.evaluation.progress import Progress
    from halucheck.evaluation.verifiers import case_of
    from halucheck.verifiers.probe.features import FeatureStore, default_store, extractor_for
    from halucheck.verifiers.probe.head import Head
    from halucheck.verifiers.probe.prompt import chunks, closest, joined
    from halucheck.verifiers.probe.training import (C_CHOICES, LAYER_CHOICES, _decision, _fit, auroc,
                                                    balanced_accuracy, layer_rows)
    from halucheck.verifiers.probe.verifier import DIRECT_THRESHOLD

    sets = {k: max(2, round(v * args.scale)) for k, v in TRAIN_SETS.items()}
    items = gather(list(sets), [], sets).items
    with EnginePool(Settings.load(profile=PROFILE)) as engines:
        ex = extractor_for(engines.engine_for("initial"), purpose="extraction")
        ex.store = FeatureStore(default_store(ex.model_id, ex.precision))
        exs = item_examples(items, ex, Progress("every chunk"), every_chunk=True)
        n_layers = engine_layers(ex)
    print(f"{len(exs)} items, {sum(len(e.chunks) for e in exs)} chunks; passes computed now {ex.passes}", flush=True)
    cases = [case_of(it) for it in items]
    near = [closest(chunks(joined(c.evidence)), c.claim.statement) for c in cases]
    assert all(k < len(e.chunks) for e, k in zip(exs, near))
    y = np.array([e.label for e in exs], dtype=int)
    names = sorted({e.dataset for e in exs})
    two_class = [d for d in names if len({e.label for e in exs if e.dataset == d}) == 2]

    def figures(score, threshold):
        per = {d: balanced_accuracy(y[m], score[m] >= threshold) for d in two_class
               for m in [np.array([e.dataset == d for e in exs])]}
        return float(np.mean(list(per.values()))), auroc(y, score), per

    direct = np.array([min(1 - f.p_supported for f in e.chunks) for e in exs])
    # the chunk direct finds most supporting: where a head can be asked instead of taking its own lowest
    pick = [max(range(len(e.chunks)), key=lambda k: e.chunks[k].margin) for e in exs]
    dmean, dau, dper = figures(direct, DIRECT_THRESHOLD)
    print(f"direct (lowest P over the chunks): mean BalAcc {dmean:.3f}, AUROC {dau:.3f}")
    best_rows = {}
    for fractions in LAYER_CHOICES:
        layers = layer_rows(fractions, n_layers)
        vec = [[Head.vector(f, layers) for f in e.chunks] for e in exs]
        for recipe in RECIPES:
            r = rows(exs, near, recipe)
            X = np.stack([vec[n][k] for n, k in r])
            yr = np.array([exs[n].label for n, _ in r], dtype=int)
            owner = np.array([exs[n].dataset for n, _ in r])
            for C in C_CHOICES:
                z, zp = np.zeros(len(exs)), np.zeros(len(exs))
                for d in names:
                    params = _fit(X[owner != d], yr[owner != d], C)
                    for n in (n for n, e in enumerate(exs) if e.dataset == d):
                        dec = _decision(params, np.stack(vec[n]))
                        z[n] = dec.min()
                        zp[n] = dec[pick[n]]
                for way, score in ((recipe, z), (f"{recipe}, scored at direct's chunk", zp)):
                    mean, au, per = figures(score, 0.0)
                    print(f"  layers {list(layers)} C={C} {way}: mean BalAcc {mean:.3f}, AUROC {au:.3f}", flush=True)
                    if mean > best_rows.get(way, (-1,))[0]:
                        best_rows[way] = (mean, au, per, list(layers), C)
    print("\nbest choice of each recipe (mean BalAcc over the two-class sets held out; AUROC of all items):")
    print("| recipe | layers | C | mean BalAcc | AUROC | " + " | ".join(two_class) + " |")
    print("|---|---|---|---|---|" + "---|" * len(two_class))
    print(f"| direct | – | – | {dmean:.3f} | {dau:.3f} | " + " | ".join(f"{dper[d]:.3f}" for d in two_class) + " |")
    for recipe, (mean, au, per, layers, C) in best_rows.items():
        print(f"| {recipe} | {layers} | {C} | {mean:.3f} | {au:.3f} | "
              + " | ".join(f"{per[d]:.3f}" for d in two_class) + " |")


if __name__ == "__main__":
    main()
