"""``nli``: a local sentence-transformers CrossEncoder judges each claim against its evidence, no LLM.

P(hallucinated) = 1 - max over passages of P(passage entails claim) (for a one-output model such as a
hallucination/consistency scorer: 1 - its sigmoid score); hallucinated when that is >= 0.5. No such
model ships on PyPI, so it has to be pointed at (``--nli-model PATH``, ``$HALUCHECK_NLI_MODEL`` or
``nli_model:`` in models.yaml).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Sequence

from halucheck.errors import ConfigError, InputError
from halucheck.records import Turn, Verdict
from halucheck.verifiers.scoring import clamp01
from halucheck.verifiers.base import Cost, Verifier, failed_verdict, verdict_from_score

THRESHOLD = 0.5
NO_NLI_MODEL = (
    "no NLI model configured, and none ships on PyPI: pass --nli-model PATH (a local sentence-transformers "
    "CrossEncoder folder, e.g. a downloaded cross-encoder/nli-deberta-v3-base), or set $HALUCHECK_NLI_MODEL "
    "or `nli_model: PATH` in models.yaml"
)


class NLI(Verifier):
    """A local CrossEncoder NLI model: P(hallucinated) = 1 - max over passages of P(entailment)."""

    name = "nli"
    uses_llm = False
    batch_size = 16

    def describe(self) -> dict:
        return {"nli_model": self.options.nli_model}

    def preflight(self) -> None:
        path = self.options.nli_model
        if not path:
            raise ConfigError(NO_NLI_MODEL)
        if not Path(path).is_dir():
            raise ConfigError(f"NLI model folder {path} does not exist; pass --nli-model a local CrossEncoder folder")

    def verify(self, checks, engines=None, on_verdict=None, on_call=None) -> list[Verdict]:
        self.preflight()
        t0 = time.perf_counter()
        if not any(c.evidence for c in checks):
            raise InputError("nli needs evidence passages and these claims have none: give a --corpus, a context, "
                             "or use an LLM verifier such as selfcheck")
        model = load_cross_encoder(self.options.nli_model)
        pairs, owner = [], []
        for i, c in enumerate(checks):
            for passage in c.evidence:
                pairs.append((passage.text, c.claim.statement))
                owner.append(i)
        probs = entailment_probabilities(model, pairs, self.batch_size)
        by_claim: dict[int, list[float]] = {}
        for i, p in zip(owner, probs):
            by_claim.setdefault(i, []).append(p)
        out = []
        for i, c in enumerate(checks):
            scores = by_claim.get(i, [])
            if not scores:
                v = failed_verdict(self.name, "no evidence passage to check the claim against")
            else:
                top = max(range(len(scores)), key=scores.__getitem__)
                s = clamp01(1.0 - scores[top])
                turn = Turn(state="S0", role="initial", opinion=f"P(entailment) {scores[top]:.2f} by passage [{top + 1}]",
                            factuality=s < THRESHOLD, error_severity=None, p_factual=1.0 - s, verifier=self.name)
                v = verdict_from_score(self.name, s >= THRESHOLD, s, turn)
            out.append(v)
            if on_verdict is not None:
                on_verdict(i, v)
        self.costs = {self.name: Cost(claims=len(checks), wall_s=time.perf_counter() - t0)}
        return out


def load_cross_encoder(path: str):
    """A sentence-transformers CrossEncoder from a local folder (never downloads)."""
    from sentence_transformers import CrossEncoder

    try:
        return CrossEncoder(path, device="cpu", local_files_only=True)
    except Exception as exc:
        raise ConfigError(f"cannot load a CrossEncoder from {path}: {str(exc).splitlines()[0]}") from None


def _id2label(model) -> dict[int, str]:
    for obj in (model, getattr(model, "model", None)):
        cfg = getattr(obj, "config", None)
        labels = getattr(cfg, "id2label", None)
        if labels:
            return {int(k): str(v) for k, v in labels.items()}
    return {}


def entailment_probabilities(model, pairs: Sequence[tuple[str, str]], batch_size: int = 16) -> list[float]:
    """P(premise entails hypothesis) per pair: the softmax entailment class of a multi-class NLI model,
    or the sigmoid output of a one-output (consistency) model."""
    if not pairs:
        return []
    labels = _id2label(model)
    num = getattr(model, "num_labels", None) or len(labels) or 1
    if num == 1:
        scores = model.predict(list(pairs), batch_size=batch_size, show_progress_bar=False)
        return [clamp01(float(s)) for s in scores]
    idx = next((i for i, name in labels.items() if name.lower().startswith("entail")), None)
    if idx is None:
        raise ConfigError(
            f"the NLI model's labels {sorted(labels.values())} have no 'entailment' class; use an NLI CrossEncoder"
        )
    rows = model.predict(list(pairs), batch_size=batch_size, show_progress_bar=False, apply_softmax=True)
    return [clamp01(float(r[idx])) for r in rows]


__all__ = ["NLI", "NO_NLI_MODEL", "entailment_probabilities", "load_cross_encoder"]
