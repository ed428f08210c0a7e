"""Read documents from a corpus folder and cut them into overlapping chunks located by character offsets.

Every chunk is an exact slice ``doc.text[start:end]``. For plain-text formats (.txt, .md) ``doc.text`` is the
file's decoded content, so the offsets point into the file itself; for .html, .pdf and .docx they point into
the extracted text, which the index stores beside the chunks. A .jsonl file holds one document per line; its
documents are named ``PATH#L<line>`` (1-based) and offsets point into that line's text field.

Lone UTF-16 surrogates (a .jsonl escape like ``"\\ud83d"`` without its pair) are not text: they become
U+FFFD, with a warning naming the file and its lines, before any text is chunked or stored.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from halucheck.text import (
    SURROGATE_HINT,
    json_surrogates,
    replace_surrogates,
    sentence_spans,
)

SUPPORTED_SUFFIXES = (".md", ".markdown", ".txt", ".html", ".htm", ".pdf", ".docx", ".jsonl")
MAX_FILE_BYTES = 50 * 1024 * 1024
JSONL_TEXT_FIELDS = ("text", "contents", "content", "body", "passage")


class SkipFile(Exception):
    """A file that cannot be indexed; the message says why (the caller warns and goes on)."""


@dataclass(frozen=True)
class Document:
    """One document: its ``source`` name (a path, or ``PATH#L<n>`` for a .jsonl line) and its text."""

    source: str
    text: str


@dataclass(frozen=True)
class Chunk:
    """A slice ``text == document.text[start:end]`` of a document."""

    text: str
    start: int
    end: int


# --- chunking -------------------------------------------------------------------------------------


def chunk_text(text: str, sentences: int = 3, overlap: int = 1, max_chars: int = 1000) -> list[Chunk]:
    """Windows of ``sentences`` consecutive sentences, consecutive windows sharing ``overlap`` sentences,
    each at most ``max_chars`` long (a window stops early rather than exceed it)."""
    if sentences < 1 or not 0 <= overlap < sentences:
        raise ValueError("need sentences >= 1 and 0 <= overlap < sentences")
    spans = sentence_spans(text, line_breaks=False, max_chars=max_chars)
    chunks: list[Chunk] = []
    i, n = 0, len(spans)
    while i < n:
        j = i
        while j + 1 < n and j + 1 - i < sentences and spans[j + 1][1] - spans[i][0] <= max_chars:
            j += 1
        start, end = spans[i][0], spans[j][1]
        chunks.append(Chunk(text[start:end], start, end))
        if j == n - 1:
            break
        i = max(j + 1 - overlap, i + 1)
    return chunks


# --- readers -------------------------------------------------------------------------------------


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _decode_text(data: bytes) -> str:
    if b"\x00" in data[:8192]:
        raise SkipFile("binary content (NUL bytes), not text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        pass
    sample = data[:8192]
    controls = sum(1 for b in sample if b < 32 and b not in (9, 10, 12, 13))
    if controls > len(sample) * 0.05:
        raise SkipFile("binary content, not text")
    return data.decode("cp1252", errors="replace")


def _read_html(data: bytes) -> str:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(_decode_text(data), "html.parser")
    for tag in soup(["script", "style", "noscript", "template"]):
        tag.decompose()
    text = soup.get_text("\n")
    lines = [re.sub(r"[ \t\r\f\v]+", " ", line).strip() for line in text.splitlines()]
    # blank lines separate blocks; runs of them collapse into one
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def _read_pdf(path: Path) -> str:
    import logging

    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    logging.getLogger("pypdf").setLevel(logging.ERROR)
    try:
        reader = PdfReader(str(path))
        if reader.is_encrypted:
            try:
                ok = reader.decrypt("")
            except Exception:
                ok = 0
            if not ok:
                raise SkipFile("encrypted PDF (password required)")
        pages = [(page.extract_text() or "").strip() for page in reader.pages]
    except SkipFile:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, OSError) as exc:
        raise SkipFile(f"unreadable PDF ({type(exc).__name__}: {exc})") from None
    except Exception as exc:  # pypdf raises many kinds on broken files
        if "crypt" in str(exc).lower():
            raise SkipFile("encrypted PDF (password required)") from None
        raise SkipFile(f"unreadable PDF ({type(exc).__name__}: {exc})") from None
    return "\n\n".join(p for p in pages if p)


def _read_docx(path: Path, head: bytes) -> str:
    if head.startswith(b"\xd0\xcf\x11\xe0"):
        # OLE compound file: what Office writes for password-protected documents (or legacy .doc)
        raise SkipFile("encrypted or legacy Word file (not a .docx zip); save it unprotected as .docx")
    import docx

    try:
        d = docx.Document(str(path))
    except Exception as exc:
        raise SkipFile(f"unreadable .docx ({type(exc).__name__}: {exc})") from None
    blocks = [p.text.strip() for p in d.paragraphs]
    for table in d.tables:
        for row in table.rows:
            blocks.append(" | ".join(c.text.strip() for c in row.cells))
    return "\n\n".join(b for b in blocks if b)


def _read_jsonl(path: Path, data: bytes, warn: Callable[[str], None]) -> list[Document]:
    text = _decode_text(data)
    docs, bad, replaced = [], [], []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec, n = json_surrogates(line, json.loads(line))
        except (ValueError, RecursionError):  # not JSON, nested too deeply, or a number of over 4,300 digits
            bad.append(lineno)
            continue
        if n:
            replaced.append(lineno)
        value = None
        if isinstance(rec, dict):
            value = next((rec[f] for f in JSONL_TEXT_FIELDS if isinstance(rec.get(f), str)), None)
        elif isinstance(rec, str):
            value = rec
        if value is None:
            bad.append(lineno)
        elif value.strip():
            docs.append(Document(f"{path}#L{lineno}", value))
    if bad:
        shown = ", ".join(map(str, bad[:5])) + (" ..." if len(bad) > 5 else "")
        warn(
            f"skipped {len(bad)} line(s) of {path} (line {shown}): not JSON or no text field "
            f"({', '.join(JSONL_TEXT_FIELDS)})"
        )
    if replaced:
        warn(f"{path}: line {_lines(replaced)}: {SURROGATE_HINT}")
    return docs


def _lines(numbers: list[int]) -> str:
    return ", ".join(map(str, numbers[:5])) + (f" and {len(numbers) - 5} more" if len(numbers) > 5 else "")


def read_file(path: Path, warn: Callable[[str], None] | None = None, max_bytes: int = MAX_FILE_BYTES) -> list[Document]:
    """Documents in one file. Raises :class:`SkipFile` (with the reason) for unreadable, binary, empty,
    oversized or encrypted files. ``warn`` receives notes on partly unusable files (bad .jsonl lines)."""
    warn = warn or (lambda msg: None)
    path = Path(path)
    suffix = path.suffix.lower()
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise SkipFile(f"too large ({size / 2**20:.0f} MB > {max_bytes / 2**20:.0f} MB limit)")
        if size == 0:
            raise SkipFile("empty file")
        if suffix == ".pdf":
            text = _read_pdf(path)
        elif suffix == ".docx":
            with open(path, "rb") as f:
                head = f.read(8)
            text = _read_docx(path, head)
        else:
            data = path.read_bytes()
            if suffix == ".jsonl":
                docs = _read_jsonl(path, data, warn)
                if not docs:
                    raise SkipFile("no documents (no line with a non-empty text field)")
                return docs
            text = _read_html(data) if suffix in (".html", ".htm") else _decode_text(data)
    except OSError as exc:
        raise SkipFile(f"cannot read ({exc.strerror or exc})") from None
    if not text.strip():
        raise SkipFile("no text (empty document, or a scanned PDF without a text layer)")
    text, n = replace_surrogates(text)  # a PDF's text map can hold them too
    if n:
        warn(f"{path}: {n} lone UTF-16 surrogate(s), which are not text, replaced with U+FFFD")
    return [Document(str(path), text)]


def iter_files(root: Path, exclude: tuple[Path, ...] = (),
               warn: Callable[[str], None] | None = None, exclude_dirs: tuple[Path, ...] = (),
               left_out: Callable[[Path, Path], None] | None = None) -> Iterator[Path]:
    """Supported files under ``root``, recursively, sorted; hidden files and folders are ignored.

    A file reached through a symlink that leads out of ``root`` is skipped (with a call to ``warn``):
    the corpus is what the folder holds, and a link to ``/etc/passwd`` must not become quoted evidence.
    So is a file whose name is not UTF-8 (Python holds its bytes as lone surrogates, which no index can store).

    Nothing halucheck wrote is corpus: a file in a folder that holds :data:`halucheck.outputs.MARKER` (a run
    folder, an eval run, an index cache), or under one of ``exclude_dirs`` (the run's own ``--out``), is left
    out with a call ``left_out(file, folder)`` naming the folder that made it halucheck's."""
    from halucheck import outputs

    root = Path(root)
    real_root = root.resolve()
    excluded = {p.resolve() for p in exclude}
    own_dirs = [Path(d).expanduser().resolve() for d in exclude_dirs]
    marked: dict[Path, Path | None] = {}  # folder -> the marked folder it lies in (None: none)

    def marked_folder(rel: Path) -> Path | None:
        found = None
        for depth in range(len(rel.parts)):  # the root, then each folder down to the file's own
            folder = root.joinpath(*rel.parts[:depth])
            if folder not in marked:
                marked[folder] = found or (folder if outputs.is_marked(folder) else None)
            found = marked[folder]
        return found

    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if any(part.startswith(".") for part in rel.parts):
            continue
        if path.suffix.lower() not in SUPPORTED_SUFFIXES or not path.is_file():
            continue
        real = path.resolve()
        if real in excluded:
            continue
        own = marked_folder(rel) or next(
            (d for d in own_dirs if path.absolute().is_relative_to(d) or real.is_relative_to(d)), None)
        if own is not None:
            if left_out:
                left_out(path, own)
            continue
        if replace_surrogates(str(path))[1]:
            if warn:
                shown = os.fsencode(path).decode("utf-8", errors="replace")
                warn(f"skipped {shown}: its name is not UTF-8 text; rename the file (or folder) to index it")
            continue
        if not real.is_relative_to(real_root):
            if warn:
                warn(f"skipped {path}: a symlink to {real}, outside the corpus folder {root}")
            continue
        yield path
