"""Read documents from a corpus folder and cut them into overlapping chunks located by character offsets.

Every chunk is an exact slice ``doc.text[start:end]``. For plain-text formats (.txt, .md) ``doc.text`` is the
file's decoded content, so the offsets point into the file itself; for .html, .pdf and .docx they point into
the extracted text, which the index stores beside the chunks. A .jsonl file holds one document per line; its
documents are named ``PATH#L<line>`` (1-based) and offsets point into that line's text field.

Lone UTF-16 surrogates (a .jsonl escape like ``"\\ud83d"`` without its pair) are not text: they become
U+FFFD, with a warning naming the file and its lines, before any text is chunked or stored.

A document holds at most ``max_chars`` characters (:func:`halucheck.config.max_document_chars`): past it its
text is cut there, with one warning per file naming the file, its size and the setting to raise. A PDF stops
extracting pages past the bound, and a .docx that unpacks to more than
:data:`halucheck.config.UNPACKED_BYTES_PER_CHAR` bytes per allowed character is read as a stream of paragraphs
that stops there, so neither is ever held whole.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from halucheck import config
from halucheck.text import (
    SURROGATE_HINT,
    json_surrogates,
    replace_surrogates,
    sentence_spans,
)

SUPPORTED_SUFFIXES = (".md", ".markdown", ".txt", ".html", ".htm", ".pdf", ".docx", ".jsonl")
MAX_FILE_BYTES = 50 * 1024 * 1024
JSONL_TEXT_FIELDS = ("text", "contents", "content", "body", "passage")
CUT_HINT = "set HALUCHECK_MAX_DOC_CHARS higher to index it whole"
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


class SkipFile(Exception):
    """A file that cannot be indexed; the message says why (the caller warns and goes on)."""


@dataclass(frozen=True)
class Document:
    """One document: its ``source`` name (a path, or ``PATH#L<n>`` for a .jsonl line) and its text."""

    source: str
    text: str
    cut: int = 0  # the bound its text was cut at (0: read whole)


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


def _read_pdf(path: Path, max_chars: int) -> str:
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
        pages, total = [], 0
        for page in reader.pages:  # no further than the bound: a PDF's streams can unpack to far more
            pages.append((page.extract_text() or "").strip())
            total += len(pages[-1]) + 2
            if total > max_chars:
                break
    except SkipFile:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, OSError) as exc:
        raise SkipFile(f"unreadable PDF ({type(exc).__name__}: {exc})") from None
    except Exception as exc:  # pypdf raises many kinds on broken files
        if "crypt" in str(exc).lower():
            raise SkipFile("encrypted PDF (password required)") from None
        raise SkipFile(f"unreadable PDF ({type(exc).__name__}: {exc})") from None
    return "\n\n".join(p for p in pages if p)


def _read_docx(path: Path, head: bytes, max_chars: int) -> tuple[str, int | None, bool, bool]:
    """The text of a .docx, what its parts unpack to (None when it is no zip), whether it was read as a stream
    and whether to its end. One whose XML unpacks to more than :func:`_xml_bound` allows, or whose other parts
    (images) to more than a file may hold, is read as a stream (:func:`_stream_docx`): python-docx holds every
    part, and about 14 bytes per byte of XML it parses."""
    if head.startswith(b"\xd0\xcf\x11\xe0"):
        # OLE compound file: what Office writes for password-protected documents (or legacy .doc)
        raise SkipFile("encrypted or legacy Word file (not a .docx zip); save it unprotected as .docx")
    import zipfile

    try:
        with zipfile.ZipFile(path) as z:  # the sizes its parts declare: a read stops there
            parts = z.infolist()
        xml = sum(i.file_size for i in parts if i.filename.endswith((".xml", ".rels")))
        unpacked = sum(i.file_size for i in parts)
    except (zipfile.BadZipFile, ValueError, EOFError):
        xml = unpacked = None  # python-docx says what is wrong with it
    if unpacked is not None and (xml > _xml_bound(max_chars) or unpacked - xml > MAX_FILE_BYTES):
        text, whole = _stream_docx(path, max_chars)
        return text, unpacked, True, whole
    import docx

    try:
        d = docx.Document(str(path))
    except Exception as exc:
        raise SkipFile(f"unreadable .docx ({type(exc).__name__}: {exc})") from None
    blocks = [p.text.strip() for p in d.paragraphs]
    for table in d.tables:
        for row in table.rows:
            blocks.append(" | ".join(c.text.strip() for c in row.cells))
    return "\n\n".join(b for b in blocks if b), unpacked, False, True


def _xml_bound(max_chars: int) -> int:
    """Bytes of XML a .docx may unpack to before it is read as a stream (25 MB at the default bound; at least
    5 MB, as Word's styles alone take about 1 MB)."""
    return max(max_chars, 1_000_000) * config.UNPACKED_BYTES_PER_CHAR


def _stream_docx(path: Path, max_chars: int) -> tuple[str, bool]:
    """The paragraphs of a .docx in document order (table cells in place), parsed as a stream that stops once
    they pass ``max_chars`` characters or ``word/document.xml`` passes 50 bytes per allowed character (markup
    without text): memory stays bounded by the text kept. Also whether it reached the end."""
    import zipfile
    import zlib

    from lxml import etree

    blocks: list[str] = []
    total, read, whole = 0, 0, True
    parser = etree.XMLPullParser(events=("end",), tag=f"{_W}p", resolve_entities=False, no_network=True)
    try:
        with zipfile.ZipFile(path) as z, z.open("word/document.xml") as f:
            while total <= max_chars:
                data = f.read(1 << 20)
                if not data:
                    break
                read += len(data)
                parser.feed(data)
                for _, p in parser.read_events():
                    text = "".join(
                        (el.text or "") if el.tag == f"{_W}t" else "\t" if el.tag == f"{_W}tab" else "\n"
                        for el in p.iter(f"{_W}t", f"{_W}tab", f"{_W}br", f"{_W}cr")).strip()
                    p.clear()
                    while p.getprevious() is not None:  # what was read before it is done with
                        del p.getparent()[0]
                    if text:
                        blocks.append(text)
                        total += len(text) + 2
                if read > max_chars * 50 and total <= max_chars:
                    whole = False
                    break
    except (KeyError, zipfile.BadZipFile, etree.XMLSyntaxError, OSError, EOFError, zlib.error) as exc:
        if not blocks:
            raise SkipFile(f"unreadable .docx ({type(exc).__name__}: {exc})") from None
        whole = False  # broken past what was read: keep that, with the warning of a cut
    return "\n\n".join(blocks), whole


def _cut(text: str, max_chars: int) -> str:
    """The first ``max_chars`` characters of ``text``, ending at a space or line break within the last 200."""
    head = text[:max_chars]
    space = max(head.rfind(" ", max_chars - 200), head.rfind("\n", max_chars - 200))
    return head[:space].rstrip() if space > 0 else head


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MB" if n >= 2**20 else f"{n / 2**10:.0f} KB" if n >= 2**10 else f"{n} bytes"


def _read_jsonl(path: Path, data: bytes, warn: Callable[[str], None], max_chars: int) -> list[Document]:
    text = _decode_text(data)
    docs, bad, replaced, cut = [], [], [], []
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
            if len(value) > max_chars:
                cut.append(lineno)
                docs.append(Document(f"{path}#L{lineno}", _cut(value, max_chars), max_chars))
            else:
                docs.append(Document(f"{path}#L{lineno}", value))
    if bad:
        shown = ", ".join(map(str, bad[:5])) + (" ..." if len(bad) > 5 else "")
        warn(
            f"skipped {len(bad)} line(s) of {path} (line {shown}): not JSON or no text field "
            f"({', '.join(JSONL_TEXT_FIELDS)})"
        )
    if replaced:
        warn(f"{path}: line {_lines(replaced)}: {SURROGATE_HINT}")
    if cut:
        warn(f"{path} ({_size(len(data))}): line {_lines(cut)}: text longer than the {max_chars:,} characters a "
             f"document may hold (HALUCHECK_MAX_DOC_CHARS); only their first {max_chars:,} are indexed: "
             f"{CUT_HINT.replace('it whole', 'them whole')}")
    return docs


def _lines(numbers: list[int]) -> str:
    return ", ".join(map(str, numbers[:5])) + (f" and {len(numbers) - 5} more" if len(numbers) > 5 else "")


def read_file(path: Path, warn: Callable[[str], None] | None = None, max_bytes: int = MAX_FILE_BYTES,
              max_chars: int | None = None) -> list[Document]:
    """Documents in one file. Raises :class:`SkipFile` (with the reason) for unreadable, binary, empty,
    oversized or encrypted files. ``warn`` receives notes on partly unusable files (bad .jsonl lines) and
    one per file whose text is cut at ``max_chars`` (default :func:`halucheck.config.max_document_chars`)."""
    warn = warn or (lambda msg: None)
    max_chars = max_chars or config.max_document_chars()
    path = Path(path)
    suffix = path.suffix.lower()
    unpacked, streamed, whole = None, suffix == ".pdf", True
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise SkipFile(f"too large ({size / 2**20:.0f} MB > {max_bytes / 2**20:.0f} MB limit)")
        if size == 0:
            raise SkipFile("empty file")
        if suffix == ".pdf":
            text = _read_pdf(path, max_chars)
        elif suffix == ".docx":
            with open(path, "rb") as f:
                head = f.read(8)
            text, unpacked, streamed, whole = _read_docx(path, head, max_chars)
        else:
            data = path.read_bytes()
            if suffix == ".jsonl":
                docs = _read_jsonl(path, data, warn, max_chars)
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
    if len(text) <= max_chars and whole:
        return [Document(str(path), text)]
    # a PDF and a streamed .docx stop reading at the bound: their whole length is not known
    what = "its text" if streamed or not whole else f"its text ({len(text):,} characters)"
    unpacks = f", unpacking to {_size(unpacked)}" if unpacked else ""
    kept = _cut(text, max_chars) if len(text) > max_chars else text
    warn(f"{path} ({_size(size)}{unpacks}): {what} is longer than the {max_chars:,} characters a document may hold "
         f"(HALUCHECK_MAX_DOC_CHARS); only its first {len(kept):,} are indexed: {CUT_HINT}")
    return [Document(str(path), kept, max_chars)]


def not_a_file(path: Path) -> str | None:
    """Why ``path`` (a name with a supported extension) is no regular file to read, or None when it is one
    (or a folder, which is walked): a dangling link, a link loop, a FIFO, a socket or a device."""
    try:
        st = path.stat()
    except OSError as exc:
        if not path.is_symlink():
            return f"cannot be read ({exc.strerror or exc})"
        target = os.readlink(path)
        if exc.errno == errno.ELOOP:
            return f"a symlink loop (to {target}, which leads back to a link on the way); point the link at a file"
        return f"a dangling symlink (to {target}, which does not exist); point it at a file that exists"
    import stat

    if stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode):
        return None
    if stat.S_ISFIFO(st.st_mode):
        return "a FIFO (named pipe), not a file: reading it would wait for a writer; write its text into a file"
    if stat.S_ISSOCK(st.st_mode):
        return "a socket, not a file"
    return "a device, not a file"


def iter_files(root: Path, exclude: tuple[Path, ...] = (),
               warn: Callable[[str], None] | None = None, exclude_dirs: tuple[Path, ...] = (),
               left_out: Callable[[Path, Path], None] | None = None,
               skip: Callable[[Path, str], None] | None = None) -> Iterator[Path]:
    """Supported files under ``root``, recursively, sorted; hidden files and folders are ignored.

    A file reached through a symlink that leads out of ``root`` is skipped: the corpus is what the folder
    holds, and a link to ``/etc/passwd`` must not become quoted evidence. So is a file whose name is not UTF-8
    (Python holds its bytes as lone surrogates, which no index can store), and a name with a supported
    extension that is no regular file (:func:`not_a_file`: a FIFO, a dangling link, a link loop, a device).
    Each is a call ``skip(path, reason)`` (default: a call to ``warn``), so the caller counts it as skipped.

    Nothing halucheck wrote is corpus: a file in a folder that holds :data:`halucheck.outputs.MARKER` (a run
    folder, an eval run, an index cache), or under one of ``exclude_dirs`` (the run's own ``--out``), is left
    out with a call ``left_out(file, folder)`` naming the folder that made it halucheck's."""
    from halucheck import outputs

    if skip is None:
        def skip(path: Path, reason: str) -> None:
            if warn:
                warn(f"skipped {path}: {reason}")
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
        if path.suffix.lower() not in SUPPORTED_SUFFIXES:
            continue
        if not path.is_file():
            why = not_a_file(path)
            if why is not None and replace_surrogates(str(path))[1] == 0:
                skip(path, why)
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
            shown = os.fsencode(path).decode("utf-8", errors="replace")
            skip(Path(shown), "its name is not UTF-8 text; rename the file (or folder) to index it")
            continue
        if not real.is_relative_to(real_root):
            skip(path, f"a symlink to {real}, outside the corpus folder {root}")
            continue
        yield path
