"""How many of a labelled set's human-extracted claims the claim stage finds: the extractor's recall.

Factcheck-GPT and FacTool-QA ship each response with the claims people extracted from it. The claim stage
runs on every response exactly as in ``halucheck run`` (the short-answer rule, one sentence per call with the
question and the sentences before it as context), then each gold claim is matched against the claims extracted from the same
response.

**Match.** Two claims match when the F1 of their content-word sets (``coverage.content_words``: numbers,
names and words outside a stop list, lower-cased, plural -s dropped) is at least ``MATCH_F1`` (0.5). One
claim "Douglas served on the Supreme Court from 1939 to 1975." against "William O. Douglas served on the
Supreme Court until 1975." share 5 of their 6 content words each: F1 0.83, a match; a claim that drops the fact
the gold states (a different date, another person) falls below. ``recall`` = gold claims matched by some
extracted claim / gold claims; ``precision`` = extracted claims matching some gold claim / extracted
claims (people extract fewer, coarser claims than the prompt asks for, so it reads low by design).
Intervals: percentile bootstrap over responses.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from halucheck.errors import InputError
from halucheck.evaluation.items import dataset_folder, dataset_root, maybe_literal, read_jsonl, split_of
from halucheck.evaluation.metrics import N_BOOT, bootstrap_indices, percentile_ci

if TYPE_CHECKING:
    from halucheck.config import Settings
    from halucheck.engines.base import Engine

MATCH_F1 = 0.5
EXTRACTION_FILE = "extraction.json"


@dataclass
class Response:
    id: str
    dataset: str
    question: str
    text: str
    gold: list[str]
    position: int
    extracted: list[str] = field(default_factory=list)


def _factcheck_gpt(root: Path) -> list[Response]:
    out = []
    for pos, r in enumerate(read_jsonl(dataset_folder(root, "factcheck-gpt") / "factcheck-GPT-benchmark.jsonl")):
        sentences = maybe_literal(r.get("sentences")) or {}
        gold = [c.strip() for s in sentences.values() if isinstance(s, dict)
                for c in (maybe_literal(s.get("claims")) or []) if isinstance(c, str) and c.strip()]
        out.append(Response(f"factcheck-gpt:r{pos}", "factcheck-gpt", r["prompt"], r["response"], gold, pos))
    return out


def _factool_qa(root: Path) -> list[Response]:
    out = []
    for pos, r in enumerate(read_jsonl(dataset_folder(root, "factool") / "knowledge_qa.jsonl")):
        gold = [c["claim"].strip() for c in maybe_literal(r["claims"]) if c.get("claim")]
        out.append(Response(f"factool-qa:{pos}", "factool-qa", r["prompt"], r["response"], gold, pos))
    return out


LOADERS: dict[str, Callable[[Path], list[Response]]] = {"factcheck-gpt": _factcheck_gpt, "factool-qa": _factool_qa}


def load_responses(name: str, split: str = "dev", limit: int | None = None) -> list[Response]:
    if name not in LOADERS:
        raise InputError(f"no human-extracted claims in {name!r}; --extraction works on: {', '.join(LOADERS)}")
    rows = [r for r in LOADERS[name](dataset_root()) if r.gold and split_of(r.position) == split]
    return rows[:limit] if limit else rows


def similarity(a: str, b: str) -> float:
    """F1 of the two claims' content-word sets (0 when either has none)."""
    from halucheck.coverage import content_words

    x, y = {w.norm for w in content_words(a)}, {w.norm for w in content_words(b)}
    common = len(x & y)
    return 2 * common / (len(x) + len(y)) if common else 0.0


def extract(engine: "Engine", responses: Sequence[Response], settings: "Settings | None" = None) -> None:
    """The claim stage of ``halucheck run`` on each response; fills ``Response.extracted``."""
    from halucheck import claims as stages

    sampling = settings.sampling("extractor", stages.EXTRACT_SAMPLING) if settings else stages.EXTRACT_SAMPLING
    work, units = [], []
    for r in responses:
        if r.question and stages.is_short_answer(r.text):
            r.extracted = [f"{r.question} {r.text.strip()}"]
        else:  # as `run` does: a simple statement is its own claim (stages.is_simple_statement), the rest extracted
            for seg, ctx in stages.units(r.text, question=r.question):
                units.append((r, seg, not stages.is_simple_statement(seg.text)))
                if units[-1][2]:
                    work.append((r, seg, ctx))
    outs = iter(stages.extract_claims(engine, [s.text for _, s, _ in work], [c for _, _, c in work], sampling))
    found: dict[str, list] = {}
    for r, seg, extracted in units:
        claims = (next(outs).value or []) if extracted else [seg.text.strip()]
        found.setdefault(r.id, []).extend((c, seg) for c in claims)
    for r in responses:
        if r.id in found:
            r.extracted = [c for c, _ in stages.select(found[r.id])]


def score(responses: Sequence[Response], n_boot: int = N_BOOT) -> dict:
    """Recall and precision of gold claims with bootstrap intervals over responses."""
    found, kept = [], []  # per response: (matched gold, gold), (matching extracted, extracted)
    for r in responses:
        sims = [[similarity(g, e) for e in r.extracted] for g in r.gold]
        found.append((sum(any(s >= MATCH_F1 for s in row) for row in sims), len(r.gold)))
        kept.append((sum(any(sims[i][j] >= MATCH_F1 for i in range(len(r.gold))) for j in range(len(r.extracted))),
                     len(r.extracted)))
    f, k = np.array(found, dtype=float).reshape(-1, 2), np.array(kept, dtype=float).reshape(-1, 2)

    def ratio(a: np.ndarray) -> float:
        return float(a[:, 0].sum() / a[:, 1].sum()) if a[:, 1].sum() else 0.0

    boots = bootstrap_indices(len(responses), n_boot=n_boot)
    return {
        "responses": len(responses),
        "gold_claims": int(f[:, 1].sum()),
        "extracted_claims": int(k[:, 1].sum()),
        "recall": round(ratio(f), 4),
        "recall_ci": [round(x, 4) for x in percentile_ci([ratio(f[i]) for i in boots])],
        "precision": round(ratio(k), 4),
        "precision_ci": [round(x, 4) for x in percentile_ci([ratio(k[i]) for i in boots])],
        "match": f"content-word F1 >= {MATCH_F1}",
    }


def run_extraction_eval(datasets: Sequence[str], settings: "Settings", out: str | Path, split: str = "dev",
                        limit: int | None = None, cache: bool = True) -> dict:
    """Extract claims from every response of ``datasets`` and score them; writes ``out/extraction.json``
    (scores per dataset) and ``out/extracted.jsonl`` (every response with its gold and extracted claims)."""
    from halucheck.evaluation.harness import REPLIES_FILE, install_cache

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    from halucheck.engines.pool import EnginePool

    engines = EnginePool(settings)
    store = install_cache(engines, out / REPLIES_FILE) if cache else None
    try:
        per_set = {name: load_responses(name, split, limit) for name in datasets}
        engine = engines.engine_for("extractor")
        extract(engine, [r for rs in per_set.values() for r in rs], settings)
    finally:
        engines.close()
        if store is not None:
            store.close()
    profile = settings.profile_for("extractor")
    result = {"split": split, "profile": profile.name, "model": profile.model,
              "datasets": {name: score(rs) for name, rs in per_set.items()}}
    (out / EXTRACTION_FILE).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    with open(out / "extracted.jsonl", "w", encoding="utf-8") as fh:
        for rs in per_set.values():
            for r in rs:
                fh.write(json.dumps({"id": r.id, "question": r.question, "response": r.text, "gold": r.gold,
                                     "extracted": r.extracted}, ensure_ascii=False) + "\n")
    return result


__all__ = ["MATCH_F1", "Response", "extract", "load_responses", "run_extraction_eval", "score", "similarity"]
