"""halucheck: a local-first, offline hallucination checker for LLM output."""

import os

# CPU inference: OpenMP threads sleep instead of spinning between small ops (spinning threads on few cores
# stall each other). It only takes effect if set before torch is first imported, whoever imports it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.1.0"
