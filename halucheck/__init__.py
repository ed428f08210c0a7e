"""halucheck: a local-first, offline hallucination checker for LLM output."""

__version__ = "0.1.0"
