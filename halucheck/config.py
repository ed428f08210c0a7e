"""models.yaml + environment + flags -> one Settings object, built in one place.

Precedence: flags > environment (HALUCHECK_*) > models.yaml > defaults. Every ``HALUCHECK_*`` variable is
read here, through :func:`env` (the list is :data:`ENV_VARS`); other modules ask this one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from halucheck.errors import ConfigError

if TYPE_CHECKING:
    from halucheck.engines.base import SamplingParams

ROLES = ("initial", "trust", "skeptic", "leader", "filter", "extractor", "query")
# Profile keys that are sampling settings rather than engine constructor options.
SAMPLING_KEYS = ("temperature", "top_p", "max_tokens", "seed", "repetition_penalty", "frequency_penalty",
                 "presence_penalty", "no_repeat_ngram_size")
# Engine options that change how replies are fetched, never what they say: left out of a run's
# fingerprint, so a resume may use a longer timeout, more concurrency, more attempts or other servers.
ENGINE_ONLY_OPTIONS = frozenset({
    "base_url", "api_key", "timeout_s", "connect_timeout_s", "max_concurrency", "max_attempts", "backoff_s",
    "max_backoff_s", "check", "threads", "step_latency",
})


@dataclass(frozen=True)
class Profile:
    """An engine plus a model and its options, as named in models.yaml."""

    name: str
    engine: str
    model: str = ""
    options: dict = field(default_factory=dict)
    sampling: dict = field(default_factory=dict)

    def result_settings(self) -> dict:
        """The profile as far as it can change results: everything but :data:`ENGINE_ONLY_OPTIONS`."""
        return {"name": self.name, "engine": self.engine, "model": self.model, "sampling": dict(self.sampling),
                "options": {k: v for k, v in self.options.items() if k not in ENGINE_ONLY_OPTIONS}}


ENV_VARS = {
    "HALUCHECK_HOME": "the cache folder: converted models, corpus indexes, compiled reply schemas",
    "HALUCHECK_CONFIG": "the models.yaml to use",
    "HALUCHECK_PROFILE": "the profile every role uses (as --profile)",
    "HALUCHECK_INDEX": "the index file of `index`, `search`, `run --corpus` (as --db / --index)",
    "HALUCHECK_DATASETS": "the folder of the labelled sets of `halucheck eval`",
    "HALUCHECK_NLI_MODEL": "the CrossEncoder folder of the `nli` verifier (as --nli-model)",
    "HALUCHECK_API_KEY": "the Bearer token sent to a vLLM server",
    "HALUCHECK_EMBED_MODEL": "the sentence-transformers model of the dense index",
    "HALUCHECK_EMBED_DTYPE": "float32 (default) or bfloat16 for the dense index's embeddings",
}


def env(name: str) -> str | None:
    """The value of a ``HALUCHECK_*`` variable (None when unset or empty); only the names of :data:`ENV_VARS`."""
    if name not in ENV_VARS:
        raise KeyError(f"{name} is not a halucheck environment variable; add it to config.ENV_VARS")
    return os.environ.get(name) or None


def user_cache_dir() -> Path:
    """Where converted weights and other caches live (``$HALUCHECK_HOME`` overrides)."""
    home = env("HALUCHECK_HOME")
    if home:
        return Path(home)
    import platformdirs

    return Path(platformdirs.user_cache_dir("halucheck"))


def index_path(corpus: str | os.PathLike | None = None, flag: str | os.PathLike | None = None) -> Path:
    """Where a corpus's index lives, the same for ``halucheck index``, ``search``, ``run`` and ``eval --corpus``:
    the ``--db``/``--index`` flag, else ``$HALUCHECK_INDEX``, else one file per corpus folder in the user
    cache (``indexes/<folder name>-<hash of its absolute path>.duckdb``: the corpus itself may be read-only).
    Without a corpus (``search``), the one index in the cache; a ConfigError when there are none or several."""
    import hashlib

    if flag:
        return Path(flag)
    if env("HALUCHECK_INDEX"):
        return Path(env("HALUCHECK_INDEX"))
    folder = user_cache_dir() / "indexes"
    if corpus is not None:
        corpus = Path(corpus).resolve()
        tag = hashlib.sha256(str(corpus).encode()).hexdigest()[:12]
        return folder / f"{corpus.name}-{tag}.duckdb"
    found = sorted(folder.glob("*.duckdb")) if folder.is_dir() else []
    if len(found) == 1:
        return found[0]
    if not found:
        raise ConfigError("no index yet: run `halucheck index DIR` first, or pass --db FILE")
    raise ConfigError(f"{len(found)} indexes in {folder}: say which with --corpus DIR (the folder you indexed) "
                      "or --db FILE")


def find_config(path: str | os.PathLike | None = None) -> Path:
    """Locate models.yaml: explicit path, $HALUCHECK_CONFIG, ./models.yaml, the packaged copy."""
    candidates = []
    if path:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file {p} does not exist; pass an existing models.yaml to --config")
        return p
    if env("HALUCHECK_CONFIG"):
        p = Path(env("HALUCHECK_CONFIG"))
        if not p.is_file():
            raise ConfigError(f"HALUCHECK_CONFIG points to {p}, which does not exist; fix or unset it")
        return p
    candidates = [Path.cwd() / "models.yaml", Path(__file__).with_name("models.yaml")]
    for p in candidates:
        if p.is_file():
            return p
    raise ConfigError("no models.yaml found; pass --config PATH or set HALUCHECK_CONFIG")


def nli_model_path(flag: str | os.PathLike | None = None, config: str | os.PathLike | None = None) -> str | None:
    """The NLI CrossEncoder folder: ``--nli-model`` > ``$HALUCHECK_NLI_MODEL`` > ``nli_model:`` in models.yaml."""
    if flag:
        return str(flag)
    if env("HALUCHECK_NLI_MODEL"):
        return env("HALUCHECK_NLI_MODEL")
    try:
        raw = yaml.safe_load(find_config(config).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError, ConfigError):
        return None
    value = raw.get("nli_model") if isinstance(raw, dict) else None
    return str(Path(value).expanduser()) if value else None


@dataclass(frozen=True)
class Settings:
    """Profiles, the role -> profile mapping and per-role sampling: data only, resolved once. The engines
    they describe are made and owned by :class:`halucheck.engines.pool.EnginePool`."""

    profiles: dict[str, Profile]
    default_profile: str
    roles: dict[str, str] = field(default_factory=dict)
    source: Path | None = None
    role_sampling: dict[str, dict] = field(default_factory=dict)  # `sampling:` in models.yaml, per role

    @classmethod
    def load(
        cls,
        config: str | os.PathLike | None = None,
        profile: str | None = None,
        role_overrides: dict[str, str] | None = None,
    ) -> "Settings":
        path = find_config(config)
        try:
            raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f":{mark.line + 1}" if mark else ""
            raise ConfigError(f"{path}{where}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
        return cls.from_dict(raw, source=path, profile=profile, role_overrides=role_overrides)

    @classmethod
    def from_dict(
        cls,
        raw: dict,
        source: Path | None = None,
        profile: str | None = None,
        role_overrides: dict[str, str] | None = None,
    ) -> "Settings":
        where = source or "models.yaml"
        profiles = {}
        for name, spec in (raw.get("profiles") or {}).items():
            if not isinstance(spec, dict) or "engine" not in spec:
                raise ConfigError(f"{where}: profile {name!r} needs an `engine:` key")
            spec = dict(spec)
            engine = spec.pop("engine")
            model = str(spec.pop("model", "") or "")
            sampling = {k: spec.pop(k) for k in SAMPLING_KEYS if k in spec}
            profiles[name] = Profile(name, engine, model, spec, sampling)
        if not profiles:
            raise ConfigError(f"{where}: no profiles defined under `profiles:`")

        default = env("HALUCHECK_PROFILE") or raw.get("default_profile")
        roles = {} if env("HALUCHECK_PROFILE") else dict(raw.get("roles") or {})
        if profile:  # --profile: every role uses it, unless a --role override says otherwise
            default, roles = profile, {}
        roles.update(role_overrides or {})
        if not default:
            default = next(iter(profiles))
        role_sampling = _role_sampling(raw.get("sampling"), where)
        settings = cls(profiles=profiles, default_profile=default, roles=roles, source=source,
                       role_sampling=role_sampling)
        settings.profile(default)
        for role, name in roles.items():
            if role not in ROLES:
                raise ConfigError(f"unknown role {role!r}; roles are: {', '.join(ROLES)}")
            settings.profile(name)
        return settings

    def profile(self, name: str) -> Profile:
        try:
            return self.profiles[name]
        except KeyError:
            import difflib

            near = difflib.get_close_matches(name, self.profiles, n=1)
            hint = f" Did you mean {near[0]!r}?" if near else ""
            raise ConfigError(
                f"unknown profile {name!r}.{hint} Profiles in {self.source or 'models.yaml'}: "
                f"{', '.join(self.profiles)}"
            ) from None

    def profile_for(self, role: str) -> Profile:
        return self.profile(self.roles.get(role, self.default_profile))

    def sampling_for(self, role: str) -> dict:
        """The sampling keys set for ``role``: its profile's, overridden by ``sampling: {role: ...}``."""
        return {**self.profile_for(role).sampling, **self.role_sampling.get(role, {})}

    def sampling(self, role: str, base: "SamplingParams") -> "SamplingParams":
        """``base`` (the caller's defaults for this kind of call) with ``role``'s settings applied."""
        from dataclasses import replace

        overrides = self.sampling_for(role)
        return replace(base, **overrides) if overrides else base


def _role_sampling(raw: Any, where: Any) -> dict[str, dict]:
    """Check the ``sampling:`` section: a role -> {sampling key: value} mapping."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: `sampling:` must map roles to settings, e.g. sampling: {{skeptic: {{max_tokens: 160}}}}")
    out = {}
    types = {"max_tokens": int, "no_repeat_ngram_size": int, "seed": int}
    for role, keys in raw.items():
        if role not in ROLES:
            raise ConfigError(f"{where}: unknown role {role!r} under `sampling:`; roles are: {', '.join(ROLES)}")
        if not isinstance(keys, dict):
            raise ConfigError(f"{where}: `sampling: {role}:` must be a mapping of sampling settings")
        bad = sorted(set(keys) - set(SAMPLING_KEYS))
        if bad:
            raise ConfigError(f"{where}: unknown sampling setting {bad[0]!r} for role {role!r}; "
                              f"valid: {', '.join(SAMPLING_KEYS)}")
        clean = {}
        for k, v in keys.items():
            want = types.get(k, float)
            try:
                clean[k] = None if (k == "seed" and v is None) else want(v)
            except (TypeError, ValueError):
                raise ConfigError(f"{where}: sampling: {role}: {k} must be a number, not {v!r}") from None
        out[role] = clean
    return out


def parse_role_overrides(values: list[str] | None) -> dict[str, str]:
    """Parse ``--role ROLE=PROFILE`` flags."""
    out = {}
    for v in values or []:
        role, sep, prof = v.partition("=")
        if not sep or not role or not prof:
            raise ConfigError(f"--role expects ROLE=PROFILE (e.g. --role skeptic=cpu-1.5b), got {v!r}")
        out[role.strip()] = prof.strip()
    return out
