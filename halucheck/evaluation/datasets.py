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
  has a model extract them from the response; ``arith`` uses :func:`halucheck.verifiers.tools.arith.find_calculations`, a
  deterministic finder, as the extractor (``scripts/math_finder_recall.py`` measures how many labelled
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
- ``summedits``: ``summedits/summedits_<domain>.json`` (8 domains, 4,681 records, files read in alphabetical
  order); one item per edited summary (the claim), no question; evidence = its document's lines (paragraphs,
  speaker turns) or, for a document on one line (podcasts, SAMSum chats, most abstracts), its sentences, so
  that the harness's BM25 selection can pick. ``label: 0`` (inconsistent) -> hallucinated, ``1`` -> not.
  Each document carries ~30 edits of one seed summary (minimal pairs), so the unit of position and group is
  the **document**, not the record: position = the document's 0-based index in its file (order of first
  appearance), counted per file; a document and all its summaries go together, like a response and its
  claims. ``meta["record"]`` is the record's index in the file; the authors' own ``split`` field is ignored.
- ``begin``: ``begin/*.tsv`` (WoW dev and test, CMU-DoG dev, TopicalChat dev; files read in alphabetical order,
  positions counted per file); one item per response, question = the user's message, evidence = the
  ``knowledge`` passage. ``Not fully attributable`` -> hallucinated, ``Fully attributable`` -> not; the 87
  ``Generic`` responses are **excluded** (they state nothing checkable, so there is no gold answer).
- ``faithdial``: ``faithdial/{CTRL,DoHA,GPT2,gold}/*.csv`` (12 files read in alphabetical order of their path,
  positions counted per file, ids ``faithdial:<model>-<benchmark>:<position>``; the CTRL, DoHA and GPT2 files
  answer one benchmark's contexts in the same row order, except CTRL's TopicalChat file, so a context's
  responses mostly share a split); one item per labelled response, question = ``history`` (the previous
  turn), evidence = the ``knowledge``/``evidence`` passage. Hallucination and Partial Hallucination (in the
  model files ``entailment,hallucination``) -> hallucinated, as WiCE's partially supported; Entailment ->
  not, Uncooperative too (it tags an entailed response that ignores the conversation, ``entailment,
  uncooperative`` in the model files: cooperativeness is not groundedness). **Excluded**: Generic (nothing
  checkable), unlabelled rows (792 of ``gold/topical.csv``), one labelled empty response and three rows with
  no knowledge.
- ``q2``: ``q2/{dodeca,memnet}_{consistent,inconsistent}.csv`` (150 rows each, files read in alphabetical order,
  positions counted per file); one item per response, question = the user's message, evidence = the one
  ``knowledge`` sentence; the file name is the label (``inconsistent`` -> hallucinated). ``cross_annotation.csv``
  (its ``*_label`` 1 = inconsistent, agreeing with the four files on all 600 shared responses) labels 488
  more responses; they are not part of the Q² benchmark and are not loaded.
- ``contract-nli``: ``contract-nli/dev.json`` then ``test.json`` (ContractNLI's own splits; positions counted per
  file, our dev/test split applies inside each); one item per (contract, hypothesis) pair, 17 per contract,
  split and grouped by the contract's position. Claim = the hypothesis; evidence = the contract's annotated
  spans (blank ones dropped), ~72 per contract. ``Entailment`` (``true`` in the files) -> not hallucinated;
  ``Contradiction`` (``false``) and ``NotMentioned`` (``na``) -> hallucinated: by the dataset's own convention
  a hypothesis the contract does not state is not supported by it. ``meta["label3"]`` keeps the 3-way label,
  ``meta["gold_spans"]`` the gold spans as indices into ``evidence``.

The dataset folder is ``$HALUCHECK_DATASETS`` if set, else the first ``shared/datasets`` folder found
walking up from the current directory and from this package's location.
"""

from __future__ import annotations

import ast
import csv
import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

from typing import TYPE_CHECKING

from halucheck.config import env
from halucheck.errors import InputError
from halucheck.registry import Registry

if TYPE_CHECKING:
    from halucheck.verifiers.tools.citations.bibliography import Bibliography

ENV_VAR = "HALUCHECK_DATASETS"
SPLITS = ("dev", "test", "all")


@dataclass
class EvalItem:
    """One labeled example: the text to verify, its gold label and where it came from.

    ``id`` is stable across runs (``"<dataset>:<position>[:<sub-index>]"``); ``group`` names the
    response (or source record) it belongs to, so bootstrap resampling and the split keep claims of
    one response together. ``label`` is True when the text is hallucinated / not factual.
    """

    id: str
    dataset: str
    claim: str
    label: bool
    group: str
    position: int
    question: str | None = None
    answer: str | None = None
    response: str | None = None
    evidence: list[str] = field(default_factory=list)
    meta: dict = field(default_factory=dict)

    @property
    def split(self) -> str:
        """``"test"`` or ``"dev"`` by the SPLITS.md rule on the record's position."""
        return split_of(self.position)


def split_of(position: int) -> str:
    """The SPLITS.md rule: 0-based position % 5 == 4 -> test, else dev."""
    return "test" if position % 5 == 4 else "dev"


# ---------------------------------------------------------------- locating the data


def _candidates() -> Iterator[Path]:
    seen: set[Path] = set()
    for start in (Path.cwd(), Path(__file__).resolve().parent):
        for d in (start, *start.parents):
            if d not in seen:
                seen.add(d)
                yield d / "shared" / "datasets"


def dataset_root(root: str | os.PathLike | None = None) -> Path:
    """The folder holding the dataset sub-folders (``factool/``, ``wice/``, ...).

    Order: the ``root`` argument, ``$HALUCHECK_DATASETS``, then the first ``shared/datasets`` found
    walking up from the working directory and from the installed package.
    Raises :class:`InputError` when none exists.
    """
    explicit = root if root is not None else env(ENV_VAR)
    if explicit:
        p = Path(explicit).expanduser()
        if not p.is_dir():
            raise InputError(f"dataset folder {p} does not exist; set ${ENV_VAR} to the folder holding factool/, wice/, halueval/, ...")
        return p
    for p in _candidates():
        if p.is_dir():
            return p
    raise InputError(
        f"dataset folder not found: no shared/datasets above {Path.cwd()}; set ${ENV_VAR} to the folder holding factool/, wice/, halueval/, ..."
    )


def _folder(root: Path, sub: str) -> Path:
    p = root / sub
    if not p.is_dir():
        raise InputError(f"dataset folder {p} is missing; copy it there or set ${ENV_VAR} to a folder that has {sub}/")
    return p


def _jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _maybe_literal(value):
    # Some upstream files store lists/dicts as Python-repr strings.
    if isinstance(value, str):
        try:
            return ast.literal_eval(value)
        except (ValueError, SyntaxError):
            return value
    return value


def _words(text: str) -> int:
    return len(text.split())


# ---------------------------------------------------------------- loaders
# Each loader yields every item of its set in file order; load() applies the split.


def _factool_claims(root: Path) -> Iterator[EvalItem]:
    for pos, r in enumerate(_jsonl(_folder(root, "factool") / "knowledge_qa.jsonl")):
        for j, c in enumerate(_maybe_literal(r["claims"])):
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
        for pos, r in enumerate(_jsonl(_folder(root, "factool") / file)):
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
    claims = _maybe_literal(r["claims"])
    return {"claims": [c["claim"] for c in claims], "claim_labels": [c["label"] for c in claims]}


def _factool_math_claims(root: Path) -> Iterator[EvalItem]:
    for pos, r in enumerate(_jsonl(_folder(root, "factool") / "math.jsonl")):
        for j, c in enumerate(_maybe_literal(r["claims"])):
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
    claims = _maybe_literal(r["claims"])
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
    for pos, r in enumerate(_jsonl(_folder(root, "factool") / "scientific.jsonl")):
        for j, c in enumerate(_maybe_literal(r["claims"])):
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
    claims = [c for c in _maybe_literal(r["claims"]) if isinstance(c.get("label"), bool)]
    return {"citations": [_sci_fields(c) for c in claims], "claim_labels": [c["label"] for c in claims]}


def _factool_code(root: Path) -> Iterator[EvalItem]:
    from halucheck.verifiers.tools.code_source import program_of

    for pos, r in enumerate(_jsonl(_folder(root, "factool") / "code.jsonl")):
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
    for pos, r in enumerate(_jsonl(_folder(base, "factool") / "scientific.jsonl")):
        for j, c in enumerate(_maybe_literal(r["claims"])):
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
    for pos, r in enumerate(_jsonl(folder / "factcheck-GPT-benchmark.jsonl")):
        for sent in r["sentences"].values():
            claims = _maybe_literal(sent.get("claims", []))
            if isinstance(claims, list):
                for c in claims:
                    out.setdefault(c.strip(), pos)
    return out


def _factcheck_gpt(root: Path) -> Iterator[EvalItem]:
    folder = _folder(root, "factcheck-gpt")
    passages: dict[str, list[dict]] = {}
    for r in _jsonl(folder / "subtasks" / "subtask3_claim_evidence_stance.jsonl"):
        passages.setdefault(r["claim"], []).append(r)
    response_pos = _factcheck_response_positions(folder)
    last = 0
    for j, r in enumerate(_jsonl(folder / "subtasks" / "subtask4_claim_factuality.jsonl")):
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
        for pos, r in enumerate(_jsonl(_folder(root, "wice") / file)):
            meta = _maybe_literal(r.get("meta", {}))
            meta = meta if isinstance(meta, dict) else {}
            yield EvalItem(
                id=f"{name}:{pos}",
                dataset=name,
                claim=r["claim"],
                label=r["label"] != "supported",
                group=f"{name}:{pos}",
                position=pos,
                evidence=list(_maybe_literal(r["evidence"])),
                meta={
                    "label3": r["label"],
                    "supporting_sentences": _maybe_literal(r.get("supporting_sentences", "[]")),
                    "wice_id": meta.get("id"),
                    "title": meta.get("claim_title"),
                    "context": meta.get("claim_context"),
                },
            )

    return loader


def _halueval_qa(file: str, name: str) -> Callable[[Path], Iterator[EvalItem]]:
    def loader(root: Path) -> Iterator[EvalItem]:
        for pos, r in enumerate(_jsonl(_folder(root, "halueval") / file)):
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
    for pos, r in enumerate(_jsonl(_folder(root, "halueval") / "general_data.json")):
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
    folder = _folder(root, "halueval2") / "human_annotation"
    if not folder.is_dir():
        raise InputError(f"dataset folder {folder} is missing; set ${ENV_VAR} to a folder that has halueval2/human_annotation/")
    for path in sorted(folder.glob("*.json")):
        domain = path.stem
        with open(path, encoding="utf-8") as fh:
            records = json.load(fh)
        for pos, r in enumerate(records):
            facts = _maybe_literal(r["chatgpt_fact"])
            judge = _maybe_literal(r["human_judge"])
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
    with open(_folder(root, "truthfulqa") / "TruthfulQA.csv", encoding="utf-8", newline="") as fh:
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



def _files(root: Path, sub: str, pattern: str) -> list[Path]:
    """The files of ``sub/`` that match ``pattern``, in alphabetical order of their path in it (each file's
    positions are counted apart)."""
    folder = _folder(root, sub)
    paths = sorted(folder.glob(pattern), key=lambda p: p.relative_to(folder).as_posix())
    if not paths:
        raise InputError(f"no {pattern} in {folder}; copy the set's files there or set ${ENV_VAR} to a folder that has {sub}/{pattern}")
    return paths


def _doc_passages(text: str) -> list[str]:
    """A long document as passages for the harness's evidence selection: its lines (paragraphs, speaker turns)
    where it has line breaks, else its sentences; a piece without a letter or digit (the " . " between chat
    turns) is dropped."""
    from halucheck.text import sentences

    lines = [line.strip() for line in text.splitlines() if line.strip()]
    parts = lines if len(lines) > 1 else sentences(text, line_breaks=False)
    return [p for p in parts if any(ch.isalnum() for ch in p)]


def _summedits(root: Path) -> Iterator[EvalItem]:
    for path in _files(root, "summedits", "summedits_*.json"):
        domain = path.stem.removeprefix("summedits_")
        with open(path, encoding="utf-8") as fh:
            records = json.load(fh)
        docs: dict[str, int] = {}  # document text -> its position: the order in which the file first gives it
        passages: dict[int, list[str]] = {}
        for rec, r in enumerate(records):
            if str(r["label"]) not in ("0", "1"):
                continue
            pos = docs.setdefault(r["doc"], len(docs))
            if pos not in passages:
                passages[pos] = _doc_passages(r["doc"])
            yield EvalItem(
                id=f"summedits:{domain}:{pos}:{rec}",
                dataset="summedits",
                claim=r["summary"],
                label=str(r["label"]) == "0",
                group=f"summedits:{domain}:{pos}",
                position=pos,
                evidence=list(passages[pos]),
                meta={"domain": domain, "record": rec, "summedits_id": r["id"],
                      "edit_types": _maybe_literal(r.get("edit_types", "[]")), "original_summary": r.get("original_summary")},
            )


_BEGIN_LABELS = {"Fully attributable": False, "Not fully attributable": True}  # "Generic": excluded


def _begin(root: Path) -> Iterator[EvalItem]:
    for path in _files(root, "begin", "*.tsv"):
        part = path.stem.split("_begin_")[-1]  # dev_cmu, dev_tc, dev_wow, test_wow
        with open(path, encoding="utf-8", newline="") as fh:
            for pos, r in enumerate(csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)):
                label = _BEGIN_LABELS.get((r.get("begin_label") or "").strip())
                response, knowledge = (r.get("response") or "").strip(), (r.get("knowledge") or "").strip()
                if label is None or not response or not knowledge:
                    continue
                yield EvalItem(
                    id=f"begin:{part}:{pos}",
                    dataset="begin",
                    claim=response,
                    label=label,
                    group=f"begin:{part}:{pos}",
                    position=pos,
                    question=r["message"].strip() or None,
                    response=response,
                    evidence=[knowledge],
                    meta={"part": part, "benchmark": r["data_source"], "model": r["model_name"], "begin_label": r["begin_label"]},
                )


def _faithdial_label(tag: str) -> bool | None:
    """A FaithDial BEGIN cell -> hallucinated: True for any hallucination tag (Hallucination, Partial Hallucination,
    "entailment,hallucination"), False for entailment (with or without "uncooperative"; "entailmentt" too), None
    for Generic or an empty cell."""
    words = re.findall(r"[a-z]+", tag.lower())
    if any(w.startswith("hallucinat") for w in words):
        return True
    if any(w.startswith(("entail", "uncooperat")) for w in words):
        return False
    return None


def _faithdial(root: Path) -> Iterator[EvalItem]:
    for path in _files(root, "faithdial", "*/*.csv"):
        model = path.parent.name.lower()  # gold, ctrl, doha, gpt2
        bench = path.stem.rsplit("_", 1)[-1]
        part = f"{model}-{'topical' if bench.startswith('topical') else bench}"
        with open(path, encoding="utf-8", newline="") as fh:
            for pos, r in enumerate(csv.DictReader(fh)):
                tag = (r.get("BEGIN") if "BEGIN" in r else r.get("begin_label")) or ""
                label = _faithdial_label(tag)
                response = ((r.get("response") if "response" in r else r.get(model)) or "").strip()
                knowledge = ((r.get("knowledge") if "knowledge" in r else r.get("evidence")) or "").strip()
                if label is None or not response or not knowledge:
                    continue
                history = (r.get("history") or "").strip()
                yield EvalItem(
                    id=f"faithdial:{part}:{pos}",
                    dataset="faithdial",
                    claim=response,
                    label=label,
                    group=f"faithdial:{part}:{pos}",
                    position=pos,
                    question=history if history not in ("", "[]") else None,
                    response=response,
                    evidence=[knowledge],
                    meta={"part": part, "model": model, "begin_label": tag.strip(),
                          "vrm": ((r.get("VRM") if "VRM" in r else r.get("vrm_label")) or "").strip()},
                )


def _q2(root: Path) -> Iterator[EvalItem]:
    for path in _files(root, "q2", "*_*consistent.csv"):  # not cross_annotation.csv
        model, kind = path.stem.split("_", 1)
        with open(path, encoding="utf-8", newline="") as fh:
            for pos, r in enumerate(csv.DictReader(fh)):
                yield EvalItem(
                    id=f"q2:{path.stem}:{pos}",
                    dataset="q2",
                    claim=r["response"].strip(),
                    label=kind == "inconsistent",
                    group=f"q2:{path.stem}:{pos}",
                    position=pos,
                    question=r["message"].strip() or None,
                    response=r["response"].strip(),
                    evidence=[r["knowledge"].strip()],
                    meta={"model": model, "topic": r["topic"], "episode_idx": int(r["episode_idx"]),
                          "round": int(r["round"]), "human_reply": r["gold"]},
                )


# ContractNLI's choices as the files spell them (true/false/na) and as its paper does
_CONTRACT_NLI = {"true": "Entailment", "false": "Contradiction", "na": "NotMentioned"}


def _contract_nli(root: Path) -> Iterator[EvalItem]:
    for path in _files(root, "contract-nli", "*.json"):  # dev.json, test.json: ContractNLI's own splits, not ours
        part = path.stem
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        hypotheses = data["labels"]
        for pos, doc in enumerate(data["documents"]):
            spans = [(i, doc["text"][a:b].strip()) for i, (a, b) in enumerate(doc["spans"])]
            spans = [(i, t) for i, t in spans if t]  # some spans are blank
            shown = {i: j for j, (i, _) in enumerate(spans)}  # span index -> evidence index
            evidence = [t for _, t in spans]
            annotations = doc["annotation_sets"][0]["annotations"]
            for key in sorted(annotations, key=lambda k: int(k.rsplit("-", 1)[-1])):  # nda-1 ... nda-20
                a = annotations[key]
                choice = _CONTRACT_NLI.get(a["choice"], a["choice"])
                if choice not in ("Entailment", "Contradiction", "NotMentioned"):
                    continue
                yield EvalItem(
                    id=f"contract-nli:{part}:{pos}:{key}",
                    dataset="contract-nli",
                    claim=hypotheses[key]["hypothesis"],
                    label=choice != "Entailment",
                    group=f"contract-nli:{part}:{pos}",
                    position=pos,
                    evidence=list(evidence),
                    meta={"part": part, "document_id": doc["id"], "file_name": doc["file_name"].strip(),
                          "hypothesis_id": key, "short_description": hypotheses[key]["short_description"],
                          "label3": choice, "gold_spans": [shown[i] for i in a["spans"] if i in shown]},
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
DATASETS.register("summedits", _summedits)
DATASETS.register("begin", _begin)
DATASETS.register("faithdial", _faithdial)
DATASETS.register("q2", _q2)
DATASETS.register("contract-nli", _contract_nli)
"""Dataset name -> loader yielding every item of the set in file order (no split applied)."""

BIBLIOGRAPHIES: dict[str, Callable[[Path], "Bibliography"]] = {
    "factool-sci": factool_sci_bibliography,
    "factool-sci-response": factool_sci_bibliography,
}
"""Sets that bring their own bibliography for the ``citation`` verifier (used when none is given)."""

GROUNDED = frozenset({"factcheck-gpt", "wice", "wice-dev", "halueval-qa", "halueval-qa-cleaned", "summedits", "begin",
                      "faithdial", "q2", "contract-nli"})
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
    chosen = (item for item in loader(dataset_root(root)) if split == "all" or item.split == split)
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
        path = _folder(dataset_root(root), "factcheck-gpt") / "subtasks" / "subtask3_claim_evidence_stance.jsonl"
        for r in _jsonl(path):
            seen.setdefault(r["evidence"], None)
        return list(seen)
    for item in load(name, "all", root=root):
        for passage in item.evidence:
            seen.setdefault(passage, None)
    return list(seen)


__all__ = ["BIBLIOGRAPHIES", "DATASETS", "ENV_VAR", "GROUNDED", "EvalItem", "SPLITS", "corpus", "dataset_root",
           "factool_sci_bibliography", "load", "split_of"]
