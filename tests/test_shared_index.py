"""Several processes on one corpus index: runs and searches only read it, so they share it; a rebuild
needs it alone, waits briefly for it, then says it is in use; a half-built index is never searched."""

import os
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from halucheck.cli import app
from halucheck.errors import InputError
from halucheck.evidence import EvidenceSources
from halucheck.retrieval import Index, build_index, get_embedder
from halucheck.retrieval import index_db as index_store

runner = CliRunner()

# what a run does with its corpus: bring the index up to date, open it, search it, and keep it open
HOLD = """
import sys
from pathlib import Path
from halucheck.evidence import EvidenceSources
sources = EvidenceSources(Path(sys.argv[1]), Path(sys.argv[2]), top_k=2, log=lambda m: None)
assert sources.corpus().search("Oslo", k=1)
print("holding", flush=True)
sys.stdin.read()
sources.close()
"""


@pytest.fixture
def corpus(tmp_path, monkeypatch):
    monkeypatch.setenv("HALUCHECK_EMBED_MODEL", "fake")  # hash embeddings, in this process and the holder's
    get_embedder.cache_clear()
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "founding.txt").write_text("Varenholt Instruments was founded in 1901 in Oslo.\n")
    (docs / "products.txt").write_text("The AquaProbe 3 weighs 410 grams.\n")
    db = tmp_path / "ix.duckdb"
    build_index(docs, db, progress=False)
    yield docs, db
    get_embedder.cache_clear()


@pytest.fixture
def holder(corpus):
    """Another process that holds the index as a run does, until the test ends."""
    docs, db = corpus
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(docs), str(db)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "HALUCHECK_EMBED_MODEL": "fake"})
    try:
        assert proc.stdout.readline().strip() == "holding"
        yield proc
    finally:
        proc.communicate("", timeout=60)
    assert proc.returncode == 0


def test_two_runs_and_a_search_share_a_corpus_index(corpus, holder):
    docs, db = corpus
    second = EvidenceSources(docs, db, top_k=2, log=lambda m: None)  # a second run on the same corpus
    try:
        assert [h.source for h in second.corpus().search("Oslo", k=1)] == [str(docs / "founding.txt")]
    finally:
        second.close()
    res = runner.invoke(app, ["search", "AquaProbe", "--corpus", str(docs), "--db", str(db), "-k", "1"])
    assert res.exit_code == 0, res.output
    assert "products.txt" in res.output
    res = runner.invoke(app, ["index", str(docs), "--db", str(db)])  # nothing changed: nothing to write
    assert res.exit_code == 0, res.output
    assert "0 added, 0 changed, 0 removed, 2 unchanged" in res.output


def test_a_rebuild_while_a_run_reads_says_the_index_is_in_use(corpus, holder, monkeypatch):
    docs, db = corpus
    monkeypatch.setattr(index_store, "LOCK_WAIT_S", 0.5)
    (docs / "staff.txt").write_text("Varenholt employs 340 people in Tampere.\n")
    t0 = time.monotonic()
    res = runner.invoke(app, ["index", str(docs), "--db", str(db)])
    assert res.exit_code == 1
    [line] = res.stderr.strip().splitlines()
    assert line.startswith("error: ") and "in use by another process" in line and "same command again" in line
    assert "delete" not in line.lower()
    assert time.monotonic() - t0 >= 0.5  # it waited before giving up
    # the reader's index was left as it was, complete
    with Index.open(db) as index:
        assert index.stats()["files"] == 2


def test_a_rebuild_waits_briefly_for_a_reader_to_finish(corpus):
    docs, db = corpus
    (docs / "staff.txt").write_text("Varenholt employs 340 people in Tampere.\n")
    reader = subprocess.Popen(
        [sys.executable, "-c", "import sys, time, duckdb; c = duckdb.connect(sys.argv[1], read_only=True); "
         "print('open', flush=True); time.sleep(1.0); c.close()", str(db)], stdout=subprocess.PIPE, text=True)
    try:
        assert reader.stdout.readline().strip() == "open"
        report = build_index(docs, db, progress=False)
    finally:
        reader.wait(timeout=30)
    assert report.added == [str(docs / "staff.txt")]
    with Index.open(db) as index:
        assert index.stats()["files"] == 3


def test_a_search_during_a_build_waits_or_says_so_never_reads_it_half_built(corpus, monkeypatch):
    docs, db = corpus
    monkeypatch.setattr(index_store, "LOCK_WAIT_S", 0.3)
    builder = subprocess.Popen(  # a build in progress holds the index alone
        [sys.executable, "-c", "import sys, duckdb; c = duckdb.connect(sys.argv[1]); "
         "c.execute(\"INSERT OR REPLACE INTO meta VALUES ('complete', '0')\"); print('building', flush=True); "
         "sys.stdin.read()", str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert builder.stdout.readline().strip() == "building"
        with pytest.raises(InputError, match="being built or updated by another process") as exc:
            Index.open(db)
        assert "delete" not in str(exc.value).lower()
    finally:
        builder.communicate("", timeout=30)
    with pytest.raises(InputError, match="was not finished"):  # the build stopped half-way
        Index.open(db)


def test_the_same_process_can_read_while_it_asks_for_a_rebuild(corpus, monkeypatch):
    """Two connections of one process: DuckDB refuses a writable one beside a read-only one; that is
    "in use" too, never a damaged index to delete."""
    docs, db = corpus
    monkeypatch.setattr(index_store, "LOCK_WAIT_S", 0.2)
    with Index.open(db):
        assert build_index(docs, db, progress=False).unchanged == 2  # nothing to write: it reads only
        (docs / "staff.txt").write_text("Varenholt employs 340 people in Tampere.\n")
        with pytest.raises(InputError, match="in use") as exc:
            build_index(docs, db, progress=False)
        assert "delete" not in str(exc.value).lower()
