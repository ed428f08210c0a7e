"""The disk says no: a full disk, a read-only --out, Ctrl-C in `index`. Each ends in one line that says
what happened and what to do, never a traceback, never an invitation to throw a good run away; the work
(and the cost of it) recorded before stays, and the same command again resumes."""

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from faults import echo
from halucheck import engines, pipeline
from halucheck.cli import app
from halucheck.engines.fake import FakeEngine
from halucheck.store import runstore
from halucheck.store.runstore import RunStore

TESTS = Path(__file__).resolve().parent
runner = CliRunner()
ANSWERS = [{"id": f"a{i}", "answer": f"Tower {i} is in Paris. It opened in {1800 + i}."} for i in range(8)]
IS_ROOT = os.geteuid() == 0
BWRAP = shutil.which("bwrap")


@pytest.fixture
def scripted():
    engines.register("scripted", lambda model="", **kw: FakeEngine(responder=echo, max_batch=4))


def setup_run(tmp_path, out="out"):
    src = tmp_path / "answers.jsonl"
    src.write_text("".join(json.dumps(a) + "\n" for a in ANSWERS))
    cfg = tmp_path / "models.yaml"
    cfg.write_text("profiles:\n  s:\n    engine: scripted\n")
    return ["run", "-i", str(src), "-o", str(tmp_path / out), "--quiet", "--config", str(cfg),
            "--min-rounds", "1", "--max-rounds", "1"]


def one_error_line(result) -> str:
    """The one line a failed command printed (a machine without bubblewrap prints a note first)."""
    lines = result.stderr.strip().splitlines()
    assert "Traceback" not in result.stderr, result.stderr
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1 and lines[-1] == errors[0], result.stderr
    return errors[0]


def assert_keeps_the_run(line: str) -> None:
    low = line.lower()
    assert "damaged" not in low and "--restart" not in low and "delete" not in low, line


def totals(db) -> dict:
    store = RunStore(db)
    try:
        return {stage: (c.llm_calls, c.prompt_tokens, c.completion_tokens) for stage, c in store.stage_totals().items()}
    finally:
        store.close()


def results(out) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def disk_full_at_verdicts(monkeypatch, when: int) -> None:
    """The ``when``-th transaction writing verdicts fails as DuckDB's does on a full disk: the commit
    cannot write the WAL, and DuckDB has rolled the transaction back by the time it says so."""
    original = runstore.Rows.insert
    seen = [0]

    def insert(self, con):
        original(self, con)
        if self.table == "verdicts" and self.rows:
            seen[0] += 1
            if seen[0] == when:
                con.execute("ROLLBACK")
                raise duckdb.TransactionException(
                    'TransactionContext Error: Failed to commit: Could not write file "run.duckdb.wal": '
                    "No space left on device")

    monkeypatch.setattr(runstore.Rows, "insert", insert)


def test_disk_full_in_the_run_database_is_one_line_and_the_costs_survive_a_resume(tmp_path, scripted, monkeypatch):
    monkeypatch.setattr(pipeline, "VERDICT_BATCH", 2)  # verdicts are written a few at a time
    clean_args = setup_run(tmp_path, "clean")
    assert runner.invoke(app, clean_args).exit_code == 0
    args = setup_run(tmp_path)
    with monkeypatch.context() as patch:
        disk_full_at_verdicts(patch, when=3)
        r = runner.invoke(app, args)
    assert r.exit_code == 1
    line = one_error_line(r)
    assert "no space left" in line.lower() and "free" in line and "same command again" in line, line
    assert_keeps_the_run(line)
    r = runner.invoke(app, args)  # space freed: the same command resumes
    assert r.exit_code == 0, r.output
    assert results(tmp_path / "out") == results(tmp_path / "clean")
    # every LLM call of the crashed run whose reply was kept is in the cost table: together with the
    # resumed run's, exactly what one uninterrupted run spends
    assert totals(tmp_path / "out" / "run.duckdb") == totals(tmp_path / "clean" / "run.duckdb")


def test_disk_full_while_writing_the_reports_is_one_line_and_leaves_no_temp_file(tmp_path, scripted, monkeypatch):
    args = setup_run(tmp_path)
    real_replace = os.replace

    def replace(src, dst, *a, **k):
        if str(dst).endswith("report.html"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_replace(src, dst, *a, **k)

    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", replace)
        r = runner.invoke(app, args)
    assert r.exit_code == 1
    line = one_error_line(r)
    assert "no space left" in line.lower() and "free" in line and "report.html" in line, line
    assert_keeps_the_run(line)
    assert sorted(p.name for p in (tmp_path / "out").iterdir() if p.name.endswith(".tmp")) == []
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    assert (tmp_path / "out" / "report.html").is_file()


def test_a_failed_write_of_results_removes_its_temp_file(tmp_path, scripted, monkeypatch):
    args = setup_run(tmp_path)
    assert runner.invoke(app, args).exit_code == 0
    real_open = open

    def failing_open(path, mode="r", *a, **k):
        handle = real_open(path, mode, *a, **k)
        if str(path).endswith(".jsonl.tmp") and "w" in mode:
            handle.close()
            raise OSError(errno.ENOSPC, "No space left on device")
        return handle

    monkeypatch.setattr("builtins.open", failing_open)
    r = runner.invoke(app, ["report", str(tmp_path / "out")])
    monkeypatch.undo()
    assert r.exit_code == 1
    assert "no space left" in one_error_line(r).lower()
    assert not (tmp_path / "out" / "results.jsonl.tmp").exists()


# -- a read-only --out -------------------------------------------------------------------------------------------


def run_read_only(folder: Path, args: list[str]) -> subprocess.CompletedProcess:
    """`halucheck ARGS` in a subprocess that cannot write ``folder``: its permissions taken away, or, for
    root (whom permissions do not stop), ``folder`` mounted read-only by bubblewrap."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from faults import register_echo; "
            "register_echo('scripted'); from halucheck.cli import app; app(sys.argv[2:], prog_name='halucheck')")
    argv = [sys.executable, "-c", code, str(TESTS), *args]
    if IS_ROOT:
        argv = [BWRAP, "--dev-bind", "/", "/", "--ro-bind", str(folder), str(folder), *argv]
        return subprocess.run(argv, capture_output=True, text=True, timeout=120)
    modes = {p: p.stat().st_mode for p in [folder, *folder.rglob("*")]}
    for p in modes:
        p.chmod(0o555 if p.is_dir() else 0o444)
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=120)
    finally:
        for p, mode in modes.items():
            p.chmod(mode)


def can_be_made_read_only(tmp_path) -> bool:
    if not IS_ROOT:
        return True
    return BWRAP is not None and subprocess.run(
        [BWRAP, "--dev-bind", "/", "/", "--ro-bind", str(tmp_path), str(tmp_path), "true"]).returncode == 0


def test_a_finished_run_on_a_read_only_disk_is_never_called_damaged(tmp_path, scripted):
    if not can_be_made_read_only(tmp_path):
        pytest.skip("running as root without a working bwrap: no way to make a folder read-only here")
    args = setup_run(tmp_path)
    assert runner.invoke(app, args).exit_code == 0
    out = tmp_path / "out"
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    r = run_read_only(out, args[:1] + ["-i", args[2], "-o", str(out)] + args[5:])
    assert r.returncode == 1, r.stderr
    line = one_error_line(r)
    assert "read-only" in line and "writable" in line, line
    assert_keeps_the_run(line)
    r = run_read_only(out, ["report", str(out)])
    assert r.returncode == 1, r.stderr
    line = one_error_line(r)
    assert "read-only" in line and "writable" in line, line
    assert_keeps_the_run(line)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_a_new_run_in_a_read_only_folder_is_one_line(tmp_path, scripted):
    if not can_be_made_read_only(tmp_path):
        pytest.skip("running as root without a working bwrap: no way to make a folder read-only here")
    args = setup_run(tmp_path)
    locked = tmp_path / "locked"
    locked.mkdir()
    for out in (locked, locked / "new"):  # the folder itself, and a folder to be made in it
        r = run_read_only(locked, args[:3] + ["-o", str(out)] + args[5:])
        assert r.returncode == 1, r.stderr
        line = one_error_line(r)
        assert "read-only" in line and "writable --out" in line, line
        assert_keeps_the_run(line)


# -- Ctrl-C in `halucheck index` -----------------------------------------------------------------------------------


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt(), RuntimeError("Query interrupted"),
                                       duckdb.InterruptException("INTERRUPT Error: Interrupted!")],
                         ids=["python", "duckdb-query", "duckdb-interrupt"])
def test_ctrl_c_in_index_is_one_line_and_exit_130(tmp_path, monkeypatch, interrupt):
    from halucheck.retrieval import build

    corpus = tmp_path / "docs"
    corpus.mkdir()
    (corpus / "a.txt").write_text("Varenholt Instruments was founded in 1901 in Oslo.\n")

    def stopped(*a, **k):
        raise interrupt

    monkeypatch.setattr(build, "_scan", stopped)
    r = runner.invoke(app, ["index", str(corpus), "--db", str(tmp_path / "ix.duckdb"), "--embed-model", "fake"])
    assert r.exit_code == 130
    assert r.stderr.strip() == "error: interrupted; run the same command again to finish the index"


def test_sigint_during_a_real_index_build_is_one_line(tmp_path):
    corpus = tmp_path / "docs"
    corpus.mkdir()
    for i in range(400):
        (corpus / f"d{i}.txt").write_text(f"Document {i} says tower {i} was built in {1500 + i}. It is tall.\n")
    db = tmp_path / "ix.duckdb"
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; from halucheck.cli import app; app(sys.argv[1:], prog_name='halucheck')",
         "index", str(corpus), "--db", str(db), "--embed-model", "fake"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    building = db.with_name(db.name + ".building")  # a new index is built there, then moved to db
    while not (building.exists() or db.exists()) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    if proc.returncode == 0:
        pytest.skip("the build finished before the signal came")
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == "error: interrupted; run the same command again to finish the index"


def test_disk_full_while_indexing_leaves_no_index_file_and_says_so(tmp_path, monkeypatch):
    """A full disk during the first build of a corpus index used to leave a 0-byte index that broke every later
    `run`, `index` and `search` on that corpus until deleted by hand."""
    from halucheck.config import index_path
    from halucheck.retrieval import build

    monkeypatch.setenv("HALUCHECK_EMBED_MODEL", "fake")
    monkeypatch.setenv("HALUCHECK_HOME", str(tmp_path / "home"))
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "tower.txt").write_text("The Eiffel Tower stands in Paris. It opened in 1889.")
    original = build._Pending.flush

    def full(self):
        raise duckdb.IOException('Could not write file "x.duckdb": No space left on device')

    monkeypatch.setattr(build._Pending, "flush", full)
    r = runner.invoke(app, ["index", str(corpus)])
    err = one_error_line(r)
    assert r.exit_code == 1 and "no space left on the disk of the index" in err and "free some space" in err
    assert "delete" not in err.lower() and not index_path(corpus).exists()
    monkeypatch.setattr(build._Pending, "flush", original)
    r = runner.invoke(app, ["search", "Eiffel Tower", "--corpus", str(corpus), "--mode", "bm25"])
    assert r.exit_code == 0 and "tower.txt" in r.stdout, r.output
    assert not [p for p in index_path(corpus).parent.iterdir() if p.name.endswith(".building")]

    # an index of halucheck's own cache that cannot be read (a 0-byte file an older version left) is made again
    index_path(corpus).write_bytes(b"")
    r = runner.invoke(app, ["search", "Eiffel Tower", "--corpus", str(corpus), "--mode", "bm25"])
    assert r.exit_code == 0 and "tower.txt" in r.stdout and "building it again" in r.stderr, r.output
    # a file the user named is theirs: never replaced, and no advice to delete it
    mine = tmp_path / "mine.duckdb"
    mine.write_text("my notes\n")
    for args in (["index", str(corpus), "--db", str(mine)], ["search", "Paris", "--db", str(mine)]):
        r = runner.invoke(app, args)
        err = one_error_line(r)
        assert r.exit_code == 1 and str(mine) in err and "pass another --db" in err and "delete" not in err.lower()
    assert mine.read_text() == "my notes\n"
