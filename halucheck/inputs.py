"""Reading the answers to check: JSONL (one JSON object per line) or CSV with the same columns,
``id``, ``answer``, and optionally ``question`` and ``context``.

A bad line never stops the run: it is reported with file:line and how to fix it, and the other lines
are read. Text that is not UTF-8 is decoded with replacement characters and reported, and so are JSON
escapes of lone UTF-16 surrogates (``"\\ud83d"`` without its pair), which no UTF-8 store can hold. A CSV
row whose quoted field is never closed is skipped, with the line and column of its opening quote; the
rows after it are read.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from halucheck.errors import InputError
from halucheck.store.rows import ErrorRow, ItemRow
from halucheck.text import SURROGATE_HINT, json_surrogates, word_spans

if TYPE_CHECKING:
    from halucheck.config import RunOptions, Settings
    from halucheck.store.runstore import RunStore

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
    lines = split_lines(raw)
    texts = []
    for n, b in enumerate(lines, start=1):
        try:
            texts.append(b.decode("utf-8"))
        except UnicodeDecodeError as exc:
            texts.append(b.decode("utf-8", errors="replace"))
            problems.append(InputProblem(n, f"not UTF-8 (byte 0x{b[exc.start]:02x} at column {exc.start + 1}); "
                                            "undecodable bytes were replaced with U+FFFD", fatal=False))
    if path.suffix.lower() == ".csv":
        records = _csv_records(path, texts, problems)
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


def split_lines(raw: bytes) -> list[bytes]:
    """The lines of a file's bytes: split at each line feed (the carriage return of a CRLF ending stays, and every
    reader here ignores it). A file with CR-only line endings (classic Mac OS, some spreadsheet exports) holds no
    line feed at all: it is split at each carriage return, so its lines are read as lines, not as one line with
    "Extra data" after its first object."""
    if b"\n" not in raw and b"\r" in raw.rstrip(b"\r"):
        return raw.split(b"\r")
    return raw.split(b"\n")


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


def json_objects(texts: list[str], example: str, note: Callable[[int, str], None]):
    """Per non-blank line: ``(line, object, None)``, or ``(line, None, why it is unusable)`` where the line is
    not one JSON object (``example`` shows the user what one looks like). Shared by every JSONL reader.
    Lone surrogates in the object are replaced with U+FFFD and ``note(line, message)`` says so."""
    for n, text in enumerate(texts, start=1):
        if not text.strip():
            continue
        try:
            rec, replaced = json_surrogates(text, json.loads(text))
        except json.JSONDecodeError as exc:
            yield n, None, f"not valid JSON ({exc.msg} at column {exc.colno}); each line must be one JSON object like {example}"
            continue
        except RecursionError:  # json.loads recurses once per nesting level
            yield n, None, f"JSON nested too deeply (line skipped); each line must be one flat object like {example}"
            continue
        except ValueError as exc:  # Python reads no integer of more than 4,300 digits
            yield n, None, f"a JSON number in it is too long to read ({str(exc).split(';')[0]}) (line skipped); write it as a string"
            continue
        if replaced:
            note(n, f"{replaced} {SURROGATE_HINT}")
        if not isinstance(rec, dict):
            yield n, None, f"expected a JSON object, got {json_kind(rec)}; write one object per line like {example}"
            continue
        yield n, rec, None


def _jsonl_records(texts: list[str], problems: list[InputProblem]):
    def note(n: int, message: str) -> None:  # a warning: the line is used
        problems.append(InputProblem(n, message, False))

    for n, rec, problem in json_objects(texts, '{"id": "a1", "answer": "..."}', note):
        if problem is not None:
            problems.append(InputProblem(n, problem, True))
        else:
            yield n, rec


def _csv_records(path: Path, texts: list[str], problems: list[InputProblem]):
    rows = csv_rows(texts)
    n, header, problem = next(rows, (1, [], None))
    if problem is not None:
        raise InputError(f"{path}:{n}: the CSV header cannot be read ({problem.why}); the first row must name "
                         "the columns, e.g. id,answer")
    if "answer" not in header:
        raise InputError(f"CSV header must have an 'answer' column (found: {', '.join(header)})")
    twice = sorted({h for h in header if header.count(h) > 1 and h in ("id", "answer", "question", "context")})
    if twice:
        raise InputError(f"{path}:{n}: the CSV header names the column {', '.join(repr(h) for h in twice)} more "
                         "than once; keep one (which one to check would be a guess)")
    for n, row, problem in rows:
        if problem is not None:
            problems.append(InputProblem(n, problem.message(header), True, _own_id(texts[n - 1], header)))
        elif row:  # a blank line is no row
            yield n, dict(zip(header, row))


def _own_id(line: str, header: list[str]) -> str | None:
    """The id of a row that cannot be read, from its first line alone (its result keeps the id)."""
    try:
        own = dict(zip(header, next(csv.reader([line]), [])))
    except csv.Error:
        return None
    return own.get("id") or None


@dataclass(frozen=True)
class CsvProblem:
    """A CSV row that cannot be read: the csv module's words, and for a quoted field that runs on past its
    line, where its quote opened (``line``, ``column``, ``field`` index) and the line the reader stopped at
    (``stop``; None: the end of the file)."""

    why: str
    line: int = 0
    column: int = 0
    field: int = 0
    stop: int | None = None

    def message(self, header: list[str]) -> str:
        """What is wrong and how to fix it, for the row's problem (the caller names the row's first line)."""
        if not self.line:
            return f"the CSV row cannot be read ({self.why}) (line skipped); check its quoting and that no field is over 128 KB"
        name = f'"{header[self.field]}"' if self.field < len(header) else f"number {self.field + 1}"
        quote = f"the quote that opens field {name} at line {self.line}, column {self.column}"
        runs = ("is never closed: the field would take in every line after it, to the end of the file" if self.stop is None
                else f"is not closed on its line: the field would run on to line {self.stop}, where the CSV reader stops "
                     f"({self.why})")
        return (f"{quote} {runs} (row skipped; reading goes on at line {self.line + 1}); close the quote, or write a "
                'quote inside a quoted field as ""')


def csv_rows(texts: list[str]):
    """The CSV rows of the lines ``texts``, the header first: ``(first line, cells, None)``, or
    ``(first line, None, CsvProblem)`` for a row that cannot be read.

    A quoted field may hold line breaks, but one whose quote is never closed takes every later row in (the
    csv module reads on to the end of the file, or to a later quote). So the strict reader reads, and a row
    it fails in after a line break is reported with the line and column of the quote that opened the field;
    reading starts again on the line after that quote's. A row of one line that only the strict reader
    refuses (``"Paris" is big``) is read as the lenient reader reads it."""
    base = 0  # the lines before the current reader's first
    while True:
        reader = csv.reader((texts[i] + "\n" for i in range(base, len(texts))), strict=True)
        while True:
            first = base + reader.line_num + 1
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                error, last = exc, base + reader.line_num
                break
            yield first, row, None
        eof = "end of data" in str(error)
        if last == first and not eof:
            try:  # one line with a stray quote, as the lenient reader has always read it
                yield first, next(csv.reader([texts[first - 1]])), None
            except csv.Error as again:
                yield first, None, CsvProblem(str(again))
            base = first
            continue
        line, column, field = _opening_quote(texts, first, last)
        yield first, None, CsvProblem(str(error), line, column, field, None if eof or last >= len(texts) else last)
        base = line


def _opening_quote(texts: list[str], first: int, last: int) -> tuple[int, int, int]:
    """(line, column, field index) of the quote that opened the field a CSV row failed in: the row's lines
    ``first..last`` scanned as the strict csv reader reads them, up to where it stops."""
    found, quoted, at_start, field = (first, 1, 0), False, True, 0
    for n in range(first, last + 1):
        text = texts[n - 1].rstrip("\r")
        i = 0
        while i < len(text):
            c = text[i]
            if quoted:
                if c == '"' and text[i + 1:i + 2] == '"':
                    i += 1  # a quote written as ""
                elif c == '"':
                    quoted = False
                    if text[i + 1:i + 2] not in ("", ","):
                        return found  # the strict reader fails here: this quote closed the field found
            elif c == '"' and at_start:
                quoted, found = True, (n, i + 1, field)
            elif c == ",":
                field += 1
            at_start = not quoted and c == ","
            i += 1
    return found


def _to_item(n: int, rec: dict, problems: list[InputProblem], taken: set[str]) -> Item | None:
    raw_id = rec.get("id")
    if raw_id not in (None, "") and (isinstance(raw_id, bool) or not isinstance(raw_id, (str, int))):
        problems.append(InputProblem(n, f"\"id\" must be a string or a whole number, got {json_kind(raw_id)} "
                                        "(line skipped)", True))
        return None
    own_id = None if raw_id in (None, "") else str(raw_id)
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
    cut = truncation_point(answer)
    if cut is not None:
        words = sum(1 for _ in word_spans(answer))
        problems.append(InputProblem(
            n, f"answer {item_id!r} has {words:,} words (a word counts once per 64 characters without a space); "
               f"only the first {MAX_ANSWER_WORDS:,} are checked (split long documents into several items to "
               "check all of it)", False))
    question = rec.get("question") or None
    context = rec.get("context") or None
    if question is not None and not isinstance(question, str):
        problems.append(InputProblem(n, f"\"question\" must be a string, got {json_kind(question)} (line skipped)",
                                     True, own_id))
        return None
    if isinstance(context, list) and all(isinstance(c, str) for c in context):
        context = "\n\n".join(context)
    elif context is not None and not isinstance(context, str):
        problems.append(InputProblem(n, f"\"context\" must be a string or a list of strings, got "
                                        f"{json_kind(context)} (line skipped)", True, own_id))
        return None
    return Item(item_id, answer, str(question) if question else None, str(context) if context else None, n)


def truncation_point(answer: str, max_words: int = MAX_ANSWER_WORDS) -> int | None:
    """Character offset where the checked part of an over-long answer ends (None: checked whole). Words
    are ``text.word_spans``: a run of characters without spaces counts one word per 64 characters."""
    for count, (start, _) in enumerate(word_spans(answer), 1):
        if count > max_words:
            return start
    return None


def load_run_input(store: "RunStore", opts: "RunOptions", settings: "Settings",
                   log: Callable[[str], None]) -> list[tuple[int, Item]]:
    """`halucheck run`'s input read, checked against the run's fingerprint (a resume with changed inputs or
    settings is refused) and stored as items, with its problems; the usable items with their index."""
    raw = read_input_bytes(opts.input)  # read once: a pipe has no second read
    items, problems = read_items(opts.input, raw)
    fp = opts.fingerprint(settings, raw)
    old = store.get_meta("fingerprint")
    if old and old != fp:
        raise InputError(
            f"{opts.out} holds a run made with other inputs or settings; use a new --out DIR, "
            "or --restart to discard it"
        )
    store.set_meta("fingerprint", fp)
    store.set_meta("input", str(opts.input))
    if opts.corpus:  # the report shows evidence paths relative to it
        store.set_meta("corpus", str(Path(opts.corpus).resolve()))
    for p in problems:
        log(f"{'warning' if not p.fatal else 'skipped'}: {opts.input}:{p.line}: {p.message}")
    if not items:
        raise InputError(f"{opts.input}: no usable line ({len(problems)} problem(s) above); "
                         "each line needs an \"answer\"")
    indexed = list(enumerate(items))
    by_line = {it.line: i for i, it in indexed}
    store.add_items([ItemRow(i, it.id, it.line, it.question, it.answer, it.context,
                                  truncation_point(it.answer)) for i, it in indexed])
    # warnings (not UTF-8, truncated) belong to their item's result; unusable lines get a result of their own
    store.set_input_problems([
        ErrorRow("input", p.message, None, p.line, item_id=p.id) if p.fatal else
        ErrorRow("input-warning", p.message, by_line.get(p.line), p.line) for p in problems])
    return indexed
