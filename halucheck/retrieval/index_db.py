"""The index's DuckDB file: files, documents, chunks and embeddings, with named, ordered migrations.

Schema changes are appended to ``MIGRATIONS`` (never edited) and applied by :mod:`halucheck.store.migrations`;
each applied one is recorded in ``index_migrations``, so opening an older file upgrades it in place.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from halucheck.store import migrations
from halucheck.errors import DiskError, InputError, disk_problem

MIGRATIONS: list[tuple[str, str]] = [
    (
        "m001_initial",
        """
        CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR);
        CREATE TABLE files (
            path VARCHAR PRIMARY KEY, size BIGINT, mtime_ns BIGINT, sha256 VARCHAR,
            status VARCHAR, reason VARCHAR, n_documents INTEGER, indexed_at TIMESTAMP
        );
        CREATE TABLE documents (doc_id BIGINT PRIMARY KEY, path VARCHAR, source VARCHAR, text VARCHAR);
        CREATE TABLE chunks (
            chunk_id BIGINT PRIMARY KEY, doc_id BIGINT, ord INTEGER,
            start_char INTEGER, end_char INTEGER, text VARCHAR
        );
        CREATE TABLE embeddings (chunk_id BIGINT PRIMARY KEY, vector FLOAT[]);
        CREATE INDEX documents_path ON documents (path);
        CREATE INDEX chunks_doc ON chunks (doc_id);
        """,
    ),
]

MIGRATIONS_TABLE = "index_migrations"  # where applied migrations are recorded

HINT = "build it with `halucheck index DIR --db {db}`"


class UnreadableIndex(InputError):
    """An index file DuckDB cannot read, or a DuckDB file that is not a halucheck index. ``own``: it lies in a
    folder halucheck made (its cache), so a build may make it again; a file the user named is left alone."""

    def __init__(self, message: str, own: bool = False) -> None:
        super().__init__(message)
        self.own = own


def own_index(db: Path) -> bool:
    """Whether ``db`` is halucheck's to replace: it lies in a folder halucheck made (the index cache, or one a
    build created), which holds halucheck's marker (:mod:`halucheck.outputs`)."""
    from halucheck import outputs

    return outputs.is_marked(Path(db).parent)


def _unreadable(db: Path, why: str) -> UnreadableIndex:
    if own_index(db):
        return UnreadableIndex(f"the index {db} in halucheck's cache cannot be read ({why}); `halucheck index DIR` "
                               "(or `run --corpus DIR`, `search --corpus DIR`) builds it again", own=True)
    return UnreadableIndex(f"{db} is not a readable halucheck index ({why}); halucheck leaves that file as it is: "
                           "pass another --db (or --index) path, where `halucheck index DIR --db PATH` builds one")


def disk_error(db: Path, exc: BaseException) -> DiskError | None:
    """The one line for a write of the index refused by the disk (full, read-only); None for other errors."""
    problem = disk_problem(exc)
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    if isinstance(exc, OSError) or problem == "read-only":  # the cache folder itself (HALUCHECK_HOME) in the way?
        from halucheck.config import cache_error

        found = cache_error(db, exc, also="or pass --db (or --index) FILE")
        if found is not None:
            return DiskError(str(found))
    if problem == "full":
        return DiskError(f"no space left on the disk of the index {db} ({first}); free some space, then run the same "
                         "command again: the index is built where it stopped")
    if problem == "read-only":
        return DiskError(f"cannot write the index {db} ({first}): its folder is read-only; make it writable, or pass "
                         "a writable --db (or --index) path")
    return None


def _duckdb():
    import duckdb

    return duckdb


LOCK_WAIT_S = 5.0  # how long opening an index waits for another process to let go of it
_LOCK_RETRY_S = 0.1
# DuckDB's words for a file another process has open (or, in this process, open read-only beside read-write)
_IN_USE = ("lock", "different configuration")


def connect(db: str | Path, create: bool = False, read_only: bool = False, wait_s: float | None = None):
    """Open (and migrate) an index file. Missing or corrupt files raise :class:`InputError`, one line.

    Any number of read-only connections (runs, searches) share the file; a writable one (a build) needs it
    alone. Either waits up to ``wait_s`` (default ``LOCK_WAIT_S``) for the other kind to let go, then says
    the index is in use."""
    duckdb = _duckdb()
    db = Path(db)
    if not create and not db.is_file():
        raise InputError(f"no index at {db}; {HINT.format(db=db)}")
    if create:
        try:
            db.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise (disk_error(db, exc) or exc) from None
    deadline = time.monotonic() + (LOCK_WAIT_S if wait_s is None else wait_s)
    while True:
        try:
            con = duckdb.connect(str(db), read_only=read_only)
            break
        except duckdb.Error as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            if not any(word in first.lower() for word in _IN_USE):
                raise (disk_error(db, exc) or _unreadable(db, first)) from None
            if time.monotonic() >= deadline or "different configuration" in first:  # this process: no use waiting
                raise _in_use(db, read_only, first) from None
            time.sleep(_LOCK_RETRY_S)
    try:
        con.execute("SET enable_progress_bar = false")
        if read_only:
            _check_schema(con, db)
        else:
            _check_not_foreign(con, db)
            migrate(con)
    except duckdb.Error as exc:
        con.close()
        first = str(exc).strip().splitlines()[0]
        raise (disk_error(db, exc) or _unreadable(db, first)) from None
    except InputError:
        con.close()
        raise
    return con


def _in_use(db: Path, read_only: bool, detail: str) -> InputError:
    pid = re.search(r"PID (\d+)", detail)
    who = f" (PID {pid.group(1)})" if pid else ""
    if read_only:
        return InputError(f"the index {db} is being built or updated by another process{who}; wait for it to "
                          "finish, then run the same command again")
    return InputError(f"the index {db} is in use by another process{who}: a run or search reading it, or another "
                      "build; it can be updated only when nothing else has it open: wait for that to finish, then "
                      "run the same command again")


def _check_not_foreign(con, db: Path) -> None:
    """Refuse to add the index's tables to a DuckDB file that holds other tables and is no halucheck index."""
    tables = sorted(r[0] for r in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database()").fetchall())
    if tables and MIGRATIONS_TABLE not in tables:
        raise _unreadable(db, f"a DuckDB file with tables halucheck did not make: {', '.join(tables[:5])}")


def _check_schema(con, db: Path) -> None:
    done = migrations.recorded(con, MIGRATIONS_TABLE)
    if done is None:
        raise _unreadable(db, "a DuckDB file, but not a halucheck index")
    missing = [name for name, _ in MIGRATIONS if name not in done]
    if missing:
        raise InputError(f"{db} was built by an older halucheck; update it with `halucheck index DIR --db {db}`")


def migrate(con) -> list[str]:
    """Apply pending migrations in order; returns the names applied."""
    return migrations.apply(con, MIGRATIONS, table=MIGRATIONS_TABLE)


def get_meta(con, key: str, default: str | None = None) -> str | None:
    row = con.execute("SELECT value FROM meta WHERE key = ?", [key]).fetchone()
    return row[0] if row else default


def set_meta(con, key: str, value) -> None:
    con.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", [key, str(value)])


def next_id(con, key: str, count: int) -> int:
    """Reserve ``count`` fresh ids from a persistent counter (ids are never reused after deletes)."""
    start = int(get_meta(con, key, "1"))
    set_meta(con, key, start + count)
    return start
