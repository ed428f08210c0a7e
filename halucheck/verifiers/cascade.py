"""Verifiers made of verifiers: a :class:`Cascade` (each stage sees only the claims the one before is unsure
of) and :class:`Routed` (claims of a tool-checkable kind go to their tool check, the rest to the main verifier).

A **cascade** (``"selfcheck,debate"``) runs its first verifier on every claim and sends on to the next
only the claims it is unsure of: no valid verdict, or P(hallucinated) inside the band ``[lo, hi]``. The
verdict of a claim is the last stage's that saw it; its chain holds every stage's turns, each turn naming
its verifier. See :data:`halucheck.config.DEFAULT_BAND` for how the default band was chosen.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Sequence

from halucheck.config import DEFAULT_BAND, VerifierOptions
from halucheck.errors import ConfigError
from halucheck.kinds import KINDS
from halucheck.records import Case, Verdict
from halucheck.registry import import_path
from halucheck.verifiers.base import OnCall, Verifier, closed_book


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
        self.reads_prose = all(s.reads_prose for s in self.stages)
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

    def preflight(self) -> None:
        for s in self.stages:
            s.preflight()

    def preflight_engine(self, engine: str) -> None:
        for s in self.stages:
            s.preflight_engine(engine)

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
    """Claims of a tool-checkable kind go to their checker (the kind's entry in :data:`halucheck.kinds.KINDS`),
    every other claim to ``main``:
    a calculation is evaluated, never judged by a model; a claim its kind's ``settled_by`` settles needs no call
    (a math answer's premise that its question states is factual, ``halucheck.verifiers.tools.premise``; the
    others go to ``main``); a math answer's
    final result is compared with programs the model writes for the question; code is run against independent
    solutions in the sandbox (where there is no sandbox, with a note, to ``main``); a result for which the
    programs found no majority is settled by its checker as an unsure "factual" (``settle``: not contradicted,
    not confirmed), not handed to a model to guess. ``main``'s verdicts on claims with no evidence at all are
    :func:`~halucheck.verifiers.base.closed_book` (never confident); a corpus document named as the answer's source
    is looked up in the corpus (``halucheck.verifiers.tools.sources``). Citations go to their checker only with a
    bibliography (``--bibliography``); without one they go to ``main`` too."""

    def __init__(self, main: Verifier, make: Callable[[str, VerifierOptions], Verifier],
                 options: VerifierOptions | None = None) -> None:
        """``make(name, options)`` builds a checker by its registered name (``halucheck.verifiers.get_verifier``)."""
        super().__init__(options or main.options)
        self.main = main
        self.name, self.uses_llm, self.reads_prose = main.name, main.uses_llm, main.reads_prose
        self.checkers: dict[str, Verifier] = {}
        self.unavailable: dict[str, str] = {}  # kind -> why its checker cannot run here
        # kind -> what settles one of its claims without a call when it can (its entry's ``settled_by``)
        self.settlers: dict[str, Callable[[Case], Verdict | None]] = {
            kind.name: import_path(kind.settled_by) for kind in KINDS.values() if kind.settled_by}
        for kind in KINDS.values():
            if kind.checker is None or (kind.needs and not getattr(self.options, kind.needs)):
                continue  # decided by ``main``
            checker = make(kind.checker, self.options)
            try:
                checker.preflight()  # given but unusable (a bibliography that does not load): say so now
            except ConfigError as exc:
                if not kind.optional:
                    raise
                self.unavailable[kind.name] = str(exc)
                continue
            self.checkers[kind.name] = checker

    def least_calls(self) -> int:
        return self.main.least_calls()

    def expected_calls(self, checks) -> int:
        return sum(self.checkers.get(c.claim.kind, self.main).least_calls() for c in checks)

    def describe(self) -> dict:
        return {**self.main.describe(), "tool_checks": {k: v.name for k, v in self.checkers.items()}}

    def preflight(self) -> None:
        self.main.preflight()

    def preflight_engine(self, engine: str) -> None:
        self.main.preflight_engine(engine)

    def verify(self, checks, engines, on_verdict=None, on_call=None):
        verdicts: list[Verdict | None] = [None] * len(checks)
        groups: dict[str, list[int]] = {}
        for i, c in enumerate(checks):
            settle = self.settlers.get(c.claim.kind)
            if settle is not None and (v := settle(c)) is not None:  # e.g. a premise its question states
                verdicts[i] = v
                if on_verdict is not None:
                    on_verdict(i, v)
                continue
            groups.setdefault(c.claim.kind if c.claim.kind in self.checkers else "", []).append(i)
        self.costs = {}
        for kind, idx in groups.items():
            verifier = self.checkers.get(kind, self.main)

            def emit(j: int, v: Verdict, idx=idx) -> None:
                if verifier is self.main and not checks[idx[j]].evidence:
                    v = closed_book(v)
                if on_verdict is not None:
                    on_verdict(idx[j], v)

            # a checker that may abstain hands its verdicts over once it has settled those it abstained on
            abstains = hasattr(verifier, "abstained")
            out = verifier.verify([checks[i] for i in idx], engines if verifier.uses_llm else None,
                                  on_verdict=None if abstains else emit, on_call=self._counted(on_call, verifier))
            self._add_costs(verifier.costs)
            if verifier is self.main:
                out = [closed_book(v) if not checks[i].evidence else v for i, v in zip(idx, out)]
            elif abstains:
                for j in verifier.abstained:  # no reference: neither confirmed nor contradicted, never a guess
                    out[j] = verifier.settle(out[j])
                for j, v in enumerate(out):
                    if on_verdict is not None:
                        on_verdict(idx[j], v)
            for i, v in zip(idx, out):
                verdicts[i] = v
        return verdicts  # type: ignore[return-value]

    def _add_costs(self, costs: dict) -> None:
        for name, c in costs.items():
            self.costs[name] = self.costs[name].merged(c) if name in self.costs else c

    def _counted(self, on_call: OnCall | None, checker: Verifier) -> OnCall | None:
        """``on_call`` for ``checker``'s claims, each claim's count shifted so that it passes :meth:`least_calls`
        (the main verifier's minimum, which a caller compares it with) exactly where it passes the checker's own
        minimum, which :meth:`expected_calls` already counted: the code check's fourth call is no call past it."""
        shift = self.least_calls() - checker.least_calls()
        if on_call is None or not shift:
            return on_call
        return lambda calls: on_call(calls + shift)


__all__ = ["Cascade", "Routed"]
