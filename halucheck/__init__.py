"""halucheck: a local-first, offline hallucination checker for LLM output."""

import os

# CPU inference: OpenMP threads sleep instead of spinning between small ops (spinning threads on few cores
# stall each other). It only takes effect if set before torch is first imported, whoever imports it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.1.0"

# The Python API (halucheck/checker.py), imported on first use: `import halucheck` stays cheap.
_API = ("AnswerResult", "Checker", "ClaimVerdict", "RunResult")
__all__ = [*_API, "__version__"]


def __getattr__(name: str):
    if name in _API:
        from halucheck import checker

        return getattr(checker, name)
    raise AttributeError(f"module 'halucheck' has no attribute {name!r}")
