"""The trained judge's one report on the test splits: `direct`, `probe` (the shipped head) and `probe` fitted without
the set it is scored on (the transfer figure), on N test items of each set (HaluEval-QA: the first N, which are
right/hallucinated pairs; the others: a fixed balanced sample, as several sets' files are sorted by label), same
model and evidence.

    python scripts/probe_report.py [-n 25] [--sets factcheck-gpt,wice=10,...] [--out runs/probe-report]

Every verifier reads the same prompt passes: `direct` computes them (into the feature store), the heads read them
from it. The held-out heads reuse the shipped head's layers and C (chosen by leaving one dataset out on dev) and
are fitted on the dev examples of every other set family (WiCE's three dev sets count as one). Prints one markdown
table per metric set, with 95 % bootstrap intervals, and writes each run's folder under --out.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, str(Path(__file__).resolve().parent))

FAMILIES = {"wice": ("wice", "wice-dev", "wice-dev-d2c"), "halueval-qa": ("halueval-qa",)}
SETS = ["halueval-qa", "q2", "begin", "faithdial", "factcheck-gpt", "summedits", "contract-nli", "wice"]


def held_out_heads(sets: list[str], profile: str, folder: Path) -> dict[str, Path]:
    """A head per set, fitted on the dev examples of every other family, with the shipped head's choice."""
    from halucheck.config import Settings
    from halucheck.engines.pool import EnginePool
    from halucheck.evaluation.heads import gather, item_examples
    from halucheck.verifiers.probe.features import FeatureStore, default_store, extractor_for
    from halucheck.verifiers.probe.head import resolve
    from halucheck.verifiers.probe.training import Choice, fit
    from train_default_head import TRAIN_SETS

    settings = Settings.load(profile=profile)
    out = {}
    with EnginePool(settings) as engines:
        ex = extractor_for(engines.engine_for("initial"))
        ex.store = FeatureStore(default_store(ex.model_id))
        shipped = resolve(None, ex.model_id)
        data = gather(list(TRAIN_SETS), [], TRAIN_SETS)
        exs = item_examples(data.items, ex)
        if ex.passes:
            print(f"note: {ex.passes} training passes were not in the store (extract first)", file=sys.stderr)
        choice = Choice(shipped.layers, shipped.meta["C"], {})
        for name in sets:
            leave = FAMILIES.get(name, (name,))
            kept = [e for e in exs if e.dataset not in leave]
            head, _ = fit(kept, ex.model_id, 0, f"without-{name}", choice=choice)
            out[name] = head.save(folder / f"without-{name}.npz")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=25)
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--profile", default="cpu-1.5b")
    ap.add_argument("--out", type=Path, default=Path("runs/probe-report"))
    ap.add_argument("--skip-direct", action="store_true", help="the direct runs exist already")
    args = ap.parse_args()
    from halucheck.config import Settings, VerifierOptions
    from halucheck.evaluation.harness import run_eval

    limits = {s.split("=")[0]: int(s.split("=")[1]) if "=" in s else args.n for s in args.sets.split(",")}
    sets = list(limits)

    def pick(name: str) -> dict:  # HaluEval-QA's first items are right/hallucinated pairs; other files are sorted
        return {"limit": limits[name]} if name == "halueval-qa" else {"sample": limits[name]}
    settings = Settings.load(profile=args.profile)
    rows = []
    for name in sets:  # direct first: it computes the passes every head reads
        if not args.skip_direct:
            r = run_eval([name], "direct", settings, args.out / f"direct-{name}", split="test", **pick(name),
                         log=lambda s: print(s, file=sys.stderr))
            rows.append(("direct", name, r.metrics))
    heads = held_out_heads(sets, args.profile, args.out / "heads")
    for name in sets:
        for label, head in (("probe", None), ("probe, without its set", str(heads[name]))):
            r = run_eval([name], "probe", settings, args.out / f"{label.split(',')[0]}{'-lodo' if head else ''}-{name}",
                         split="test", **pick(name), options=VerifierOptions(head=head), label=label)
            rows.append((label, name, r.metrics))
    print("| verifier | set | n | BalAcc | AUROC | ECE | s/claim |\n|---|---|---|---|---|---|---|")
    for label, name, m in rows:
        ds = m["results"][name]
        def f(k):
            v = ds["metrics"].get(k) or {}
            return "–" if v.get("value") is None else f"{v['value']:.3f} [{v['ci_low']:.3f}, {v['ci_high']:.3f}]"
        wall = m["cost"].get("wall_time_s")
        print(f"| {label} | {name} | {ds['n']} | {f('balanced_accuracy')} | {f('auroc')} | {f('ece')} | "
              f"{wall / ds['n'] if wall and ds['n'] else float('nan'):.2f} |")
    (args.out / "rows.json").write_text(json.dumps([[l, n, m] for l, n, m in rows], default=str, indent=1))


if __name__ == "__main__":
    main()
