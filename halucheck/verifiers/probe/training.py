"""Fitting a head on labelled data: examples from prompt passes, choices made by leaving one dataset out, and the
fitted, calibrated :class:`~.head.Head` with its provenance.

An :class:`Example` is one labelled claim with the features of chunks of its evidence: by default only the chunk
that shares the most words with the claim (one prompt pass per example: a long document costs one pass, not one
per chunk), else every chunk, of which the one the direct verdict finds most supporting is used. The head is
applied at run time to every chunk, the lowest P(hallucinated) deciding.

Choices (which layers, how strong the regularisation) are made by leave-one-dataset-out (LODO): for each labelled
set, a head fitted on the others scores it; the choice with the best mean balanced accuracy over the sets wins, so
it rewards what transfers, not what a set's own quirks allow. The Platt calibration is fitted on those out-of-set
scores too. With a single set (a user's own file), folds by group stand in for sets.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from halucheck.errors import InputError
from halucheck.records import Case
from halucheck.verifiers.probe.features import Extractor, Features
from halucheck.verifiers.probe.head import Head
from halucheck.verifiers.probe.prompt import RECIPE
from halucheck.verifiers.probe.verifier import prompts_of

# The choices LODO picks from: layer sets of the 28-layer 1.5B, given as fractions of the depth so that other
# models get the same relative layers, and the inverse regularisation strength C of the logistic regression.
LAYER_CHOICES: tuple[tuple[float, ...], ...] = ((0.5,), (0.64,), (0.75,), (0.86,), (0.5, 0.75), (0.43, 0.64, 0.86))
C_CHOICES = (0.0005, 0.002, 0.01)
MIN_PER_CLASS = 8  # fewer examples of a class than this cannot be fitted or measured
FOLDS = 5  # group folds when there is one dataset


@dataclass
class Example:
    """One labelled claim: ``label`` True = hallucinated; ``chunks``: the features of each chunk of its evidence."""

    id: str
    dataset: str
    group: str
    label: bool
    chunks: list[Features] = field(default_factory=list)

    @property
    def representative(self) -> Features:
        return max(self.chunks, key=lambda f: f.margin)


def examples(checks: Sequence[Case], labels: Sequence[bool], ids: Sequence[str], datasets: Sequence[str],
             groups: Sequence[str], extractor: Extractor,
             progress: Callable[[int, int], None] | None = None, every_chunk: bool = False) -> list[Example]:
    """The features of each check's chunk closest to its claim (``every_chunk``: of all its chunks), from the
    extractor's store where it has them."""
    owners, prompts = [], []
    for n, check in enumerate(checks):
        _, ps = prompts_of(check, only_closest=not every_chunk)
        owners += [n] * len(ps)
        prompts += ps
    feats = extractor.features(prompts, progress)
    out = [Example(i, d, g, bool(y)) for i, d, g, y in zip(ids, datasets, groups, labels)]
    for n, f in zip(owners, feats):
        out[n].chunks.append(f)
    return out


def layer_rows(fractions: Sequence[float], n_layers: int) -> tuple[int, ...]:
    """Rows of :attr:`Features.hidden` (0 = embeddings, ``n_layers`` = the last layer) at these fractions of depth."""
    return tuple(sorted({max(1, min(n_layers, round(f * n_layers))) for f in fractions}))


def matrix(exs: Sequence[Example], layers: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    X = np.stack([Head.vector(e.representative, layers) for e in exs])
    y = np.array([e.label for e in exs], dtype=int)
    return X, y


def _fit(X: np.ndarray, y: np.ndarray, C: float):
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    scaler = StandardScaler().fit(X)
    scale = np.where(scaler.scale_ > 0, scaler.scale_, 1.0)
    lr = LogisticRegression(C=C, class_weight="balanced", max_iter=2000).fit((X - scaler.mean_) / scale, y)
    return scaler.mean_, scale, lr.coef_[0], float(lr.intercept_[0])


def _decision(params, X: np.ndarray) -> np.ndarray:
    mean, scale, coef, intercept = params
    return ((X - mean) / scale) @ coef + intercept


def folds(exs: Sequence[Example]) -> list[np.ndarray]:
    """Index arrays of the held-out parts: one per dataset, or (one dataset) ``FOLDS`` folds by group."""
    names = sorted({e.dataset for e in exs})
    if len(names) > 1:
        return [np.array([i for i, e in enumerate(exs) if e.dataset == d]) for d in names]
    groups = sorted({e.group for e in exs})
    rng = np.random.default_rng(0)
    order = {g: k % FOLDS for k, g in enumerate(rng.permutation(groups))}
    return [np.array([i for i, e in enumerate(exs) if order[e.group] == k]) for k in range(FOLDS)]


def held_out_scores(exs: Sequence[Example], layers: Sequence[int], C: float) -> np.ndarray:
    """Each example's decision value from a head fitted without its part (its dataset, or its fold)."""
    X, y = matrix(exs, layers)
    z = np.zeros(len(exs))
    for part in folds(exs):
        train = np.setdiff1d(np.arange(len(exs)), part)
        if len(set(y[train])) < 2:
            raise InputError("a fold has only one class; give more examples of each class")
        z[part] = _decision(_fit(X[train], y[train], C), X[part])
    return z


def balanced_accuracy(y: np.ndarray, hallucinated: np.ndarray) -> float:
    """nan for a part with one class (e.g. the D2C negatives): it counts in training, not in the choice."""
    pos, neg = y == 1, y == 0
    if not pos.any() or not neg.any():
        return float("nan")
    return float(0.5 * (hallucinated[pos].mean() + (~hallucinated[neg]).mean()))


def auroc(y: np.ndarray, score: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y, score)) if len(set(y)) == 2 else float("nan")


def parts(exs: Sequence[Example]) -> dict[str, np.ndarray]:
    """Masks of the parts figures are given for: each dataset (when there are several), and all."""
    names = sorted({e.dataset for e in exs})
    masks = {d: np.array([e.dataset == d for e in exs]) for d in (names if len(names) > 1 else [])}
    return {**masks, "all": np.ones(len(exs), dtype=bool)}


def per_part(exs: Sequence[Example], z: np.ndarray, threshold: float = 0.0) -> dict[str, dict]:
    """BalAcc and AUROC of held-out decision values, per dataset (when there are several) and in all."""
    y = np.array([e.label for e in exs], dtype=int)
    return {d: {"n": int(m.sum()), "balacc": balanced_accuracy(y[m], z[m] >= threshold), "auroc": auroc(y[m], z[m])}
            for d, m in parts(exs).items()}


def check_labels(exs: Sequence[Example], where: str = "the training data") -> None:
    """InputError in one line when a class has too few examples."""
    pos = sum(e.label for e in exs)
    neg = len(exs) - pos
    if min(pos, neg) < MIN_PER_CLASS:
        raise InputError(f"{where} has {pos} hallucinated and {neg} supported example(s); a head needs at least "
                         f"{MIN_PER_CLASS} of each: add labelled items of the smaller class")


@dataclass
class Choice:
    layers: tuple[int, ...]
    C: float
    figures: dict

    @property
    def score(self) -> float:
        parts = [v["balacc"] for k, v in self.figures.items() if k != "all"] or [self.figures["all"]["balacc"]]
        return float(np.nanmean(parts))


def choose(exs: Sequence[Example], n_layers: int, log: Callable[[str], None] = lambda s: None) -> list[Choice]:
    """Every (layers, C) choice with its held-out figures, best (highest mean BalAcc over the parts) first."""
    tried = []
    for fractions in LAYER_CHOICES:
        layers = layer_rows(fractions, n_layers)
        for C in C_CHOICES:
            z = held_out_scores(exs, layers, C)
            c = Choice(layers, C, per_part(exs, z))
            tried.append(c)
            log(f"  layers {list(layers)} C={C}: mean BalAcc {c.score:.3f}, AUROC {c.figures['all']['auroc']:.3f}")
    return sorted(tried, key=lambda c: -c.score)


def platt(z: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(a, b) of P = sigmoid(a z + b) fitted on held-out decision values (nearly unregularised)."""
    from sklearn.linear_model import LogisticRegression

    lr = LogisticRegression(C=1e4, max_iter=2000).fit(z.reshape(-1, 1), y)
    return float(lr.coef_[0, 0]), float(lr.intercept_[0])


def fit(exs: Sequence[Example], model: str, n_layers: int, name: str, sets: dict | None = None,
        choice: Choice | None = None, log: Callable[[str], None] = lambda s: None) -> tuple[Head, Choice]:
    """The head for these examples: the best LODO choice (or ``choice``), fitted on all of them, calibrated on its
    held-out scores, with its provenance."""
    check_labels(exs)
    chosen = choice or choose(exs, n_layers, log)[0]
    X, y = matrix(exs, chosen.layers)
    z = held_out_scores(exs, chosen.layers, chosen.C)
    a, b = platt(z, y)
    chosen = Choice(chosen.layers, chosen.C, per_part(exs, z))  # the figures of these examples
    mean, scale, coef, intercept = _fit(X, y, chosen.C)
    counts = sets or {}
    if not counts:
        for e in exs:
            counts.setdefault(e.dataset, [0, 0])[int(e.label)] += 1
    meta = {"name": name, "model": model, "recipe": RECIPE, "layers": list(chosen.layers), "C": chosen.C,
            "examples": len(exs),
            "sets": {d: {"supported": v[0], "hallucinated": v[1]} for d, v in sorted(counts.items())},
            "held_out": chosen.figures, "fitted": time.strftime("%Y-%m-%d"),
            "held_out_is": "leave one dataset out" if len(folds(exs)) > 1 and len({e.dataset for e in exs}) > 1
            else f"{FOLDS} folds by group"}
    head = Head(chosen.layers, mean, scale, coef, intercept, (a, b), meta)
    head.held_out_scores = z  # type: ignore[attr-defined] - for intervals, not saved
    return head, chosen


__all__ = ["C_CHOICES", "Choice", "Example", "LAYER_CHOICES", "MIN_PER_CLASS", "balanced_accuracy", "check_labels",
           "choose", "examples", "fit", "held_out_scores", "layer_rows", "parts", "per_part"]
