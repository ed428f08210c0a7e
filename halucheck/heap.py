"""Objects loaded once and kept while the process lives (the embedding model with torch, the names of a corpus's
documents: hundreds of thousands of Python objects) are taken out of the cyclic garbage collector's full passes.
Each such pass reads every object of the process again: 0.15–0.25 s at 100,000 passages with the embedding model
loaded, several times a minute in a run, about a sixth of the run's own CPU after its start-up
(docs/scale.md, "The orchestrator's CPU an answer")."""

from __future__ import annotations

import gc


def keep() -> None:
    """Just loaded something kept for good: the garbage of now collected, every object left is frozen
    (:func:`gc.freeze`), so that the collector's passes skip them from now on. A frozen object is still freed
    when nothing refers to it any more; only a reference cycle among frozen objects, dropped later, stays in
    memory until the process ends."""
    gc.collect()
    gc.freeze()
