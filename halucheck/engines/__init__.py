"""Engine registry: backends registered by name and imported only when used, so ``--help`` and the
fake engine never load torch or vLLM."""

from __future__ import annotations

from typing import Any, Callable

from halucheck.engines.base import Engine, Request, Result, SamplingParams, validate_reply
from halucheck.registry import Registry

# name -> "module:Class" (lazy) or a factory callable (registered at run time, e.g. by tests)
ENGINES: Registry[Callable[..., Engine]] = Registry("engine", hint=" (the `engine:` of a profile in models.yaml)")
ENGINES.register("transformers", "halucheck.engines.transformers:TransformersEngine")
ENGINES.register("vllm", "halucheck.engines.openai_server:OpenAIServerEngine")
ENGINES.register("vllm-local", "halucheck.engines.vllm_local:VLLMLocalEngine")
ENGINES.register("fake", "halucheck.engines.fake:FakeEngine")

register = ENGINES.register


def available() -> list[str]:
    return sorted(ENGINES)


def engine_class(name: str) -> Callable[..., Engine]:
    """Resolve an engine name to its class, importing its module only now."""
    return ENGINES[name]


def create_engine(name: str, model: str = "", **options: Any) -> Engine:
    """Instantiate the engine ``name`` for ``model`` with profile ``options``."""
    return engine_class(name)(model=model, **options)


__all__ = [
    "ENGINES",
    "Engine",
    "Request",
    "Result",
    "SamplingParams",
    "available",
    "create_engine",
    "engine_class",
    "register",
    "validate_reply",
]
