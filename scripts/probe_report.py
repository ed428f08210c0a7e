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
        ex.store = FeatureStore(default_store(ex.model_id, ex.precision))
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
    ap.add_argument("--selfcheck", action="store_true",
                    help="also run the reasoning judge `selfcheck` on the same items (decodes: the slow part)")
    ap.add_argument("--only-selfcheck", action="store_true", help="only the selfcheck runs (the others exist)")
    ap.add_argument("--summary", type=Path, nargs="+", metavar="DIR",
                    help="run nothing: read the run folders under these DIRs and print, per verifier, the mean "
                         "BalAcc over sets, pooled AUROC and ECE, s/claim, and each verifier's paired difference "
                         "from selfcheck, all with 95 %% bootstrap intervals")
    ap.add_argument("--base", default="selfcheck", help="with --summary: the verifier the differences are from")
    ap.add_argument("--record", action="store_true",
                    help="with --summary: write the head's test figures into the shipped head's provenance")
    args = ap.parse_args()
    if args.summary:
        figures = summary(args.summary, base=args.base)
        if args.record:
            record(figures, args.profile)
        return
    from halucheck.config import Settings, VerifierOptions
    from halucheck.evaluation.harness import run_eval

    limits = {s.split("=")[0]: int(s.split("=")[1]) if "=" in s else args.n for s in args.sets.split(",")}
    sets = list(limits)

    def pick(name: str) -> dict:  # HaluEval-QA's first items are right/hallucinated pairs; other files are sorted
        return {"limit": limits[name]} if name == "halueval-qa" else {"sample": limits[name]}
    settings = Settings.load(profile=args.profile)
    rows = []
    if args.selfcheck or args.only_selfcheck:  # one set at a time, its replies cached: a killed run resumes
        for name in sets:
            r = run_eval([name], "selfcheck", settings, args.out / f"selfcheck-{name}", split="test", **pick(name),
                         log=lambda s: print(s, file=sys.stderr))
            rows.append(("selfcheck", name, r.metrics))
            table(rows[-1:])
    for name in ([] if args.only_selfcheck else sets):  # direct first: it computes the passes every head reads
        if not args.skip_direct:
            r = run_eval([name], "direct", settings, args.out / f"direct-{name}", split="test", **pick(name),
                         log=lambda s: print(s, file=sys.stderr))
            rows.append(("direct", name, r.metrics))
    heads = held_out_heads(sets, args.profile, args.out / "heads") if not args.only_selfcheck else {}
    for name in ([] if args.only_selfcheck else sets):
        for label, head in (("probe", None), ("probe, without its set", str(heads[name]))):
            r = run_eval([name], "probe", settings, args.out / f"{label.split(',')[0]}{'-lodo' if head else ''}-{name}",
                         split="test", **pick(name), options=VerifierOptions(head=head), label=label)
            rows.append((label, name, r.metrics))
    table(rows)
    (args.out / ("rows-selfcheck.json" if args.only_selfcheck else "rows.json")).write_text(
        json.dumps([[l, n, m] for l, n, m in rows], default=str, indent=1))


KINDS = {"selfcheck": "selfcheck", "selfcheck-cal": "selfcheck, its shipped calibrator", "direct": "direct",
         "direct-cal": "direct, its shipped calibrator", "probe": "probe", "probe-cal": "probe, its shipped calibrator",
         "probe-lodo": "probe, without its set"}


def record(figures: dict, profile: str) -> None:
    """The test figures of ``probe``, of ``probe`` without each set and of ``selfcheck`` on the same items, into the
    shipped head file's provenance."""
    from halucheck.config import Settings
    from halucheck.verifiers.probe.head import Head, shipped_path

    path = shipped_path(Settings.load(profile=profile).profiles[profile].model)
    head = Head.load(path)
    head.meta["test"] = {"protocol": "scripts/probe_report.py: HaluEval-QA's first test items, the other sets a fixed "
                                     "balanced sample of their test split; once, after every choice was made on dev",
                         **{k: figures[k] for k in ("probe", "probe-lodo", "selfcheck") if k in figures}}
    head.save(path)
    print(f"wrote the test figures into {path}")


def summary(dirs: list[Path], n_boot: int = 1000, seed: int = 0, base: str = "selfcheck") -> dict:
    """Per verifier over the sets every verifier was run on: mean BalAcc over sets (each set resampled by group,
    the same resamples for every verifier), pooled AUROC and ECE, seconds a claim; and the paired difference of
    each verifier's mean BalAcc from ``base``'s. ``selfcheck``, ``direct`` and ``probe`` also appear with their
    P(hallucinated) through the calibrator the package ships for them."""
    import numpy as np

    from halucheck.evaluation.metrics import auroc, balanced_accuracy, ece, percentile_ci

    runs: dict[str, dict[str, tuple[list[dict], float]]] = {}
    for d in dirs:
        for folder in sorted(p for p in d.iterdir() if (p / "predictions.jsonl").is_file()):
            kind = next((k for k in sorted(KINDS, key=len, reverse=True) if folder.name.startswith(k + "-")), None)
            if kind is None:
                continue
            name = folder.name[len(kind) + 1:]
            wall = json.loads((folder / "metrics.json").read_text())["cost"].get("wall_time_s") or float("nan")
            if name in runs.get(kind, {}):  # the first folder given wins; a pass is timed where it was computed,
                rows, was = runs[kind][name]  # the slowest run of the same items (the later ones read the store)
                runs[kind][name] = (rows, max(was, wall))
                continue
            rows = [json.loads(line) for line in (folder / "predictions.jsonl").read_text().splitlines() if line]
            runs.setdefault(kind, {})[name] = (sorted(rows, key=lambda r: r["id"]), wall)
    # the same verdicts, P(hallucinated) through the calibrator the package ships for it (fitted on dev)
    for kind in [k for k in ("selfcheck", "direct", "probe") if k in runs]:
        from halucheck.config import Settings
        from halucheck.verifiers.calibration import shipped

        cal, _ = shipped(kind, Settings.load(profile="cpu-1.5b").profiles["cpu-1.5b"].model)
        if cal is not None:
            runs[f"{kind}-cal"] = {name: ([{**r, "score": cal.apply(r["score"])} for r in rows], wall)
                                   for name, (rows, wall) in runs[kind].items()}
    sets = sorted(set.intersection(*(set(v) for v in runs.values())))
    for name in sets:
        ids = {kind: [r["id"] for r in v[name][0]] for kind, v in runs.items()}
        if len({tuple(x) for x in ids.values()}) > 1:
            sys.exit(f"{name}: the verifiers' runs hold different items ({', '.join(f'{k} {len(v)}' for k, v in ids.items())})")
    if not sets:
        sys.exit("no set was run by every verifier under " + ", ".join(map(str, dirs)))
    rng = np.random.default_rng(seed)
    resamples = {}  # set -> list of index arrays, resampling whole groups (the items' order is the same in every run)
    for name in sets:
        groups = [r["group"] for r in runs["selfcheck" if "selfcheck" in runs else next(iter(runs))][name][0]]
        keys = sorted(set(groups))
        members = {g: [i for i, x in enumerate(groups) if x == g] for g in keys}
        resamples[name] = [np.array([i for g in rng.choice(len(keys), len(keys)) for i in members[keys[g]]])
                           for _ in range(n_boot)]

    def arrays(kind: str, name: str):
        rows = runs[kind][name][0]
        return (np.array([r["label"] for r in rows], bool), np.array([r["prediction"] for r in rows], bool),
                np.array([r["score"] for r in rows], float))

    def mean_balacc(kind: str, b: int | None) -> float:
        vals = []
        for name in sets:
            y, p, s = arrays(kind, name)
            i = resamples[name][b] if b is not None else slice(None)
            vals.append(balanced_accuracy(y[i], p[i], s[i]))
        return float(np.nanmean(vals))

    def pooled(kind: str, fn) -> tuple[float, float, float]:
        ys, ps, ss = zip(*(arrays(kind, n) for n in sets))
        y, p, s = np.concatenate(ys), np.concatenate(ps), np.concatenate(ss)
        offsets = np.cumsum([0] + [len(a) for a in ys])
        boots = [np.concatenate([resamples[n][b] + offsets[k] for k, n in enumerate(sets)]) for b in range(n_boot)]
        lo, hi = percentile_ci([fn(y[i], p[i], s[i]) for i in boots])
        return fn(y, p, s), lo, hi

    n = sum(len(runs[next(iter(runs))][name][0]) for name in sets)
    print(f"{len(sets)} sets, {n} items: {', '.join(sets)}")
    out: dict = {}
    print(f"| verifier | mean BalAcc over sets | minus {base}'s | pooled AUROC | pooled ECE | s/claim |")
    print("|---|---|---|---|---|---|")
    for kind in [k for k in KINDS if k in runs]:
        boot = [mean_balacc(kind, b) for b in range(n_boot)]
        lo, hi = percentile_ci(boot)
        diff = "–"
        if base in runs and kind != base:
            d = [x - mean_balacc(base, b) for b, x in enumerate(boot)]
            dlo, dhi = percentile_ci(d)
            diff = f"{mean_balacc(kind, None) - mean_balacc(base, None):+.3f} [{dlo:+.3f}, {dhi:+.3f}]"
        a, e = pooled(kind, auroc), pooled(kind, ece)
        # the heads read the passes `direct` computed (same prompt, same store): their cost is direct's plus their own
        secs = sum(runs[kind][name][1] + (runs["direct"][name][1] if kind.startswith("probe") and "direct" in runs
                                          else 0) for name in sets) / n
        print(f"| {KINDS[kind]} | {mean_balacc(kind, None):.3f} [{lo:.3f}, {hi:.3f}] | {diff} | "
              f"{a[0]:.3f} [{a[1]:.3f}, {a[2]:.3f}] | {e[0]:.3f} [{e[1]:.3f}, {e[2]:.3f}] | {secs:.1f} |")
        per_set = {}
        for name in sets:
            y, p, sc = arrays(kind, name)
            per_set[name] = {"n": int(y.size), "balanced_accuracy": round(balanced_accuracy(y, p, sc), 3),
                             "auroc": round(auroc(y, p, sc), 3)}
        out[kind] = {"sets": per_set, "mean_balanced_accuracy": [round(v, 3) for v in (mean_balacc(kind, None), lo, hi)],
                     "pooled_auroc": [round(v, 3) for v in a], "pooled_ece": [round(v, 3) for v in e],
                     "seconds_a_claim": round(secs, 1)}
    return out


def table(rows: list) -> None:
    print("| verifier | set | n | BalAcc | AUROC | ECE | s/claim |\n|---|---|---|---|---|---|---|")
    for label, name, m in rows:
        ds = m["results"][name]
        def f(k):
            v = ds["metrics"].get(k) or {}
            return "–" if v.get("value") is None else f"{v['value']:.3f} [{v['ci_low']:.3f}, {v['ci_high']:.3f}]"
        wall = m["cost"].get("wall_time_s")
        print(f"| {label} | {name} | {ds['n']} | {f('balanced_accuracy')} | {f('auroc')} | {f('ece')} | "
              f"{wall / ds['n'] if wall and ds['n'] else float('nan'):.2f} |", flush=True)


if __name__ == "__main__":
    main()
