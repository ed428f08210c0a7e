"""models.yaml + environment + flags -> one Settings object, built in one place.

Precedence: flags > environment (HALUCHECK_*) > models.yaml > defaults. Every ``HALUCHECK_*`` variable is
read here, through :func:`env` (the list is :data:`ENV_VARS`); other modules ask this one.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
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
    verifier: str = ""  # what `run`, `check` and `eval` verify with on this profile when no -v is given ("": DEFAULT_VERIFIER)

    def result_settings(self) -> dict:
        """The profile as far as it can change results: everything but :data:`ENGINE_ONLY_OPTIONS`."""
        return {"name": self.name, "engine": self.engine, "model": self.model, "sampling": dict(self.sampling),
                "options": {k: v for k, v in self.options.items() if k not in ENGINE_ONLY_OPTIONS}}


ENV_VARS = {
    "HALUCHECK_HOME": "the cache folder: converted models, corpus indexes, compiled reply schemas",
    "HALUCHECK_MODELS": "the folder of converted models (default: $HALUCHECK_HOME/models)",
    "HALUCHECK_CONFIG": "the models.yaml to use",
    "HALUCHECK_PROFILE": "the profile every role uses (as --profile)",
    "HALUCHECK_INDEX": "the index file of `index`, `search`, `run --corpus` (as --db / --index)",
    "HALUCHECK_RAY_OBJECT_STORE": "bytes of the object store of the local Ray cluster `run --ray` starts",
    "HALUCHECK_DATASETS": "the folder of the labelled sets of `halucheck eval`",
    "HALUCHECK_NLI_MODEL": "the CrossEncoder folder of the `nli` verifier (as --nli-model)",
    "HALUCHECK_API_KEY": "the Bearer token sent to a vLLM server",
    "HALUCHECK_EMBED_MODEL": "the sentence-transformers model of the dense index",
    "HALUCHECK_EMBED_DTYPE": "float32 (default) or bfloat16 for the dense index's embeddings",
    "HALUCHECK_MAX_DOC_CHARS": "characters of text a corpus document may hold; past it the text is cut, with a "
                               "warning (default 5,000,000)",
}


def env(name: str) -> str | None:
    """The value of a ``HALUCHECK_*`` variable (None when unset or empty); only the names of :data:`ENV_VARS`."""
    if name not in ENV_VARS:
        raise KeyError(f"{name} is not a halucheck environment variable; add it to config.ENV_VARS")
    return os.environ.get(name) or None


def env_for_workers() -> dict[str, str]:
    """The ``HALUCHECK_*`` variables set here, for the workers of a distributed run to read the same."""
    return {k: v for k in ENV_VARS if (v := os.environ.get(k))}


def user_cache_dir() -> Path:
    """Where converted weights and other caches live (``$HALUCHECK_HOME`` overrides)."""
    home = env("HALUCHECK_HOME")
    if home:
        return Path(home)
    import platformdirs

    return Path(platformdirs.user_cache_dir("halucheck"))


def cache_error(path: str | os.PathLike, exc: BaseException, also: str = "") -> ConfigError | None:
    """The one line for ``exc``, raised making or writing ``path`` in halucheck's cache, when the cache folder
    itself is the trouble: ``HALUCHECK_HOME`` (or ``HALUCHECK_MODELS``, or the default cache folder) is a file,
    or lies under one, or cannot be written. It names the setting and how to fix it (``also``: another way,
    e.g. "or pass --db FILE"); None when ``path`` is not in the cache or the trouble is another one."""
    import errno

    from halucheck.errors import disk_problem

    places = [("HALUCHECK_MODELS", Path(env("HALUCHECK_MODELS")))] if env("HALUCHECK_MODELS") else []
    places.append(("HALUCHECK_HOME", user_cache_dir()))
    path = Path(path).expanduser().absolute()
    for var, folder in places:
        folder = folder.expanduser().absolute()
        if path == folder or path.is_relative_to(folder):
            break
    else:
        return None
    named = f"{var}={folder}" if env(var) else f"halucheck's cache folder {folder}"
    fix = (f"point {var} at a writable folder" + (" (or unset it)" if env(var) else "")
           + (f", {also}" if also else ""))
    why = getattr(exc, "strerror", None) or (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    blocker = next((p for p in (folder, *folder.parents) if p.exists()), None)
    if getattr(exc, "errno", None) in (errno.ENOTDIR, errno.EEXIST) or (blocker is not None and not blocker.is_dir()):
        what = "is a file" if blocker == folder else f"lies under the file {blocker}"
        return ConfigError(f"{named} {what}, not a folder (cannot make {path}: {why}); {fix}")
    if disk_problem(exc) == "read-only":
        return ConfigError(f"{named} cannot be written (cannot write {path}: {why}); {fix}")
    return None


def index_path(corpus: str | os.PathLike | None = None, flag: str | os.PathLike | None = None) -> Path:
    """Where a corpus's index lives, the same for ``halucheck index``, ``search``, ``run`` and ``eval --corpus``:
    the ``--db``/``--index`` flag, else ``$HALUCHECK_INDEX``, else one file per corpus folder in the user
    cache (``indexes/<folder name>-<hash of its absolute path>.duckdb``: the corpus itself may be read-only).
    Without a corpus (``search``), the one index in the cache; a ConfigError when there are none or several."""

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


MAX_DOCUMENT_CHARS = 5_000_000
"""Characters of extracted text one corpus document may hold (about 2,000 pages; ``$HALUCHECK_MAX_DOC_CHARS``
overrides). Past it the document's text is cut there, with a warning naming the file: a 334 KB .docx that
unpacked to 120 MB gave 133,434 chunks and 2 GB of memory. A .docx whose XML unpacks to more than
:data:`UNPACKED_BYTES_PER_CHAR` bytes per allowed character is read as a stream and stops at the bound."""

UNPACKED_BYTES_PER_CHAR = 5
"""Bytes of XML a .docx may unpack to per character of :data:`MAX_DOCUMENT_CHARS` (25 MB at the default; at
least 5 MB) before its text is read as a stream, never held whole (python-docx holds about 14 bytes per byte
of XML it parses)."""


def max_document_chars() -> int:
    """:data:`MAX_DOCUMENT_CHARS`, or ``$HALUCHECK_MAX_DOC_CHARS`` when set (a whole number of at least 1,000)."""
    raw = env("HALUCHECK_MAX_DOC_CHARS")
    if raw is None:
        return MAX_DOCUMENT_CHARS
    try:
        value = int(raw.replace("_", "").replace(",", ""))
    except ValueError:
        value = 0
    if value < 1000:
        raise ConfigError(f"HALUCHECK_MAX_DOC_CHARS={raw!r} must be a whole number of characters, at least 1000 "
                          f"(default {MAX_DOCUMENT_CHARS}); fix or unset it")
    return value


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


class _UniqueKeys(yaml.SafeLoader):
    """YAML's safe loader, except that a key written twice in one mapping is an error: a second profile of the
    same name would otherwise replace the first without a word."""

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"{key!r} is given twice (first on line {seen[key] + 1}); keep one",
                    key_node.start_mark)
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def read_yaml(text: str):
    """``text`` as YAML data (safe types only; a duplicated key is an error, see :class:`_UniqueKeys`)."""
    return yaml.load(text, Loader=_UniqueKeys)  # noqa: S506 - a SafeLoader subclass


def nli_model_path(flag: str | os.PathLike | None = None, config: str | os.PathLike | None = None) -> str | None:
    """The NLI CrossEncoder folder: ``--nli-model`` > ``$HALUCHECK_NLI_MODEL`` > ``nli_model:`` in models.yaml."""
    if flag:
        return str(flag)
    if env("HALUCHECK_NLI_MODEL"):
        return env("HALUCHECK_NLI_MODEL")
    try:
        raw = read_yaml(find_config(config).read_text(encoding="utf-8")) or {}
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
            raw = read_yaml(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f":{mark.line + 1}" if mark else ""
            raise ConfigError(f"{path}{where}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
                              "save models.yaml as UTF-8") from None
        except RecursionError:
            raise ConfigError(f"{path}: nested too deeply to be a models.yaml; write it as in the packaged "
                              "models.yaml (profiles: NAME: {engine: ..., model: ...})") from None
        except OSError as exc:
            raise ConfigError(f"{path}: cannot be read ({exc.strerror or exc}); pass a readable models.yaml") from None
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
        example = "profiles: {NAME: {engine: ..., model: ...}}, as in the packaged models.yaml"
        if not isinstance(raw, dict):
            raise ConfigError(f"{where}: expected a mapping of settings ({example}), got {_kind(raw)}")
        for key in ("profiles", "roles"):
            if not isinstance(raw.get(key) or {}, dict):
                raise ConfigError(f"{where}: `{key}:` must be a mapping ("
                                  + (example if key == "profiles" else "ROLE: PROFILE, e.g. roles: {skeptic: cpu-1.5b}")
                                  + f"), got {_kind(raw[key])}")
        profiles = {}
        for name, spec in (raw.get("profiles") or {}).items():
            if not isinstance(spec, dict) or "engine" not in spec:
                raise ConfigError(f"{where}: profile {name!r} needs an `engine:` key")
            spec = dict(spec)
            engine = spec.pop("engine")
            model = str(spec.pop("model", "") or "")
            sampling = {k: spec.pop(k) for k in SAMPLING_KEYS if k in spec}
            verifier = spec.pop("verifier", "") or ""
            if not isinstance(verifier, str):
                raise ConfigError(f"{where}: profile {name!r}: `verifier:` must be a verifier's name, e.g. "
                                  f"verifier: probe, got {_kind(verifier)}")
            profiles[name] = Profile(name, engine, model, spec, sampling, verifier)
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

    @property
    def verifier(self) -> str:
        """The verifier when none is named: the judging profile's ``verifier:`` (models.yaml), else
        :data:`DEFAULT_VERIFIER`."""
        return self.profile_for("initial").verifier or DEFAULT_VERIFIER

    def sampling_for(self, role: str) -> dict:
        """The sampling keys set for ``role``: its profile's, overridden by ``sampling: {role: ...}``."""
        return {**self.profile_for(role).sampling, **self.role_sampling.get(role, {})}

    def sampling(self, role: str, base: "SamplingParams") -> "SamplingParams":
        """``base`` (the caller's defaults for this kind of call) with ``role``'s settings applied."""
        from dataclasses import replace

        overrides = self.sampling_for(role)
        return replace(base, **overrides) if overrides else base


def _kind(value: Any) -> str:
    """What a YAML value is, in words, for error messages."""
    return {str: "a string", list: "a list", int: "a number", float: "a number", bool: "true or false"}.get(
        type(value), type(value).__name__)


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


# ---------------------------------------------------------------- what a check is run with, defaults once

EVIDENCE_K = 10
"""Evidence passages per claim: what retrieval returns (``run --top-k``, ``eval --top-k``), what every
verifier's prompt shows and the passage numbers a reply schema lets an agent cite."""

DEFAULT_VERIFIER = "selfcheck"
"""What ``run``, ``check`` and ``eval`` verify with when no ``--verifier`` is given."""

DEBATE_POLICIES: dict[str, tuple[str, str]] = {
    "true-skeptic": ("S2", "S1"),
    "true-trust": ("S1", "S2"),
    "always-trust": ("S1", "S1"),
    "always-skeptic": ("S2", "S2"),
}
"""The debate's transition policies (``--policy``), each as its next state when the standing verdict is
factual and when it is not (paper Table 4; ``halucheck.verifiers.debate.rounds.next_state``)."""
PROMPT_SETS = ("grounded", "paper")
"""The debate's prompt sets: ``grounded`` (default) or ``paper`` (the paper's own texts)."""

MAX_CLAIMS = 64
"""Claims checked per answer at most (``run --max-claims``): an answer with more keeps the first ones and
says so in a warning."""

QUERY_RULES = ("auto", "model", "claim")
QUERY_RULE = "auto"
"""Which claims get search queries written by the model in corpus mode (``run --queries``): ``auto`` only the claims
whose own words find no passage holding :data:`QUERY_COVERAGE` of their content words
(``halucheck.evidence.EvidenceSources.needs_queries``), ``model`` every claim (FacTool's step), ``claim`` none (the
claim's own words only, as in RAG mode); the claim's own words are always searched. Measured in corpus mode on 80
dev claims (``scripts/query_recall.py``: Factcheck-GPT's 2,386 passages, HaluEval-QA's knowledge paragraphs),
recall@10: the claim alone 0.988, with the model's queries 1.000 (one Factcheck-GPT claim), ``auto`` 1.000 with
56 of the 80 query calls."""
QUERY_COVERAGE = 0.8
"""``--queries auto``: a claim whose best passage of its own top k holds at least this share of its content words
has its evidence without model-written queries (0.67 lost the one claim the queries found; 0.8 kept it)."""

SUBJECTIVE_FILTERS = ("auto", "on", "off")
SUBJECTIVE_FILTER = "auto"
"""Whether subjective sentences are removed before claim extraction (``run --filter``): ``on``, ``off``, or
``auto``: for answers that look like dialogue."""

CHUNK_SENTENCES = 3
CHUNK_OVERLAP = 1
"""How the corpus index cuts documents (``index --chunk-sentences``, ``--chunk-overlap``): sentences per chunk,
and sentences shared by consecutive chunks."""
EMBED_BATCH = 64
"""Chunks embedded per batch when the corpus index is built (``index --batch-size``)."""
SEARCH_HITS = 10
SEARCH_MODE = "hybrid"
"""What ``halucheck search`` returns by default: hits, and how they are ranked (bm25, dense or hybrid)."""

SHARD_ANSWERS = 64
"""``run --ray``: answers per shard, the unit a worker retries and the driver merges (``--shard-answers``)."""

MIN_ACCURACY = 0.8
"""A calibrator's undecided band: the accuracy the decided claims must reach on the fitting data
(``calibrate --min-accuracy``; ``halucheck.verifiers.calibration.band_for``)."""

DEFAULT_BAND = (0.0, 0.5)
"""A cascade's default band on P(hallucinated): claims the first verifier scores inside it go on. Chosen on
the dev split (first 10 items of Factcheck-GPT and WiCE, 1.5B) by replaying selfcheck's and the debate's
replies for the bands 0.2-0.8 ... 0-1 (docs/eval-comparison.md): the 1.5B's selfcheck puts 18 of 20
P(hallucinated) below 0.02 or above 0.97, so a middle band sends almost nothing on (0.2-0.8: 1 of 20,
selfcheck's accuracy). Sending on what selfcheck finds factual (0-0.5) matched the debate's balanced
accuracy (0.566) with 79 calls instead of 143, and had the best AUROC (0.648 vs 0.560 and 0.637)."""


@dataclass(frozen=True)
class DebateConfig:
    """``min_rounds``/``max_rounds`` count states after S0; ``max_rounds=0`` is the initial agent alone.
    ``prompts``: the agents' prompt set (:data:`PROMPT_SETS`)."""

    policy: str = "true-skeptic"
    min_rounds: int = 1
    max_rounds: int = 2
    prompts: str = "grounded"
    # ask the Leader with the stances in both orders and let their token probabilities decide: on Factcheck-GPT
    # dev the two orders named the same winner in 69 % of calls, below the 90 % that one order would need
    leader_both_orders: bool = True

    def __post_init__(self) -> None:
        if self.policy not in DEBATE_POLICIES:
            raise ConfigError(f"unknown policy {self.policy!r}; choose one of: {', '.join(DEBATE_POLICIES)}")
        if self.prompts not in PROMPT_SETS:
            raise ConfigError(f"unknown prompt set {self.prompts!r}; choose one of: {', '.join(PROMPT_SETS)}")
        if not 0 <= self.min_rounds <= self.max_rounds:
            raise ConfigError(
                f"need 0 <= min_rounds <= max_rounds, got min_rounds={self.min_rounds}, "
                f"max_rounds={self.max_rounds}; raise --max-rounds or lower --min-rounds"
            )


@dataclass(frozen=True)
class VerifierOptions:
    """Settings the verifiers share: the debate's configuration, the consistency verifier's samples,
    the judges' reply budget, the NLI model folder and a cascade's band."""

    debate: DebateConfig = field(default_factory=DebateConfig)
    samples: int = 3  # sampled verdicts for ``consistency``
    sample_temperature: float = 0.7
    seed: int = 0
    max_tokens: int = 256
    nli_model: str | None = None
    band: tuple[float, float] = DEFAULT_BAND
    bibliography: str | None = None  # ``citation``: a BibTeX, CSL-JSON or CSV file of the works that exist
    head: str | None = None  # ``probe``: a head saved by ``halucheck train`` (name or file); None: the shipped one
    # ``direct``/``probe``: keep prompt passes' features in this SQLite file ("default": the model's store in
    # $HALUCHECK_HOME/features, shared with ``halucheck train``); None: keep none
    features: str | None = None
    grade: bool = True  # ``direct``/``probe``: grade the severity of each claim found unsupported (one short call)


def parse_band(text: str) -> tuple[float, float]:
    """``"0,0.5"`` -> (0.0, 0.5); a ConfigError saying the expected form otherwise (the range is checked
    by the cascade)."""
    try:
        lo, hi = (float(x) for x in text.split(","))
    except ValueError:
        raise ConfigError(f"--band {text!r}: give LO,HI, two probabilities such as 0,0.5") from None
    return lo, hi


@dataclass
class RunOptions:
    """Everything that determines a run's results (and so must match to resume it), plus how failed
    work is retried within one run (which does not change results, so is not fingerprinted)."""

    input: Path
    out: Path
    corpus: Path | None = None
    index: Path | None = None
    use_context: bool = True
    subjective_filter: str = SUBJECTIVE_FILTER  # one of SUBJECTIVE_FILTERS
    top_k: int = EVIDENCE_K  # evidence passages per claim
    max_claims: int = MAX_CLAIMS
    queries: str = QUERY_RULE  # one of QUERY_RULES
    debate: DebateConfig = field(default_factory=DebateConfig)
    verifier: str = DEFAULT_VERIFIER  # a registered verifier, or a cascade such as "selfcheck,debate"
    band: tuple[float, float] = DEFAULT_BAND  # a cascade's uncertainty band on P(hallucinated)
    nli_model: str | None = None
    bibliography: Path | None = None  # the works that exist: citations are checked against it
    head: str | None = None  # ``probe``: the head (a name saved by ``halucheck train``, or a file); None: the shipped one
    calibration: str | None = None  # a named or file calibrator (None: the stored default); not fingerprinted:
    #                                 it changes the reports, not the verdicts
    batch_items: int = 256  # answers per claims-stage batch (its results are one transaction)
    retries: int = 2  # passes over failed work after the first, within one run
    retry_backoff_s: float = 2.0  # wait before the first retry pass; doubles for each further pass

    def fingerprint(self, settings: Settings, input_bytes: bytes) -> str:
        # engine-only options (timeouts, concurrency, attempts, URLs) are left out: changing them must
        # not block a resume, and a run interrupted by a timeout is resumed with a longer one
        profiles = {r: settings.profile_for(r).result_settings() for r in ROLES}
        payload = {
            "input_sha256": hashlib.sha256(input_bytes).hexdigest(),
            "corpus": str(self.corpus.resolve()) if self.corpus else None,
            "use_context": self.use_context, "filter": self.subjective_filter, "top_k": self.top_k,
            "max_claims": self.max_claims, "debate": asdict(self.debate), "profiles": profiles,
            **({"queries": self.queries} if self.queries != "model" else {}),  # runs made before the option resume
            **({"verifier": self.verifier, "band": list(self.band) if "," in self.verifier else None}
               if self.verifier != "debate" else {}),
            **({"bibliography": _file_identity(self.bibliography)} if self.bibliography else {}),
            **({"head": _head_identity(self.head)} if self.head else {}),
            "role_sampling": settings.role_sampling,
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def head_file(name: str) -> Path:
    """The file of the head called ``name``: the path itself when it is a .npz file or exists, else the head saved
    under that name by ``halucheck train`` (``$HALUCHECK_HOME/heads/NAME.npz``)."""
    path = Path(name)
    return path if path.suffix == ".npz" or path.exists() else user_cache_dir() / "heads" / f"{name}.npz"


def _head_identity(name: str) -> str:
    """A head by what its file holds (a refitted head under the same name makes another run)."""
    path = head_file(name)
    return _file_identity(path) if path.is_file() else name


def _file_identity(path: Path) -> str:
    """A file's content hash (so an edited bibliography makes another run, a moved one does not)."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return str(path)  # the verifier reports the missing file
