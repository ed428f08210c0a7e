"""Why a run database cannot be used, each said in one line a user can act on: another process holds it,
it is damaged, it is not a DuckDB file, or its disk is full or read-only. DuckDB's own words are read
here; :class:`halucheck.store.runstore.RunStore` decides when to raise what these make."""

from __future__ import annotations

import re
from pathlib import Path

from halucheck.errors import DiskError, HalucheckError, disk_problem


class RunStoreError(HalucheckError):
    """The run database cannot be used: in use by another process, or damaged."""


class RunStoreDiskError(RunStoreError, DiskError):
    """The run database cannot be written: its disk is full or its folder read-only."""


def first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]


def in_use(exc: BaseException) -> bool:
    """DuckDB's words for a file another process holds (a path may well contain the word "lock")."""
    return "Could not set lock" in str(exc) or "Conflicting lock" in str(exc)


def could_be_duckdb(path: Path) -> bool:
    """Whether ``path`` may be a DuckDB file, perhaps damaged: empty, DuckDB's magic bytes at offset 8, or a
    head overwritten with zeros. Anything else (text, SQLite, ...) is someone else's file."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return True  # the open that failed says why
    return not head or head[8:12] == b"DUCK" or not head.strip(b"\0")


def is_damage(exc: BaseException) -> bool:
    """DuckDB's signs of a truncated or overwritten file (as opposed to a mistake in our own SQL)."""
    import duckdb

    text = str(exc)
    return isinstance(exc, duckdb.IOException) or any(
        s in text for s in ("Corrupt database", "checksum", "not a valid DuckDB", "Could not read enough bytes"))


def in_use_error(path: Path, exc: BaseException) -> RunStoreError:
    """Another process holds ``path`` open to write (DuckDB names its PID when it can)."""
    pid = re.search(r"PID (\d+)", str(exc))
    return RunStoreError(
        f"run database {path} is in use by another halucheck process"
        f"{f' (PID {pid.group(1)})' if pid else ''}; wait for it to finish or stop it, "
        "then run again (a run in progress is never discarded, not even by --restart)"
    )


def foreign(path: Path, why: str) -> RunStoreError:
    """``path`` is a file halucheck did not make (``why``): it is left as it is."""
    return RunStoreError(
        f"{path} is not a run database halucheck made ({why}); halucheck writes nothing into it and "
        f"--restart does not empty it: choose another --out, or keep that file under another name")


def damaged(path: Path, exc: BaseException) -> RunStoreError:
    return RunStoreError(
        f"run database {path} is damaged or not a run database ({first_line(exc)}); "
        "run again with --restart to start this run over, or use another --out"
    )


def disk_failure(path: Path, exc: BaseException) -> RunStoreDiskError | None:
    """The one-line error for ``exc`` when it says the disk of ``path`` is full or read-only, else None."""
    problem = disk_problem(exc)
    folder = path.parent
    if problem == "full":
        return RunStoreDiskError(
            f"no space left on the disk of {path} ({first_line(exc)}); free some space, then run the "
            "same command again: the run resumes where it stopped, with everything written so far")
    if problem == "read-only" and not folder.is_dir():
        return RunStoreDiskError(f"cannot make the run folder {folder} ({first_line(exc)}): the folder it goes "
                                 "in is read-only; choose a writable --out")
    if problem == "read-only":
        keep = f" (a copy of {folder} there resumes the run in it)" if path.is_file() else ""
        return RunStoreDiskError(
            f"run database {path} cannot be written ({first_line(exc)}): {folder} is read-only; make "
            f"it writable and run the same command again, or choose a writable --out{keep}")
    return None


__all__ = ["RunStoreDiskError", "RunStoreError", "could_be_duckdb", "damaged", "disk_failure", "first_line",
           "foreign", "in_use", "in_use_error", "is_damage"]
