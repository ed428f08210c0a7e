"""Loaders of the grounded sets read from many files: SummEdits, BEGIN, FaithDial, Q² and ContractNLI.

Each item is a text to check against the source shipped with it (a document, a knowledge passage, a
contract); each set spans several files, read in alphabetical order, with positions counted per file.
:mod:`halucheck.evaluation.datasets` registers them in ``DATASETS`` with the other sets (the first grounded
ones, ``factcheck-gpt``, ``wice`` and ``halueval-qa``, are read there) and applies the split.

Per set (name: source file, unit, evidence, label mapping):

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
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterator
from pathlib import Path

from halucheck.evaluation.items import EvalItem, dataset_files, maybe_literal


def _doc_passages(text: str) -> list[str]:
    """A long document as passages for the harness's evidence selection: its lines (paragraphs, speaker turns)
    where it has line breaks, else its sentences; a piece without a letter or digit (the " . " between chat
    turns) is dropped."""
    from halucheck.text import sentences

    lines = [line.strip() for line in text.splitlines() if line.strip()]
    parts = lines if len(lines) > 1 else sentences(text, line_breaks=False)
    return [p for p in parts if any(ch.isalnum() for ch in p)]


def summedits(root: Path) -> Iterator[EvalItem]:
    for path in dataset_files(root, "summedits", "summedits_*.json"):
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
                      "edit_types": maybe_literal(r.get("edit_types", "[]")), "original_summary": r.get("original_summary")},
            )


_BEGIN_LABELS = {"Fully attributable": False, "Not fully attributable": True}  # "Generic": excluded


def _reply(dataset: str, part: str, pos: int, response: str, knowledge: str, label: bool, question: str | None,
           meta: dict) -> EvalItem:
    """One dialogue reply of BEGIN, FaithDial or Q2: the reply is the text judged, its knowledge the one passage, the
    turn before it the question; each reply is its own group."""
    return EvalItem(id=f"{dataset}:{part}:{pos}", dataset=dataset, claim=response, label=label,
                    group=f"{dataset}:{part}:{pos}", position=pos, question=question, response=response,
                    evidence=[knowledge], meta=meta)


def begin(root: Path) -> Iterator[EvalItem]:
    for path in dataset_files(root, "begin", "*.tsv"):
        part = path.stem.split("_begin_")[-1]  # dev_cmu, dev_tc, dev_wow, test_wow
        with open(path, encoding="utf-8", newline="") as fh:
            for pos, r in enumerate(csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)):
                label = _BEGIN_LABELS.get((r.get("begin_label") or "").strip())
                response, knowledge = (r.get("response") or "").strip(), (r.get("knowledge") or "").strip()
                if label is None or not response or not knowledge:
                    continue
                yield _reply("begin", part, pos, response, knowledge, label, r["message"].strip() or None,
                             {"part": part, "benchmark": r["data_source"], "model": r["model_name"],
                              "begin_label": r["begin_label"]})


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


def faithdial(root: Path) -> Iterator[EvalItem]:
    for path in dataset_files(root, "faithdial", "*/*.csv"):
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
                yield _reply("faithdial", part, pos, response, knowledge, label,
                             history if history not in ("", "[]") else None,
                             {"part": part, "model": model, "begin_label": tag.strip(),
                              "vrm": ((r.get("VRM") if "VRM" in r else r.get("vrm_label")) or "").strip()})


def q2(root: Path) -> Iterator[EvalItem]:
    for path in dataset_files(root, "q2", "*_*consistent.csv"):  # not cross_annotation.csv
        model, kind = path.stem.split("_", 1)
        with open(path, encoding="utf-8", newline="") as fh:
            for pos, r in enumerate(csv.DictReader(fh)):
                yield _reply("q2", path.stem, pos, r["response"].strip(), r["knowledge"].strip(), kind == "inconsistent",
                             r["message"].strip() or None,
                             {"model": model, "topic": r["topic"], "episode_idx": int(r["episode_idx"]),
                              "round": int(r["round"]), "human_reply": r["gold"]})


# ContractNLI's choices as the files spell them (true/false/na) and as its paper does
_CONTRACT_NLI = {"true": "Entailment", "false": "Contradiction", "na": "NotMentioned"}


def contract_nli(root: Path) -> Iterator[EvalItem]:
    for path in dataset_files(root, "contract-nli", "*.json"):  # dev.json, test.json: ContractNLI's own splits, not ours
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


__all__ = ["begin", "contract_nli", "faithdial", "q2", "summedits"]
