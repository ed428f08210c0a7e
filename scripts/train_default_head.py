"""Fit the head shipped for the default profile, and extract the test items' features for its one report.

    python scripts/train_default_head.py extract [--per-set N] [--test N]   # prompt passes into the feature store
    python scripts/train_default_head.py fit [--per-set N]                   # LODO choice, fit, save in the package
    python scripts/train_default_head.py ship-direct-calibrator              # `direct`'s calibrator, on the dev passes
    python scripts/train_default_head.py ship-probe-calibrator               # the shipped head's, on its held-out P

Both steps read and write the feature store (``$HALUCHECK_HOME/features/<model>-<precision>.sqlite``): extraction is resumable
(kill it and start it again: stored passes are not computed again) and ``fit`` computes nothing new when
``extract`` ran with the same numbers. Training items: the dev splits of the sets in :data:`TRAIN_SETS` (sampled by
``halucheck.evaluation.heads.sample``: balanced classes, at most 4 per source group, the clean panel left out);
test items: the same rule on the test splits of :data:`TEST_SETS`, extracted only so that the report runs from
the store (nothing is fitted or chosen on them).
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# set -> items sampled from its dev split (one prompt pass each: the chunk closest to the claim). Sized for a
# 2-core CPU without AVX-512 (~37 prompt tokens/s for the 1.5B): about 70 minutes; --scale 4 on a faster machine.
TRAIN_SETS = {"halueval-qa": 50, "halueval-dialogue": 40, "begin": 50, "faithdial": 50, "q2": 50,
              "factcheck-gpt": 40, "summedits": 40, "wice": 25, "wice-dev": 20, "wice-dev-d2c": 12,
              "halueval-summarization": 15, "contract-nli": 24}
# set -> items sampled from its test split (every chunk of the evidence: the verdict as `-v probe` reaches it)
TEST_SETS = {"halueval-qa": 40, "begin": 40, "faithdial": 40, "q2": 40, "factcheck-gpt": 24, "summedits": 24,
             "wice": 12, "contract-nli": 24}
PROFILE = "cpu-1.5b"


def _items(split: str, sets: dict[str, int], scale: float):
    from halucheck.evaluation.datasets import load
    from halucheck.evaluation.heads import panel_ids, sample

    out = []
    for name, n in sets.items():
        out += sample(load(name, split), max(2, round(n * scale)), exclude=panel_ids() if split == "dev" else None)
    return out


def extract(scale: float, order: str) -> None:
    from halucheck.config import Settings
    from halucheck.engines.pool import EnginePool
    from halucheck.evaluation.progress import Progress
    from halucheck.evaluation.verifiers import case_of
    from halucheck.verifiers.probe.features import FeatureStore, default_store, extractor_for
    from halucheck.verifiers.probe.verifier import prompts_of

    phases = {"dev": _items("dev", TRAIN_SETS, scale), "test": _items("test", TEST_SETS, scale)}
    with EnginePool(Settings.load(profile=PROFILE)) as engines:
        ex = extractor_for(engines.engine_for("initial"), purpose="extraction")
        ex.store = FeatureStore(default_store(ex.model_id, ex.precision))
        for phase in order.split(","):
            items = phases[phase]
            # set by set, so that a stop leaves whole sets done
            for name in dict.fromkeys(it.dataset for it in items):
                prompts = [p for it in items if it.dataset == name
                           for p in prompts_of(case_of(it), only_closest=phase == "dev")[1]]
                ex.features(prompts, Progress(f"{phase} {name} ({sum(it.dataset == name for it in items)} items)"))
        print(f"passes {ex.passes}, computed tokens {ex.computed_tokens}, reused {ex.reused_tokens}; "
              f"store {len(ex.store)} entries", flush=True)


def fit(scale: float) -> None:
    from halucheck.config import Settings
    from halucheck.evaluation.heads import train
    from halucheck.verifiers.probe.head import shipped_path

    settings = Settings.load(profile=PROFILE)
    model = settings.profile_for("initial").model
    path, meta = train(settings, list(TRAIN_SETS), [], "default", {k: round(v * scale) for k, v in TRAIN_SETS.items()},
                       out=shipped_path(model), log=print, direct_threshold=True)
    print(f"saved {path} ({path.stat().st_size // 1024} KB): layers {meta['layers']}, C {meta['C']}")
    print("| held out | n | BalAcc | AUROC | direct BalAcc (dev threshold) | direct AUROC |\n|---|---|---|---|---|---|")
    for k, v in meta["held_out"].items():
        d = meta["direct"][k]
        print(f"| {k} | {v['n']} | {v['balacc']:.3f} [{v['balacc_ci'][0]:.3f}, {v['balacc_ci'][1]:.3f}] | "
              f"{v['auroc']:.3f} [{v['auroc_ci'][0]:.3f}, {v['auroc_ci'][1]:.3f}] | {d['balacc']:.3f} | {d['auroc']:.3f} |")
    print(f"direct verdict: the P(hallucinated) threshold best on dev (mean BalAcc over the sets): "
          f"{meta['direct_threshold']:.2f}")


def ship_calibrator(scale: float, verifier: str) -> None:
    """The calibrator the package ships for ``verifier`` on the default model, fitted on the dev passes the head was
    trained on, no undecided band. ``direct``: its P (it learns nothing from them; its threshold was chosen on
    them). ``probe``: the shipped head's P of each item from a head with its layers and C fitted without the item's
    set (what the head says of a set it never saw: the scores its own Platt map was fitted on), so that a run's
    output says how its P was calibrated, as `direct`'s does. A head of your own (``--head``) is not given it."""
    import numpy as np

    from halucheck.config import Settings
    from halucheck.engines.pool import EnginePool
    from halucheck.evaluation.heads import gather, item_examples
    from halucheck.verifiers import calibration
    from halucheck.verifiers.probe.features import FeatureStore, default_store, extractor_for

    settings = Settings.load(profile=PROFILE)
    model = settings.profile_for("initial").model
    sets = {k: round(v * scale) for k, v in TRAIN_SETS.items()}
    with EnginePool(settings) as engines:
        ex = extractor_for(engines.engine_for("initial"))
        ex.store = FeatureStore(default_store(ex.model_id, ex.precision))
        exs = item_examples(gather(list(sets), [], sets).items, ex)
    if ex.passes:
        sys.exit(f"{ex.passes} dev passes were not in the store: run `extract` first")
    if verifier == "probe":
        from halucheck.verifiers.probe.head import resolve
        from halucheck.verifiers.probe.training import held_out_scores

        head = resolve(None, ex.model_id)
        a, b = head.platt
        p = 1.0 / (1.0 + np.exp(-(a * held_out_scores(exs, head.layers, head.meta["C"]) + b)))
    else:
        p = np.array([1.0 - e.representative.p_supported for e in exs])
    cal = calibration.fit(p, [e.label for e in exs], verifier=verifier, profile=PROFILE, model=model, split="dev",
                          min_accuracy=None, datasets=sorted({e.dataset for e in exs}))
    path = calibration.shipped_path(verifier, model)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(cal.to_json(), encoding="utf-8")
    print(f"{cal.summary()}\nwrote {path} ({len(exs)} dev items)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=["extract", "fit", "ship-direct-calibrator", "ship-probe-calibrator"])
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every set's item count")
    ap.add_argument("--order", default="dev,test")
    args = ap.parse_args()
    if args.step == "extract":
        extract(args.scale, args.order)
    elif args.step == "fit":
        fit(args.scale)
    else:
        ship_calibrator(args.scale, args.step.split("-")[1])


if __name__ == "__main__":
    sys.exit(main())
