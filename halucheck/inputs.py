"""Reading the answers to check: JSONL (one JSON object per line) or CSV with the same columns,
``id``, ``answer``, and optionally ``question`` and ``context``.

A bad line never stops the run: it is reported with file:line and how to fix it, and the other lines
are read. Text that is not UTF-8 is decoded with replacement characters and reported.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, replace
from pathlib import Path

from halucheck.errors import InputError

MAX_ANSWER_WORDS = 5000


@dataclass(frozen=True)
class Item:
    """One answer to check. ``line`` is its 1-based line (JSONL) or row (CSV) in the input file."""

    id: str
    answer: str
    question: str | None = None
    context: str | None = None
    line: int = 0


@dataclass(frozen=True)
class InputProblem:
    line: int
    message: str
    fatal: bool  # True: the line could not be used at all
    id: str | None = None  # the line's own id, when it has one


def read_input_bytes(path: str | Path) -> bytes:
    """The input's bytes, read once: a pipe (``/dev/stdin``, a process substitution) gives its content
    only to the first read, and the run must check and fingerprint that same content."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"input file {path} does not exist")
    if path.is_dir():
        raise InputError(f"{path} is a folder; pass a .jsonl or .csv file with one answer per line")
    return path.read_bytes()


def read_items(path: str | Path, raw: bytes | None = None) -> tuple[list[Item], list[InputProblem]]:
    """Read ``path`` (or its bytes ``raw``, already read); returns the usable items and the problems
    found (each with its line)."""
    path = Path(path)
    if raw is None:
        raw = read_input_bytes(path)
    if raw.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte order mark (Excel, Notepad) is not content
        raw = raw[3:]
    if not raw.strip():
        raise InputError(f"{path} is empty: nothing to check; it needs one JSON object per line with an \"answer\"")
    problems: list[InputProblem] = []
    lines = raw.split(b"\n")
    texts = []
    for n, b in enumerate(lines, start=1):
        try:
            texts.append(b.decode("utf-8"))
        except UnicodeDecodeError as exc:
            texts.append(b.decode("utf-8", errors="replace"))
            problems.append(InputProblem(n, f"not UTF-8 (byte 0x{b[exc.start]:02x} at column {exc.start + 1}); "
                                            "undecodable bytes were replaced with U+FFFD", fatal=False))
    if path.suffix.lower() == ".csv":
        records = _csv_records("\n".join(texts), problems)
    else:
        records = _jsonl_records(texts, problems)
    records = list(records)
    # a line without an id is named line-N, unless a real id already says so (then line-N-2, ...)
    taken = {str(rec["id"]) for _, rec in records if rec.get("id") not in (None, "")}
    items, seen = [], set()
    for n, rec in records:
        item = _to_item(n, rec, problems, taken)
        if item is None:
            continue
        if item.id in seen:
            problems.append(InputProblem(n, f"duplicate id {item.id!r}; ids must be unique (line skipped)", True,
                                         item.id))
            continue
        seen.add(item.id)
        items.append(item)
    # a skipped line keeps its own id in the report; without one it gets a line-N that no item has
    problems = [replace(p, id=p.id or synthetic_id(p.line, taken)) if p.fatal else p for p in problems]
    return items, problems


def synthetic_id(line: int, taken: set[str]) -> str:
    """``line-N`` for a line without an id, made unique against ``taken`` (which it joins)."""
    name, k = f"line-{line}", 1
    while name in taken:
        k += 1
        name = f"line-{line}-{k}"
    taken.add(name)
    return name


def json_kind(value) -> str:
    """What a parsed JSON value is, in words ("a list", "a string", ...), for error messages."""
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list",
            dict: "an object", type(None): "null"}.get(type(value), type(value).__name__)


def json_objects(texts: list[str], example: str):
    """Per non-blank line: ``(line, object, None)``, or ``(line, None, why it is unusable)`` where the line is
    not one JSON object (``example`` shows the user what one looks like). Shared by every JSONL reader."""
    for n, text in enumerate(texts, start=1):
        if not text.strip():
            continue
        try:
            rec = json.loads(text)
        except json.JSONDecodeError as exc:
            yield n, None, f"not valid JSON ({exc.msg} at column {exc.colno}); each line must be one JSON object like {example}"
            continue
        except RecursionError:  # json.loads recurses once per nesting level
            yield n, None, f"JSON nested too deeply (line skipped); each line must be one flat object like {example}"
            continue
        if not isinstance(rec, dict):
            yield n, None, f"expected a JSON object, got {json_kind(rec)}; write one object per line like {example}"
            continue
        yield n, rec, None


def _jsonl_records(texts: list[str], problems: list[InputProblem]):
    for n, rec, problem in json_objects(texts, '{"id": "a1", "answer": "..."}'):
        if problem is not None:
            problems.append(InputProblem(n, problem, True))
        else:
            yield n, rec


def _csv_records(text: str, problems: list[InputProblem]):
    reader = csv.DictReader(io.StringIO(text))
    if not reader.fieldnames or "answer" not in reader.fieldnames:
        raise InputError(f"CSV header must have an 'answer' column (found: {', '.join(reader.fieldnames or [])})")
    for rec in reader:
        yield reader.line_num, rec


def _to_item(n: int, rec: dict, problems: list[InputProblem], taken: set[str]) -> Item | None:
    own_id = None if rec.get("id") in (None, "") else str(rec["id"])
    answer = rec.get("answer")
    if answer is None:
        problems.append(InputProblem(n, "missing the \"answer\" field (line skipped); add the text to check "
                                        "as \"answer\"", True, own_id))
        return None
    if not isinstance(answer, str):
        problems.append(InputProblem(n, f"\"answer\" must be a string, got {type(answer).__name__}", True, own_id))
        return None
    if not answer.strip():
        problems.append(InputProblem(n, "\"answer\" is empty (line skipped)", True, own_id))
        return None
    item_id = own_id or synthetic_id(n, taken)
    words = answer.split()
    if len(words) > MAX_ANSWER_WORDS:
        problems.append(InputProblem(
            n, f"answer {item_id!r} has {len(words):,} words; only the first {MAX_ANSWER_WORDS:,} are checked "
               "(split long documents into several items to check all of it)", False))
    question = rec.get("question") or None
    context = rec.get("context") or None
    if isinstance(context, list):
        context = "\n\n".join(str(c) for c in context)
    return Item(item_id, answer, str(question) if question else None, str(context) if context else None, n)


def truncation_point(answer: str, max_words: int = MAX_ANSWER_WORDS) -> int | None:
    """Character offset where the checked part of an over-long answer ends (None: checked whole)."""
    count = 0
    in_word = False
    for i, ch in enumerate(answer):
        if ch.isspace():
            in_word = False
        elif not in_word:
            in_word = True
            count += 1
            if count > max_words:
                return i
    return None
