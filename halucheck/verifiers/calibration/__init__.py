"""Calibrated confidence: map a verifier's raw P(hallucinated) to a probability that holds on labelled data.

A verifier's ``p_hallucinated`` ranks claims, but small models are over- or under-confident: of the
claims a model scores 0.9, far fewer (or more) than 90 % may be hallucinated. :func:`fit` learns a
monotone map from raw to calibrated probability on labelled items (True = hallucinated), picks the
decision threshold and an *undecided* band from the same data, and returns a :class:`Calibrator`: a
plain record that applies the map, serialises to pure JSON and says what it was fitted on.

Modules: :mod:`~.metrics` (ECE, Brier, AUROC, reliability bins), :mod:`~.maps` (the temperature, Platt
and isotonic maps), :mod:`~.threshold` (threshold and undecided band), :mod:`~.record` (the
:class:`Calibrator`), :mod:`~.fitting` (cross-validated choice of the map, :func:`fit`), :mod:`~.files`
(stored calibrators, :func:`resolve`) and :mod:`~.plot` (the SVG reliability diagram).
"""

from halucheck.verifiers.calibration.files import (
    NONE,
    SHIPPED,
    calibration_dir,
    calibration_path,
    load,
    load_file,
    names,
    resolve,
    save,
    shipped,
    shipped_path,
)
from halucheck.verifiers.calibration.fitting import FOLDS, MIN_ITEMS, fit
from halucheck.verifiers.calibration.maps import EPS, METHODS, TIE_BREAK
from halucheck.verifiers.calibration.metrics import (
    CONSISTENCY_DRAWS,
    ECE_BINS,
    auroc_score,
    bin_index,
    brier_score,
    ece_if_calibrated,
    expected_calibration_error,
    mann_whitney_u,
    reliability_table,
)
from halucheck.verifiers.calibration.plot import COLORS, reliability_svg
from halucheck.verifiers.calibration.record import (
    FORMAT,
    UNCALIBRATED,
    Calibrator,
    calibrated_fields,
    describe,
    json_safe,
)
from halucheck.verifiers.calibration.threshold import MIN_ACCURACY, band_for, choose_threshold


def for_run(verifier, settings, name: str | None):
    """The calibrator fitted for ``verifier`` and the profile of its first agent (`halucheck calibrate`; the one
    ``--calibration`` names) and where it was read: ``(None, None)`` when there is none. The package's calibrator
    for ``probe`` was fitted on the shipped head's scores: a head of your own (``--head``) is not given it."""
    prof = settings.profile_for("initial") if verifier.uses_llm else None
    cal, path = resolve(verifier.name, prof.name if prof else None, prof.model if prof else None, name)
    from halucheck.verifiers.probe.head import SHIPPED as SHIPPED_HEAD

    head = getattr(getattr(verifier, "options", None), "head", None)
    if path is not None and path.parent == SHIPPED and head and head != SHIPPED_HEAD:
        return None, None
    return cal, path


def keep_with_run(store, cal, path) -> None:
    """Keep the calibrator with a run (its reports, rebuilt later too, give calibrated P(hallucinated)) and its
    reliability diagram; none found: the reports say uncalibrated."""
    diagram = path.with_suffix(".svg") if cal and path else None
    store.set_meta("calibrator", cal.to_json() if cal else "")
    store.set_meta("calibration_svg", diagram.read_text(encoding="utf-8") if diagram and diagram.is_file() else "")


__all__ = [
    "for_run",
    "keep_with_run",
    "COLORS",
    "CONSISTENCY_DRAWS",
    "Calibrator",
    "ECE_BINS",
    "EPS",
    "FOLDS",
    "FORMAT",
    "METHODS",
    "MIN_ACCURACY",
    "MIN_ITEMS",
    "TIE_BREAK",
    "UNCALIBRATED",
    "auroc_score",
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
    "load_file",
    "mann_whitney_u",
    "names",
    "reliability_svg",
    "reliability_table",
    "resolve",
    "NONE",
    "SHIPPED",
    "shipped",
    "shipped_path",
    "save",
]
