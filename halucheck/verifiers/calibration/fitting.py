"""Fitting a calibrator: each method cross-validated, the one with the lowest out-of-fold ECE refitted on all
items, and its threshold and undecided band chosen (:func:`fit`).

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
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from halucheck.errors import InputError
from halucheck.verifiers.calibration.maps import FITTERS, METHODS, apply_map
from halucheck.verifiers.calibration.metrics import auroc_score, brier_score, expected_calibration_error
from halucheck.verifiers.calibration.record import Calibrator, finite_or_none
from halucheck.verifiers.calibration.threshold import MIN_ACCURACY, band_with_stats, threshold_with_rule

MIN_ITEMS = 10
"""The fewest labelled items :func:`fit` accepts (and both classes must be among them)."""
FOLDS = 5


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
            out[test] = apply_map(m, FITTERS[m](s[train], y[train]), s[test])
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
    parameters = FITTERS[chosen](s, y)
    after = apply_map(chosen, parameters, s)
    # threshold and band on out-of-fold calibrated scores when there are some (see module docstring)
    basis_scores, basis = (oof[chosen], "out-of-fold") if chosen in oof else (after, "in-sample")
    threshold, rule = threshold_with_rule(basis_scores, y, target_precision)
    if min_accuracy is None:
        band, stats = [threshold, threshold], {"undecided_share": 0.0, "decided_accuracy": None}
        band_rule = "no band asked"
    else:
        lo, hi, stats = band_with_stats(basis_scores, y, min_accuracy, threshold)
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
        ece_before=finite_or_none(expected_calibration_error(s, y)),
        ece_after=finite_or_none(expected_calibration_error(after, y)),
        brier_before=finite_or_none(brier_score(s, y)),
        brier_after=finite_or_none(brier_score(after, y)),
        auroc_before=finite_or_none(auroc_score(s, y)),
        auroc_after=finite_or_none(auroc_score(after, y)),
        threshold_rule=rule,
        band_rule=band_rule,
        threshold_basis=basis,
        target_precision=target_precision,
        min_accuracy=min_accuracy,
        undecided_share=finite_or_none(stats["undecided_share"]),
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
