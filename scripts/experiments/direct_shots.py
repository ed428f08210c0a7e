#!/usr/bin/env python
"""Do the worked examples before the item make the prompt pass a better judge? Measured on the head's dev sample
(`scripts/train_default_head.py`'s 416 items, the chunk closest to the claim each): the shipped prompt
(`prompts/direct.yaml`, its `shots` as earlier chat turns) against the same prompt without them (its first and last
turn only: the instructions and the item).

The examples are the same for every pass, so the prefix cache computes them once a run: they cost a pass nothing
after the first. Reported for both prompts: `direct` (P from the first reply token, the threshold with the best
mean balanced accuracy over the sets, per prompt) and the head held out by set (leave one dataset out: the shipped
head's layers and C, and each prompt's own best choice on the same grid as `train`'s). Passes of the shipped prompt
are read from the default feature store; those without the examples go to a store of their own under --workdir
(resumable: kill it and start it again).

    python scripts/experiments/direct_shots.py [--workdir runs/direct-shots] [--scale 1]
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


def without_shots(messages):
    """``messages`` (the shipped prompt's builder) without the worked examples: the instructions and the item."""
    def build(document, text, question=None):
        turns = messages(document, text, question)
        return (turns[0], turns[-1])
    return build


def report(name, exs, n_layers, shipped):
    import numpy as np

    from halucheck.evaluation.heads import direct_figures
    from halucheck.verifiers.probe.training import choose, held_out_scores, per_part

    def mean(fig):
        return float(np.nanmean([v["balacc"] for k, v in fig.items() if k != "all"]))

    def mean_auroc(fig):
        return float(np.nanmean([v["auroc"] for k, v in fig.items() if k != "all"]))

    rows = {}
    fig, t = direct_figures(exs)
    rows[f"{name}: direct (threshold {t})"] = fig
    layers, C = shipped.layers, shipped.meta["C"]
    rows[f"{name}: head held out, layers {list(layers)} C {C}"] = per_part(exs, held_out_scores(exs, layers, C))
    best = choose(exs, n_layers)[0]
    rows[f"{name}: head held out, its best {list(best.layers)} C {best.C}"] = best.figures
    for label, f in rows.items():
        print(f"{label}: mean BalAcc {mean(f):.3f}, mean AUROC {mean_auroc(f):.3f}, all AUROC {f['all']['auroc']:.3f}")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", type=Path, default=REPO / "runs" / "direct-shots")
    ap.add_argument("--scale", type=float, default=1.0)
    args = ap.parse_args()

    from train_default_head import PROFILE, TRAIN_SETS

    from halucheck.config import Settings
    from halucheck.engines.pool import EnginePool
    from halucheck.evaluation.heads import engine_layers, gather, item_examples
    from halucheck.evaluation.progress import Progress
    from halucheck.verifiers.probe import verifier
    from halucheck.verifiers.probe.features import FeatureStore, default_store, extractor_for
    from halucheck.verifiers.probe.head import resolve

    sets = {k: max(2, round(v * args.scale)) for k, v in TRAIN_SETS.items()}
    items = gather(list(sets), [], sets).items
    args.workdir.mkdir(parents=True, exist_ok=True)
    with EnginePool(Settings.load(profile=PROFILE)) as engines:
        ex = extractor_for(engines.engine_for("initial"), purpose="extraction")
        ex.store = FeatureStore(default_store(ex.model_id, ex.precision))
        shots = item_examples(items, ex, Progress("shipped prompt, with worked examples"))
        print(f"shipped prompt: {len(shots)} items, passes computed now {ex.passes}", flush=True)
        ex.store = FeatureStore(args.workdir / f"features-{ex.precision}.sqlite")
        shipped_messages = verifier.messages
        verifier.messages = without_shots(shipped_messages)
        try:
            plain = item_examples(items, ex, Progress("without worked examples"))
        finally:
            verifier.messages = shipped_messages
        print(f"without worked examples: passes computed now {ex.passes} ({ex.computed_tokens} tokens computed, "
              f"{ex.reused_tokens} reused)", flush=True)
        n_layers = engine_layers(ex)
        head = resolve(None, ex.model_id)
    a = report("without examples", plain, n_layers, head)
    b = report("worked examples (shipped)", shots, n_layers, head)
    import numpy as np

    names = [k for k in next(iter(a.values())) if k != "all"]
    print("\n| prompt, verifier | mean BalAcc | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    for label, f in (a | b).items():
        m = float(np.nanmean([f[d]["balacc"] for d in names]))
        cells = " | ".join(f"{f[d]['balacc']:.3f} / {f[d]['auroc']:.3f}" for d in names)
        print(f"| {label} | {m:.3f} | {cells} |")


if __name__ == "__main__":
    main()
