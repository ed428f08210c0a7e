"""Building the on-disk index: :func:`build_index` ingests a folder into one DuckDB file (documents, chunks
with offsets, embeddings; the BM25 index lives beside it in ``<db>.bm25/``), re-processing only changed,
added or deleted files.

A build runs in four steps: compare the folder with what the index knows (:func:`_scan`), drop what is gone
and read, chunk and write the changed files (:func:`_read_changed`), embed every chunk without an embedding
(:func:`_embed_missing`), and rebuild BM25 when the chunks changed.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from halucheck import ingest
from halucheck.config import CHUNK_OVERLAP, CHUNK_SENTENCES, EMBED_BATCH
from halucheck.errors import InputError
from halucheck.retrieval import index_db
from halucheck.retrieval.dense import default_model, get_embedder
from halucheck.retrieval.index import bm25_dir, ensure_bm25

EMBED_GROUP = 2048  # chunks embedded and written per step: bounds memory, drives the progress bar
FLUSH_CHUNKS = 20000  # read chunks are written in one transaction once this many are pending...
FLUSH_FILES = 500  # ...or this many files
log = logging.getLogger("halucheck.retrieval")


@dataclass
class IndexReport:
    """What :func:`build_index` did. Paths are absolute."""

    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    left_out: dict[str, int] = field(default_factory=dict)  # folder halucheck wrote -> its files, never read
    documents: int = 0
    chunks: int = 0
    embedded: int = 0
    bm25_rebuilt: bool = False
    seconds: float = 0.0
    timings: dict = field(default_factory=dict)  # seconds per phase: scan, read, embed, bm25

    def left_out_note(self) -> str:
        """", N file(s) halucheck wrote left out (FOLDER, ...)", or "" when none."""
        if not self.left_out:
            return ""
        folders = sorted(self.left_out)
        shown = ", ".join(folders[:3]) + (f" and {len(folders) - 3} more" if len(folders) > 3 else "")
        return (f", {sum(self.left_out.values())} file(s) halucheck wrote left out ({shown}: its runs and indexes "
                "are never corpus)")

    def note_left_out(self, path: Path, folder: Path) -> None:
        self.left_out[str(folder)] = self.left_out.get(str(folder), 0) + 1

    def skipper(self, warn: Callable[[str], None]) -> Callable[[Path, str], None]:
        """What :func:`ingest.iter_files` calls for a name it does not read (a FIFO, a dangling link, a link
        loop, a link out of the corpus, a name that is not UTF-8): counted as skipped, and said."""
        def skip(path: Path, reason: str) -> None:
            self.skipped.append((str(path), reason))
            warn(f"skipped {path}: {reason}")
        return skip

    def summary(self) -> str:
        return (
            f"{len(self.added)} added, {len(self.changed)} changed, {len(self.removed)} removed, "
            f"{self.unchanged} unchanged, {len(self.skipped)} skipped{self.left_out_note()}; index holds {self.documents} documents, "
            f"{self.chunks} chunks ({self.embedded} embedded now) [{self.seconds:.1f} s]"
        )


def build_index(
    root: str | Path,
    db: str | Path,
    embed_model: str | None = None,
    embedder=None,
    chunk_sentences: int = CHUNK_SENTENCES,
    chunk_overlap: int = CHUNK_OVERLAP,
    max_chars: int = 1000,
    batch_size: int = EMBED_BATCH,
    max_file_bytes: int | None = None,
    progress: bool | None = None,
    warn: Callable[[str], None] | None = None,
    exclude_dirs: tuple[Path, ...] = (),
    max_doc_chars: int | None = None,
) -> IndexReport:
    """Index the supported files under ``root`` into the DuckDB file ``db`` (created if missing).

    Re-running only re-reads files whose size or mtime changed and re-chunks those whose content hash
    changed; removed files leave the index. Unreadable, binary, empty, oversized (> 50 MB) or encrypted
    files are skipped, each with a call to ``warn`` naming the file. ``embed_model`` is ``None`` (keep the
    index's model, or the default), a local sentence-transformers folder, or ``"fake"`` (tests).
    Chunking settings apply to files processed in this run. Nothing halucheck wrote is read: folders holding
    its marker (:mod:`halucheck.outputs`), ``exclude_dirs`` (a run's ``--out``) and its cache folder are left
    out (counted in ``report.left_out``). A document's text is cut at ``max_doc_chars`` characters (default
    :func:`halucheck.config.max_document_chars`), with a warning; a file cut at another bound than this build's
    is read again, so raising the bound reads the files it cut.
    """
    t0 = time.perf_counter()
    warn = warn or log.warning
    disable = None if progress is None else not progress
    root = Path(root).expanduser()
    if not root.is_dir():
        raise InputError(f"{root} is not a folder; pass the folder of documents to index")
    root = root.resolve()
    db = Path(db).expanduser().resolve()
    exclude_dirs = _own_folders(root, exclude_dirs)
    _mark_index_folder(db)
    max_file_bytes = max_file_bytes or ingest.MAX_FILE_BYTES
    from halucheck.config import max_document_chars

    max_doc_chars = max_doc_chars or max_document_chars()
    chunking = f"sentences={chunk_sentences},overlap={chunk_overlap},max_chars={max_chars}"
    unchanged = _unchanged_index(root, db, embed_model, embedder, warn, exclude_dirs, max_doc_chars)
    if unchanged is not None:  # read only: runs and searches reading the index meanwhile are no obstacle
        unchanged.seconds = time.perf_counter() - t0
        return unchanged
    import duckdb

    try:
        report = _build(root, db, embed_model, embedder, chunking, chunk_sentences, chunk_overlap, max_chars, batch_size,
                        max_file_bytes, disable, warn, exclude_dirs, t0, max_doc_chars)
    except (duckdb.Error, OSError) as exc:
        raise (index_db.disk_error(db, exc) or exc) from None
    report.seconds = time.perf_counter() - t0
    return report


def _building(db: Path) -> Path:
    """Where a new index is built before it is moved to ``db``: a build stopped half-way (a full disk, a kill)
    never leaves a file at ``db`` that every later run, index and search would stumble on."""
    return db.with_name(db.name + ".building")


def _open_for_build(db: Path, warn: Callable[[str], None]):
    """A writable connection for the build, and the file it writes: ``db`` when it exists, else its
    :func:`_building` file (finished there by a build stopped before). An index of halucheck's own that
    cannot be read is made again (with a warning); a user's file is left alone (the error says so)."""
    target = db if db.exists() else _building(db)
    if target != db:
        shutil.rmtree(bm25_dir(db), ignore_errors=True)  # another index's BM25, left at that name
    try:
        return index_db.connect(target, create=True), target
    except index_db.UnreadableIndex as exc:
        if not (exc.own or target != db):  # a file the user named: theirs
            raise
        warn(f"{exc}; building it again" if target == db else f"an unfinished build of {db} cannot be read; "
             "starting it again")
        for p in (target, Path(str(target) + ".wal")):
            p.unlink(missing_ok=True)
        shutil.rmtree(bm25_dir(db), ignore_errors=True)
        target = _building(db)
        return index_db.connect(target, create=True), target


def _build(root: Path, db: Path, embed_model, embedder, chunking: str, chunk_sentences: int, chunk_overlap: int,
           max_chars: int, batch_size: int, max_file_bytes: int, disable, warn: Callable[[str], None],
           exclude_dirs: tuple[Path, ...], t0: float, max_doc_chars: int) -> IndexReport:
    """Steps 1 to 4 of :func:`build_index` on a writable connection (a new index is built beside ``db`` and
    moved into place when finished)."""
    con, target = _open_for_build(db, warn)
    report = IndexReport()
    try:
        # until step 4 ends, the index is not searched (a build killed half-way is finished by the next one)
        index_db.set_meta(con, "complete", 0)
        embedder, model_spec = _choose_embedder(con, embed_model, embedder, warn)

        # 1. compare the folder with what the index knows
        todo = _scan(con, root, db, max_file_bytes, report, warn, exclude_dirs, also=(target,),
                     max_doc_chars=max_doc_chars)
        report.timings["scan"] = time.perf_counter() - t0
        t1 = time.perf_counter()

        # 2. drop what is gone or about to be replaced, then read, chunk and insert changed files
        _read_changed(con, todo, report, warn=warn, max_file_bytes=max_file_bytes, chunk_sentences=chunk_sentences,
                      chunk_overlap=chunk_overlap, max_chars=max_chars, disable=disable, max_doc_chars=max_doc_chars)
        changed = bool(todo or report.removed)
        report.timings["read"] = time.perf_counter() - t1
        t1 = time.perf_counter()

        # 3. embed every chunk without an embedding (also finishes an interrupted run)
        dim = _embed_missing(con, embedder, batch_size, report, disable)
        report.timings["embed"] = time.perf_counter() - t1
        t1 = time.perf_counter()
        generation = _record_settings(con, dim, model_spec, chunking, changed)

        # 4. BM25 beside the DB, rebuilt whenever the chunks changed (a few seconds per 100k chunks)
        report.bm25_rebuilt = ensure_bm25(con, db, generation) is not None
        report.timings["bm25"] = time.perf_counter() - t1
        index_db.set_meta(con, "complete", 1)
        report.documents = con.execute("SELECT count(*) FROM documents").fetchone()[0]
        report.chunks = con.execute("SELECT count(*) FROM chunks").fetchone()[0]
    finally:
        con.close()
    if target != db:  # a new index, finished: moved into place whole (its WAL, if any, with it)
        wal = Path(str(target) + ".wal")
        if wal.exists():
            os.replace(wal, Path(str(db) + ".wal"))
        os.replace(target, db)
    return report


def _own_folders(root: Path, exclude_dirs: tuple[Path, ...]) -> tuple[Path, ...]:
    """``exclude_dirs`` and halucheck's cache folder, resolved, where they lie inside ``root`` (one that holds
    the whole corpus excludes nothing: a run's ``--out`` that holds its corpus is refused before this)."""
    from halucheck.config import user_cache_dir

    out = []
    for d in (*exclude_dirs, user_cache_dir()):
        d = Path(d).expanduser().resolve()
        if d != root and d.is_relative_to(root):
            out.append(d)
    return tuple(out)


def _mark_index_folder(db: Path) -> None:
    """Mark the folder of an index in halucheck's cache (or one a build makes) as halucheck's: never corpus.
    A folder the user chose for ``--db`` and that already exists is theirs, and stays unmarked."""
    from halucheck import outputs
    from halucheck.config import user_cache_dir

    try:
        if not db.parent.exists() or db.parent == (user_cache_dir() / "indexes").expanduser().resolve():
            outputs.mark(db.parent)
    except OSError:
        pass  # the build itself says why the folder cannot be written


def _unchanged_index(root: Path, db: Path, embed_model: str | None, embedder,
                     warn: Callable[[str], None], exclude_dirs: tuple[Path, ...] = (),
                     max_doc_chars: int | None = None) -> IndexReport | None:
    """The report of a build with nothing to do, found on a read-only connection: a finished index of the
    same embedding model, every chunk embedded, BM25 current, and every file under ``root`` with the size
    and mtime it was indexed with (chunking settings apply to files read again: none here). None when there
    is anything to write."""
    if not db.is_file():
        return None
    try:
        con = index_db.connect(db, read_only=True, wait_s=0)
    except InputError:  # being built, older, damaged: the writable build waits for it, upgrades it or says so
        return None
    notes: list[str] = []
    report = IndexReport()
    try:
        requested = getattr(embedder, "name", None) if embedder is not None else embed_model
        stored_model, generation = index_db.get_meta(con, "embedding_model"), index_db.get_meta(con, "generation")
        if (index_db.get_meta(con, "complete", "1") != "1" or generation is None or stored_model is None
                or requested not in (None, stored_model)):
            return None
        if con.execute("SELECT count(*) FROM chunks c ANTI JOIN embeddings e ON c.chunk_id = e.chunk_id").fetchone()[0]:
            return None
        try:
            saved = json.loads((bm25_dir(db) / "halucheck.json").read_text())
        except (OSError, ValueError):
            return None
        if saved.get("generation") != int(generation) or not (bm25_dir(db) / "chunk_ids.npy").is_file():
            return None
        prefix = str(root).rstrip(os.sep) + os.sep
        known = {r[0]: r[1:] for r in con.execute(
            "SELECT path, size, mtime_ns, sha256, status, reason FROM files WHERE starts_with(path, ?)", [prefix]
        ).fetchall()}
        for path in ingest.iter_files(root, exclude=(db, Path(str(db) + ".wal")), warn=notes.append,
                                      exclude_dirs=exclude_dirs, left_out=report.note_left_out,
                                      skip=report.skipper(notes.append)):
            old = known.pop(str(path), None)
            try:
                st = path.stat()
            except OSError:
                return None
            if old is None or (old[0], old[1]) != (st.st_size, st.st_mtime_ns) or _cut_elsewhere(old, max_doc_chars):
                return None
            _unchanged(report, str(path), old, notes.append)
        if known:  # files gone
            return None
        report.documents = con.execute("SELECT count(*) FROM documents").fetchone()[0]
        report.chunks = con.execute("SELECT count(*) FROM chunks").fetchone()[0]
    finally:
        con.close()
    for note in notes:
        warn(note)
    return report


def _choose_embedder(con, embed_model: str | None, embedder, warn: Callable[[str], None]):
    """The embedder and its model spec: explicit > the index's own > default. A model other than the index's
    drops the stored embeddings, so every chunk is embedded again with the new one."""
    stored_model = index_db.get_meta(con, "embedding_model")
    requested = getattr(embedder, "name", None) if embedder is not None else embed_model
    model_spec = requested or stored_model or default_model()
    if embedder is None:
        embedder = get_embedder(model_spec)
    if stored_model and stored_model != model_spec:
        n = con.execute("SELECT count(*) FROM embeddings").fetchone()[0]
        if n:
            warn(f"embedding model changed from {stored_model} to {model_spec}: re-embedding {n} chunks")
        con.execute("DELETE FROM embeddings")
    return embedder, model_spec


def _scan(
    con, root: Path, db: Path, max_file_bytes: int, report: IndexReport, warn: Callable[[str], None],
    exclude_dirs: tuple[Path, ...] = (), also: tuple[Path, ...] = (), max_doc_chars: int | None = None,
) -> list[tuple[Path, os.stat_result, str | None]]:
    """The files under ``root`` to read again, with their stat and content hash; fills the report's added,
    changed, unchanged, removed and (unchanged) skipped files. A file whose size or mtime changed but whose
    content hash did not only has its stat updated; one cut at another bound than ``max_doc_chars`` is read again."""
    prefix = str(root).rstrip(os.sep) + os.sep
    known = {
        r[0]: r[1:]
        for r in con.execute(
            "SELECT path, size, mtime_ns, sha256, status, reason FROM files WHERE starts_with(path, ?)", [prefix]
        ).fetchall()
    }
    exclude = tuple(p for d in (db, *also) for p in (d, Path(str(d) + ".wal")))
    todo: list[tuple[Path, os.stat_result, str | None]] = []
    seen: set[str] = set()
    for path in ingest.iter_files(root, exclude=exclude, warn=warn, exclude_dirs=exclude_dirs,
                                  left_out=report.note_left_out, skip=report.skipper(warn)):
        p = str(path)
        seen.add(p)
        try:
            st = path.stat()
        except OSError as exc:
            report.skipped.append((p, f"cannot read ({exc.strerror})"))
            warn(f"skipped {p}: cannot read ({exc.strerror})")
            continue
        old = known.get(p)
        recut = bool(old) and _cut_elsewhere(old, max_doc_chars)
        if old and not recut and old[0] == st.st_size and old[1] == st.st_mtime_ns:
            _unchanged(report, p, old, warn)
            continue
        sha = None
        if 0 < st.st_size <= max_file_bytes:
            try:
                sha = ingest.file_sha256(path)
            except OSError:
                sha = None  # read_file reports it
        if old and not recut and sha is not None and old[2] == sha:
            con.execute("UPDATE files SET size = ?, mtime_ns = ? WHERE path = ?", [st.st_size, st.st_mtime_ns, p])
            _unchanged(report, p, old, warn)
            continue
        todo.append((path, st, sha))
        (report.changed if old else report.added).append(p)
    report.removed = sorted(set(known) - seen)
    return todo


CUT = "cut at {} characters"  # the reason recorded for an indexed file whose text was cut


def _cut_elsewhere(old: tuple, max_doc_chars: int | None) -> bool:
    """Whether the file of index row ``old`` was cut at another bound than ``max_doc_chars``."""
    return (max_doc_chars is not None and old[3] == "indexed" and bool(old[4]) and old[4].startswith("cut at ")
            and old[4] != CUT.format(max_doc_chars))


def _unchanged(report: IndexReport, path: str, old: tuple, warn: Callable[[str], None]) -> None:
    # ``old`` is the file's row in the index: size, mtime_ns, sha256, status, reason
    report.unchanged += 1
    if old[3] == "skipped":
        report.skipped.append((path, old[4]))
        warn(f"skipped {path}: {old[4]} (unchanged since the last run)")
    elif old[4] and old[4].startswith("cut at "):
        warn(f"{path}: its text was {old[4]} (HALUCHECK_MAX_DOC_CHARS): {ingest.CUT_HINT} (unchanged since the last run)")


def _read_changed(
    con,
    todo: list[tuple[Path, os.stat_result, str | None]],
    report: IndexReport,
    *,
    warn: Callable[[str], None],
    max_file_bytes: int,
    chunk_sentences: int,
    chunk_overlap: int,
    max_chars: int,
    disable: bool | None,
    max_doc_chars: int | None = None,
) -> None:
    """Drop the removed files, then read and chunk ``todo``, writing it in batches (see :class:`_Pending`).
    A file that cannot be read is recorded as skipped, with its reason, and counts as skipped only."""
    from tqdm.auto import tqdm

    con.execute("BEGIN")
    _drop(con, report.removed)
    con.execute("COMMIT")

    pending = _Pending(con)
    for path, st, sha in tqdm(todo, desc="reading", unit="file", disable=True if not todo else disable):
        p = str(path)
        try:
            docs = ingest.read_file(path, warn=warn, max_bytes=max_file_bytes, max_chars=max_doc_chars)
        except ingest.SkipFile as exc:
            _skip(report, pending, p, st, sha, str(exc), warn)
            continue
        except Exception as exc:  # a reader library choking on a malformed file must not stop the run
            _skip(report, pending, p, st, sha, f"unreadable ({type(exc).__name__}: {exc})", warn)
            continue
        per_doc = [ingest.chunk_text(d.text, chunk_sentences, chunk_overlap, max_chars) for d in docs]
        cut = max(d.cut for d in docs)
        pending.add_indexed(p, st, sha, docs, per_doc, CUT.format(cut) if cut else None)
        if pending.full():
            pending.flush()
    pending.flush()


def _skip(report: IndexReport, pending: "_Pending", path: str, st: os.stat_result, sha: str | None, reason: str,
          warn: Callable[[str], None]) -> None:
    _not_indexed(report, path)
    report.skipped.append((path, reason))
    warn(f"skipped {path}: {reason}")
    pending.add_skipped(path, st, sha, reason)


def _not_indexed(report: IndexReport, path: str) -> None:
    # a skipped file counts as skipped only, not as added or changed
    for lst in (report.added, report.changed):
        if path in lst:
            lst.remove(path)


def _drop(con, paths: list[str]) -> None:
    """Delete the rows of ``paths`` from every table (the caller holds the transaction)."""
    if not paths:
        return
    con.execute(
        "DELETE FROM embeddings WHERE chunk_id IN (SELECT chunk_id FROM chunks WHERE doc_id IN "
        "(SELECT doc_id FROM documents WHERE path IN (SELECT unnest(?))))",
        [paths],
    )
    con.execute(
        "DELETE FROM chunks WHERE doc_id IN (SELECT doc_id FROM documents WHERE path IN (SELECT unnest(?)))",
        [paths],
    )
    con.execute("DELETE FROM documents WHERE path IN (SELECT unnest(?))", [paths])
    con.execute("DELETE FROM files WHERE path IN (SELECT unnest(?))", [paths])


class _Pending:
    """Documents, chunks and file rows read but not written yet. :meth:`flush` replaces the files' old rows
    with them in one transaction; ids are reserved as files are added, so they never repeat."""

    def __init__(self, con) -> None:
        self.con = con
        self.docs: list[tuple] = []
        self.chunks: list[tuple] = []
        self.files: list[tuple] = []

    def add_skipped(self, path: str, st: os.stat_result, sha: str | None, reason: str) -> None:
        self.files.append((path, st.st_size, st.st_mtime_ns, sha, "skipped", reason, 0))

    def add_indexed(self, path: str, st: os.stat_result, sha: str | None, docs: list, per_doc: list,
                    reason: str | None = None) -> None:
        """``docs`` read from ``path`` and ``per_doc`` their chunks (a list per document)."""
        doc_start = index_db.next_id(self.con, "next_doc_id", len(docs))
        chunk_start = index_db.next_id(self.con, "next_chunk_id", sum(map(len, per_doc)))
        cid = chunk_start
        for j, (doc, chunks) in enumerate(zip(docs, per_doc)):
            self.docs.append((doc_start + j, path, doc.source, doc.text))
            for o, ch in enumerate(chunks):
                self.chunks.append((cid, doc_start + j, o, ch.start, ch.end, ch.text))
                cid += 1
        self.files.append((path, st.st_size, st.st_mtime_ns, sha, "indexed", reason, len(docs)))

    def full(self) -> bool:
        return len(self.chunks) >= FLUSH_CHUNKS or len(self.files) >= FLUSH_FILES

    def flush(self) -> None:
        if not self.files:
            return
        con = self.con
        con.execute("BEGIN")
        _drop(con, [f[0] for f in self.files])
        if self.docs:
            d = list(zip(*self.docs))
            _insert(con, "documents", {"doc_id": np.array(d[0], dtype=np.int64), "path": _obj(list(d[1])),
                                       "source": _obj(list(d[2])), "text": _obj(list(d[3]))})
        if self.chunks:
            c = list(zip(*self.chunks))
            _insert(con, "chunks", {"chunk_id": np.array(c[0], dtype=np.int64),
                                    "doc_id": np.array(c[1], dtype=np.int64),
                                    "ord": np.array(c[2], dtype=np.int32),
                                    "start_char": np.array(c[3], dtype=np.int32),
                                    "end_char": np.array(c[4], dtype=np.int32), "text": _obj(list(c[5]))})
        for f in self.files:
            con.execute("INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?, ?, now())", list(f))
        con.execute("COMMIT")
        self.docs.clear()
        self.chunks.clear()
        self.files.clear()


def _embed_missing(con, embedder, batch_size: int, report: IndexReport, disable: bool | None) -> int | None:
    """Embed every chunk that has no embedding, :data:`EMBED_GROUP` at a time; counts them in
    ``report.embedded`` and returns the vectors' dimension (None when nothing was embedded)."""
    from tqdm.auto import tqdm

    missing = con.execute(
        "SELECT count(*) FROM chunks c ANTI JOIN embeddings e ON c.chunk_id = e.chunk_id"
    ).fetchone()[0]
    if not missing:
        return None
    vecs = None
    bar = tqdm(total=missing, desc="embedding", unit="chunk", disable=disable)
    last = -1
    while True:
        rows = con.execute(
            "SELECT c.chunk_id, c.text FROM chunks c ANTI JOIN embeddings e ON c.chunk_id = e.chunk_id "
            "WHERE c.chunk_id > ? ORDER BY c.chunk_id LIMIT ?",
            [last, EMBED_GROUP],
        ).fetchall()
        if not rows:
            break
        vecs = embedder.encode([r[1] for r in rows], batch_size=batch_size)
        _insert(con, "embeddings", {"chunk_id": np.array([r[0] for r in rows], dtype=np.int64),
                                    "vector": _obj(list(vecs))})
        last = rows[-1][0]
        report.embedded += len(rows)
        bar.update(len(rows))
    bar.close()
    return None if vecs is None else vecs.shape[1]


def _record_settings(con, dim: int | None, model_spec: str, chunking: str, changed: bool) -> int:
    """Store the embedding model (and dimension, when vectors were written now) and the chunking settings;
    a new generation when the chunks changed. Returns the index's generation."""
    if dim is not None:
        index_db.set_meta(con, "embedding_dim", dim)
    index_db.set_meta(con, "embedding_model", model_spec)
    index_db.set_meta(con, "chunking", chunking)
    if changed or index_db.get_meta(con, "generation") is None:
        index_db.set_meta(con, "generation", int(index_db.get_meta(con, "generation", "0")) + 1)
    return int(index_db.get_meta(con, "generation"))


def _insert(con, table: str, columns: dict[str, np.ndarray]) -> None:
    # DuckDB scans a dict of numpy arrays directly: ~100x faster than executemany for bulk rows
    batch = columns  # noqa: F841 - referenced by name in the SQL below
    cols = ", ".join(columns)
    con.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM batch")


def _obj(values: list) -> np.ndarray:
    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    return arr
