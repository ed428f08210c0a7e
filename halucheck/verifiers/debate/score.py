"""The debate's P(hallucinated): a logistic model over what the chain measured, not a vote.

Features of a finished chain (all zero-centred):

* ``first``: the first agent's log-odds that the claim is hallucinated (its verdict token's probability);
* ``leader``: the mean log-odds, over the Leader calls made, that the verdict should be "not factual";
* ``margin``: verified quotes of the counted stances arguing "not factual" minus those arguing "factual";
* ``verdict``: +1 when the chain's standing verdict is "not factual", -1 when "factual".

P(hallucinated) = sigmoid(bias + sum of weight * feature). The weights are fitted on the dev split
(``halucheck calibrate`` on a debate eval run writes them beside its calibrator) and the shipped ones
live in ``score.json`` with their provenance; :func:`load_weights` reads either.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from importlib import resources
from typing import Sequence

from halucheck.records import Turn

FEATURES = ("first", "leader", "margin", "verdict")
EPS = 1e-4


def _logit(p: float) -> float:
    p = min(1 - EPS, max(EPS, p))
    return math.log(p / (1 - p))


def features(chain: Sequence[Turn], standing: bool) -> dict[str, float]:
    """The chain's features (see the module)."""
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
    provenance: dict = field(default_factory=dict)

    def score(self, x: dict[str, float]) -> float:
        z = self.bias + sum(self.weights.get(k, 0.0) * v for k, v in x.items())
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))

    def to_dict(self) -> dict:
        return {"bias": self.bias, "weights": self.weights, "provenance": self.provenance}


def load_weights(path: str | None = None) -> ScoreWeights:
    """The weights in ``path`` (a ``debate_score.json`` written by ``halucheck calibrate``), else the shipped ones."""
    if path:
        with open(path, encoding="utf-8") as fh:
            raw = json.load(fh)
    else:
        raw = json.loads(resources.files(__package__).joinpath("score.json").read_text("utf-8"))
    return ScoreWeights(float(raw["bias"]), {k: float(raw["weights"].get(k, 0.0)) for k in FEATURES},
                        raw.get("provenance", {}))


_SHIPPED: list[ScoreWeights] = []


def chain_score(chain: Sequence[Turn], standing: bool, weights: ScoreWeights | None = None) -> float:
    """P(hallucinated) of a finished chain."""
    if weights is None:
        if not _SHIPPED:
            _SHIPPED.append(load_weights())
        weights = _SHIPPED[0]
    return weights.score(features(chain, standing))
