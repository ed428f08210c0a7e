"""Where calibrators are kept: saving, loading, listing named ones, and :func:`resolve` (the one a run uses).

Storage: one file per verifier and profile in the user cache,
``user_cache_dir() / "calibration" / "<verifier>--<profile>.json"`` (names percent-encoded), and beside
it any number of named ones, ``<verifier>--<profile>@<name>.json`` (one per kind of data: a map fitted
on one domain's base rate is off for another's). A stored calibrator is applied only to the model it
was fitted on: :func:`load` raises a :class:`~halucheck.errors.ConfigError` otherwise.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from urllib.parse import quote, unquote

from halucheck.config import user_cache_dir
from halucheck.errors import ConfigError
from halucheck.verifiers.calibration.record import Calibrator


def calibration_dir(root: str | os.PathLike | None = None) -> Path:
    """The folder of stored calibrators: ``root``, else ``user_cache_dir() / "calibration"``."""
    return Path(root) if root is not None else user_cache_dir() / "calibration"


def calibration_path(verifier: str, profile: str | None, root: str | os.PathLike | None = None,
                     name: str | None = None) -> Path:
    """``<dir>/<verifier>--<profile>.json``, or ``<verifier>--<profile>@<name>.json`` for a named one; all
    names percent-encoded (``selfcheck,debate`` -> ``selfcheck%2Cdebate``), so any name is one file name
    inside the folder and two names never share a file. No profile (a verifier without a model) is an
    empty one."""
    if not verifier:
        raise ValueError("a calibrator is stored under its verifier's name; none given")
    if name is not None and not str(name).strip():
        raise ValueError("a calibrator's name is empty; give one, e.g. --name medical")
    label = f"@{quote(str(name), safe='')}" if name is not None else ""
    return calibration_dir(root) / f"{quote(str(verifier), safe='')}--{quote(str(profile or ''), safe='')}{label}.json"


def names(verifier: str, profile: str | None, root: str | os.PathLike | None = None) -> list[str]:
    """The names of the calibrators stored for ``verifier`` on ``profile`` (``calibrate --name``), sorted."""
    stem = calibration_path(verifier, profile, root).stem + "@"
    folder = calibration_dir(root)
    found = folder.glob("*.json") if folder.is_dir() else ()
    return sorted(unquote(p.stem[len(stem):]) for p in found if p.stem.startswith(stem))


def save(calibrator: Calibrator, root: str | os.PathLike | None = None) -> Path:
    """Write ``calibrator`` (atomically) to :func:`calibration_path` (under its ``name`` when it has one)
    and return the path; replaces the one stored for the same verifier, profile and name."""
    if not calibrator.verifier:
        raise ValueError("this calibrator has no verifier name; fit it with verifier=... to store it")
    return write_atomic(calibration_path(calibrator.verifier, calibrator.profile, root, calibrator.name),
                        calibrator.to_json())


def write_atomic(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file beside it, so a reader never sees half of it. A cache
    folder that is a file or read-only (``HALUCHECK_HOME``) is one line naming it."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        from halucheck.config import cache_error

        raise (cache_error(path, exc) or exc) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _read(path: Path, what: str) -> Calibrator:
    try:
        return Calibrator.from_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ConfigError(f"calibrator file {path} is unreadable ({e}); run `halucheck calibrate ...` for {what} "
                          "again or delete the file") from None


def _same_model(cal: Calibrator, what: str, model: str | None, path: Path) -> Calibrator:
    if cal.model != model:
        raise ConfigError(f"calibrator for {what} was fitted on model {cal.model}, this run uses model {model}; "
                          f"run `halucheck calibrate ...` again (the stored one is {path})")
    return cal


def load(verifier: str, profile: str | None, model: str | None, root: str | os.PathLike | None = None,
         name: str | None = None) -> Calibrator | None:
    """The stored calibrator of ``verifier`` on ``profile`` (the one called ``name``, when given), or None
    when there is none. A ``name`` asked for and not stored is a :class:`ConfigError` (the user chose it).

    Raises :class:`ConfigError` when the stored one was fitted on another model than ``model`` (it is
    never applied to another model), or when the file is damaged.
    """
    path = calibration_path(verifier, profile, root, name)
    what = f"{verifier}/{profile}" if profile else verifier
    if not path.is_file():
        if name is None:
            return None
        have = names(verifier, profile, root)
        raise ConfigError(f"no calibrator named {name!r} for {what}"
                          + (f" (stored: {', '.join(have)})" if have else " (none is named)")
                          + f"; fit one with `halucheck calibrate ... -v {verifier}"
                          + (f" -p {profile}" if profile else "") + f" --name {name}`, or pass a calibrator file")
    cal = _read(path, what)
    if cal.verifier != verifier or (cal.profile or None) != (profile or None) or cal.name != name:
        raise ConfigError(f"calibrator file {path} holds {cal.verifier}/{cal.profile}"
                          + (f" named {cal.name!r}" if cal.name else "") + f", not {what}; "
                          "run `halucheck calibrate ...` again or delete the file")
    return _same_model(cal, what, model, path)


def load_file(path: str | os.PathLike, verifier: str, model: str | None) -> Calibrator:
    """A calibrator from a file (one `halucheck calibrate` stored or kept with its fitting run), checked to
    be for ``verifier`` and fitted on ``model``; it may have been fitted on another profile of that model
    (its description names the profile)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"calibrator file {path} does not exist; pass a file written by `halucheck calibrate` "
                          "(calibrator.json in its run folder) or a stored calibrator's name")
    cal = _read(path, verifier)
    if cal.verifier != verifier:
        raise ConfigError(f"calibrator file {path} is for verifier {cal.verifier}, this run uses {verifier}; "
                          f"pass one fitted with `halucheck calibrate ... -v {verifier}`")
    return _same_model(cal, verifier, model, path)


SHIPPED = Path(__file__).resolve().parent / "shipped"
"""Calibrators that come with the package, one per verifier and model (``<verifier>--<model>.json``), fitted on dev
data (``scripts/clean_panel.py ship-calibrator``): what a run uses when the user has stored none."""
NONE = "none"
"""``--calibration none``: no calibrator at all, not even the shipped one (the verifier's raw P(hallucinated))."""


def shipped_path(verifier: str, model: str | None) -> Path:
    return SHIPPED / f"{quote(str(verifier), safe='')}--{quote(str(model or ''), safe='')}.json"


def shipped(verifier: str, model: str | None) -> tuple[Calibrator | None, Path | None]:
    """The package's calibrator for ``verifier`` on ``model`` and its path, or ``(None, None)``."""
    path = shipped_path(verifier, model)
    if not model or not path.is_file():
        return None, None
    cal = _read(path, verifier)
    return (cal, path) if cal.verifier == verifier and cal.model == model else (None, None)


def resolve(verifier: str, profile: str | None, model: str | None, choice: str | os.PathLike | None = None,
            root: str | os.PathLike | None = None) -> tuple[Calibrator | None, Path | None]:
    """The calibrator a run uses and where it was read, ``(None, None)`` when there is none: ``choice`` None
    is the stored unnamed one, else the package's for this verifier and model (:func:`shipped`); ``"none"``
    none at all; a path (ending in ``.json`` or holding a folder separator) is a file, read by
    :func:`load_file`; anything else a stored calibrator's name (:func:`load`)."""
    if choice is None:
        cal = load(verifier, profile, model, root)
        return (cal, calibration_path(verifier, profile, root)) if cal else shipped(verifier, model)
    choice = str(choice)
    if choice == NONE:
        return None, None
    if choice.endswith(".json") or "/" in choice or os.sep in choice:
        return load_file(choice, verifier, model), Path(choice)
    return load(verifier, profile, model, root, choice), calibration_path(verifier, profile, root, choice)
