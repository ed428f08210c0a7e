"""The one migration runner (halucheck.store.migrations) and the two databases that use it: the run database and
the corpus index. Files made by the runners each database had before keep opening and upgrade in place."""

from __future__ import annotations

import ast
from pathlib import Path

import duckdb
import pytest

from halucheck.store import migrations
from halucheck.errors import InputError
from halucheck.retrieval import FakeEmbedder, Index, build_index
from halucheck.retrieval import index_db as index_store
from halucheck.store.runstore import MIGRATIONS as RUN_MIGRATIONS
from halucheck.store.runstore import RunStore

STEPS = [
    ("001_table", "CREATE TABLE t (x INTEGER)"),
    ("002_column", "ALTER TABLE t ADD COLUMN y VARCHAR"),  # needs 001 first
    ("003_row", "INSERT INTO t VALUES (1, 'one'); CREATE INDEX t_x ON t (x)"),  # two statements, needs 002
]


@pytest.fixture
def con():
    c = duckdb.connect(":memory:")
    yield c
    c.close()


# --- the runner --------------------------------------------------------------------------------------------


def test_applies_in_order_and_records_each(con):
    assert migrations.apply(con, STEPS, table="schema_log") == ["001_table", "002_column", "003_row"]
    assert con.execute("SELECT x, y FROM t").fetchall() == [(1, "one")]
    assert con.execute("SELECT count(*) FROM schema_log WHERE applied_at IS NULL").fetchone()[0] == 0
    assert migrations.recorded(con, "schema_log") == {"001_table", "002_column", "003_row"}


def test_is_idempotent_and_applies_only_what_was_appended(con):
    migrations.apply(con, STEPS[:2], table="schema_log")
    assert migrations.apply(con, STEPS[:2], table="schema_log") == []
    assert migrations.apply(con, STEPS, table="schema_log") == ["003_row"]
    assert migrations.apply(con, STEPS, table="schema_log") == []
    assert con.execute("SELECT count(*) FROM t").fetchone()[0] == 1  # the insert ran once


def test_a_failing_migration_is_rolled_back_and_not_recorded(con):
    bad = ("004_bad", "ALTER TABLE t ADD COLUMN z INTEGER; SELECT * FROM no_such_table")
    with pytest.raises(duckdb.Error, match="no_such_table"):
        migrations.apply(con, STEPS + [bad], table="schema_log")
    assert migrations.recorded(con, "schema_log") == {"001_table", "002_column", "003_row"}
    assert "z" not in [r[0] for r in con.execute("DESCRIBE t").fetchall()]  # its first statement undone too
    assert migrations.apply(con, STEPS, table="schema_log") == []  # the connection is usable afterwards


def test_a_migration_unknown_to_this_version_is_left_alone(con):
    """A file upgraded by a newer halucheck opens as it always did: the unknown record stays, nothing known is
    applied again, and no error is raised."""
    migrations.apply(con, STEPS, table="schema_log")
    con.execute("INSERT INTO schema_log (name) VALUES ('999_from_a_newer_version')")
    assert migrations.apply(con, STEPS, table="schema_log") == []
    assert "999_from_a_newer_version" in migrations.recorded(con, "schema_log")


def test_recorded_is_none_without_the_table_and_works_read_only(tmp_path):
    db = tmp_path / "x.duckdb"
    with duckdb.connect(str(db)) as c:
        assert migrations.recorded(c, "schema_log") is None
        migrations.apply(c, STEPS[:1], table="schema_log")
    with duckdb.connect(str(db), read_only=True) as c:
        assert migrations.recorded(c, "schema_log") == {"001_table"}


def test_the_table_name_must_be_a_plain_identifier(con):
    with pytest.raises(ValueError, match="table name"):
        migrations.apply(con, STEPS, table="log; DROP TABLE t")


def test_the_runner_imports_no_halucheck_module():
    tree = ast.parse(Path(migrations.__file__).read_text())
    imported = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    imported += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert not [m for m in imported if m.startswith("halucheck")], imported


# --- the run database --------------------------------------------------------------------------------------


def old_run_migrate(con, steps):
    """The run database's runner as it was before halucheck.store.migrations: its table, its SQL."""
    con.execute(
        "CREATE TABLE IF NOT EXISTS migrations (name VARCHAR PRIMARY KEY, applied_at TIMESTAMP "
        "DEFAULT current_timestamp)"
    )
    for name, sql in steps:
        con.execute("BEGIN")
        con.execute(sql)
        con.execute("INSERT INTO migrations (name) VALUES (?)", [name])
        con.execute("COMMIT")


def columns(con, table):
    return {r[0] for r in con.execute(f"DESCRIBE {table}").fetchall()}


@pytest.mark.parametrize("made_with", [len(RUN_MIGRATIONS) - 1, len(RUN_MIGRATIONS)])
def test_run_database_made_before_keeps_opening_and_upgrades(tmp_path, made_with):
    db = tmp_path / "run.duckdb"
    with duckdb.connect(str(db)) as c:
        old_run_migrate(c, RUN_MIGRATIONS[:made_with])
        c.execute("INSERT INTO meta VALUES ('marker', 'kept')")
    store = RunStore(db)
    try:
        assert store.get_meta("marker") == "kept"
        got = [r[0] for r in store.con.execute("SELECT name FROM migrations").fetchall()]
        assert sorted(got) == sorted(name for name, _ in RUN_MIGRATIONS)
        assert {"verifier", "p_factual"} <= columns(store.con, "turns")  # added by 004 and 002
    finally:
        store.close()
    store = RunStore(db)  # and again, with nothing left to apply
    store.close()


def test_run_database_with_a_newer_migration_opens_as_before(tmp_path):
    db = tmp_path / "run.duckdb"
    RunStore(db).close()
    with duckdb.connect(str(db)) as c:
        c.execute("INSERT INTO migrations (name) VALUES ('999_from_a_newer_version')")
    store = RunStore(db)
    try:
        got = {r[0] for r in store.con.execute("SELECT name FROM migrations").fetchall()}
        assert got == {name for name, _ in RUN_MIGRATIONS} | {"999_from_a_newer_version"}
    finally:
        store.close()


# --- the corpus index --------------------------------------------------------------------------------------


def old_index_migrate(con, steps):
    """The index's runner as it was before halucheck.store.migrations: its table (no default), one statement at a
    time, its INSERT."""
    con.execute("CREATE TABLE IF NOT EXISTS index_migrations (name VARCHAR PRIMARY KEY, applied_at TIMESTAMP)")
    for name, sql in steps:
        con.execute("BEGIN")
        for stmt in filter(str.strip, sql.split(";")):
            con.execute(stmt)
        con.execute("INSERT INTO index_migrations VALUES (?, now())", [name])
        con.execute("COMMIT")


@pytest.fixture
def corpus(tmp_path):
    root = tmp_path / "docs"
    root.mkdir()
    (root / "a.txt").write_text("The Eiffel Tower is in Paris. It opened in 1889.")
    return root


def test_index_made_before_keeps_opening_and_builds(tmp_path, corpus):
    db = tmp_path / "index.duckdb"
    with duckdb.connect(str(db)) as c:
        old_index_migrate(c, index_store.MIGRATIONS)
    report = build_index(corpus, db, embedder=FakeEmbedder(), progress=False)
    assert report.documents == 1 and report.chunks >= 1
    with Index.open(db, embedder=FakeEmbedder()) as index:
        assert index.search("Eiffel Tower", k=1, mode="bm25")[0].source.endswith("a.txt")
    with duckdb.connect(str(db), read_only=True) as c:
        got = [r[0] for r in c.execute("SELECT name FROM index_migrations").fetchall()]
    assert got == [name for name, _ in index_store.MIGRATIONS]


def test_index_missing_a_migration_is_the_older_version_error_when_read_only(tmp_path, corpus):
    db = tmp_path / "index.duckdb"
    build_index(corpus, db, embedder=FakeEmbedder(), progress=False)
    with duckdb.connect(str(db)) as c:
        c.execute("DELETE FROM index_migrations")
    with pytest.raises(InputError, match="built by an older halucheck; update it with `halucheck index DIR"):
        Index.open(db)


def test_index_with_a_newer_migration_opens_as_before(tmp_path, corpus):
    db = tmp_path / "index.duckdb"
    build_index(corpus, db, embedder=FakeEmbedder(), progress=False)
    with duckdb.connect(str(db)) as c:
        c.execute("INSERT INTO index_migrations VALUES ('m999_from_a_newer_version', now())")
    with Index.open(db, embedder=FakeEmbedder()) as index:
        assert index.stats()["documents"] == 1
    assert build_index(corpus, db, embedder=FakeEmbedder(), progress=False).unchanged == 1
