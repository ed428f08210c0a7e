"""The engines of one process: created on first use from the profiles of a :class:`~halucheck.config.Settings`,
one per profile (roles sharing a profile share it), wrapped (the run's reply cache, the eval's meter) and
closed together. Settings stays data; this is what owns engines."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from halucheck.errors import ConfigError

if TYPE_CHECKING:
    from halucheck.config import Settings
    from halucheck.engines.base import Engine

Wrapper = Callable[["Engine"], "Engine"]


class EnginePool:
    """``engine_for(role)`` creates the role's engine on first use; ``close()`` closes every one."""

    def __init__(self, settings: "Settings", wrappers: tuple[Wrapper, ...] = ()) -> None:
        self.settings = settings
        self.wrappers: list[Wrapper] = list(wrappers)
        self._engines: dict[str, "Engine"] = {}

    def add_wrapper(self, wrapper: Wrapper) -> None:
        """Wrap every engine created from now on in ``wrapper(engine)``, outside the wrappers already
        added (e.g. the eval's cost meter around its reply cache)."""
        self.wrappers.append(wrapper)

    def engine_for(self, role: str) -> "Engine":
        """The engine serving ``role``; roles sharing a profile share one engine instance."""
        prof = self.settings.profile_for(role)
        if prof.name not in self._engines:
            from halucheck.engines import create_engine

            try:
                engine = create_engine(prof.engine, model=prof.model, **prof.options)
            except (TypeError, ValueError) as exc:  # an option of the wrong kind that check_options let by
                raise ConfigError(f"{self.settings.source or 'models.yaml'}: profile {prof.name!r}: bad option "
                                  f"({str(exc).splitlines()[0]}); fix it in the profile") from None
            for wrap in self.wrappers:
                engine = wrap(engine)
            self._engines[prof.name] = engine
        return self._engines[prof.name]

    def close(self) -> None:
        for engine in self._engines.values():
            engine.close()
        self._engines.clear()

    def __enter__(self) -> "EnginePool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def pool_of(models: "Settings | EnginePool") -> EnginePool:
    """``models`` itself when it is a pool, else a new pool over those settings (its caller closes it)."""
    return models if isinstance(models, EnginePool) else EnginePool(models)


__all__ = ["EnginePool", "Wrapper", "pool_of"]
