"""Detection metrics with bootstrap confidence intervals; *positive = hallucinated*.

Every metric is registered by name with its direction (``higher_is_better``) and takes the gold
labels, the hard predictions and the scores (probability that the item is hallucinated), each as a
1-D numpy array. Threshold metrics use ``predictions``; ranking and calibration metrics use
``scores``. Everything but ECE, Brier and AUROC is computed with scikit-learn.

Conventions:

- precision / recall / F1 are 0 when their denominator is 0 (no predicted or no gold positives);
- AUROC and balanced accuracy are NaN when the labels hold only one class (undefined there);
- AUROC: the share of (hallucinated, correct) pairs in which the hallucinated item scores higher, a tie
  counting one half;
- ECE: 10 equal-width bins on the hallucination probability over [0, 1] (bin *k* holds scores in
  ``[k/10, (k+1)/10)``, the last bin also holds 1.0);
  ``ECE = sum_k (n_k / n) * |mean(label in bin k) - mean(score in bin k)|``, empty bins skipped.
  This is the binary (positive-class reliability) ECE, not the top-label one.
- Brier: mean squared difference between the score and the 0/1 label.

ECE, Brier and AUROC are those of :mod:`halucheck.verifiers.calibration` (one definition for evaluation and
calibration).

Confidence intervals are percentile bootstrap intervals (default 1,000 resamples, 95 %, fixed
seed). When ``groups`` are given, whole groups (a response and all of its claims) are resampled, so
correlated claims are not counted as independent evidence. NaN resamples (e.g. one class only)
are ignored when taking percentiles.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from sklearn import metrics as skm

from halucheck.registry import Registry
from halucheck.verifiers.calibration import (
    ECE_BINS,
    auroc_score,
    brier_score,
    ece_if_calibrated,
    expected_calibration_error,
    mann_whitney_u,
)

N_BOOT = 1000
SEED = 0
CI = 0.95


@dataclass(frozen=True)
class Metric:
    """A named metric: ``fn(labels, predictions, scores) -> float`` and its direction."""

    name: str
    fn: Callable[[np.ndarray, np.ndarray, np.ndarray], float]
    higher_is_better: bool
    label: str


METRICS: Registry[Metric] = Registry("metric")
"""Metric registry, in report order."""


def register_metric(name: str, higher_is_better: bool, label: str | None = None):
    """Decorator: register ``fn(labels, predictions, scores) -> float`` under ``name``."""

    def deco(fn):
        METRICS.register(name, Metric(name, fn, higher_is_better, label or name))
        return fn

    return deco


def _two_classes(y: np.ndarray) -> bool:
    return y.size > 0 and 0 < int(y.sum()) < y.size


@register_metric("accuracy", True, "Acc")
def accuracy(y, p, s) -> float:
    return float(skm.accuracy_score(y, p)) if y.size else math.nan


@register_metric("precision", True, "P")
def precision(y, p, s) -> float:
    return float(skm.precision_score(y, p, zero_division=0.0)) if y.size else math.nan


@register_metric("recall", True, "R")
def recall(y, p, s) -> float:
    return float(skm.recall_score(y, p, zero_division=0.0)) if y.size else math.nan


@register_metric("f1", True, "F1")
def f1(y, p, s) -> float:
    return float(skm.f1_score(y, p, zero_division=0.0)) if y.size else math.nan


@register_metric("balanced_accuracy", True, "BalAcc")
def balanced_accuracy(y, p, s) -> float:
    if not _two_classes(y):
        return math.nan
    return float(skm.balanced_accuracy_score(y, p))


@register_metric("auroc", True, "AUROC")
def auroc(y, p, s) -> float:
    if not _two_classes(y):
        return math.nan
    return auroc_score(s, y)


@register_metric("ece", False, "ECE")
def ece(y, p, s, n_bins: int = ECE_BINS) -> float:
    """Expected calibration error of the hallucination probability (see module docstring)."""
    return expected_calibration_error(s, y, n_bins)


@register_metric("brier", False, "Brier")
def brier(y, p, s) -> float:
    return brier_score(s, y)


# ---------------------------------------------------------------- bootstrap


def _as_arrays(labels, predictions, scores):
    y = np.asarray(labels, dtype=int)
    p = np.asarray(predictions, dtype=int)
    s = p.astype(float) if scores is None else np.asarray(scores, dtype=float)
    if not (y.shape == p.shape == s.shape) or y.ndim != 1:
        raise ValueError(f"labels, predictions and scores must be 1-D of one length, got {y.shape}, {p.shape}, {s.shape}")
    if s.size and (np.isnan(s).any() or s.min() < 0 or s.max() > 1):
        raise ValueError("scores must be probabilities of hallucination in [0, 1]")
    return y, p, s


def bootstrap_indices(n: int, groups: Sequence | None = None, n_boot: int = N_BOOT, seed: int = SEED) -> list[np.ndarray]:
    """``n_boot`` index arrays drawn with replacement; whole groups at a time when ``groups`` is given."""
    rng = np.random.default_rng(seed)
    if groups is None:
        return [rng.integers(0, n, n) for _ in range(n_boot)]
    _, inverse = np.unique(np.asarray([str(g) for g in groups]), return_inverse=True)
    members = [np.flatnonzero(inverse == g) for g in range(inverse.max() + 1)] if n else []
    k = len(members)
    out = []
    for _ in range(n_boot):
        pick = rng.integers(0, k, k)
        out.append(np.concatenate([members[g] for g in pick]) if k else np.array([], dtype=int))
    return out


def percentile_ci(values: Sequence[float], ci: float = CI) -> tuple[float, float]:
    """Percentile interval of the finite values; (nan, nan) when there are none."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if not v.size:
        return math.nan, math.nan
    a = (1 - ci) / 2 * 100
    return float(np.percentile(v, a)), float(np.percentile(v, 100 - a))


def compute_metrics(
    labels: Sequence[bool],
    predictions: Sequence[bool],
    scores: Sequence[float] | None = None,
    groups: Sequence | None = None,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    ci: float = CI,
    metrics: Sequence[str] | None = None,
) -> dict:
    """Every registered metric (or those named in ``metrics``) with a bootstrap interval.

    ``labels`` and ``predictions`` are booleans with True = hallucinated; ``scores`` are
    probabilities of hallucination (the hard predictions are used when None). ``groups`` (one key
    per item, e.g. the response id) makes the bootstrap resample whole groups. ``n_boot=0`` skips
    the intervals.

    Returns ``{"n", "n_positive", "metrics": {name: {"value", "ci_low", "ci_high",
    "higher_is_better"}}}``; undefined values are NaN.
    """
    y, p, s = _as_arrays(labels, predictions, scores)
    if groups is not None and len(groups) != y.size:
        raise ValueError("groups must have one entry per item")
    chosen = [METRICS[m] for m in (metrics or METRICS)]
    boots = bootstrap_indices(y.size, groups, n_boot, seed) if (n_boot and y.size) else []
    out = {}
    with warnings.catch_warnings():
        # Resamples with a single class trigger sklearn warnings; such values are NaN or 0 by the
        # conventions above, and a single warning per resample would drown the output.
        warnings.simplefilter("ignore")
        for m in chosen:
            value = m.fn(y, p, s)
            lo, hi = percentile_ci([m.fn(y[i], p[i], s[i]) for i in boots], ci) if boots else (math.nan, math.nan)
            out[m.name] = {"value": value, "ci_low": lo, "ci_high": hi, "higher_is_better": m.higher_is_better}
    return {"n": int(y.size), "n_positive": int(y.sum()), "metrics": out}


# ---------------------------------------------------------------- length control (HaluEval QA)

LENGTH_BUCKETS: tuple[tuple[int, int], ...] = ((1, 1), (2, 2), (3, 3), (4, 5), (6, 9), (10, 10**9))
"""Answer word-count buckets for the per-length table (inclusive bounds)."""


def stratified_auroc(labels, scores, strata) -> tuple[float, int]:
    """AUROC counted only over (hallucinated, correct) pairs in the same stratum.

    ``= sum_k [#(s_pos > s_neg) + 0.5 #(s_pos == s_neg)] / sum_k n_pos_k * n_neg_k`` over strata
    *k* — the probability that a hallucinated item outscores a correct one *of the same length*.
    Returns (value, number of pairs); NaN when no stratum holds both classes.
    """
    y = np.asarray(labels, dtype=int)
    s = np.asarray(scores, dtype=float)
    z = np.asarray(strata)
    num = 0.0
    pairs = 0
    for k in np.unique(z):
        m = z == k
        # Rank-based count (Mann-Whitney U) so big strata stay O(n log n).
        u, n_pairs = mann_whitney_u(s[m], y[m])
        if not n_pairs:
            continue
        num += u
        pairs += n_pairs
    return (num / pairs if pairs else math.nan), int(pairs)


def length_controlled(
    labels: Sequence[bool],
    predictions: Sequence[bool],
    scores: Sequence[float] | None,
    lengths: Sequence[int],
    groups: Sequence | None = None,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    ci: float = CI,
) -> dict:
    """The length-controlled view for HaluEval QA, where answer length alone separates the classes.

    - ``length_only_auroc``: AUROC of the answer word count used as the score — the shortcut a
      detector may be exploiting (about 0.975 on ``halueval-qa``).
    - ``length_matched_auroc``: :func:`stratified_auroc` with the exact answer word count as the
      stratum, i.e. hallucinated and correct answers are compared only when they have the same
      number of words; the length shortcut scores 0.5 on it by construction. Bootstrap interval as
      in :func:`compute_metrics`; ``matched_pairs`` and ``matched_items`` say how much data it rests on.
    - ``buckets``: per answer word-count bucket (:data:`LENGTH_BUCKETS`): item counts per class,
      accuracy, and the hit rate on each class (recall on hallucinated, specificity on correct).
    """
    y, p, s = _as_arrays(labels, predictions, scores)
    n_words = np.asarray(lengths, dtype=int)
    value, pairs = stratified_auroc(y, s, n_words)
    boots = bootstrap_indices(y.size, groups, n_boot, seed) if (n_boot and y.size) else []
    lo, hi = percentile_ci([stratified_auroc(y[i], s[i], n_words[i])[0] for i in boots], ci) if boots else (math.nan, math.nan)
    mixed = [k for k in np.unique(n_words) if 0 < y[n_words == k].sum() < (n_words == k).sum()]
    buckets = []
    for a, b in LENGTH_BUCKETS:
        m = (n_words >= a) & (n_words <= b)
        pos, neg = m & (y == 1), m & (y == 0)
        buckets.append(
            {
                "words": f"{a}" if a == b else (f"{a}+" if b >= 10**9 else f"{a}-{b}"),
                "n_hallucinated": int(pos.sum()),
                "n_correct": int(neg.sum()),
                "accuracy": float((p[m] == y[m]).mean()) if m.any() else math.nan,
                "recall_hallucinated": float(p[pos].mean()) if pos.any() else math.nan,
                "specificity_correct": float(1 - p[neg].mean()) if neg.any() else math.nan,
            }
        )
    return {
        "length_feature": "answer word count",
        "length_only_auroc": auroc(y, p, n_words.astype(float)),
        "length_matched_auroc": {"value": float(value), "ci_low": lo, "ci_high": hi, "higher_is_better": True},
        "matched_pairs": pairs,
        "matched_items": int(np.isin(n_words, mixed).sum()),
        "buckets": buckets,
    }


# ---------------------------------------------------------------- calibration before / after

CALIBRATION_METRICS = ("ece", "brier", "auroc")
"""What :func:`calibration_effect` compares: calibration error, and that the ranking is kept."""


def calibration_effect(
    labels: Sequence[bool],
    raw: Sequence[float],
    calibrated: Sequence[float],
    groups: Sequence | None = None,
    lengths: Sequence[int] | None = None,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    ci: float = CI,
) -> dict:
    """ECE, Brier and AUROC of the raw and of the calibrated P(hallucinated) of the same items, each
    with a bootstrap interval over the same resamples (whole ``groups`` at a time). With ``lengths``
    (answer word counts, HaluEval QA) also the length-matched AUROC (:func:`stratified_auroc`).

    A strictly increasing map (temperature, Platt) keeps AUROC; isotonic regression merges scores into
    ties, which can move it either way, which is why AUROC is reported on both sides.

    ``ece_if_calibrated`` holds, per side, what ECE calibrated scores would show on these items
    (:func:`~halucheck.verifiers.calibration.ece_if_calibrated`: ``mean``, ``p95``, ``p_value``): on a few dozen
    items even a perfect map shows an ECE near 0.1, and this says whether the measured one is more.

    Returns ``{"n", "before": {name: cell}, "after": {name: cell}, "ece_if_calibrated": {"before",
    "after"}}`` with cells as in :func:`compute_metrics` (``value``, ``ci_low``, ``ci_high``,
    ``higher_is_better``).
    """
    y, _, before = _as_arrays(labels, labels, raw)
    after = np.asarray(calibrated, dtype=float)
    if after.shape != before.shape:
        raise ValueError(f"raw and calibrated scores differ in length: {before.size} and {after.size}")
    n_words = None if lengths is None else np.asarray(lengths, dtype=int)
    names = [*CALIBRATION_METRICS, *(["length_matched_auroc"] if n_words is not None else [])]

    def value(name: str, s: np.ndarray, i) -> float:
        if name == "length_matched_auroc":
            return stratified_auroc(y[i], s[i], n_words[i])[0]
        return METRICS[name].fn(y[i], y[i], s[i])

    everything = np.arange(y.size)
    boots = bootstrap_indices(y.size, groups, n_boot, seed) if (n_boot and y.size) else []
    out: dict = {"n": int(y.size)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # one-class resamples: NaN by convention
        for side, s in (("before", before), ("after", after)):
            cells = {}
            for name in names:
                lo, hi = percentile_ci([value(name, s, i) for i in boots], ci) if boots else (math.nan, math.nan)
                cells[name] = {"value": float(value(name, s, everything)), "ci_low": lo, "ci_high": hi,
                               "higher_is_better": METRICS[name].higher_is_better if name in METRICS else True}
            out[side] = cells
    out["ece_if_calibrated"] = {side: ece_if_calibrated(s, y, seed=seed) for side, s in (("before", before), ("after", after))}
    return out


__all__ = [
    "CI",
    "ECE_BINS",
    "LENGTH_BUCKETS",
    "METRICS",
    "Metric",
    "N_BOOT",
    "SEED",
    "CALIBRATION_METRICS",
    "bootstrap_indices",
    "calibration_effect",
    "compute_metrics",
    "ece",
    "length_controlled",
    "percentile_ci",
    "register_metric",
    "stratified_auroc",
]
