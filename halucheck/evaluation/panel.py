"""The clean panel: a fixed, versioned set of dev items that guards what a model is shown.

Every change to a prompt, a template, an evidence filter or a decoding control is scored on it before it lands
(docs/prompt-changes.md): a defence against injected text is worth nothing if it makes the judge read clean text
worse, and that cost is invisible on the injection sets that motivate it.

The panel is a list of item ids (``scripts/panel/v<N>.ids``), not data: the items are read from the named sets
(:mod:`halucheck.evaluation.datasets`, dev split only), so nothing from the datasets is committed. Beside them, the
``simple`` set (``scripts/panel/simple-v1.jsonl``, written for the panel, blind to the prompts): 48 claims about
well-known facts, each with a 2-3 sentence context that settles it, half with one wrong detail (a place, a number,
a person, a direction, an added detail, a role) -- the easy case a judge must not get wrong. It is made by
:func:`select`, a rule with no randomness but a hash of each id: per set, ``per_class`` hallucinated and
``per_class`` supported items, at most one item per group (a HaluEval-QA row gives its right *or* its wrong
answer, never both), and only items whose evidence as shown (:func:`~halucheck.evaluation.harness.select_evidence`)
fits ``max_chars``, so one run of the default judge on the 1.5B stays within an hour on two cores. A new rule or
a new set is a new version; an old version's ids file is never edited.

:func:`paired` compares two runs on the same items with the same bootstrap resamples (whole groups at a time):
per set and over all, balanced accuracy and AUROC of each and the 95 % interval of their difference. The panel's
*noise* is that interval: a change whose difference interval holds 0 has cost nothing measurable.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from halucheck.errors import InputError
from halucheck.evaluation.datasets import EvalItem, load
from halucheck.evaluation.metrics import N_BOOT, SEED, auroc, balanced_accuracy, bootstrap_indices, percentile_ci

SETS = ("factcheck-gpt", "wice", "halueval-qa", "summedits", "begin", "faithdial", "q2", "contract-nli")
PER_CLASS = 20
MAX_CHARS = 3000
VERSION = 1
HERE = Path(__file__).resolve().parents[2] / "scripts" / "panel"


def ids_file(version: int = VERSION) -> Path:
    return HERE / f"v{version}.ids"


def _rank(item_id: str) -> str:
    return hashlib.sha256(f"panel:{item_id}".encode()).hexdigest()


def _shown_chars(item: EvalItem) -> int:
    from halucheck.evaluation.harness import select_evidence

    return sum(len(p) for p in select_evidence(item.claim, item.evidence)) + len(item.claim)


def select(sets: Sequence[str] = SETS, per_class: int = PER_CLASS, max_chars: int = MAX_CHARS) -> list[str]:
    """The panel's ids by its rule (module docstring), set by set in ``sets`` order."""
    ids: list[str] = []
    for name in sets:
        items = [it for it in load(name, split="dev") if it.evidence and _shown_chars(it) <= max_chars]
        taken = {True: [], False: []}
        groups: set[str] = set()
        for it in sorted(items, key=lambda it: _rank(it.id)):
            if len(taken[it.label]) < per_class and (it.group or it.id) not in groups:
                taken[it.label].append(it.id)
                groups.add(it.group or it.id)
        if min(len(v) for v in taken.values()) < per_class:
            raise InputError(f"{name}: only {len(taken[True])} hallucinated and {len(taken[False])} supported dev items "
                             f"fit {max_chars} characters; lower per_class or raise max_chars")
        ids += sorted(taken[True] + taken[False], key=_rank)
    return ids


def read_ids(version: int = VERSION) -> list[str]:
    path = ids_file(version)
    if not path.is_file():
        raise InputError(f"{path} not found: panel version {version} does not exist (python scripts/clean_panel.py build)")
    return [line.strip() for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith("#")]


SIMPLE = "simple"


def simple_file(version: int = VERSION) -> Path:
    return HERE / f"simple-v{version}.jsonl"


def load_simple(version: int = VERSION) -> list[EvalItem]:
    """The ``simple`` set's items (an eval ``--data`` file, every line usable), as the panel's ninth set."""
    from dataclasses import replace

    from halucheck.evaluation.userdata import read_user_data

    data = read_user_data(simple_file(version))
    if data.problems or not data.items:
        raise InputError(f"{simple_file(version)}: {data.problems[0] if data.problems else 'no items'}")
    return [replace(it, dataset=SIMPLE) for it in data.items]


def load_panel(version: int = VERSION) -> list[EvalItem]:
    """The panel's items: the ids file's, in its order, then the ``simple`` set's; an id no set yields any more is
    an error (a loader changed)."""
    ids = read_ids(version)
    wanted = set(ids)
    by_id: dict[str, EvalItem] = {}
    for name in dict.fromkeys(i.split(":", 1)[0] for i in ids):
        for it in load(name, split="dev"):
            if it.id in wanted:
                by_id[it.id] = it
    missing = [i for i in ids if i not in by_id]
    if missing:
        raise InputError(f"panel v{version}: {len(missing)} ids are no longer yielded by their sets (first: {missing[0]}); "
                         "a loader changed what it yields: make a new panel version, do not edit this one")
    return [by_id[i] for i in ids] + load_simple(version)


@dataclass(frozen=True)
class Difference:
    """One metric of runs A and B on the same items, and the paired 95 % interval of A - B."""

    a: float
    b: float
    low: float
    high: float

    @property
    def diff(self) -> float:
        return self.a - self.b

    @property
    def holds_zero(self) -> bool:
        return self.low <= 0 <= self.high


METRICS = {"balanced_accuracy": balanced_accuracy, "auroc": auroc}


def paired(a: Mapping[str, Mapping], b: Mapping[str, Mapping], ids: Sequence[str], n_boot: int = N_BOOT,
           seed: int = SEED) -> dict[str, dict[str, Difference]]:
    """Per set (and ``"all"``: every item pooled; ``"mean"``: the mean of the sets' figures), each metric of
    prediction rows ``a`` and ``b`` (``predictions.jsonl`` rows keyed by id; labels and groups are read from
    ``a``, or from ``b`` when ``a`` is a stored baseline, which keeps none) with the paired bootstrap interval
    of a - b. An item either run left undecided counts as a wrong verdict with score 0.5 in that run: a change
    that makes replies fail must cost, not vanish from the count."""
    labelled = a if all("label" in a[i] for i in ids) else b  # a stored baseline keeps no labels
    sets = list(dict.fromkeys(labelled[i]["dataset"] for i in ids))
    y = np.array([bool(labelled[i]["label"]) for i in ids])

    def arrays(rows):
        pred = np.array([not y[k] if rows[i].get("prediction") is None else bool(rows[i]["prediction"])
                         for k, i in enumerate(ids)])
        score = np.array([0.5 if rows[i].get("score") is None else float(rows[i]["score"]) for i in ids])
        return pred, score

    (pa, sa), (pb, sb) = arrays(a), arrays(b)
    groups = [labelled[i].get("group") or i for i in ids]
    members = {s: np.array([k for k, i in enumerate(ids) if labelled[i]["dataset"] == s]) for s in sets}
    resamples = bootstrap_indices(len(ids), groups, n_boot=n_boot, seed=seed)

    def figure(fn, k):
        return fn(y[k], pa[k], sa[k]), fn(y[k], pb[k], sb[k])

    out: dict[str, dict[str, Difference]] = {}
    for metric, fn in METRICS.items():
        scopes = {**members, "all": np.arange(len(ids))}
        point = {s: figure(fn, k) for s, k in scopes.items()}
        diffs: dict[str, list[float]] = {s: [] for s in [*scopes, "mean"]}
        for r in resamples:
            per_set = []
            for s, k in scopes.items():
                sub = r[np.isin(r, k)] if s != "all" else r
                fa, fb = figure(fn, sub) if sub.size else (math.nan, math.nan)
                diffs[s].append(fa - fb)
                if s != "all":
                    per_set.append(fa - fb)
            diffs["mean"].append(float(np.nanmean(per_set)) if np.isfinite(per_set).any() else math.nan)
        point["mean"] = (float(np.nanmean([point[s][0] for s in members])), float(np.nanmean([point[s][1] for s in members])))
        for s in [*scopes, "mean"]:
            low, high = percentile_ci(diffs[s])
            out.setdefault(s, {})[metric] = Difference(point[s][0], point[s][1], low, high)
    return out


def table(result: Mapping[str, Mapping[str, Difference]], a: str, b: str) -> str:
    """A Markdown table of :func:`paired`'s result."""
    lines = [f"| set | BalAcc {a} | BalAcc {b} | difference, 95 % paired interval | AUROC {a} | AUROC {b} | difference |",
             "|---|---|---|---|---|---|---|"]
    for s, m in result.items():
        ba, au = m["balanced_accuracy"], m["auroc"]
        lines.append(f"| {s} | {ba.a:.3f} | {ba.b:.3f} | {ba.diff:+.3f} [{ba.low:+.3f}, {ba.high:+.3f}] | "
                     f"{au.a:.3f} | {au.b:.3f} | {au.diff:+.3f} [{au.low:+.3f}, {au.high:+.3f}] |")
    return "\n".join(lines)


__all__ = ["Difference", "MAX_CHARS", "PER_CLASS", "SETS", "SIMPLE", "VERSION", "ids_file", "load_panel", "load_simple",
           "paired", "read_ids", "select", "simple_file", "table"]
