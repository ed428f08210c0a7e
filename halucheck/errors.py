"""Errors a user can act on. The CLI prints any HalucheckError as one line and exits 1."""


class HalucheckError(Exception):
    """Base class: the message says what went wrong and how to fix it."""


class ConfigError(HalucheckError):
    """models.yaml, a profile or a flag is wrong."""


class InputError(HalucheckError):
    """A user-supplied input (claim, file, line) is unusable."""


class ModelNotInstalled(HalucheckError):
    """The weights a profile needs are not on this machine."""


class EngineError(HalucheckError):
    """An engine could not be started or reached (server down, library missing)."""


class DiskError(HalucheckError):
    """A file could not be written: the disk is full, or the folder is read-only."""


# how the OS and DuckDB say it (DuckDB passes the OS's words on: 'Could not write file "x": No space left ...')
_FULL = ("No space left on device", "Disk quota exceeded")
_READ_ONLY = ("Read-only file system", "Permission denied", "Operation not permitted")


def disk_problem(exc: BaseException) -> str | None:
    """``"full"`` or ``"read-only"`` when ``exc`` says a write was refused for that reason, else None."""
    import errno

    if isinstance(exc, OSError) and exc.errno is not None:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return "full"
        if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            return "read-only"
    text = str(exc)
    if any(words in text for words in _FULL):
        return "full"
    if any(words in text for words in _READ_ONLY):
        return "read-only"
    return None
