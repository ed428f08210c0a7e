"""A trained head: P(hallucinated) from one prompt pass's features, and the file it lives in.

The head is a standardised logistic regression (fitted with scikit-learn, :mod:`.training`) on the hidden states of
a few layers at the prompt's last token and the direct verdict's margin, followed by a Platt calibration fitted on
out-of-fold scores (each dataset scored by a head fitted without it), so its probabilities hold on data it has not
seen. A claim's score is its best-supporting chunk's: the lowest P(hallucinated) over the chunks of its evidence.

The file is data, not code: an ``.npz`` of arrays and one JSON string of provenance (model and its hash, feature
recipe, layers, training sets and sizes, figures), read with ``allow_pickle=False``. A head fitted for another
model or recipe refuses to load, in one line that says why.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Sequence

import numpy as np

from halucheck.errors import ConfigError
from halucheck.verifiers.probe.features import Features
from halucheck.verifiers.probe.prompt import RECIPE

SHIPPED = "default"  # the head in the package (halucheck/verifiers/probe/heads/<model>.npz)


@dataclass
class Head:
    """``layers``: which rows of :attr:`Features.hidden` are read (0 = embeddings); ``mean``/``scale``: the
    standardisation of the feature vector; ``coef``/``intercept``: the logistic regression (positive =
    hallucinated); ``platt``: (a, b), P = sigmoid(a * z + b) of its decision value z; ``meta``: provenance."""

    layers: tuple[int, ...]
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float
    platt: tuple[float, float] = (1.0, 0.0)
    meta: dict = field(default_factory=dict)

    @property
    def model(self) -> str:
        return self.meta.get("model", "")

    @staticmethod
    def vector(f: Features, layers: Sequence[int]) -> np.ndarray:
        """The feature vector of one pass: the chosen layers' states, then the direct verdict's margin."""
        return np.concatenate([f.hidden[list(layers)].astype(np.float32).ravel(), [f.margin]])

    def decision(self, vectors: np.ndarray) -> np.ndarray:
        return ((vectors - self.mean) / self.scale) @ self.coef + self.intercept

    def p_hallucinated(self, features: Sequence[Features]) -> np.ndarray:
        """Calibrated P(hallucinated) of each pass."""
        z = self.decision(np.stack([self.vector(f, self.layers) for f in features]))
        a, b = self.platt
        return 1.0 / (1.0 + np.exp(-(a * z + b)))

    # -- the file ------------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = {**self.meta, "layers": list(self.layers), "platt": list(self.platt), "intercept": self.intercept}
        with open(path, "wb") as fh:  # np.savez would add .npz to a name without it
            np.savez_compressed(fh, mean=self.mean.astype(np.float32), scale=self.scale.astype(np.float32),
                                coef=self.coef.astype(np.float32), meta=np.array(json.dumps(meta, sort_keys=True)))
        return path

    @classmethod
    def load(cls, path: str | Path, model: str | None = None) -> "Head":
        """Read a head file; ConfigError when it is not one, or was fitted for another model or recipe than
        ``model`` and :data:`RECIPE`."""
        path = Path(path)
        try:
            with np.load(path, allow_pickle=False) as data:
                meta = json.loads(str(data["meta"]))
                head = cls(tuple(meta["layers"]), data["mean"], data["scale"], data["coef"], float(meta["intercept"]),
                           tuple(meta["platt"]), meta)
        except FileNotFoundError:
            raise ConfigError(f"head file {path} does not exist; fit one with `halucheck train --name NAME`") from None
        except Exception as exc:
            raise ConfigError(f"{path} is not a halucheck head file ({type(exc).__name__}: {exc}); fit one with "
                              f"`halucheck train`") from None
        if meta.get("recipe") != RECIPE:
            raise ConfigError(f"head {path.name} was fitted on features {meta.get('recipe')!r}, this halucheck makes "
                              f"{RECIPE!r}; fit it again with `halucheck train`")
        if model is not None and head.model != model:
            raise ConfigError(f"head {path.name} was fitted on {head.model or 'an unknown model'}, this profile runs "
                              f"{model}; use a head fitted for this model (`halucheck train -p PROFILE`) or the "
                              f"profile it was fitted for")
        return head


def heads_dir() -> Path:
    """Where ``halucheck train`` saves heads: ``$HALUCHECK_HOME/heads``."""
    from halucheck.config import user_cache_dir

    return user_cache_dir() / "heads"


def head_path(name: str) -> Path:
    """The file of the head called ``name`` (:func:`halucheck.config.head_file`: the path itself when it is a .npz
    file or exists, else ``heads_dir()/NAME.npz``); the run fingerprint reads the same rule."""
    from halucheck.config import head_file

    return head_file(name)


def shipped_path(model_name: str) -> Path:
    return Path(str(resources.files("halucheck.verifiers.probe").joinpath("heads", f"{model_name}.npz")))


def resolve(name: str | None, model_id: str) -> Head:
    """The head called ``name`` (a saved name, or a path to a head file) for the model ``model_id``
    (``name@hash``); None or ``default``: the head shipped for that model."""
    model_name = model_id.split("@")[0]
    if not name or name == SHIPPED:
        path = shipped_path(model_name)
        if not path.exists():
            raise ConfigError(f"no head is shipped for {model_name}; fit one with `halucheck train --name NAME` and "
                              f"pass --head NAME, or use -p cpu-1.5b")
        return Head.load(path, model_id)
    path = head_path(name)
    if path == heads_dir() / f"{name}.npz" and not path.exists():
        raise ConfigError(f"no head called {name!r} in {heads_dir()}; fit it with `halucheck train --name {name}`")
    return Head.load(path, model_id)


__all__ = ["Head", "SHIPPED", "head_path", "heads_dir", "resolve", "shipped_path"]
