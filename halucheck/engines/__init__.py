"""Engine registry: backends registered by name and imported only when used, so ``--help`` and the
fake engine never load torch or vLLM."""

from __future__ import annotations

import importlib
from typing import Any, Callable

from halucheck.engines.base import Engine, Request, Result, SamplingParams, validate_reply
from halucheck.errors import ConfigError

# name -> "module:Class" (lazy) or a factory callable (registered at run time, e.g. by tests)
_REGISTRY: dict[str, str | Callable[..., Engine]] = {
    "transformers": "halucheck.engines.transformers:TransformersEngine",
    "vllm": "halucheck.engines.openai_server:OpenAIServerEngine",
    "vllm-local": "halucheck.engines.vllm_local:VLLMLocalEngine",
    "fake": "halucheck.engines.fake:FakeEngine",
}


def register(name: str, factory: str | Callable[..., Engine]) -> None:
    """Register an engine under ``name``: a ``"module:Class"`` path or a callable."""
    _REGISTRY[name] = factory


def available() -> list[str]:
    return sorted(_REGISTRY)


def engine_class(name: str) -> Callable[..., Engine]:
    """Resolve an engine name to its class, importing its module only now."""
    try:
        target = _REGISTRY[name]
    except KeyError:
        raise ConfigError(
            f"unknown engine {name!r} in models.yaml; available engines: {', '.join(available())}"
        ) from None
    if callable(target):
        return target
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def create_engine(name: str, model: str = "", **options: Any) -> Engine:
    """Instantiate the engine ``name`` for ``model`` with profile ``options``."""
    return engine_class(name)(model=model, **options)


__all__ = [
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
