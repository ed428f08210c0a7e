"""The debate's P(hallucinated) and verdict: a logistic model over what the chain measured, fitted, not voted.

Features of a finished chain (all zero-centred):

* ``first``: the first agent's log-odds that the claim is hallucinated (its verdict token's probability);
* ``leader``: the mean log-odds, over the Leader calls made, that the verdict should be "not factual";
* ``margin``: verified quotes of the counted stances arguing "not factual" minus those arguing "factual";
* ``verdict``: +1 when the chain's standing verdict (:func:`standing_of`) is "not factual", -1 when "factual".

P(hallucinated) = sigmoid(bias + sum of weight * feature); the claim is reported not factual when P reaches
the ``threshold``. Weights and threshold are fitted on the dev split (:func:`fit`: a logistic regression, then
the threshold of best balanced accuracy on the fitting data) and stored with their provenance: the shipped
ones in ``score.json``; ``halucheck calibrate -v debate`` refits them for a profile
(:func:`weights_path`), and the debate then uses those for that profile and model (:func:`resolve_weights`).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Sequence
from urllib.parse import quote

from halucheck.errors import ConfigError
from halucheck.records import Turn

FEATURES = ("first", "leader", "margin", "verdict")
EPS = 1e-4


def _logit(p: float) -> float:
    p = min(1 - EPS, max(EPS, p))
    return math.log(p / (1 - p))


def round_verdict(leaders: Sequence[Turn], standing: bool) -> bool | None:
    """The verdict a round's Leader turns give (None: no valid one, nothing moves): the winner's, or, where
    the two orders named different winners, the side their mean token probability favours (a tie keeps
    ``standing``). A walkover turn (no call) carries its verdict as a Leader's would."""
    decided = [t for t in leaders if t.ok and t.factuality is not None]
    if not decided:
        return None
    if len({t.factuality for t in decided}) == 1:
        return bool(decided[0].factuality)
    p_factual = sum(t.p_factual if t.p_factual is not None else float(t.factuality) for t in decided) / len(decided)
    return standing if (p_factual if standing else 1.0 - p_factual) >= 0.5 else not standing


def standing_of(chain: Sequence[Turn]) -> bool | None:
    """The chain's own verdict: the first agent's, moved by each round's Leader turns (:func:`round_verdict`)."""
    if not chain or chain[0].role != "initial" or not chain[0].ok:
        return None
    standing, leaders = bool(chain[0].factuality), []
    for turn in [*chain[1:], None]:
        if turn is not None and turn.role == "leader":
            leaders.append(turn)
            continue
        if leaders:  # a round's Leader turns end where the next round's stances begin
            moved = round_verdict(leaders, standing)
            standing = standing if moved is None else moved
            leaders = []
    return standing


def features(chain: Sequence[Turn], standing: bool | None = None) -> dict[str, float]:
    """The chain's features (see the module); ``standing`` defaults to :func:`standing_of`."""
    if standing is None:
        standing = bool(standing_of(chain))
    first = chain[0] if chain and chain[0].role == "initial" and chain[0].ok else None
    p_first = (first.p_factual if first.p_factual is not None else float(first.factuality)) if first else 0.5
    leaders = [t for t in chain if t.role == "leader" and t.ok and t.p_factual is not None and t.winner]
    leader = sum(_logit(1 - t.p_factual) for t in leaders) / len(leaders) if leaders else 0.0
    margin = 0.0
    for t in chain:
        if t.role in ("trust", "skeptic") and t.counts:
            margin += sum(q.verified for q in t.quotes) * (-1 if t.factuality else 1)
    return {"first": _logit(1 - p_first), "leader": leader, "margin": margin, "verdict": -1.0 if standing else 1.0}


@dataclass(frozen=True)
class ScoreWeights:
    bias: float
    weights: dict[str, float]
    threshold: float = 0.5  # reported not factual when P(hallucinated) reaches it
    provenance: dict = field(default_factory=dict)

    def score(self, x: dict[str, float]) -> float:
        z = self.bias + sum(self.weights.get(k, 0.0) * v for k, v in x.items())
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))

    def to_dict(self) -> dict:
        return {"bias": self.bias, "weights": self.weights, "threshold": self.threshold,
                "provenance": self.provenance}

    @classmethod
    def from_dict(cls, raw: dict) -> "ScoreWeights":
        return cls(float(raw["bias"]), {k: float(raw["weights"].get(k, 0.0)) for k in FEATURES},
                   float(raw.get("threshold", 0.5)), raw.get("provenance", {}))


def load_weights(path: str | os.PathLike | None = None) -> ScoreWeights:
    """The weights in ``path`` (written by ``halucheck calibrate -v debate``), else the shipped ones."""
    if path:
        try:
            return ScoreWeights.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ConfigError(f"debate score file {path} is unreadable ({e}); run `halucheck calibrate -v debate` "
                              "again or delete the file") from None
    return ScoreWeights.from_dict(json.loads(resources.files(__package__).joinpath("score.json").read_text("utf-8")))


def weights_path(profile: str | None, root: str | os.PathLike | None = None) -> Path:
    """Where ``halucheck calibrate -v debate`` keeps the weights it fits for ``profile`` (beside the calibrators)."""
    from halucheck.verifiers.calibration.files import calibration_dir

    return calibration_dir(root) / f"debate-score--{quote(str(profile or ''), safe='')}.json"


def resolve_weights(profile: str | None, model: str | None, root: str | os.PathLike | None = None) -> ScoreWeights:
    """The weights refitted for ``profile`` when stored and fitted on ``model``; else the shipped ones."""
    path = weights_path(profile, root)
    if not path.is_file():
        return shipped()
    weights = load_weights(path)
    fitted_on = weights.provenance.get("model")
    if fitted_on and model and fitted_on != model:
        raise ConfigError(f"the debate score in {path} was fitted on model {fitted_on}, this run uses {model}; "
                          "run `halucheck calibrate -v debate ...` again or delete the file")
    return weights


def save_weights(weights: ScoreWeights, path: str | os.PathLike) -> Path:
    """Write ``weights`` to ``path`` atomically."""
    from halucheck.verifiers.calibration.files import write_atomic

    return write_atomic(Path(path), json.dumps(weights.to_dict(), indent=2) + "\n")


def fit(chains: Sequence[Sequence[Turn]], labels: Sequence[bool], provenance: dict | None = None) -> ScoreWeights:
    """Weights by logistic regression (scikit-learn, L2, C=1) of the labels on the chains' features, and the
    threshold of best balanced accuracy on the fitted probabilities. Chains whose first agent failed are left
    out. Raises ConfigError unless both labels remain."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    from halucheck.verifiers.calibration.threshold import choose_threshold

    standings = [standing_of(c) for c in chains]
    rows = [(features(c, s), bool(y)) for c, s, y in zip(chains, standings, labels) if s is not None]
    if len({y for _, y in rows}) < 2:
        raise ConfigError("the debate score needs hallucinated and factual items among the debated ones to fit on")
    X = np.array([[x[k] for k in FEATURES] for x, _ in rows])
    y = np.array([label for _, label in rows])
    model = LogisticRegression(C=1.0).fit(X, y)
    fitted = model.predict_proba(X)[:, 1]
    return ScoreWeights(round(float(model.intercept_[0]), 4),
                        {k: round(float(w), 4) for k, w in zip(FEATURES, model.coef_[0])},
                        round(float(choose_threshold(list(fitted), list(y))), 4),
                        {**(provenance or {}), "fitted": True, "items": len(rows), "method":
                         "LogisticRegression(C=1) on the chain features; threshold: best balanced accuracy"})


def turns_of(chain: Sequence[dict]) -> list[Turn]:
    """The debate's turns of a chain as written to predictions.jsonl or results.jsonl (a cascade's earlier
    stages' turns left out)."""
    return [Turn(t["state"], t["role"], t.get("opinion") or "", t.get("factuality"), t.get("error_severity"),
                 error=t.get("error"), p_factual=t.get("p_factual"), **Turn.detail_fields(t))
            for t in chain if t.get("verifier", "debate") == "debate"]


_SHIPPED: list[ScoreWeights] = []


def shipped() -> ScoreWeights:
    """The weights in ``score.json``, read once."""
    if not _SHIPPED:
        _SHIPPED.append(load_weights())
    return _SHIPPED[0]
