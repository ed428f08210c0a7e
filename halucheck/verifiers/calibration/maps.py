"""The three calibration maps: fitting their parameters on raw scores and labels, and applying them.

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
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

METHODS = ("temperature", "platt", "isotonic")
"""The calibration methods, fewest parameters first (the order also breaks ties in the choice)."""
EPS = 1e-6
"""Raw scores are clipped to [EPS, 1 - EPS] before their logit; calibrated ones are kept there too."""
TIE_BREAK = 1e-6
"""Isotonic's tilt by the raw score, so that its flat steps keep the raw order (module docstring)."""
T_BOUNDS = (0.01, 100.0)


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


FITTERS = {"temperature": _fit_temperature, "platt": _fit_platt, "isotonic": _fit_isotonic}


def apply_map(method: str, parameters: Mapping, p, eps: float = EPS) -> np.ndarray:
    """Raw P(hallucinated) ``p`` through the fitted ``method`` map with its ``parameters``."""
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


def check_parameters(method: str, parameters: Mapping) -> None:
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
