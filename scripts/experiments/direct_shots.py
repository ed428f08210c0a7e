#!/usr/bin/env python
"""Would worked examples before the item make the prompt pass a better judge? Measured on the head's dev sample
(`scripts/train_default_head.py`'s 416 items, the chunk closest to the claim each), the shipped prompt against the
same prompt after a few invented worked examples given as earlier chat turns (document, statement, "Yes"/"No").

The examples are the same for every pass, so the prefix cache computes them once a run: they would cost a pass
nothing after the first. Reported for both prompts: `direct` (P from the first reply token, the threshold with the
best mean balanced accuracy over the sets, per prompt) and the head held out by set (leave one dataset out: the
shipped layers and C, and each prompt's own best choice on the same grid as `train`'s). Passes of the shipped
prompt are read from the default feature store; those of the examples' prompt go to a store of their own under
--workdir (resumable: kill it and start it again).

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

# Invented, not dataset data: a changed number, an answer the document backs, an added detail, a paraphrase.
SHOTS = (
    ("The Lindqvist Bridge, completed in 1978, spans 412 metres across the Ostra river and carries two rail tracks.",
     None, "The Lindqvist Bridge carries two rail tracks and was completed in 1987.", "No"),
    ("Mara Okafor joined the Helix Foundation as its chief financial officer in 2015 and became its director in 2021.",
     "What is Mara Okafor's role at the Helix Foundation?", "She has been its director since 2021.", "Yes"),
    ("The museum's new wing opened in May. It houses the textile collection and a reading room.",
     None, "The museum's new wing, which opened in May, houses the textile collection and a cafe.", "No"),
    ("Sales at Corvane fell by 8% in 2022, mainly because of weaker demand in Asia.",
     None, "Corvane's sales declined in 2022.", "Yes"),
)


def with_shots(messages):
    """``messages`` (the shipped prompt's builder) with the worked examples as earlier turns."""
    def build(document, text, question=None):
        system, user = messages(document, text, question)
        turns = [system]
        for doc, q, t, reply in SHOTS:
            turns += [messages(doc, t, q)[1], {"role": "assistant", "content": reply}]
        return (*turns, user)
    return build


def report(name, exs, n_layers):
    import numpy as np

    from halucheck.evaluation.heads import direct_figures
    from halucheck.verifiers.probe.training import Choice, choose, held_out_scores, per_part

    def mean(fig):
        return float(np.nanmean([v["balacc"] for k, v in fig.items() if k != "all"]))

    def mean_auroc(fig):
        return float(np.nanmean([v["auroc"] for k, v in fig.items() if k != "all"]))

    rows = {}
    fig, t = direct_figures(exs)
    rows[f"{name}: direct (threshold {t})"] = fig
    shipped = Choice((24,), 0.002, {})
    rows[f"{name}: head held out, layers [24] C 0.002"] = per_part(exs, held_out_scores(exs, shipped.layers, shipped.C))
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

    sets = {k: max(2, round(v * args.scale)) for k, v in TRAIN_SETS.items()}
    items = gather(list(sets), [], sets).items
    args.workdir.mkdir(parents=True, exist_ok=True)
    with EnginePool(Settings.load(profile=PROFILE)) as engines:
        ex = extractor_for(engines.engine_for("initial"), purpose="extraction")
        ex.store = FeatureStore(default_store(ex.model_id, ex.precision))
        plain = item_examples(items, ex, Progress("shipped prompt"))
        print(f"shipped prompt: {len(plain)} items, passes computed now {ex.passes}", flush=True)
        ex.store = FeatureStore(args.workdir / f"features-{ex.precision}.sqlite")
        shipped_messages = verifier.messages
        verifier.messages = with_shots(shipped_messages)
        try:
            shots = item_examples(items, ex, Progress("with worked examples"))
        finally:
            verifier.messages = shipped_messages
        print(f"with worked examples: passes computed now {ex.passes} ({ex.computed_tokens} tokens computed, "
              f"{ex.reused_tokens} reused)", flush=True)
        n_layers = engine_layers(ex)
    a = report("shipped", plain, n_layers)
    b = report("worked examples", shots, n_layers)
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
