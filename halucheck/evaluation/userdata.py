"""The user's own labelled file for ``halucheck eval --data FILE``, read as :class:`EvalItem` records.

A file is JSONL (one JSON object per line) or CSV (a header row, then one item per row) with the fields:

- ``id`` (required): unique in the file; the item's id in ``predictions.jsonl`` is ``data:<stem>:<id>``.
- ``answer`` or ``claim`` (required, one of them): the text to verify.
- ``hallucinated`` (required): true when the text is hallucinated. JSON booleans; in CSV (and as strings
  in JSONL) ``true/false``, ``1/0`` or ``yes/no``, case-insensitive.
- ``question`` (optional): the question the answer replies to; the verifiers then judge question + answer.
- ``context`` (optional): a string of evidence. Up to :data:`CONTEXT_PASSAGE_CHARS` characters it is one
  passage; a longer one is cut into its sentences (as ``halucheck run`` searches an item's context), from
  which the harness shows the ``--max-evidence`` most relevant, like the sentences of a WiCE article.
- ``evidence`` (optional): a list of passages; in CSV a JSON array string, or a single string that is one
  passage. With both ``context`` and ``evidence``, the context's passages come first.
- ``group`` (optional, a string or number): items that share it are resampled together by the bootstrap and held
  out together by ``halucheck train``'s folds (e.g. a right and a wrong answer to one question: a head that saw one
  of them would be judged on its twin). Default: items with the same question and the same evidence share a group;
  an item with neither is its own.

An item without context or evidence is judged closed-book, unless a corpus is given
(:func:`add_corpus_evidence`): then its top passages are retrieved from the corpus index, searched with
the question and the text.

A bad line never stops the reading: it becomes a :class:`LineProblem` (``FILE:LINE: what is wrong and how
to fix it``) and the other lines are read. A later line repeating an earlier line's id is a bad line.
A line that is used but changed on the way is a note, in the same form: JSON escapes of lone UTF-16
surrogates (``"\\ud83d"`` without its pair), which are not text, become U+FFFD.
What stops the reading is a file-level problem, raised as :class:`InputError` naming the file: missing,
unreadable, not ``.jsonl``/``.csv``, empty, a CSV header without the needed columns; and, from
:meth:`UserData.require_items`, a file without a single usable line.

User files are never split into dev and test: every usable item is scored (``limit`` keeps the first N).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from halucheck.config import EVIDENCE_K
from halucheck.errors import InputError
from halucheck.evaluation.datasets import EvalItem
from halucheck.inputs import csv_rows, json_kind, json_objects, split_lines
from halucheck.text import SURROGATE_HINT, json_surrogates

SUFFIXES = (".jsonl", ".csv")
CONTEXT_PASSAGE_CHARS = 1000  # a context up to this long is one passage; longer ones are cut into sentences
TRUE_WORDS = frozenset({"true", "1", "yes"})
FALSE_WORDS = frozenset({"false", "0", "no"})
EXAMPLE = '{"id": "q1", "answer": "...", "hallucinated": false}'

Warn = Callable[[str], None]


@dataclass(frozen=True)
class LineProblem:
    """One unusable line: its file, 1-based line number (for CSV, the row's first line) and what to fix."""

    path: Path
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


@dataclass
class UserData:
    """A read ``--data`` file: its dataset name (``data:<stem>``), its usable items in file order, the
    lines that could not be used and the notes on lines used with a change (``notes``). ``corpus``: the
    folder evidence was retrieved from, once :func:`add_corpus_evidence` ran."""

    path: Path
    name: str
    items: list[EvalItem] = field(default_factory=list)
    problems: list[LineProblem] = field(default_factory=list)
    notes: list[LineProblem] = field(default_factory=list)
    limit: int | None = None
    corpus: Path | None = None

    def require_items(self) -> None:
        """Raise :class:`InputError` (one line naming the file) when no line was usable."""
        if self.items:
            return
        if not self.problems:
            raise InputError(f"{self.path}: no items; add one labelled item per line, e.g. {EXAMPLE}")
        first = self.problems[0]
        raise InputError(f"{self.path}: no usable line ({len(self.problems)} bad line(s); the first, line "
                         f"{first.line}: {first.message})")

    def evidence_counts(self) -> dict[str, int]:
        """How many items got their evidence from their own fields, from the corpus, or none."""
        counts = {"own": 0, "corpus": 0, "none": 0}
        for it in self.items:
            counts[it.meta.get("evidence_from") or "none"] += 1
        return counts

    def describe(self) -> dict[str, Any]:
        """What metrics.json records about the file under ``settings.data``."""
        return {
            "file": str(self.path),
            "dataset": self.name,
            "items": len(self.items),
            "bad_lines": len(self.problems),
            "limit": self.limit,
            "split": "none (every item is used)",
            "corpus": str(self.corpus) if self.corpus else None,
            "evidence": self.evidence_counts(),
        }


def dataset_name(path: str | Path) -> str:
    """The dataset name of a user file in metrics and tables: ``data:<file name without extension>``."""
    return f"data:{Path(path).stem}"


# ---------------------------------------------------------------- reading the file


def read_user_data(path: str | Path, limit: int | None = None) -> UserData:
    """Read and check ``path`` (``.jsonl`` or ``.csv``); ``limit`` keeps the first ``limit`` usable items.

    Bad lines are returned as problems (the whole file is checked whatever ``limit`` is); file-level
    problems raise :class:`InputError`. A result may hold no items: see :meth:`UserData.require_items`.
    """
    path = Path(path)
    texts, problems = _read_lines(path)
    name = dataset_name(path)
    data = UserData(path=path, name=name, limit=limit)
    csv_file = path.suffix.lower() == ".csv"
    notes: list[LineProblem] = []
    records = _csv_records(path, texts, problems) if csv_file else _jsonl_records(path, texts, problems, notes)
    first_line: dict[str, int] = {}
    for line, rec in records:
        item = _to_item(path, name, line, rec, csv_file, problems, first_line, notes)
        if item is not None and (limit is None or len(data.items) < limit):
            data.items.append(item)
    data.problems = sorted(problems, key=lambda p: p.line)
    data.notes = sorted(notes, key=lambda p: p.line)
    return data


def _read_lines(path: Path) -> tuple[list[str], list[LineProblem]]:
    """The file's lines as text; a line that is not UTF-8 is a problem (and blanked)."""
    if not path.exists():
        raise InputError(f"{path}: no such file; --data takes a .jsonl or .csv file of labelled items")
    if path.is_dir():
        raise InputError(f"{path} is a folder; --data takes a .jsonl or .csv file of labelled items")
    if path.suffix.lower() not in SUFFIXES:
        raise InputError(f"{path}: unsupported file type {path.suffix or '(no extension)'!r}; --data reads .jsonl "
                         "(one JSON object per line) or .csv (a header row, then one item per row)")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read the file ({exc.strerror or exc}); check its permissions") from None
    if raw.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte order mark (Excel, Notepad) is not content
        raw = raw[3:]
    if not raw.strip():
        raise InputError(f"{path} is empty; add one labelled item per line, e.g. {EXAMPLE}")
    texts: list[str] = []
    problems: list[LineProblem] = []
    for n, b in enumerate(split_lines(raw), start=1):
        try:
            texts.append(b.decode("utf-8"))
        except UnicodeDecodeError as exc:
            texts.append("")
            problems.append(LineProblem(path, n, f"not UTF-8 text (byte 0x{b[exc.start]:02x} at column "
                                                 f"{exc.start + 1}); save the file as UTF-8"))
    return texts, problems


def _jsonl_records(path: Path, texts: list[str], problems: list[LineProblem],
                   notes: list[LineProblem]) -> Iterator[tuple[int, dict]]:
    """(line, object) per usable JSON line; the other non-blank lines become problems."""
    if not any(t.strip() for t in texts):
        return
    whole = "\n".join(texts).strip()
    if whole.startswith("["):  # one JSON array rather than one object per line
        try:
            if isinstance(json.loads(whole), list):
                raise InputError(f"{path} holds one JSON array; write one JSON object per line (JSONL), "
                                 f"e.g. {EXAMPLE}")
        except (json.JSONDecodeError, RecursionError):
            pass
    for n, rec, problem in json_objects(texts, EXAMPLE, lambda n, message: notes.append(LineProblem(path, n, message))):
        if problem is not None:
            problems.append(LineProblem(path, n, problem))
        else:
            yield n, rec


def _csv_records(path: Path, texts: list[str], problems: list[LineProblem]) -> Iterator[tuple[int, dict]]:
    """(first line, {column: cell}) per usable CSV row; a header without the needed columns raises."""
    bad = {p.line for p in problems}  # lines that were not UTF-8: their rows are skipped
    rows = csv_rows(texts)  # a quote never closed is reported at its row, not read on into the next rows
    _, header, problem = next(rows, (1, [], None))
    if problem is not None:
        raise InputError(f"{path}:1: the CSV header cannot be read ({problem.why}); the first row must name the "
                         "columns")
    header = [h.strip() for h in header]
    needed = {"id": ("id",), "answer (or claim)": ("answer", "claim"), "hallucinated": ("hallucinated",)}
    missing = [c for c, names in needed.items() if not any(n in header for n in names)]
    if missing:
        hint = "; rename 'label' to 'hallucinated' (true = hallucinated)" if "label" in header else ""
        raise InputError(f"{path}:1: the CSV header lacks the column(s) {', '.join(missing)} (found: "
                         f"{', '.join(h for h in header if h) or 'none'}){hint}")
    for start, row, problem in rows:
        if problem is not None:  # the reader goes on with the next row
            problems.append(LineProblem(path, start, problem.message(header)))
            continue
        if not any(cell.strip() for cell in row):
            continue
        end = start + sum(cell.count("\n") for cell in row)
        if any(n in bad for n in range(start, end + 1)):
            continue  # already reported as not UTF-8
        if len(row) != len(header):
            problems.append(LineProblem(path, start, f"the row has {len(row)} fields but the header has "
                                                     f"{len(header)}; quote fields that hold commas"))
            continue
        yield start, {h: v for h, v in zip(header, row) if h}


# ---------------------------------------------------------------- one record -> one item


def _label(value: Any) -> bool | None:
    """``hallucinated`` as a bool, or None when it is not one of the accepted spellings."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
    return None


def _text(rec: dict, key: str) -> str | None:
    """An optional text field: None when absent, null or blank; raises ValueError when not a string."""
    value = rec.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"\"{key}\" must be a string, got {json_kind(value)}")
    return value.strip() or None


def _evidence(rec: dict, csv_row: bool, note: Callable[[str], None]) -> list[str]:
    """The ``evidence`` field as a list of non-blank passages; raises ValueError when malformed."""
    value = rec.get("evidence")
    if csv_row and isinstance(value, str) and value.strip().startswith("["):
        try:
            value, replaced = json_surrogates(value, json.loads(value))
            if replaced:
                note(f"\"evidence\": {replaced} {SURROGATE_HINT}")
        except json.JSONDecodeError as exc:
            raise ValueError(f"\"evidence\" starts with '[' but is not a valid JSON array ({exc.msg} at column "
                             f"{exc.colno}); write a JSON array of strings, e.g. [\"passage one\", \"passage two\"]")
    if value is None:
        return []
    if isinstance(value, str):
        return [value.strip()] if value.strip() else []
    if not isinstance(value, list):
        raise ValueError(f"\"evidence\" must be a list of strings, got {json_kind(value)}")
    out = []
    for i, p in enumerate(value):
        if not isinstance(p, str):
            raise ValueError(f"\"evidence\" must be a list of strings, but entry {i + 1} is {json_kind(p)}")
        if p.strip():
            out.append(p.strip())
    return out


def context_passages(context: str) -> list[str]:
    """A context string as evidence passages: itself when short, else its sentences (see module doc)."""
    context = context.strip()
    if len(context) <= CONTEXT_PASSAGE_CHARS:
        return [context] if context else []
    from halucheck.text import sentence_spans

    return [context[s:e] for s, e in sentence_spans(context, line_breaks=False, max_chars=1000)]


def _to_item(path: Path, name: str, line: int, rec: dict, csv_row: bool, problems: list[LineProblem],
             first_line: dict[str, int], notes: list[LineProblem]) -> EvalItem | None:
    """One record as an :class:`EvalItem`, or None after adding its problem; ``first_line`` maps each id
    seen so far (usable line or not) to its line, so a later line repeating it is the one rejected."""

    def bad(message: str) -> None:
        problems.append(LineProblem(path, line, message))

    raw_id = rec.get("id")
    if raw_id is None or (isinstance(raw_id, str) and not raw_id.strip()):
        bad(f"missing \"id\"; give every item a unique id, e.g. {EXAMPLE}")
        return None
    if isinstance(raw_id, bool) or not isinstance(raw_id, (str, int)):
        bad(f"\"id\" must be a string or a whole number, got {json_kind(raw_id)}")
        return None
    own_id = str(raw_id).strip()
    if own_id in first_line:
        bad(f"duplicate id {own_id!r} (first on line {first_line[own_id]}); ids must be unique, rename one")
        return None
    first_line[own_id] = line
    try:
        answer, claim = _text(rec, "answer"), _text(rec, "claim")
        question = _text(rec, "question")
        if isinstance(rec.get("context"), list):
            raise ValueError("\"context\" must be a string; put a list of passages in \"evidence\"")
        context = _text(rec, "context")
        evidence = _evidence(rec, csv_row, lambda message: notes.append(LineProblem(path, line, message)))
    except ValueError as exc:
        bad(str(exc))
        return None
    if answer and claim and answer != claim:
        bad("has both \"answer\" and \"claim\"; keep one: the text whose label \"hallucinated\" gives")
        return None
    text = answer or claim
    if text is None:
        present = "answer" in rec or "claim" in rec
        bad("\"answer\" is empty; give the text to verify" if present else
            "missing \"answer\" (or \"claim\"); add the text to verify")
        return None
    if rec.get("hallucinated") is None or rec.get("hallucinated") == "":
        hint = " (found \"label\"; rename it to \"hallucinated\")" if "label" in rec else ""
        bad(f"missing \"hallucinated\"{hint}; add true when the text is hallucinated, false when it is not")
        return None
    label = _label(rec["hallucinated"])
    if label is None:
        bad(f"\"hallucinated\" must be true or false (also 1/0, yes/no), got {rec['hallucinated']!r}")
        return None
    passages = (context_passages(context) if context else []) + evidence
    given = rec.get("group")
    if isinstance(given, bool) or (given is not None and not isinstance(given, (str, int, float))):
        bad(f"\"group\" must be a string or a number, got {given!r}; items sharing it are held out together")
        return None
    if given is not None and str(given).strip():
        group = f"group:{str(given).strip()}"
    elif question or passages:  # twins: answers to one question on one evidence
        group = "same:" + hashlib.sha256(json.dumps([question, passages]).encode()).hexdigest()[:16]
    else:
        group = own_id
    return EvalItem(
        id=f"{name}:{own_id}",
        dataset=name,
        # like HaluEval QA and TruthfulQA: the claim holds the question too (evidence selection and corpus
        # search see both); the verifiers read question and answer apart (verifiers.text_of)
        claim=f"{question} {text}" if question else text,
        label=label,
        group=f"{name}:{group}",
        position=line,
        question=question,
        answer=text if question else None,
        evidence=passages,
        meta={"line": line, "source_id": own_id, "evidence_from": "own" if passages else None},
    )


# ---------------------------------------------------------------- evidence from a corpus


def add_corpus_evidence(data: UserData, corpus: str | Path, k: int, index: str | Path | None = None,
                        warn: Warn | None = None) -> int:
    """Give every item of ``data`` without evidence the top ``k`` passages of ``corpus`` (a folder of
    documents), searched with the item's claim (question + text) in the corpus index: the same index
    ``halucheck run --corpus`` builds and reuses (``index`` or its default path in the user cache).
    Returns how many items got evidence."""
    from halucheck import retrieval
    from halucheck.config import index_path

    warn = warn or (lambda _m: None)
    corpus = Path(corpus)
    if not corpus.is_dir():
        raise InputError(f"--corpus {corpus} is not a folder; pass the folder of your documents")
    data.corpus = corpus
    todo = [it for it in data.items if not it.evidence]
    if not todo or k < 1:
        return 0
    db = index_path(corpus, index)
    report = retrieval.build_index(corpus, db, warn=lambda m: warn(f"warning: {m}"))
    if not report.chunks:
        warn(f"note: the corpus {corpus} has no indexable text ({len(report.skipped)} file(s) skipped): "
             f"{len(todo)} item(s) of {data.path} are judged without evidence")
        return 0
    with retrieval.Index.open(db) as idx:
        hits = idx.search_many([it.claim for it in todo], k=k)
    got = 0
    for it, found in zip(todo, hits):
        it.evidence = [h.text for h in found]
        if it.evidence:
            got += 1
            it.meta["evidence_from"] = "corpus"
            it.meta["evidence_sources"] = [f"{h.source}:{h.start}-{h.end}" for h in found]
    return got


def load_user_data(path: str | Path, limit: int | None = None, corpus: str | Path | None = None,
                   k: int = EVIDENCE_K, index: str | Path | None = None, warn: Warn | None = None) -> UserData:
    """Read ``path``, pass each bad line to ``warn`` (as ``FILE:LINE: ...``), require a usable item, and
    with ``corpus`` retrieve evidence for the items that have none; see :func:`read_user_data`."""
    warn = warn or (lambda _m: None)
    data = read_user_data(path, limit)
    for p in sorted(data.problems + data.notes, key=lambda p: p.line):
        warn(f"warning: {p}")
    data.require_items()
    if corpus is not None:
        add_corpus_evidence(data, corpus, k, index=index, warn=warn)
    return data


__all__ = ["CONTEXT_PASSAGE_CHARS", "LineProblem", "SUFFIXES", "UserData", "add_corpus_evidence",
           "context_passages", "dataset_name", "load_user_data", "read_user_data"]
