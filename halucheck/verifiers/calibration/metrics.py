"""Calibration metrics: ECE, Brier, AUROC, reliability bins and the ECE calibrated scores would show.

ECE, Brier and AUROC are defined here and :mod:`halucheck.evaluation.metrics` uses these definitions
(the evaluation is built on this package, not the other way round): ECE over 10 equal-width bins of the
hallucination probability, bin *k* holding scores in ``[k/10, (k+1)/10)`` and the last bin also 1.0,
``ECE = sum_k (n_k / n) * |mean(label in bin k) - mean(score in bin k)|`` with empty bins skipped.
This is the binary ECE of the positive class ("hallucinated"), not the top-label ECE of Guo et al.
(2017), which bins ``max(p, 1 - p)`` against accuracy; the two differ in general. Brier: the mean of
``(score - label)**2``. AUROC: the share of (hallucinated, correct) pairs in which the hallucinated item
scores higher, a tie counting one half (:func:`auroc_score`).
"""

from __future__ import annotations

import math

import numpy as np

ECE_BINS = 10
CONSISTENCY_DRAWS = 1000
"""Label draws behind :func:`ece_if_calibrated`."""


def as_arrays(scores, labels) -> tuple[np.ndarray, np.ndarray]:
    """Scores and labels as flat float arrays of the same length (ValueError otherwise)."""
    s = np.asarray(scores, dtype=float).reshape(-1)
    y = np.asarray(labels, dtype=float).reshape(-1)
    if s.shape != y.shape:
        raise ValueError(f"scores and labels must have one length, got {s.size} and {y.size}")
    if s.size and (np.isnan(s).any() or s.min() < 0 or s.max() > 1):
        raise ValueError("scores must be probabilities of hallucination in [0, 1]")
    if y.size and not np.isin(y, (0.0, 1.0)).all():
        raise ValueError("labels must be True/False (1/0), True = hallucinated")
    return s, y.astype(int)


def bin_index(scores, bins: int = ECE_BINS) -> np.ndarray:
    """The equal-width bin of each score: bin *k* holds ``[k/bins, (k+1)/bins)``, the last one also 1.0."""
    if bins < 1:
        raise ValueError("bins must be at least 1")
    s = np.asarray(scores, dtype=float)
    return np.minimum((s * bins).astype(int), bins - 1)


def reliability_table(scores, labels, bins: int = ECE_BINS) -> list[dict]:
    """One row per bin (empty ones included): ``lo``, ``hi``, ``n``, ``mean_score`` and ``observed`` (the
    share of hallucinated items), the last two None for an empty bin."""
    s, y = as_arrays(scores, labels)
    idx = bin_index(s, bins)
    rows = []
    for k in range(bins):
        m = idx == k
        n = int(m.sum())
        rows.append({
            "bin": k,
            "lo": k / bins,
            "hi": (k + 1) / bins,
            "n": n,
            "mean_score": float(s[m].mean()) if n else None,
            "observed": float(y[m].mean()) if n else None,
        })
    return rows


def expected_calibration_error(scores, labels, bins: int = ECE_BINS) -> float:
    """Binary ECE of the hallucination probability over ``bins`` equal-width bins (module docstring);
    NaN for no items."""
    s, y = as_arrays(scores, labels)
    return float(_ece(s, y[None], bins)[0]) if s.size else math.nan


def _ece(s: np.ndarray, y: np.ndarray, bins: int) -> np.ndarray:
    """The ECE of scores ``s`` against each row of ``y`` (label sets x items), one definition for all."""
    idx = bin_index(s, bins)
    total = np.zeros(y.shape[0])
    for b in np.unique(idx):
        m = idx == b
        total += m.sum() / s.size * np.abs(y[:, m].mean(axis=1) - s[m].mean())
    return total


def brier_score(scores, labels) -> float:
    """Mean squared difference between the score and the 0/1 label; NaN for no items."""
    s, y = as_arrays(scores, labels)
    return float(np.mean((s - y) ** 2)) if s.size else math.nan


def ece_if_calibrated(scores, labels=None, bins: int = ECE_BINS, draws: int = CONSISTENCY_DRAWS,
                      seed: int = 0) -> dict:
    """The ECE a perfectly calibrated verifier would show on these scores, by consistency resampling
    (Bröcker & Smith, "Increasing the reliability of reliability diagrams", 2007).

    ECE measured on few items is biased upwards: in every bin the observed share of hallucinated items
    scatters around the bin's mean score even when the scores are exactly right, and the absolute values
    add that scatter up. Here labels are drawn ``draws`` times as ``Bernoulli(score)`` (what a calibrated
    verifier's labels would be) and each draw's ECE computed with the same bins. Returns ``mean`` and
    ``p95`` of those ECEs and, with the real ``labels``, ``observed`` (their ECE) and ``p_value``: the
    share of draws with an ECE at least the observed one. A small ``p_value`` (< 0.05) is evidence of
    miscalibration; an observed ECE near ``mean`` is what calibrated scores give on ``n`` items, so a
    target below ``mean`` cannot be shown on so few. NaN fields for no items.
    """
    s, y = as_arrays(scores, np.zeros(np.size(scores)) if labels is None else labels)
    out = {"n": int(s.size), "draws": int(draws), "mean": math.nan, "p95": math.nan}
    if labels is not None:
        out.update(observed=math.nan, p_value=math.nan)
    if not s.size:
        return out
    drawn = np.random.default_rng(seed).random((draws, s.size)) < s  # draws x items, each Bernoulli(score)
    ece = _ece(s, drawn, bins)
    out.update(mean=float(ece.mean()), p95=float(np.quantile(ece, 0.95)))
    if labels is not None:
        observed = float(_ece(s, y[None], bins)[0])
        out.update(observed=observed, p_value=float((ece >= observed - 1e-12).mean()))
    return out


def mann_whitney_u(scores, labels) -> tuple[float, int]:
    """``(U, pairs)`` over the (hallucinated, correct) pairs of these items: ``U`` counts the pairs in which the
    hallucinated item (label True / 1) scores higher, a tie one half (the Mann-Whitney statistic, from average
    ranks, so O(n log n)); ``pairs`` is their number, ``(0.0, 0)`` when either class is absent. Only the order
    of the scores counts: any real numbers will do."""
    from scipy.stats import rankdata

    s = np.asarray(scores, dtype=float).reshape(-1)
    y = np.asarray(labels, dtype=int).reshape(-1)
    if s.shape != y.shape:
        raise ValueError(f"scores and labels must have one length, got {s.size} and {y.size}")
    pos, neg = int(y.sum()), int(y.size - y.sum())
    if not pos or not neg:
        return 0.0, 0
    r = rankdata(s)
    return float(r[y == 1].sum() - pos * (pos + 1) / 2), pos * neg


def auroc_score(scores, labels) -> float:
    """AUROC of P(hallucinated) ``scores`` for ``labels`` (True = hallucinated): the share of (hallucinated,
    correct) pairs in which the hallucinated item scores higher, a tie counting one half: ``U / pairs`` of
    :func:`mann_whitney_u`, whose U is a sum of half-integer ranks and so exact, hence the correctly rounded
    value. NaN when the labels hold one class only (or there are no items)."""
    u, pairs = mann_whitney_u(scores, labels)
    return u / pairs if pairs else math.nan
