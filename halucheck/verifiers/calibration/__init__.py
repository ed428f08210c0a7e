"""Calibrated confidence: map a verifier's raw P(hallucinated) to a probability that holds on labelled data.

A verifier's ``p_hallucinated`` ranks claims, but small models are over- or under-confident: of the
claims a model scores 0.9, far fewer (or more) than 90 % may be hallucinated. :func:`fit` learns a
monotone map from raw to calibrated probability on labelled items (True = hallucinated), picks the
decision threshold and an *undecided* band from the same data, and returns a :class:`Calibrator`: a
plain record that applies the map, serialises to pure JSON and says what it was fitted on.

Methods (all applied to raw scores first clipped to ``[EPS, 1 - EPS]``; ``z = logit(p)``):

- ``temperature``: ``p' = sigmoid(z / T)``, one parameter, fitted by minimising the log loss over
  ``T`` in ``[0.01, 100]`` (:func:`scipy.optimize.minimize_scalar`, bounded, on ``log T``). It only
  sharpens or softens; it cannot move 0.5 (and a verifier that ranks the wrong way round gets T at
  its upper bound: everything near 0.5).
- ``platt``: ``p' = sigmoid(a * z + b)``, logistic regression on the logit, fitted by minimising the
  log loss (BFGS) against Platt's smoothed targets ``(N+ + 1) / (N+ + 2)`` and ``1 / (N- + 2)``
  instead of 1 and 0, which keeps ``a`` finite when the fitting data are separable.
- ``isotonic``: the non-decreasing step function of :class:`sklearn.isotonic.IsotonicRegression`
  (``out_of_bounds="clip"``), with outputs kept inside ``[1 / (n + 2), (n + 1) / (n + 2)]``: n items
  cannot support a probability closer to 0 or 1 than the rule of succession gives. Stored as its
  breakpoints ``x`` / ``y`` and applied by linear interpolation between them (as scikit-learn does),
  plus ``TIE_BREAK * p`` (at most 1e-6): the step function's flat steps would merge claims the raw
  score tells apart into ties and lose ranking for nothing, so each step keeps the raw order inside it.
  A non-negative tilt never moves a score below a bin edge it sat on.

All three are strictly increasing (temperature and Platt for ``T > 0`` / ``a > 0``), so the order of
the claims, hence AUROC, is kept.

Choice: each method is scored by the ECE of its *out-of-fold* predictions (stratified k-fold, the
out-of-fold calibrated scores of all folds pooled, then one ECE over all items, which is steadier on
small folds than a mean of per-fold ECEs). The lowest wins; on a tie the method with fewer parameters
(temperature, platt, isotonic). The winner is then refitted on all items. With fewer items of the
smaller class than ``folds``, as many folds as that class has items are used; with a single item of a
class no cross-validation is possible, and temperature (one parameter, the least able to overfit) is
taken without comparison. Both cases are written in the record's ``selection``. Fewer than
:data:`MIN_ITEMS` items, or one class only, is an :class:`~halucheck.errors.InputError`.

Decision threshold (:func:`choose_threshold`) and undecided band (:func:`band_for`) are chosen on the
chosen method's out-of-fold calibrated scores (in-sample ones when there was no cross-validation; the
record's ``threshold_basis`` says which): the in-sample scores of a refitted isotonic map are
optimistically calibrated and would promise a precision the next data will not give. A claim is
hallucinated when its calibrated P >= ``threshold``; it is *undecided* when ``lo <= P < hi`` (``lo <=
P`` when ``hi == 1``); ``lo <= threshold <= hi``, and ``lo == hi`` is an empty band. The band is the
one that leaves the fewest claims undecided while the decided ones are right at least
``min_accuracy`` of the time (default :data:`MIN_ACCURACY`); the record's ``undecided_share`` and
``decided_accuracy`` say what that cost and gave on the fitting data.

ECE and Brier are defined here and :mod:`halucheck.evaluation.metrics` uses these definitions (the
evaluation is built on this module, not the other way round): ECE over 10 equal-width bins of the
hallucination probability, bin *k* holding scores in ``[k/10, (k+1)/10)`` and the last bin also 1.0,
``ECE = sum_k (n_k / n) * |mean(label in bin k) - mean(score in bin k)|`` with empty bins skipped.
This is the binary ECE of the positive class ("hallucinated"), not the top-label ECE of Guo et al.
(2017), which bins ``max(p, 1 - p)`` against accuracy; the two differ in general. Brier: the mean of
``(score - label)**2``.

Storage: one file per verifier and profile in the user cache,
``user_cache_dir() / "calibration" / "<verifier>--<profile>.json"`` (names percent-encoded), and beside
it any number of named ones, ``<verifier>--<profile>@<name>.json`` (one per kind of data: a map fitted
on one domain's base rate is off for another's). A stored calibrator is applied only to the model it
was fitted on: :func:`load` raises a :class:`~halucheck.errors.ConfigError` otherwise.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import quote, unquote
from xml.sax.saxutils import escape

import numpy as np

from halucheck import __version__
from halucheck.config import user_cache_dir
from halucheck.errors import ConfigError, InputError

METHODS = ("temperature", "platt", "isotonic")
"""The calibration methods, fewest parameters first (the order also breaks ties in the choice)."""
EPS = 1e-6
"""Raw scores are clipped to [EPS, 1 - EPS] before their logit; calibrated ones are kept there too."""
TIE_BREAK = 1e-6
"""Isotonic's tilt by the raw score, so that its flat steps keep the raw order (module docstring)."""
MIN_ITEMS = 10
"""The fewest labelled items :func:`fit` accepts (and both classes must be among them)."""
ECE_BINS = 10
CONSISTENCY_DRAWS = 1000
"""Label draws behind :func:`ece_if_calibrated`."""
FOLDS = 5
MIN_ACCURACY = 0.8
"""Default accuracy that the decided claims must reach on the fitting data (see :func:`band_for`)."""
FORMAT = 1
"""Version of the JSON layout written by :meth:`Calibrator.to_json`."""
T_BOUNDS = (0.01, 100.0)
MAX_CUTS = 500
"""Candidate cut points per side of the threshold in :func:`band_for` (thinned to quantiles above)."""


# ---------------------------------------------------------------- ECE, Brier, reliability bins


def _arrays(scores, labels) -> tuple[np.ndarray, np.ndarray]:
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
    s, y = _arrays(scores, labels)
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
    s, y = _arrays(scores, labels)
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
    s, y = _arrays(scores, labels)
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
    s, y = _arrays(scores, np.zeros(np.size(scores)) if labels is None else labels)
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


def _auroc(s: np.ndarray, y: np.ndarray) -> float:
    from scipy.stats import rankdata

    pos, neg = int(y.sum()), int(y.size - y.sum())
    if not pos or not neg:
        return math.nan
    r = rankdata(s)
    return float((r[y == 1].sum() - pos * (pos + 1) / 2) / (pos * neg))


# ---------------------------------------------------------------- the three maps


def _logit(p, eps: float = EPS) -> np.ndarray:
    p = np.clip(np.asarray(p, dtype=float), eps, 1 - eps)
    return np.log(p) - np.log1p(-p)


def _sigmoid(u, eps: float = EPS) -> np.ndarray:
    return np.clip(0.5 * (1.0 + np.tanh(0.5 * np.asarray(u, dtype=float))), eps, 1 - eps)


def _log_loss(u: np.ndarray, t: np.ndarray) -> float:
    """Mean cross-entropy of sigmoid(u) against targets t in [0, 1], computed without overflow."""
    return float(np.mean(t * np.logaddexp(0.0, -u) + (1 - t) * np.logaddexp(0.0, u)))


def _fit_temperature(s: np.ndarray, y: np.ndarray) -> dict:
    from scipy.optimize import minimize_scalar

    z = _logit(s)
    yf = y.astype(float)
    lo, hi = math.log(T_BOUNDS[0]), math.log(T_BOUNDS[1])
    res = minimize_scalar(lambda log_t: _log_loss(z / math.exp(log_t), yf), bounds=(lo, hi), method="bounded",
                          options={"xatol": 1e-8})
    return {"T": float(math.exp(res.x))}


def _fit_platt(s: np.ndarray, y: np.ndarray) -> dict:
    from scipy.optimize import minimize

    z = _logit(s)
    n_pos, n_neg = int(y.sum()), int(y.size - y.sum())
    t = np.where(y == 1, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))

    def loss(w):
        u = w[0] * z + w[1]
        q = _sigmoid(u)
        g = q - t  # d loss / d u, per item
        return _log_loss(u, t), np.array([np.mean(g * z), np.mean(g)])

    res = minimize(loss, np.array([1.0, 0.0]), jac=True, method="BFGS", options={"gtol": 1e-10})
    return {"a": float(res.x[0]), "b": float(res.x[1])}


def _fit_isotonic(s: np.ndarray, y: np.ndarray) -> dict:
    from sklearn.isotonic import IsotonicRegression

    n = y.size
    iso = IsotonicRegression(out_of_bounds="clip", y_min=1 / (n + 2), y_max=(n + 1) / (n + 2), increasing=True)
    iso.fit(np.clip(s, EPS, 1 - EPS), y.astype(float))
    return {"x": [float(v) for v in iso.X_thresholds_], "y": [float(v) for v in iso.y_thresholds_]}


_FITTERS = {"temperature": _fit_temperature, "platt": _fit_platt, "isotonic": _fit_isotonic}


def _apply(method: str, parameters: Mapping, p, eps: float = EPS) -> np.ndarray:
    p = np.asarray(p, dtype=float)
    if method == "temperature":
        return _sigmoid(_logit(p, eps) / parameters["T"], eps)
    if method == "platt":
        return _sigmoid(parameters["a"] * _logit(p, eps) + parameters["b"], eps)
    if method == "isotonic":
        x, yv = np.asarray(parameters["x"], dtype=float), np.asarray(parameters["y"], dtype=float)
        p = np.clip(p, eps, 1 - eps)
        return np.clip(np.interp(p, x, yv) + TIE_BREAK * p, eps, 1 - eps)
    raise ValueError(f"unknown calibration method {method!r}; one of {', '.join(METHODS)}")


def _check_parameters(method: str, parameters: Mapping) -> None:
    """Raise ValueError when ``parameters`` cannot drive ``method``."""
    def finite(v):
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

    if method == "temperature":
        if not (finite(parameters.get("T")) and parameters["T"] > 0):
            raise ValueError("temperature needs a positive finite T")
    elif method == "platt":
        if not (finite(parameters.get("a")) and finite(parameters.get("b"))):
            raise ValueError("platt needs finite a and b")
    elif method == "isotonic":
        x, yv = parameters.get("x"), parameters.get("y")
        if not (isinstance(x, list) and isinstance(yv, list) and len(x) == len(yv) >= 1
                and all(map(finite, x + yv))):
            raise ValueError("isotonic needs lists x and y of one length with finite numbers")
        if any(b < a for a, b in zip(x, x[1:])) or any(b < a for a, b in zip(yv, yv[1:])):
            raise ValueError("isotonic x and y must be non-decreasing")
    else:
        raise ValueError(f"unknown calibration method {method!r}; one of {', '.join(METHODS)}")


# ---------------------------------------------------------------- threshold and undecided band


def _cuts(s: np.ndarray) -> np.ndarray:
    """0 and the midpoints between consecutive distinct scores: every way to split the sorted scores
    into "below" and "at or above" with at least one item at or above."""
    u = np.unique(s)
    return np.concatenate([[0.0], (u[:-1] + u[1:]) / 2])


def _threshold(s: np.ndarray, y: np.ndarray, target_precision: float | None) -> tuple[float, str]:
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
    s, y = _arrays(scores, labels)
    return _threshold(s, y, target_precision)[0]


def _thin(c: np.ndarray) -> np.ndarray:
    if c.size <= MAX_CUTS:
        return c
    return np.unique(c[np.linspace(0, c.size - 1, MAX_CUTS).round().astype(int)])


def _band(s: np.ndarray, y: np.ndarray, min_accuracy: float, threshold: float) -> tuple[float, float, dict]:
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
    s, y = _arrays(scores, labels)
    t = _threshold(s, y, None)[0] if threshold is None else float(threshold)
    lo, hi, _ = _band(s, y, min_accuracy, t)
    return lo, hi


# ---------------------------------------------------------------- the record


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass
class Calibrator:
    """A fitted calibration map with its threshold, undecided band, scores and provenance (pure data).

    ``parameters``: ``{"T"}`` (temperature), ``{"a", "b"}`` (platt) or ``{"x": [...], "y": [...]}``
    (isotonic breakpoints). ``cv_ece`` / ``cv_brier``: per method tried, its out-of-fold score (None
    when no cross-validation ran). ``ece_before`` … ``brier_after``: on the fitting data, raw and
    calibrated by the refitted map (in-sample). ``band``: ``[lo, hi]`` of calibrated P left undecided.
    """

    method: str
    parameters: dict
    threshold: float = 0.5
    band: list = field(default_factory=lambda: [0.5, 0.5])
    n: int = 0
    positives: int = 0
    cv_ece: dict = field(default_factory=dict)
    cv_brier: dict = field(default_factory=dict)
    folds: int = 0
    selection: str = ""
    ece_before: float | None = None
    ece_after: float | None = None
    brier_before: float | None = None
    brier_after: float | None = None
    auroc_before: float | None = None
    auroc_after: float | None = None
    threshold_rule: str = ""
    band_rule: str = ""
    threshold_basis: str = ""
    target_precision: float | None = None
    min_accuracy: float | None = None
    undecided_share: float | None = None
    decided_accuracy: float | None = None
    verifier: str | None = None
    profile: str | None = None
    model: str | None = None
    name: str | None = None
    datasets: list = field(default_factory=list)
    files: list = field(default_factory=list)
    split: str | None = None
    seed: int = 0
    eps: float = EPS
    created_at: str = field(default_factory=_now)
    version: str = __version__
    format: int = FORMAT

    def __post_init__(self):
        _check_parameters(self.method, self.parameters)
        if not (isinstance(self.band, (list, tuple)) and len(self.band) == 2):
            raise ValueError("band must be [lo, hi]")
        self.band = [float(self.band[0]), float(self.band[1])]
        if not 0 < self.eps < 0.5:
            raise ValueError("eps must be in (0, 0.5)")
        if not 0 <= self.band[0] <= self.band[1] <= 1:
            raise ValueError(f"band {self.band} is not 0 <= lo <= hi <= 1")

    # ---- applying

    def apply(self, p: float | None) -> float | None:
        """Calibrated P(hallucinated) of one raw score; None stays None (a claim without a score)."""
        if p is None:
            return None
        return self.apply_many([p])[0]

    def apply_many(self, ps: Iterable[float | None]) -> list[float | None]:
        """:meth:`apply` over many scores (None kept in place)."""
        ps = list(ps)
        idx = [i for i, p in enumerate(ps) if p is not None]
        raw = np.asarray([ps[i] for i in idx], dtype=float)
        if raw.size and (np.isnan(raw).any() or raw.min() < 0 or raw.max() > 1):
            raise ValueError("raw scores must be probabilities in [0, 1]")
        out: list[float | None] = [None] * len(ps)
        for i, q in zip(idx, _apply(self.method, self.parameters, raw, self.eps) if raw.size else []):
            out[i] = float(q)
        return out

    def undecided(self, q: float) -> bool:
        """Whether a calibrated P falls in the undecided band."""
        lo, hi = self.band
        if lo >= hi:
            return False
        return lo <= q < hi or (hi >= 1.0 and lo <= q)

    def decide(self, p: float | None) -> bool | None:
        """True (hallucinated), False or None (undecided, or no score) for one *raw* score."""
        q = self.apply(p)
        if q is None or self.undecided(q):
            return None
        return q >= self.threshold

    def summary(self) -> str:
        """One line for a terminal: the method, why, and what it did to ECE."""
        others = ", ".join(f"{m} {v:.3f}" for m, v in self.cv_ece.items() if v is not None and m != self.method)
        cv = self.cv_ece.get(self.method)
        head = f"{self.method}" + (f" (CV ECE {cv:.3f}" + (f"; {others})" if others else ")") if cv is not None else "")
        lo, hi = self.band
        band = f"undecided {lo:.3f} <= P < {hi:.3f}" if lo < hi else "no undecided band"
        return (f"{head}; ECE {_f(self.ece_before)} -> {_f(self.ece_after)} on {self.n} items "
                f"({self.positives} hallucinated); threshold {self.threshold:.3f}; {band}")

    def describe(self) -> str:
        """What a user's output says about the P(hallucinated) it shows: which map, fitted on what."""
        fitted = ", ".join([*self.datasets, *self.files]) or "labelled data"
        label = f" {self.name!r}" if self.name else ""
        return (f"calibrated: {self.method} map{label} for {self.verifier}/{self.profile or '-'} fitted on {fitted} "
                f"({self.split or 'all'}, {self.n} items; ECE {_f(self.ece_before)} -> {_f(self.ece_after)} there)")

    # ---- JSON

    def to_dict(self) -> dict:
        return json_safe(asdict(self))

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False, allow_nan=False) + "\n"

    @classmethod
    def from_dict(cls, d: Mapping) -> "Calibrator":
        if not isinstance(d, Mapping):
            raise ValueError("a calibrator is a JSON object")
        if d.get("format") != FORMAT:
            raise ValueError(f"format {d.get('format')!r} is not {FORMAT} (written by another halucheck version)")
        known = {f.name for f in fields(cls)}
        missing = {"method", "parameters"} - d.keys()
        if missing:
            raise ValueError(f"missing {', '.join(sorted(missing))}")
        return cls(**{k: v for k, v in d.items() if k in known})

    @classmethod
    def from_json(cls, text: str) -> "Calibrator":
        """The calibrator of :meth:`to_json`; ValueError when ``text`` is not one."""
        try:
            d = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"not JSON: {e}") from None
        try:
            return cls.from_dict(d)
        except TypeError as e:
            raise ValueError(str(e)) from None


def _f(v) -> str:
    return "n/a" if v is None else f"{v:.3f}"


def json_safe(x):
    """JSON-safe copy: NaN/inf -> None, numpy scalars -> Python numbers (for files that must be strict JSON)."""
    if isinstance(x, dict):
        return {k: json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    if hasattr(x, "item") and not isinstance(x, (str, bytes)):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _num(v: float) -> float | None:
    return None if v is None or not math.isfinite(v) else float(v)


# ---------------------------------------------------------------- fitting


def _validate(scores, labels) -> tuple[np.ndarray, np.ndarray]:
    scores, labels = list(scores), list(labels)
    if len(scores) != len(labels):
        raise InputError(f"{len(scores)} scores but {len(labels)} labels")
    for i, v in enumerate(scores):
        if v is None or isinstance(v, bool) or not isinstance(v, (int, float, np.number)) or not 0 <= float(v) <= 1:
            raise InputError(f"item {i}: score {v!r} is not a probability in [0, 1]; leave out items the verifier "
                             "gave no score")
    for i, v in enumerate(labels):
        if v not in (True, False, 0, 1):
            raise InputError(f"item {i}: label {v!r} is not true/false (true = hallucinated)")
    s = np.asarray(scores, dtype=float)
    y = np.asarray([int(bool(v)) for v in labels], dtype=int)
    pos = int(y.sum())
    if y.size < MIN_ITEMS or pos in (0, y.size):
        raise InputError(f"need at least {MIN_ITEMS} labelled items of both kinds (hallucinated and not); got "
                         f"{y.size} item{'s' if y.size != 1 else ''}: {pos} hallucinated, {y.size - pos} not")
    return s, y


def _cross_validate(s, y, methods, folds, seed) -> tuple[dict[str, np.ndarray], int]:
    from sklearn.model_selection import StratifiedKFold

    skf = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    splits = list(skf.split(s.reshape(-1, 1), y))
    oof = {}
    for m in methods:
        out = np.empty_like(s)
        for train, test in splits:
            out[test] = _apply(m, _FITTERS[m](s[train], y[train]), s[test])
        oof[m] = out
    return oof, folds


def fit(
    scores: Sequence[float],
    labels: Sequence[bool],
    methods: Sequence[str] = METHODS,
    folds: int = FOLDS,
    seed: int = 0,
    *,
    target_precision: float | None = None,
    min_accuracy: float | None = MIN_ACCURACY,
    verifier: str | None = None,
    profile: str | None = None,
    model: str | None = None,
    name: str | None = None,
    datasets: Sequence[str] = (),
    files: Sequence[str | os.PathLike] = (),
    split: str | None = None,
) -> Calibrator:
    """Fit the ``methods`` on raw P(hallucinated) ``scores`` and ``labels`` (True = hallucinated), keep
    the one with the lowest cross-validated ECE refitted on all items, and choose its threshold
    (:func:`choose_threshold` with ``target_precision``) and undecided band (:func:`band_for` with
    ``min_accuracy``; None: no band). The keyword arguments are provenance, stored as given.

    Raises :class:`InputError` for fewer than :data:`MIN_ITEMS` items, one class only, or a score that
    is not a probability; ValueError for an unknown method or ``folds < 2``.
    """
    methods = list(dict.fromkeys(methods))
    unknown = [m for m in methods if m not in METHODS]
    if not methods or unknown:
        raise ValueError(f"unknown calibration method(s) {unknown or '(none given)'}; choose from {', '.join(METHODS)}")
    methods = [m for m in METHODS if m in methods]  # fewest parameters first: ties go to the simpler map
    if folds < 2:
        raise ValueError("folds must be at least 2")
    s, y = _validate(scores, labels)
    pos, neg = int(y.sum()), int(y.size - y.sum())
    k = min(folds, pos, neg)
    cv_ece: dict[str, float | None] = {m: None for m in methods}
    cv_brier: dict[str, float | None] = {m: None for m in methods}
    oof: dict[str, np.ndarray] = {}
    if k >= 2:
        oof, k = _cross_validate(s, y, methods, k, seed)
        for m in methods:
            cv_ece[m] = expected_calibration_error(oof[m], y)
            cv_brier[m] = brier_score(oof[m], y)
        chosen = min(methods, key=lambda m: (round(cv_ece[m], 12), methods.index(m)))
        selection = f"lowest {k}-fold cross-validated ECE ({cv_ece[chosen]:.4f})" if len(methods) > 1 else \
            f"only method asked ({k}-fold cross-validated ECE {cv_ece[chosen]:.4f})"
        if k < folds:
            smaller = "hallucinated" if pos <= neg else "correct"
            selection += f"; {k} folds instead of {folds}: only {min(pos, neg)} {smaller} items"
    else:
        k = 0
        smaller = "hallucinated" if pos <= neg else "correct"
        chosen = "temperature" if "temperature" in methods else methods[0]
        selection = (f"no cross-validation: only {min(pos, neg)} {smaller} item; took {chosen} without comparison"
                     + (" (one parameter, the least able to overfit)" if chosen == "temperature" else ""))
    parameters = _FITTERS[chosen](s, y)
    after = _apply(chosen, parameters, s)
    # threshold and band on out-of-fold calibrated scores when there are some (see module docstring)
    basis_scores, basis = (oof[chosen], "out-of-fold") if chosen in oof else (after, "in-sample")
    threshold, rule = _threshold(basis_scores, y, target_precision)
    if min_accuracy is None:
        band, stats = [threshold, threshold], {"undecided_share": 0.0, "decided_accuracy": None}
        band_rule = "no band asked"
    else:
        lo, hi, stats = _band(basis_scores, y, min_accuracy, threshold)
        band = [lo, hi]
        if stats["reached"]:
            band_rule = (f"fewest undecided claims ({stats['undecided_share']:.1%}) with the decided ones right "
                         f">= {min_accuracy:g} of the time ({stats['decided_accuracy']:.3f})")
        else:
            band_rule = f"no band reaches accuracy {min_accuracy:g} on the decided claims: every claim is undecided"
    return Calibrator(
        method=chosen,
        parameters=parameters,
        threshold=threshold,
        band=band,
        n=int(y.size),
        positives=pos,
        cv_ece=cv_ece,
        cv_brier=cv_brier,
        folds=k,
        selection=selection,
        ece_before=_num(expected_calibration_error(s, y)),
        ece_after=_num(expected_calibration_error(after, y)),
        brier_before=_num(brier_score(s, y)),
        brier_after=_num(brier_score(after, y)),
        auroc_before=_num(_auroc(s, y)),
        auroc_after=_num(_auroc(after, y)),
        threshold_rule=rule,
        band_rule=band_rule,
        threshold_basis=basis,
        target_precision=target_precision,
        min_accuracy=min_accuracy,
        undecided_share=_num(stats["undecided_share"]),
        decided_accuracy=stats["decided_accuracy"],
        verifier=verifier,
        profile=profile,
        model=model,
        name=name,
        datasets=[str(d) for d in datasets],
        files=[str(f) for f in files],
        split=split,
        seed=seed,
    )


def calibrated_fields(calibrator: Calibrator | None, raw: float | None) -> dict:
    """What an output carries about its P(hallucinated): with a calibrator and a score, the calibrated
    ``p_hallucinated`` (4 decimals), ``p_raw``, ``calibrated: True`` and ``calibrated_decision`` (None: in the
    undecided band); otherwise ``calibrated: False`` alone."""
    if calibrator is None or raw is None:
        return {"calibrated": False}
    return {"p_raw": raw, "p_hallucinated": round(calibrator.apply(raw), 4), "calibrated": True,
            "calibrated_decision": calibrator.decide(raw)}


UNCALIBRATED = ("uncalibrated: P(hallucinated) is the verifier's own (fit a calibrator on labelled data with "
                "`halucheck calibrate -d DATASET -v VERIFIER -p PROFILE`)")
"""What an output made without a calibrator says about its P(hallucinated)."""


def describe(calibrator: Calibrator | None) -> str:
    """:meth:`Calibrator.describe`, or :data:`UNCALIBRATED`."""
    return calibrator.describe() if calibrator is not None else UNCALIBRATED


# ---------------------------------------------------------------- storage


def calibration_dir(root: str | os.PathLike | None = None) -> Path:
    """The folder of stored calibrators: ``root``, else ``user_cache_dir() / "calibration"``."""
    return Path(root) if root is not None else user_cache_dir() / "calibration"


def calibration_path(verifier: str, profile: str | None, root: str | os.PathLike | None = None,
                     name: str | None = None) -> Path:
    """``<dir>/<verifier>--<profile>.json``, or ``<verifier>--<profile>@<name>.json`` for a named one; all
    names percent-encoded (``selfcheck,debate`` -> ``selfcheck%2Cdebate``), so any name is one file name
    inside the folder and two names never share a file. No profile (a verifier without a model) is an
    empty one."""
    if not verifier:
        raise ValueError("a calibrator is stored under its verifier's name; none given")
    if name is not None and not str(name).strip():
        raise ValueError("a calibrator's name is empty; give one, e.g. --name medical")
    label = f"@{quote(str(name), safe='')}" if name is not None else ""
    return calibration_dir(root) / f"{quote(str(verifier), safe='')}--{quote(str(profile or ''), safe='')}{label}.json"


def names(verifier: str, profile: str | None, root: str | os.PathLike | None = None) -> list[str]:
    """The names of the calibrators stored for ``verifier`` on ``profile`` (``calibrate --name``), sorted."""
    stem = calibration_path(verifier, profile, root).stem + "@"
    folder = calibration_dir(root)
    found = folder.glob("*.json") if folder.is_dir() else ()
    return sorted(unquote(p.stem[len(stem):]) for p in found if p.stem.startswith(stem))


def save(calibrator: Calibrator, root: str | os.PathLike | None = None) -> Path:
    """Write ``calibrator`` (atomically) to :func:`calibration_path` (under its ``name`` when it has one)
    and return the path; replaces the one stored for the same verifier, profile and name."""
    if not calibrator.verifier:
        raise ValueError("this calibrator has no verifier name; fit it with verifier=... to store it")
    path = calibration_path(calibrator.verifier, calibrator.profile, root, calibrator.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(calibrator.to_json())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _read(path: Path, what: str) -> Calibrator:
    try:
        return Calibrator.from_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ConfigError(f"calibrator file {path} is unreadable ({e}); run `halucheck calibrate ...` for {what} "
                          "again or delete the file") from None


def _same_model(cal: Calibrator, what: str, model: str | None, path: Path) -> Calibrator:
    if cal.model != model:
        raise ConfigError(f"calibrator for {what} was fitted on model {cal.model}, this run uses model {model}; "
                          f"run `halucheck calibrate ...` again (the stored one is {path})")
    return cal


def load(verifier: str, profile: str | None, model: str | None, root: str | os.PathLike | None = None,
         name: str | None = None) -> Calibrator | None:
    """The stored calibrator of ``verifier`` on ``profile`` (the one called ``name``, when given), or None
    when there is none. A ``name`` asked for and not stored is a :class:`ConfigError` (the user chose it).

    Raises :class:`ConfigError` when the stored one was fitted on another model than ``model`` (it is
    never applied to another model), or when the file is damaged.
    """
    path = calibration_path(verifier, profile, root, name)
    what = f"{verifier}/{profile}" if profile else verifier
    if not path.is_file():
        if name is None:
            return None
        have = names(verifier, profile, root)
        raise ConfigError(f"no calibrator named {name!r} for {what}"
                          + (f" (stored: {', '.join(have)})" if have else " (none is named)")
                          + f"; fit one with `halucheck calibrate ... -v {verifier}"
                          + (f" -p {profile}" if profile else "") + f" --name {name}`, or pass a calibrator file")
    cal = _read(path, what)
    if cal.verifier != verifier or (cal.profile or None) != (profile or None) or cal.name != name:
        raise ConfigError(f"calibrator file {path} holds {cal.verifier}/{cal.profile}"
                          + (f" named {cal.name!r}" if cal.name else "") + f", not {what}; "
                          "run `halucheck calibrate ...` again or delete the file")
    return _same_model(cal, what, model, path)


def load_file(path: str | os.PathLike, verifier: str, model: str | None) -> Calibrator:
    """A calibrator from a file (one `halucheck calibrate` stored or kept with its fitting run), checked to
    be for ``verifier`` and fitted on ``model``; it may have been fitted on another profile of that model
    (its description names the profile)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"calibrator file {path} does not exist; pass a file written by `halucheck calibrate` "
                          "(calibrator.json in its run folder) or a stored calibrator's name")
    cal = _read(path, verifier)
    if cal.verifier != verifier:
        raise ConfigError(f"calibrator file {path} is for verifier {cal.verifier}, this run uses {verifier}; "
                          f"pass one fitted with `halucheck calibrate ... -v {verifier}`")
    return _same_model(cal, verifier, model, path)


def resolve(verifier: str, profile: str | None, model: str | None, choice: str | os.PathLike | None = None,
            root: str | os.PathLike | None = None) -> tuple[Calibrator | None, Path | None]:
    """The calibrator a run uses and where it was read, ``(None, None)`` when there is none: ``choice`` None
    is the stored unnamed one; a path (ending in ``.json`` or holding a folder separator) is a file, read
    by :func:`load_file`; anything else a stored calibrator's name (:func:`load`)."""
    if choice is None:
        cal = load(verifier, profile, model, root)
        return cal, calibration_path(verifier, profile, root) if cal else None
    choice = str(choice)
    if choice.endswith(".json") or "/" in choice or os.sep in choice:
        return load_file(choice, verifier, model), Path(choice)
    return load(verifier, profile, model, root, choice), calibration_path(verifier, profile, root, choice)


# ---------------------------------------------------------------- reliability diagram

COLORS = ("#d95f02", "#1b9e77")  # colour-blind-safe pair (ColorBrewer Dark2)


def _fmt(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".") if abs(v - round(v, 1)) < 1e-9 else f"{v:.2f}"


def reliability_svg(
    scores,
    labels,
    bins: int = ECE_BINS,
    title: str = "",
    calibrated=None,
    names: tuple[str, str] = ("raw", "calibrated"),
) -> str:
    """A self-contained SVG reliability diagram (no script, no external font or link).

    Per equal-width bin of P(hallucinated), a bar up to the observed share of hallucinated items, a
    dark tick at the bin's mean predicted P, and the bin's item count under the axis; the dashed
    diagonal is perfect calibration. With ``calibrated`` (the same items' calibrated scores) the two
    series are drawn side by side in two colours with a legend (``names``). The caption gives each
    series' ECE over the same ``bins``. Bars carry ``data-series``, ``data-bin``, ``data-n`` and
    ``data-observed``; count labels ``data-series`` and ``data-bin``.

    Each bar also has a consistency bar (Bröcker & Smith 2007): the range, 5th to 95th percentile, in
    which the observed share of its ``n`` items falls nine times in ten when the predicted P is right
    (``Binomial(n, mean predicted P) / n``). A bar top outside it is a miscalibration the sample shows;
    inside, the gap to the diagonal may be chance. Whiskers carry ``data-series``, ``data-bin``,
    ``data-lo`` and ``data-hi``.
    """
    from scipy.stats import binom

    series = [(names[0], scores)] + ([(names[1], calibrated)] if calibrated is not None else [])
    tables, eces = [], []
    n_items = None
    for _, sc in series:
        s, y = _arrays(sc, labels)
        if n_items is not None and s.size != n_items:
            raise ValueError("calibrated scores must be as many as the raw ones")
        n_items = s.size
        tables.append(reliability_table(s, y, bins))
        eces.append(expected_calibration_error(s, y, bins))
    rows = len(series)

    # layout, top to bottom: title, plot, tick labels, one count row per series, axis title, legend, caption
    left, pw, ph = 64, 420, 300
    top = 44 if title else 20
    # the legend's run of swatches and words (about 7 px a character at 11 px) may widen the picture
    legend_end = (left + sum(14 + 7 * len(name) + 16 for name, _ in series) + (16 + 7 * 16 + 16) + (12 + 7 * 13 + 16)
                  + 18 + 7 * 19)
    width = max(left + pw + 24, legend_end + 8)
    tick_y = top + ph + 14
    count_y = [tick_y + 16 + 14 * r for r in range(rows)]
    axis_y = count_y[-1] + 18
    legend_y = axis_y + 20
    caption_y = legend_y + 22
    height = caption_y + 14
    X = lambda v: left + v * pw  # noqa: E731
    Y = lambda v: top + (1 - v) * ph  # noqa: E731
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'role="img" font-family="sans-serif" font-size="11">',
        f"<title>{escape(title or 'Reliability diagram')}</title>",
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
    ]
    if title:
        out.append(f'<text x="{width / 2:.1f}" y="26" text-anchor="middle" font-size="14" '
                   f'font-weight="bold">{escape(title)}</text>')
    for i in range(6):  # grid and tick labels every 0.2
        v = i / 5
        out.append(f'<line x1="{X(0):.1f}" y1="{Y(v):.1f}" x2="{X(1):.1f}" y2="{Y(v):.1f}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{X(0) - 6:.1f}" y="{Y(v) + 4:.1f}" text-anchor="end">{_fmt(v)}</text>')
        out.append(f'<text x="{X(v):.1f}" y="{tick_y:.1f}" text-anchor="middle">{_fmt(v)}</text>')
    gap = 0.08 / bins
    bw = (1 / bins - 2 * gap) / rows
    for r, table in enumerate(tables):
        color = COLORS[r % len(COLORS)]
        for row in table:
            x0 = row["lo"] + gap + r * bw
            if row["n"]:
                obs, mean = row["observed"], row["mean_score"]
                out.append(
                    f'<rect class="bar" data-series="{r}" data-bin="{row["bin"]}" data-n="{row["n"]}" '
                    f'data-observed="{obs:.4f}" x="{X(x0):.2f}" y="{Y(obs):.2f}" width="{bw * pw:.2f}" '
                    f'height="{(Y(0) - Y(obs)):.2f}" fill="{color}" fill-opacity="0.8"/>')
                out.append(f'<line x1="{X(x0):.2f}" y1="{Y(mean):.2f}" x2="{X(x0 + bw):.2f}" y2="{Y(mean):.2f}" '
                           f'stroke="#222222" stroke-width="2"/>')
                lo, hi = (binom.ppf(q, row["n"], mean) / row["n"] for q in (0.05, 0.95))
                xc = X(x0 + bw / 2)
                out.append(f'<line class="consistency" data-series="{r}" data-bin="{row["bin"]}" '
                           f'data-lo="{lo:.4f}" data-hi="{hi:.4f}" x1="{xc:.2f}" y1="{Y(lo):.2f}" x2="{xc:.2f}" '
                           f'y2="{Y(hi):.2f}" stroke="#222222" stroke-width="1"/>')
            out.append(f'<text class="count" data-series="{r}" data-bin="{row["bin"]}" '
                       f'x="{X(row["lo"] + 0.5 / bins):.1f}" y="{count_y[r]:.1f}" text-anchor="middle" '
                       f'font-size="10" fill="{color}">{row["n"]}</text>')
        out.append(f'<text x="{X(0) - 6:.1f}" y="{count_y[r]:.1f}" text-anchor="end" font-size="10" '
                   f'fill="{color}">n</text>')
    out.append(f'<line x1="{X(0):.1f}" y1="{Y(0):.1f}" x2="{X(1):.1f}" y2="{Y(1):.1f}" stroke="#555555" '
               'stroke-dasharray="5,4"/>')
    out.append(f'<rect x="{X(0):.1f}" y="{Y(1):.1f}" width="{pw}" height="{ph}" fill="none" stroke="#333333"/>')
    out.append(f'<text x="{X(0.5):.1f}" y="{axis_y:.1f}" text-anchor="middle" fill="#444444">'
               'predicted P(hallucinated), binned</text>')
    out.append(f'<text transform="translate(18 {Y(0.5):.1f}) rotate(-90)" text-anchor="middle" fill="#444444">'
               'observed share hallucinated</text>')
    # legend: one swatch per series, the mean tick, the diagonal
    x = X(0)
    for r, (name, _) in enumerate(series):
        out.append(f'<rect class="legend" x="{x:.1f}" y="{legend_y - 9:.1f}" width="10" height="10" '
                   f'fill="{COLORS[r % len(COLORS)]}"/>')
        out.append(f'<text x="{x + 14:.1f}" y="{legend_y:.1f}">{escape(name)}</text>')
        x += 14 + 7 * len(name) + 16
    out.append(f'<line x1="{x:.1f}" y1="{legend_y - 4:.1f}" x2="{x + 12:.1f}" y2="{legend_y - 4:.1f}" '
               'stroke="#222222" stroke-width="2"/>')
    out.append(f'<text x="{x + 16:.1f}" y="{legend_y:.1f}">mean predicted P</text>')
    x += 16 + 7 * 16 + 16
    out.append(f'<line x1="{x + 5:.1f}" y1="{legend_y - 10:.1f}" x2="{x + 5:.1f}" y2="{legend_y + 1:.1f}" '
               'stroke="#222222" stroke-width="1"/>')
    out.append(f'<text x="{x + 12:.1f}" y="{legend_y:.1f}">90 % if right</text>')
    x += 12 + 7 * 13 + 16
    out.append(f'<line x1="{x:.1f}" y1="{legend_y - 4:.1f}" x2="{x + 14:.1f}" y2="{legend_y - 4:.1f}" '
               'stroke="#555555" stroke-dasharray="5,4"/>')
    out.append(f'<text x="{x + 18:.1f}" y="{legend_y:.1f}">perfect calibration</text>')
    caption = f"ECE ({bins} bins, {n_items} items): " + " · ".join(
        f"{name} {_f(_num(e))}" for (name, _), e in zip(series, eces))
    out.append(f'<text class="caption" x="{width / 2:.1f}" y="{caption_y:.1f}" text-anchor="middle">'
               f'{escape(caption)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


__all__ = [
    "COLORS",
    "CONSISTENCY_DRAWS",
    "Calibrator",
    "ECE_BINS",
    "EPS",
    "FOLDS",
    "METHODS",
    "MIN_ACCURACY",
    "MIN_ITEMS",
    "UNCALIBRATED",
    "band_for",
    "bin_index",
    "brier_score",
    "calibrated_fields",
    "calibration_dir",
    "calibration_path",
    "choose_threshold",
    "describe",
    "ece_if_calibrated",
    "expected_calibration_error",
    "fit",
    "json_safe",
    "load",
    "reliability_svg",
    "reliability_table",
    "save",
]
