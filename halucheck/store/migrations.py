"""Named, ordered schema migrations for halucheck's DuckDB files: the run database and the corpus index.

A migration is ``(name, sql)``. Each database keeps its own list beside the code that reads its tables
(``halucheck.store.runstore.MIGRATIONS``, ``halucheck.retrieval.index_db.MIGRATIONS``) and its own bookkeeping
table; this module knows neither schema, it only applies and records. Lists are appended to, never
edited, so opening a file made by an older version upgrades it in place.

Each migration runs in its own transaction together with the row that records it: a failure rolls both
back and re-raises the database's own error, which the caller turns into its one-line message.
"""

from __future__ import annotations

import re
from typing import Sequence

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _table(name: str) -> str:
    if not _IDENTIFIER.fullmatch(name):
        raise ValueError(f"not a plain table name: {name!r}")
    return name


def recorded(con, table: str) -> set[str] | None:
    """Names of the migrations recorded in ``table``; None when the database has no such table (it was not
    made by halucheck). Reads only, so it works on a read-only connection."""
    table = _table(table)
    tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    if table not in tables:
        return None
    return {r[0] for r in con.execute(f"SELECT name FROM {table}").fetchall()}


def apply(con, migrations: Sequence[tuple[str, str]], *, table: str) -> list[str]:
    """Apply the migrations not yet recorded in ``table`` (created if missing), in list order; returns the
    names applied. Names recorded in ``table`` but absent from ``migrations`` are left alone."""
    table = _table(table)
    con.execute(
        f"CREATE TABLE IF NOT EXISTS {table} (name VARCHAR PRIMARY KEY, applied_at TIMESTAMP "
        "DEFAULT current_timestamp)"
    )
    done = {r[0] for r in con.execute(f"SELECT name FROM {table}").fetchall()}
    applied = []
    for name, sql in migrations:
        if name in done:
            continue
        con.execute("BEGIN")
        try:
            con.execute(sql)
            con.execute(f"INSERT INTO {table} (name, applied_at) VALUES (?, now())", [name])
            con.execute("COMMIT")
        except Exception:
            try:
                con.execute("ROLLBACK")
            except Exception:
                pass  # the connection is unusable (damaged file): the first error is the one to report
            raise
        applied.append(name)
    return applied
