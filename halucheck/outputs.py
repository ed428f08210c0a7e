"""What halucheck writes, and the mark that keeps it out of every corpus.

Every folder halucheck makes to write into (a run's ``--out``, an eval run's folder, the cache of corpus
indexes, an index's BM25 folder) holds the marker file :data:`MARKER`. :func:`halucheck.ingest.iter_files`
never reads a folder that holds it, so a run folder left inside the corpus (``runs/<name>`` made from the
corpus folder) never becomes evidence: its report quotes the claims it checked word for word.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from halucheck.errors import InputError

if TYPE_CHECKING:
    from halucheck.config import RunOptions

MARKER = ".halucheck-output"
_TEXT = ("This folder was written by halucheck. `halucheck index` and `run --corpus` never read a folder\n"
         "holding this file as corpus: its reports quote the claims they checked.\n")

RUN_DB = "run.duckdb"
# the files `halucheck run` writes in its --out folder (an input may be none of them)
RUN_FILES = (RUN_DB, RUN_DB + ".wal", "results.jsonl", "results.jsonl.tmp", "report.html", "report.html.tmp")


def mark(folder: str | os.PathLike) -> None:
    """Make ``folder`` (and its parents) if missing and put the marker in it. OSError as the OS says it (the
    caller turns a full disk or a read-only folder into its one line)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / MARKER
    if not marker.is_file():
        marker.write_text(_TEXT, encoding="utf-8")


def is_marked(folder: str | os.PathLike) -> bool:
    """Whether halucheck wrote ``folder`` (it holds the marker)."""
    return (Path(folder) / MARKER).is_file()


def run_files(out: str | os.PathLike) -> list[Path]:
    """The files a run with ``--out out`` writes, resolved: :data:`RUN_FILES` and the further pages of its HTML
    report there (``report-N.html``, see :func:`halucheck.reports.page_name`)."""
    import re

    out = Path(out).expanduser().resolve()
    pages = sorted(p for p in out.glob("report-*.html*") if re.fullmatch(r"report-\d+\.html(\.tmp)?", p.name)) \
        if out.is_dir() else []
    return [out / name for name in RUN_FILES] + pages


def same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Whether ``a`` and ``b`` are one file: the same resolved path, or (both existing) the same inode."""
    a, b = Path(a).expanduser(), Path(b).expanduser()
    try:
        if a.resolve() == b.resolve():
            return True
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def check_paths(opts: "RunOptions") -> None:
    """Refuse a run that would read what it writes: an --out that is the corpus folder or holds it (its
    reports would be read as evidence), an input that is one of the files the run writes."""
    out = opts.out.expanduser().resolve()
    if opts.corpus is not None:
        corpus = Path(opts.corpus).expanduser().resolve()
        if corpus == out or corpus.is_relative_to(out):
            raise InputError(
                f"--out {opts.out} {'is' if corpus == out else 'holds'} the corpus folder {corpus}: the run's reports "
                "would be read as evidence; choose an --out outside it (a folder inside the corpus is fine: it is "
                "never read as corpus)")
    for path in run_files(out):
        if same_file(opts.input, path):
            raise InputError(
                f"--input {opts.input} is the file {path.name} that this run writes in --out {opts.out}; it would "
                "be overwritten: choose another --out, or keep the answers under another name")


def mark_run_folder(out: Path) -> None:
    """Put halucheck's marker in the run folder (:mod:`halucheck.outputs`): no corpus ever reads it. A folder
    that cannot be written is left as it is: writing the reports there says so in one line."""
    try:
        mark(out)
    except OSError:
        pass
