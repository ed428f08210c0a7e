"""Verifiers: claims with their evidence in, one verdict per claim out; the registry of their names.

Registry (``halucheck run --verifier`` and ``halucheck eval --verifier`` take the same names):

- ``selfcheck`` (the default, ``config.DEFAULT_VERIFIER``), ``selfcheck-3shot``, ``judge-likert``,
  ``prometheus``, ``lynx``, ``consistency``: single-agent judges on the ``initial`` role's profile (``verifiers/judges.py``).
- ``debate``: the Markov-chain multi-agent debate (``verifiers/debate/``).
- ``collab-cal``: Collaborative Calibration (``verifiers/collab.py``).
- ``nli``: a local CrossEncoder NLI model, no LLM (``verifiers/nli.py``).
- ``direct`` and ``probe``: one prompt pass per evidence chunk, nothing decoded: the first reply token's
  Yes/No logits, or a head trained on the pass's hidden states (``verifiers/probe/``).
- ``arith``, ``citation``, ``code``, ``program``, ``source``: tool checks (``math``: a whole math answer's
  calculations and final result together, for ``eval`` on responses) (``verifiers/tools/``), which ``run`` routes
  claims of their kind to (:func:`routed`).

``"a,b[,c]"`` names a cascade of registered verifiers (``verifiers/cascade.py``).
"""

from __future__ import annotations

from typing import Callable

from halucheck.config import VerifierOptions
from halucheck.errors import ConfigError
from halucheck.registry import Registry
from halucheck.verifiers.base import Cost, OnCall, OnVerdict, Verifier, failed_verdict, verdict_from_score
from halucheck.verifiers.cascade import Cascade, Routed

# name -> "module:Class" (imported when used) or a factory taking VerifierOptions (registered at run time)
VERIFIERS: Registry[Callable[[VerifierOptions], Verifier]] = Registry(
    "verifier", hint=" (or a cascade such as selfcheck,debate)")
VERIFIERS.register("debate", "halucheck.verifiers.debate.verifier:DebateVerifier")
VERIFIERS.register("selfcheck", "halucheck.verifiers.judges:SelfCheck")
VERIFIERS.register("selfcheck-3shot", "halucheck.verifiers.judges:SelfCheck3Shot")
VERIFIERS.register("judge-likert", "halucheck.verifiers.judges:JudgeLikert")
VERIFIERS.register("prometheus", "halucheck.verifiers.judges:Prometheus")
VERIFIERS.register("lynx", "halucheck.verifiers.judges:Lynx")
VERIFIERS.register("consistency", "halucheck.verifiers.judges:Consistency")
VERIFIERS.register("collab-cal", "halucheck.verifiers.collab:CollabCal")
VERIFIERS.register("nli", "halucheck.verifiers.nli:NLI")
VERIFIERS.register("direct", "halucheck.verifiers.probe.verifier:Direct")
VERIFIERS.register("probe", "halucheck.verifiers.probe.verifier:Probe")
VERIFIERS.register("arith", "halucheck.verifiers.tools.arith:ArithVerifier")
VERIFIERS.register("citation", "halucheck.verifiers.tools.citations.verifier:CitationVerifier")
VERIFIERS.register("code", "halucheck.verifiers.tools.code:CodeCheck")
VERIFIERS.register("program", "halucheck.verifiers.tools.program:ProgramCheck")
VERIFIERS.register("math", "halucheck.verifiers.tools.program:MathAnswer")
VERIFIERS.register("source", "halucheck.verifiers.tools.sources:SourceVerifier")

register = VERIFIERS.register


def available() -> list[str]:
    """Verifier names, in registration order."""
    return VERIFIERS.names()


def get_verifier(spec: str, options: VerifierOptions | None = None) -> Verifier:
    """The verifier named ``spec``, or the cascade ``"a,b[,c]"`` of registered verifiers."""
    options = options or VerifierOptions()
    names = [n.strip() for n in spec.split(",")]
    if any(not n for n in names):
        raise ConfigError(f"verifier {spec!r}: give a name, or names joined by commas such as selfcheck,debate")
    if len(names) == 1:
        return VERIFIERS[names[0]](options)
    return Cascade([VERIFIERS[n](options) for n in names], options.band)


def routed(spec: str, options: VerifierOptions | None = None) -> Routed:
    """``spec`` (a verifier or cascade) for every claim but those of a tool-checkable kind, which go to
    their tool check: what ``halucheck run`` verifies with."""
    options = options or VerifierOptions()
    return Routed(get_verifier(spec, options), get_verifier, options)


__all__ = ["VERIFIERS", "Cascade", "Cost", "OnCall", "OnVerdict", "Routed", "Verifier", "VerifierOptions", "available",
           "failed_verdict", "get_verifier", "register", "routed", "verdict_from_score"]
