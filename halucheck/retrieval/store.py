"""The index's DuckDB file: files, documents, chunks and embeddings, with named, ordered migrations.

Schema changes are appended to ``MIGRATIONS`` (never edited) and applied by :mod:`halucheck.store.migrations`;
each applied one is recorded in ``index_migrations``, so opening an older file upgrades it in place.
"""

from __future__ import annotations

from pathlib import Path

from halucheck.store import migrations
from halucheck.errors import InputError

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


def _duckdb():
    import duckdb

    return duckdb


def connect(db: str | Path, create: bool = False, read_only: bool = False):
    """Open (and migrate) an index file. Missing or corrupt files raise :class:`InputError`, one line."""
    duckdb = _duckdb()
    db = Path(db)
    if not create and not db.is_file():
        raise InputError(f"no index at {db}; {HINT.format(db=db)}")
    if create:
        db.parent.mkdir(parents=True, exist_ok=True)
    try:
        con = duckdb.connect(str(db), read_only=read_only)
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if "lock" in first.lower():
            raise InputError(f"{db} is in use by another process ({first}); wait for it to finish") from None
        raise InputError(f"{db} is not a readable DuckDB index ({first}); delete it and {HINT.format(db=db)}") from None
    try:
        con.execute("SET enable_progress_bar = false")
        if read_only:
            _check_schema(con, db)
        else:
            migrate(con)
    except duckdb.Error as exc:
        con.close()
        first = str(exc).strip().splitlines()[0]
        raise InputError(f"{db} is not a halucheck index ({first}); delete it and {HINT.format(db=db)}") from None
    except InputError:
        con.close()
        raise
    return con


def _check_schema(con, db: Path) -> None:
    done = migrations.recorded(con, MIGRATIONS_TABLE)
    if done is None:
        raise InputError(f"{db} is a DuckDB file but not a halucheck index; {HINT.format(db=db)}")
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
