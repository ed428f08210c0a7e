"""The verify stage that ``halucheck run`` and ``halucheck eval`` share: verifiers, their registry, cascades.

A verifier takes claims with their evidence (:class:`~halucheck.records.Check`) and returns one
:class:`~halucheck.records.Verdict` per claim, in order: factuality, severity (where the verifier rates
it), P(hallucinated), and its trace as turns. It is batch-first: every LLM call goes through the engine
pool it is given (one ``generate`` call per step for all claims, or the debate's scheduler), so an engine
always sees a full batch, and the run's reply cache and the eval's meter see every call.

Registry (name: module; ``halucheck eval --verifier`` and ``halucheck run --verifier`` take the same names):

- ``debate`` (default): the Markov-chain multi-agent debate (``halucheck.verifiers.debate.verifier``).
- ``selfcheck``, ``selfcheck-3shot``, ``judge-likert``, ``prometheus``, ``lynx``, ``consistency``:
  single-agent judges on the ``initial`` role's profile (``halucheck.verifiers.judges``).
- ``nli``: a local CrossEncoder NLI model, no LLM (``halucheck.verifiers.nli``).

A **cascade** (``"selfcheck,debate"``) runs its first verifier on every claim and sends on to the next
only the claims it is unsure of: no valid verdict, or P(hallucinated) inside the band ``[lo, hi]``. The
verdict of a claim is the last stage's that saw it; its chain holds every stage's turns, each turn naming
its verifier. See :data:`DEFAULT_BAND` for how the default band was chosen.
"""

from __future__ import annotations

import difflib
import importlib
import uuid
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable, Sequence

from halucheck.verifiers.debate.rounds import DebateConfig
from halucheck.errors import ConfigError
from halucheck.records import Check, Verdict

if TYPE_CHECKING:
    from halucheck.engines.pool import EnginePool

OnVerdict = Callable[[int, Verdict], None]  # (index of the check, its final verdict), as each one is decided
OnCall = Callable[[int], None]  # after every LLM call: how many calls that claim has had so far

# The cascade's default band on P(hallucinated): claims the first verifier scores inside it go on. Chosen on
# the dev split (first 10 items of Factcheck-GPT and WiCE, 1.5B) by replaying selfcheck's and the debate's
# replies for the bands 0.2-0.8 ... 0-1 (docs/eval-comparison.md): the 1.5B's selfcheck puts 18 of 20
# P(hallucinated) below 0.02 or above 0.97, so a middle band sends almost nothing on (0.2-0.8: 1 of 20,
# selfcheck's accuracy). Sending on what selfcheck finds factual (0-0.5) matched the debate's balanced
# accuracy (0.566) with 79 calls instead of 143, and had the best AUROC (0.648 vs 0.560 and 0.637).
DEFAULT_BAND = (0.0, 0.5)


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


@dataclass
class Cost:
    """What one verifier spent in its last ``verify``: LLM calls (retries included), tokens, seconds."""

    claims: int = 0
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    failed_calls: int = 0
    wall_s: float = 0.0

    def add_results(self, results) -> None:
        """Count engine Results (a reply from the run's cache spent nothing now)."""
        for r in results:
            self.llm_calls += r.attempts
            self.failed_calls += r.error is not None
            if r.attempts:
                self.prompt_tokens += r.prompt_tokens
                self.completion_tokens += r.completion_tokens
                self.cached_tokens += r.cached_tokens


class Verifier:
    """Base class. ``verify(checks, engines)`` returns one Verdict per check, in order; ``costs`` then
    says what each stage spent (one entry, this verifier's name, except for a cascade)."""

    name: str = ""
    uses_llm: bool = True

    def __init__(self, options: VerifierOptions | None = None) -> None:
        self.options = options or VerifierOptions()
        self.costs: dict[str, Cost] = {}

    def verify(self, checks: Sequence[Check], engines: "EnginePool | None",
               on_verdict: OnVerdict | None = None, on_call: OnCall | None = None) -> list[Verdict]:
        raise NotImplementedError  # pragma: no cover

    def least_calls(self) -> int:
        """The LLM calls one claim costs at least (for progress bars)."""
        return 1 if self.uses_llm else 0

    def expected_calls(self, checks: Sequence[Check]) -> int:
        """The LLM calls ``checks`` cost at least."""
        return self.least_calls() * len(checks)

    def describe(self) -> dict:
        """The settings that shaped this verifier's verdicts (written to metrics.json)."""
        return {}

    def check(self) -> None:
        """Raise a HalucheckError before any work when the verifier cannot run as configured."""

    def prefix_groups(self, n: int) -> list[str]:
        """A fresh ``Request.prefix_group`` for each of ``n`` claims of one ``verify`` call (unique across
        calls, so an engine never mixes up two calls' prefixes); release them when their calls are over."""
        run = uuid.uuid4().hex[:12]
        return [f"{self.name}:{run}:{i}" for i in range(n)]


def verdict_from_score(name: str, hallucinated: bool, p_hallucinated: float, turn) -> Verdict:
    """The Verdict of a single-agent verifier: its decision, its score, its one turn as the trace."""
    confidence = p_hallucinated if hallucinated else 1.0 - p_hallucinated
    return Verdict(factuality=not hallucinated, error_severity=None, confidence=confidence, chain=[turn],
                   p_hallucinated=p_hallucinated, verifier=name)


def failed_verdict(name: str, error: str, turn=None) -> Verdict:
    return Verdict(None, None, 0.0, chain=[turn] if turn is not None else [], error=error, verifier=name)


class Cascade(Verifier):
    """Verifiers in order; each later one sees only the claims the one before is unsure of."""

    def __init__(self, stages: Sequence[Verifier], band: tuple[float, float] = DEFAULT_BAND) -> None:
        lo, hi = band
        if not 0.0 <= lo <= hi <= 1.0:
            raise ConfigError(f"cascade band {lo},{hi}: give LO,HI with 0 <= LO <= HI <= 1 (e.g. 0,0.5)")
        if len(stages) < 2:
            raise ConfigError("a cascade needs two verifiers or more, e.g. selfcheck,debate")
        super().__init__(stages[-1].options)
        self.stages, self.band = list(stages), (lo, hi)
        self.name = ",".join(s.name for s in self.stages)
        self.uses_llm = any(s.uses_llm for s in self.stages)
        self.reached: dict[str, int] = {}

    def unsure(self, verdict: Verdict | None) -> bool:
        lo, hi = self.band
        return verdict is None or verdict.p_hallucinated is None or lo <= verdict.p_hallucinated <= hi

    def least_calls(self) -> int:
        return self.stages[0].least_calls()

    def describe(self) -> dict:
        """The stages, the band, and after a run how many claims reached each stage and what each spent."""
        return {"cascade": [s.name for s in self.stages], "band": list(self.band),
                **{k: v for s in self.stages for k, v in s.describe().items()},
                **({"stages": {name: {"claims": n, "llm_calls": self.costs[name].llm_calls if name in self.costs else 0}
                               for name, n in self.reached.items()}} if self.reached else {})}

    def check(self) -> None:
        for s in self.stages:
            s.check()

    def verify(self, checks, engines, on_verdict=None, on_call=None):
        verdicts: list[Verdict | None] = [None] * len(checks)
        todo = list(range(len(checks)))
        self.reached, self.costs = {}, {}
        for k, stage in enumerate(self.stages):
            last = k == len(self.stages) - 1
            self.reached[stage.name] = len(todo)

            def merged(i: int, v: Verdict) -> Verdict:  # this stage's verdict after the earlier stages' turns
                return replace(v, chain=(verdicts[i].chain if verdicts[i] is not None else []) + v.chain)

            def emit(j: int, v: Verdict, todo=todo, last=last) -> None:
                if on_verdict is not None and (last or not self.unsure(v)):
                    on_verdict(todo[j], merged(todo[j], v))

            out = stage.verify([checks[i] for i in todo], engines, on_verdict=emit, on_call=on_call)
            self.costs.update(stage.costs)
            for i, v in zip(todo, out):
                verdicts[i] = merged(i, v)
            todo = [i for i, v in zip(todo, out) if self.unsure(v)]
            if not todo:
                break
        return verdicts  # type: ignore[return-value]


class Routed(Verifier):
    """Claims of a tool-checkable kind go to their checker (:data:`CHECKERS`), every other claim to ``main``:
    a calculation is evaluated, never judged by a model; code is run against independent solutions in the
    sandbox (where there is none, with a note, to ``main``); a corpus document named as the answer's source
    is looked up in the corpus (``halucheck.verifiers.tools.sources``). Citations go to their checker only with a
    bibliography (``--bibliography``); without one they go to ``main`` too."""

    # claim kind -> (its checker, the option it needs; without it those claims go to ``main``)
    CHECKERS = {"calculation": ("arith", None), "citation": ("citation", "bibliography"), "code": ("code", None),
                "source": ("source", None)}
    OPTIONAL = ("code",)  # a checker that may be unavailable here (no sandbox): its claims go to ``main``

    def __init__(self, main: Verifier, options: VerifierOptions | None = None) -> None:
        super().__init__(options or main.options)
        self.main = main
        self.name, self.uses_llm = main.name, main.uses_llm
        self.checkers: dict[str, Verifier] = {}
        self.unavailable: dict[str, str] = {}  # kind -> why its checker cannot run here
        for kind, (name, needs) in self.CHECKERS.items():
            if needs and not getattr(self.options, needs):
                continue
            checker = get_verifier(name, self.options)
            try:
                checker.check()  # given but unusable (a bibliography that does not load): say so now
            except ConfigError as exc:
                if kind not in self.OPTIONAL:
                    raise
                self.unavailable[kind] = str(exc)
                continue
            self.checkers[kind] = checker

    def least_calls(self) -> int:
        return self.main.least_calls()

    def expected_calls(self, checks) -> int:
        return sum(self.checkers.get(c.claim.kind, self.main).least_calls() for c in checks)

    def describe(self) -> dict:
        return {**self.main.describe(), "tool_checks": {k: v.name for k, v in self.checkers.items()}}

    def check(self) -> None:
        self.main.check()

    def verify(self, checks, engines, on_verdict=None, on_call=None):
        verdicts: list[Verdict | None] = [None] * len(checks)
        groups: dict[str, list[int]] = {}
        for i, c in enumerate(checks):
            groups.setdefault(c.claim.kind if c.claim.kind in self.checkers else "", []).append(i)
        self.costs = {}
        for kind, idx in groups.items():
            verifier = self.checkers.get(kind, self.main)

            def emit(j: int, v: Verdict, idx=idx) -> None:
                if on_verdict is not None:
                    on_verdict(idx[j], v)

            out = verifier.verify([checks[i] for i in idx], engines if verifier.uses_llm else None,
                                  on_verdict=emit, on_call=on_call)
            self.costs.update(verifier.costs)
            for i, v in zip(idx, out):
                verdicts[i] = v
        return verdicts  # type: ignore[return-value]


# ---------------------------------------------------------------- registry

# name -> "module:Class" (imported when used) or a factory taking VerifierOptions (registered at run time)
_REGISTRY: dict[str, str | Callable[[VerifierOptions], Verifier]] = {
    "debate": "halucheck.verifiers.debate.verifier:DebateVerifier",
    "selfcheck": "halucheck.verifiers.judges:SelfCheck",
    "selfcheck-3shot": "halucheck.verifiers.judges:SelfCheck3Shot",
    "judge-likert": "halucheck.verifiers.judges:JudgeLikert",
    "prometheus": "halucheck.verifiers.judges:Prometheus",
    "lynx": "halucheck.verifiers.judges:Lynx",
    "consistency": "halucheck.verifiers.judges:Consistency",
    "collab-cal": "halucheck.verifiers.collab:CollabCal",
    "nli": "halucheck.verifiers.nli:NLI",
    "arith": "halucheck.verifiers.tools.arith:ArithVerifier",
    "citation": "halucheck.verifiers.tools.citations:CitationVerifier",
    "code": "halucheck.verifiers.tools.code:CodeCheck",
    "source": "halucheck.verifiers.tools.sources:SourceVerifier",
}


def register(name: str, factory: str | Callable[[VerifierOptions], Verifier]) -> None:
    """Register a verifier under ``name``: a ``"module:Class"`` path or a callable taking VerifierOptions."""
    _REGISTRY[name] = factory


def available() -> list[str]:
    """Verifier names, in registration order."""
    return list(_REGISTRY)


def _one(name: str, options: VerifierOptions) -> Verifier:
    try:
        target = _REGISTRY[name]
    except KeyError:
        near = difflib.get_close_matches(name, _REGISTRY, n=1)
        hint = f" Did you mean {near[0]!r}?" if near else ""
        raise ConfigError(f"unknown verifier {name!r}.{hint} Available: {', '.join(_REGISTRY)} "
                          "(or a cascade such as selfcheck,debate)") from None
    if isinstance(target, str):
        module, _, attr = target.partition(":")
        target = getattr(importlib.import_module(module), attr)
    return target(options)


def get_verifier(spec: str, options: VerifierOptions | None = None) -> Verifier:
    """The verifier named ``spec``, or the cascade ``"a,b[,c]"`` of registered verifiers."""
    options = options or VerifierOptions()
    names = [n.strip() for n in spec.split(",")]
    if any(not n for n in names):
        raise ConfigError(f"verifier {spec!r}: give a name, or names joined by commas such as selfcheck,debate")
    if len(names) == 1:
        return _one(names[0], options)
    return Cascade([_one(n, options) for n in names], options.band)


def parse_band(text: str) -> tuple[float, float]:
    """``"0,0.5"`` -> (0.0, 0.5); a ConfigError saying the expected form otherwise (the range is checked
    by :class:`Cascade`)."""
    try:
        lo, hi = (float(x) for x in text.split(","))
    except ValueError:
        raise ConfigError(f"--band {text!r}: give LO,HI, two probabilities such as 0,0.5") from None
    return lo, hi


__all__ = ["DEFAULT_BAND", "Cascade", "Cost", "OnCall", "OnVerdict", "Routed", "Verifier", "VerifierOptions", "available",
           "failed_verdict", "get_verifier", "parse_band", "register", "verdict_from_score"]
