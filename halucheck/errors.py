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
