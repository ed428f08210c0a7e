"""Named registries: engines, verifiers, datasets and metrics are each one :class:`Registry`.

An entry is the thing itself or a ``"module:attr"`` path that is imported only when the entry is first
used, so ``--help``, the fake engine and the tests never load torch, vLLM or a dataset parser they do
not need. ``register(name, target)`` adds an entry (also as a decorator); an unknown name is an error
of the registry's own kind that suggests the nearest name and lists the others.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Iterator, Mapping
from typing import Callable, Generic, TypeVar

from halucheck.errors import ConfigError, HalucheckError

T = TypeVar("T")


def import_path(path: str):
    """The object a ``"module:attr"`` path names, its module imported now."""
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


class Registry(Mapping[str, T], Generic[T]):
    """Name -> entry, in registration order; ``"module:attr"`` entries are imported on first lookup."""

    def __init__(self, kind: str, error: type[HalucheckError] = ConfigError, hint: str = "") -> None:
        self.kind, self.error, self.hint = kind, error, hint
        self._entries: dict[str, T | str] = {}

    def register(self, name: str, target: T | str | None = None):
        """Add ``target`` under ``name`` (a later registration replaces an earlier one). Without a target,
        a decorator: ``@REGISTRY.register("name")``."""
        if target is None:
            def deco(obj: T) -> T:
                self._entries[name] = obj
                return obj
            return deco
        self._entries[name] = target
        return target

    def __getitem__(self, name: str) -> T:
        try:
            target = self._entries[name]
        except KeyError:
            near = difflib.get_close_matches(name, list(self._entries), n=1)
            hint = f" Did you mean {near[0]!r}?" if near else ""
            raise self.error(f"unknown {self.kind} {name!r}.{hint} Available: {', '.join(self._entries)}"
                             f"{self.hint}") from None
        if isinstance(target, str):
            target = self._entries[name] = import_path(target)
        return target

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._entries))

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def names(self) -> list[str]:
        """The registered names, in registration order."""
        return list(self._entries)

    def snapshot(self) -> dict[str, T | str]:
        """The entries as they are now (``restore`` puts them back: tests register fakes freely)."""
        return dict(self._entries)

    def restore(self, entries: dict[str, T | str]) -> None:
        self._entries = dict(entries)


Factory = Callable[..., T]

__all__ = ["Factory", "Registry", "import_path"]
