"""The calibrator record: a fitted map with its threshold, band and provenance, applied to raw scores and
kept as pure JSON; and what an output says about its P(hallucinated) with or without one.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone

import numpy as np

from halucheck import __version__
from halucheck.verifiers.calibration.maps import EPS, apply_map, check_parameters

FORMAT = 1
"""Version of the JSON layout written by :meth:`Calibrator.to_json`."""


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
        check_parameters(self.method, self.parameters)
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
        for i, q in zip(idx, apply_map(self.method, self.parameters, raw, self.eps) if raw.size else []):
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
        return (f"{head}; ECE {format_score(self.ece_before)} -> {format_score(self.ece_after)} on {self.n} items "
                f"({self.positives} hallucinated); threshold {self.threshold:.3f}; {band}")

    def describe(self) -> str:
        """What a user's output says about the P(hallucinated) it shows: which map, fitted on what."""
        fitted = ", ".join([*self.datasets, *self.files]) or "labelled data"
        label = f" {self.name!r}" if self.name else ""
        return (f"calibrated: {self.method} map{label} for {self.verifier}/{self.profile or '-'} fitted on {fitted} "
                f"({self.split or 'all'}, {self.n} items; ECE {format_score(self.ece_before)} -> "
                f"{format_score(self.ece_after)} there)")

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


def format_score(v) -> str:
    """A score as shown in summaries: three decimals, or n/a."""
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


def finite_or_none(v: float) -> float | None:
    """``v`` as a float, or None when it is missing or not finite (JSON has no NaN)."""
    return None if v is None or not math.isfinite(v) else float(v)


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
