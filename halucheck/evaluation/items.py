"""The record every dataset loader yields, the dev/test rule, and where the dataset files are.

Every loader yields :class:`EvalItem` records with ``label=True`` meaning *hallucinated / not
factual*, whatever the source file's own convention. The dev/test rule of ``datasets/SPLITS.md``
(:func:`split_of`): a record's 0-based position in its file, ``position % 5 == 4`` is test, every other
position is dev. The dataset folder is ``$HALUCHECK_DATASETS`` if set, else the first ``shared/datasets``
folder found walking up from the current directory and from this package's location; the small readers
here (a set's folder, its files, JSONL, Python-repr fields) are shared by every loader.
"""

from __future__ import annotations

import ast
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from halucheck.config import env
from halucheck.errors import InputError

ENV_VAR = "HALUCHECK_DATASETS"


@dataclass
class EvalItem:
    """One labeled example: the text to verify, its gold label and where it came from.

    ``id`` is stable across runs (``"<dataset>:<position>[:<sub-index>]"``); ``group`` names the
    response (or source record) it belongs to, so bootstrap resampling and the split keep claims of
    one response together. ``label`` is True when the text is hallucinated / not factual.
    """

    id: str
    dataset: str
    claim: str
    label: bool
    group: str
    position: int
    question: str | None = None
    answer: str | None = None
    response: str | None = None
    evidence: list[str] = field(default_factory=list)
    meta: dict = field(default_factory=dict)

    @property
    def split(self) -> str:
        """``"test"`` or ``"dev"`` by the SPLITS.md rule on the record's position."""
        return split_of(self.position)


def split_of(position: int) -> str:
    """The SPLITS.md rule: 0-based position % 5 == 4 -> test, else dev."""
    return "test" if position % 5 == 4 else "dev"


# ---------------------------------------------------------------- locating the data


def _candidates() -> Iterator[Path]:
    seen: set[Path] = set()
    for start in (Path.cwd(), Path(__file__).resolve().parent):
        for d in (start, *start.parents):
            if d not in seen:
                seen.add(d)
                yield d / "shared" / "datasets"


def dataset_root(root: str | os.PathLike | None = None) -> Path:
    """The folder holding the dataset sub-folders (``factool/``, ``wice/``, ...).

    Order: the ``root`` argument, ``$HALUCHECK_DATASETS``, then the first ``shared/datasets`` found
    walking up from the working directory and from the installed package.
    Raises :class:`InputError` when none exists.
    """
    explicit = root if root is not None else env(ENV_VAR)
    if explicit:
        p = Path(explicit).expanduser()
        if not p.is_dir():
            raise InputError(f"dataset folder {p} does not exist; set ${ENV_VAR} to the folder holding factool/, wice/, halueval/, ...")
        return p
    for p in _candidates():
        if p.is_dir():
            return p
    raise InputError(
        f"dataset folder not found: no shared/datasets above {Path.cwd()}; set ${ENV_VAR} to the folder holding factool/, wice/, halueval/, ..."
    )


def dataset_folder(root: Path, sub: str) -> Path:
    """The folder ``sub`` of the datasets root; an InputError saying how to provide it when missing."""
    p = root / sub
    if not p.is_dir():
        raise InputError(f"dataset folder {p} is missing; copy it there or set ${ENV_VAR} to a folder that has {sub}/")
    return p


def read_jsonl(path: Path) -> list[dict]:
    """The records of a JSONL file (blank lines skipped)."""
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def maybe_literal(value):
    """``value``, or the list or dict a Python-repr string holds (some upstream files store them so)."""
    if isinstance(value, str):
        try:
            return ast.literal_eval(value)
        except (ValueError, SyntaxError):
            return value
    return value


def dataset_files(root: Path, sub: str, pattern: str) -> list[Path]:
    """The files of ``sub/`` that match ``pattern``, in alphabetical order of their path in it (each file's
    positions are counted apart)."""
    folder = dataset_folder(root, sub)
    paths = sorted(folder.glob(pattern), key=lambda p: p.relative_to(folder).as_posix())
    if not paths:
        raise InputError(f"no {pattern} in {folder}; copy the set's files there or set ${ENV_VAR} to a folder that has {sub}/{pattern}")
    return paths


__all__ = ["ENV_VAR", "EvalItem", "dataset_files", "dataset_folder", "dataset_root", "maybe_literal", "read_jsonl", "split_of"]
