"""``halucheck train``: a head fitted on labelled sets or a user's own files, from prompt passes kept in a feature
store so that a killed run continues where it stopped.

Items: each named set's dev split (never test), sampled the same way every time (:func:`sample`: classes
balanced, at most :data:`PER_GROUP` items of one source group, the clean panel's items left out so it stays a
fair check); every usable item of a ``--data`` file. Evidence: the item's whole evidence, chunked
(:mod:`halucheck.verifiers.probe.prompt`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from halucheck.evaluation.items import EvalItem
from halucheck.evaluation.progress import Progress

PER_GROUP = 4
PANEL_IDS = Path(__file__).resolve().parents[2] / "scripts" / "panel" / "v1.ids"


def panel_ids() -> set[str]:
    """The clean panel's item ids (scripts/panel/v1.ids), where this is a checkout; else none."""
    try:
        return {line.strip() for line in PANEL_IDS.read_text().splitlines() if line.strip() and not line.startswith("#")}
    except OSError:
        return set()


def sample(items: Sequence[EvalItem], n: int | None, seed: int = 0, per_group: int = PER_GROUP,
           exclude: set[str] | None = None) -> list[EvalItem]:
    """Up to ``n`` items, half of each class where the set allows, at most ``per_group`` of a group, drawn by a
    fixed shuffle of the groups (the same items every time)."""
    exclude = exclude or set()
    pool = [it for it in items if it.id not in exclude]
    if n is None or n >= len(pool):
        return pool
    groups: dict[str, list[EvalItem]] = {}
    for it in pool:
        groups.setdefault(it.group, []).append(it)
    order = sorted(groups)
    random.Random(seed).shuffle(order)
    want = {True: n // 2, False: n - n // 2}
    taken: list[EvalItem] = []
    for g in order:
        members = groups[g][:]
        random.Random(f"{seed}:{g}").shuffle(members)
        took = 0
        for it in members:
            if took < per_group and want[it.label] > 0:
                taken.append(it)
                want[it.label] -= 1
                took += 1
        if not any(want.values()):
            break
    short = sum(want.values())
    if short:  # one class ran out: fill with the other, still at most per_group of a group
        chosen = {it.id for it in taken}
        per = {g: sum(it.group == g for it in taken) for g in order}
        for g in order:
            for it in groups[g]:
                if short and it.id not in chosen and per[g] < per_group:
                    taken.append(it)
                    per[g] += 1
                    short -= 1
    return taken


@dataclass
class TrainingData:
    items: list[EvalItem] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)  # dataset -> where it came from


def gather(datasets: Sequence[str], files: Sequence[Path], per_set: int | dict | None, seed: int = 0) -> TrainingData:
    """The items to fit on: named sets' dev splits, sampled; the files' every usable item."""
    from halucheck.evaluation.datasets import load
    from halucheck.evaluation.userdata import load_user_data

    data = TrainingData()
    skip = panel_ids()
    for name in datasets:  # per_set: one count for all, or set -> count
        n = per_set.get(name) if isinstance(per_set, dict) else per_set
        chosen = sample(load(name, "dev"), n, seed, exclude=skip)
        data.items += chosen
        data.sources[name] = f"dev split, {len(chosen)} sampled"
    for path in files:
        user = load_user_data(path)
        data.items += list(user.items)
        data.sources[user.items[0].dataset if user.items else str(path)] = str(path)
    return data


def train(settings, datasets: Sequence[str], files: Sequence[Path], name: str, per_set: int | dict | None,
          out: Path | None = None, store_path: Path | None = None, every_chunk: bool = False,
          log: Callable[[str], None] = print, direct_threshold: bool = False) -> tuple[Path, dict]:
    """Fit and save a head; returns its path and provenance."""
    from halucheck.engines.pool import EnginePool
    from halucheck.verifiers.probe.features import FeatureStore, default_store, extractor_for
    from halucheck.verifiers.probe.head import heads_dir
    from halucheck.verifiers.probe.training import check_labels, fit

    data = gather(datasets, files, per_set)
    exs_items = data.items
    with EnginePool(settings) as engines:
        engine = engines.engine_for("initial")
        probe = extractor_for(engine, purpose="halucheck train")
        model = probe.model_id
        store = FeatureStore(store_path or default_store(model, probe.precision))
        probe.store = store
        log(f"{len(exs_items)} labelled items from {len(data.sources)} set(s); model {model}; features in {store.path}")
        exs = item_examples(exs_items, probe, Progress("features"), every_chunk=every_chunk)
        n_layers = int(engine_layers(probe))
    check_labels(exs)
    head, choice = fit(exs, model, n_layers, name, log=log)
    add_intervals(head.meta["held_out"], exs, head.held_out_scores)
    head.meta["sources"] = data.sources
    if direct_threshold:  # the direct verdict on the same examples: its figures and its best threshold
        head.meta["direct"], head.meta["direct_threshold"] = direct_figures(exs)
    path = head.save(out or heads_dir() / f"{name}.npz")
    return path, head.meta


def item_examples(items: Sequence[EvalItem], extractor, progress=None, every_chunk: bool = False):
    """Labelled items as training examples: the features of their evidence's chunks (from the store where it has
    them; :func:`halucheck.verifiers.probe.training.examples`)."""
    from halucheck.evaluation.verifiers import case_of
    from halucheck.verifiers.probe.training import examples

    return examples([case_of(it) for it in items], [it.label for it in items], [it.id for it in items],
                    [it.dataset for it in items], [it.group for it in items], extractor, progress,
                    every_chunk=every_chunk)


def add_intervals(figures: dict, exs, z, threshold: float = 0.0, n_boot: int = 1000) -> None:
    """95 % bootstrap intervals (whole source groups resampled) of each part's held-out balanced accuracy and AUROC,
    added to ``figures`` as ``balacc_ci`` / ``auroc_ci``."""
    import numpy as np

    from halucheck.evaluation.metrics import bootstrap_indices, percentile_ci
    from halucheck.verifiers.probe.training import auroc, balanced_accuracy, parts

    y = np.array([e.label for e in exs], dtype=int)
    groups = np.array([e.group for e in exs])
    for d, m in parts(exs).items():
        yd, zd = y[m], np.asarray(z)[m]
        boot = [i for i in bootstrap_indices(len(yd), list(groups[m]), n_boot=n_boot) if 0 < yd[i].sum() < len(i)]
        figures[d]["balacc_ci"] = list(percentile_ci([balanced_accuracy(yd[i], zd[i] >= threshold) for i in boot]))
        figures[d]["auroc_ci"] = list(percentile_ci([auroc(yd[i], zd[i]) for i in boot]))


def direct_figures(exs) -> tuple[dict, float]:
    """The direct verdict's figures per set on the examples at the P(hallucinated) threshold with the best mean
    balanced accuracy over the sets (searched on a grid), and that threshold."""
    import numpy as np

    from halucheck.verifiers.probe.training import per_part

    p = np.array([1.0 - e.representative.p_supported for e in exs])
    best, best_t = -1.0, 0.5
    for t in np.arange(0.05, 0.96, 0.01):
        figures = per_part(exs, p - t)
        mean = float(np.nanmean([v["balacc"] for k, v in figures.items() if k != "all"] or [figures["all"]["balacc"]]))
        if mean > best:
            best, best_t = mean, float(t)
    return per_part(exs, p - best_t), round(best_t, 2)


def engine_layers(extractor) -> int:
    return extractor.engine.hf_model.config.num_hidden_layers


__all__ = ["PER_GROUP", "TrainingData", "add_intervals", "gather", "item_examples", "panel_ids", "sample", "train"]
