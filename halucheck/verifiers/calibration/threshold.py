"""Decision threshold and undecided band on calibrated scores, from labelled items.

A claim is hallucinated when its calibrated P >= the threshold (:func:`choose_threshold`); it is
*undecided* when it falls in the band around the threshold (:func:`band_for`): the band that leaves the
fewest claims undecided while the decided ones are right at least a given share of the time.
"""

from __future__ import annotations

import numpy as np

from halucheck.config import MIN_ACCURACY
from halucheck.errors import InputError
from halucheck.verifiers.calibration.metrics import as_arrays

MAX_CUTS = 500
"""Candidate cut points per side of the threshold in :func:`band_for` (thinned to quantiles above)."""


def _cuts(s: np.ndarray) -> np.ndarray:
    """0 and the midpoints between consecutive distinct scores: every way to split the sorted scores
    into "below" and "at or above" with at least one item at or above."""
    u = np.unique(s)
    return np.concatenate([[0.0], (u[:-1] + u[1:]) / 2])


def threshold_with_rule(s: np.ndarray, y: np.ndarray, target_precision: float | None) -> tuple[float, str]:
    """:func:`choose_threshold` on arrays, with the rule that chose it."""
    if target_precision is not None and not 0 < target_precision <= 1:
        raise ValueError("target_precision must be in (0, 1]")
    pos, neg = int(y.sum()), int(y.size - y.sum())
    if not pos or not neg:
        raise InputError("choosing a threshold needs labelled items of both kinds")
    order = np.sort(s)
    pos_sorted = np.sort(s[y == 1])
    cuts = _cuts(s)
    flagged = s.size - np.searchsorted(order, cuts, side="left")           # P >= cut
    flagged_pos = pos - np.searchsorted(pos_sorted, cuts, side="left")
    if target_precision is not None:
        precision = flagged_pos / flagged
        ok = np.flatnonzero(precision >= target_precision - 1e-12)
        if ok.size:
            k = ok[0]
            return float(cuts[k]), (f"smallest threshold with precision >= {target_precision:g} on hallucinations "
                                    f"({precision[k]:.3f}, recall {flagged_pos[k] / pos:.3f})")
    tpr = flagged_pos / pos
    tnr = (neg - (flagged - flagged_pos)) / neg
    bal = (tpr + tnr) / 2
    best = np.flatnonzero(bal >= bal.max() - 1e-12)
    k = best[np.argmin(np.abs(cuts[best] - 0.5))]  # ties: the one closest to 0.5
    why = f"maximal balanced accuracy ({bal[k]:.3f})"
    if target_precision is not None:
        why = f"precision {target_precision:g} not reached on the fitting data; " + why
    return float(cuts[k]), why


def choose_threshold(scores, labels, target_precision: float | None = None) -> float:
    """Decision threshold on calibrated scores: a claim is hallucinated when its P >= the threshold.

    With ``target_precision``: the smallest threshold at which the precision on hallucinations reaches
    it (the most hallucinations found at that precision). Without one, or when no threshold reaches it:
    the threshold with the highest balanced accuracy (ties: the one closest to 0.5). Candidates are 0
    (flag everything) and the midpoints between consecutive distinct scores, so a threshold never sits
    on a fitted score. Raises :class:`InputError` unless both classes are present.
    """
    s, y = as_arrays(scores, labels)
    return threshold_with_rule(s, y, target_precision)[0]


def _thin(c: np.ndarray) -> np.ndarray:
    if c.size <= MAX_CUTS:
        return c
    return np.unique(c[np.linspace(0, c.size - 1, MAX_CUTS).round().astype(int)])


def band_with_stats(s: np.ndarray, y: np.ndarray, min_accuracy: float, threshold: float) -> tuple[float, float, dict]:
    """:func:`band_for` on arrays, with its statistics: the share left undecided, the accuracy of the rest,
    whether it reached ``min_accuracy``."""
    if not 0 < min_accuracy <= 1:
        raise ValueError("min_accuracy must be in (0, 1]")
    if not 0 <= threshold <= 1:
        raise ValueError("threshold must be in [0, 1]")
    cuts = _cuts(s)
    lows = _thin(np.unique(np.concatenate([cuts[cuts <= threshold], [threshold]])))
    highs = _thin(np.unique(np.concatenate([cuts[cuts >= threshold], [threshold, 1.0]])))
    order = np.sort(s)
    neg_sorted, pos_sorted = np.sort(s[y == 0]), np.sort(s[y == 1])
    cleared = np.searchsorted(order, lows, side="left")                    # P < lo
    cleared_ok = np.searchsorted(neg_sorted, lows, side="left")
    flagged = np.where(highs >= 1.0, 0, s.size - np.searchsorted(order, highs, side="left"))  # P >= hi
    flagged_ok = np.where(highs >= 1.0, 0, pos_sorted.size - np.searchsorted(pos_sorted, highs, side="left"))
    decided = cleared[:, None] + flagged[None, :]
    correct = cleared_ok[:, None] + flagged_ok[None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = np.where(decided > 0, correct / np.maximum(decided, 1), -1.0)
    ok = (decided > 0) & (acc >= min_accuracy - 1e-12)
    if not ok.any():
        return 0.0, 1.0, {"undecided_share": 1.0, "decided_accuracy": None, "reached": False}
    # most decided items; then the highest accuracy; then the narrowest band
    ii, jj = np.nonzero(ok)
    width = highs[jj] - lows[ii]
    best = np.lexsort((width, -acc[ii, jj], -decided[ii, jj]))[0]
    i, j = ii[best], jj[best]
    lo, hi = float(lows[i]), float(highs[j])
    return lo, hi, {"undecided_share": float(1 - decided[i, j] / s.size), "decided_accuracy": float(acc[i, j]),
                    "reached": True}


def band_for(scores, labels, min_accuracy: float = MIN_ACCURACY, threshold: float | None = None) -> tuple[float, float]:
    """The undecided band ``(lo, hi)`` around ``threshold`` (default: :func:`choose_threshold`).

    Claims with calibrated ``lo <= P < hi`` (``lo <= P`` when ``hi == 1``) are left undecided; the
    others are decided by the threshold. The band is the one that leaves the **fewest claims undecided**
    while the decided claims of these (calibrated, labelled) scores are right at least ``min_accuracy``
    of the time: the risk–coverage trade-off of selective classification, with the abstention region
    kept to one interval around the threshold, where a calibrated verifier's errors sit. Ties: the
    higher accuracy, then the narrower band. Cut points are the midpoints between consecutive distinct
    scores (and 0, the threshold, 1). ``(t, t)`` (empty) when all decisions already reach the accuracy;
    ``(0, 1)`` (everything undecided) when no band does.
    """
    s, y = as_arrays(scores, labels)
    t = threshold_with_rule(s, y, None)[0] if threshold is None else float(threshold)
    lo, hi, _ = band_with_stats(s, y, min_accuracy, t)
    return lo, hi
