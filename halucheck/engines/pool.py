"""The engines of one process: created on first use from the profiles of a :class:`~halucheck.config.Settings`,
one per profile (roles sharing a profile share it), wrapped (the run's reply cache, the eval's meter) and
closed together. Settings stays data; this is what owns engines."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from halucheck.config import SAMPLING_KEYS
from halucheck.errors import ConfigError

if TYPE_CHECKING:
    from halucheck.config import Profile, Settings
    from halucheck.engines.base import Engine

Wrapper = Callable[["Engine"], "Engine"]


class EnginePool:
    """``engine_for(role)`` creates the role's engine on first use; ``close()`` closes every one."""

    def __init__(self, settings: "Settings", wrappers: tuple[Wrapper, ...] = (),
                 kept: dict[str, "Engine"] | None = None) -> None:
        """``kept``: engines (unwrapped, by profile name) that outlive this pool, e.g. a worker's loaded
        model serving one shard after another: new ones are added to it, and ``close()`` leaves them open."""
        check_profiles(settings)  # before any engine is made
        self.settings = settings
        self.wrappers: list[Wrapper] = list(wrappers)
        self._engines: dict[str, "Engine"] = {}
        self._kept = kept

    def add_wrapper(self, wrapper: Wrapper) -> None:
        """Wrap every engine created from now on in ``wrapper(engine)``, outside the wrappers already
        added (e.g. the eval's cost meter around its reply cache)."""
        self.wrappers.append(wrapper)

    def engine_for(self, role: str) -> "Engine":
        """The engine serving ``role``; roles sharing a profile share one engine instance."""
        prof = self.settings.profile_for(role)
        if prof.name not in self._engines:
            engine = self._kept.get(prof.name) if self._kept is not None else None
            if engine is None:
                engine = self._create(prof)
                if self._kept is not None:
                    self._kept[prof.name] = engine
            for wrap in self.wrappers:
                engine = wrap(engine)
            self._engines[prof.name] = engine
        return self._engines[prof.name]

    def prompts_started(self) -> int | None:
        """Requests this pool's engines have begun to read (admitted to an embedded engine's decode loop),
        for a progress bar to move before the first reply is done; None when no engine counts them (a
        server's queue is its own)."""
        counts = []
        for engine in self._engines.values():
            while getattr(engine, "inner", None) is not None:  # the reply cache and cost meter wrap it
                engine = engine.inner
            admitted = getattr(getattr(engine, "stats", None), "admitted", None)
            if isinstance(admitted, int):
                counts.append(admitted)
        return sum(counts) if counts else None

    def _create(self, prof: "Profile") -> "Engine":
        from halucheck.engines import create_engine

        try:
            return create_engine(prof.engine, model=prof.model, **prof.options)
        except (TypeError, ValueError) as exc:  # an option of the wrong kind that check_options let by
            raise ConfigError(f"{self.settings.source or 'models.yaml'}: profile {prof.name!r}: bad option "
                              f"({str(exc).splitlines()[0]}); fix it in the profile") from None

    def close(self) -> None:
        if self._kept is None:
            for engine in self._engines.values():
                engine.close()
        self._engines.clear()

    def __enter__(self) -> "EnginePool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _engine_parameters(engine: str) -> dict[str, str] | None:
    """Option name -> annotation of an engine's constructor, or None when it cannot be known (an unknown
    engine, reported when it is created, or a factory taking any keyword)."""
    import inspect

    from halucheck.engines import engine_class

    try:
        target = engine_class(engine)
    except ConfigError:
        return None
    params = inspect.signature(target.__init__ if inspect.isclass(target) else target).parameters.values()
    if not inspect.isclass(target) and any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return {p.name: str(p.annotation) for p in params
            if p.name not in ("self", "model") and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}


def _type_problem(value: Any, annotation: str) -> str | None:
    """What is wrong with ``value`` for a simple annotation ("float", "int | None", "bool"), else None."""
    kinds = {a.strip() for a in annotation.split("|")}
    if value is None and "None" in kinds:
        return None
    if "bool" in kinds and kinds <= {"bool", "None"}:
        return None if isinstance(value, bool) else "true or false"
    if kinds & {"int", "float"} and kinds <= {"int", "float", "None"}:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return "a whole number" if "float" not in kinds else "a number"
        if "float" not in kinds and not isinstance(value, int):
            return "a whole number"
    return None


def check_options(profile: "Profile", where: object = "models.yaml") -> None:
    """Reject a profile option its engine does not take (a typo such as ``timeout:`` would otherwise be
    ignored silently) and options of the wrong kind (``timeout_s: abc``), naming the file and the fix."""
    from halucheck.engines.base import SamplingParams

    params = _engine_parameters(profile.engine)
    sampling_types = {k: str(v) for k, v in SamplingParams.__annotations__.items()}
    for key, value in profile.sampling.items():
        problem = _type_problem(value, sampling_types.get(key, ""))
        if problem:
            raise ConfigError(f"{where}: profile {profile.name!r}: {key} must be {problem}, got {value!r}")
    if params is None:
        return
    for key, value in profile.options.items():
        if key not in params:
            import difflib

            valid = sorted({"engine", "model", *SAMPLING_KEYS, *params})
            near = difflib.get_close_matches(key, valid, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise ConfigError(f"{where}: profile {profile.name!r} has an unknown option {key!r}{hint}; "
                              f"valid options for engine {profile.engine!r}: {', '.join(valid)}")
        problem = _type_problem(value, params[key])
        if problem:
            raise ConfigError(f"{where}: profile {profile.name!r}: {key} must be {problem}, got {value!r}")


def check_profiles(settings: "Settings") -> None:
    """Check the options of every profile a role uses against its engine (see :func:`check_options`)."""
    for name in sorted({settings.default_profile, *settings.roles.values()}):
        check_options(settings.profile(name), settings.source or "models.yaml")


def pool_of(models: "Settings | EnginePool") -> EnginePool:
    """``models`` itself when it is a pool, else a new pool over those settings (its caller closes it)."""
    return models if isinstance(models, EnginePool) else EnginePool(models)


__all__ = ["EnginePool", "Wrapper", "check_options", "check_profiles", "pool_of"]
