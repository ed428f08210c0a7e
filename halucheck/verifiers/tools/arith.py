"""``arith``: calculations stated in answers ("48 x 125 = 5800") evaluated exactly, never judged by a model.

:class:`ArithVerifier` (``--verifier arith``) is the FacTool-style math check: each calculation of a claim
(found by :func:`halucheck.kinds.calculations.find_calculations`) is evaluated by :mod:`halucheck.arithmetic`
(see its docstring for the verdicts it gives).
"""

from __future__ import annotations

import math
import time
from decimal import Context, Decimal
from fractions import Fraction
from typing import Sequence

from halucheck.arithmetic import ArithResult, recompute
from halucheck.kinds.calculations import find_calculations
from halucheck.records import Case, Turn, Verdict
from halucheck.verifiers.base import Cost, Verifier, failed_verdict

# Severity of a wrong result by its relative error |value - claimed| / |value|: below 1 % -> 1, below 10 % -> 2,
# below 50 % -> 3, below 200 % -> 4, else 5. Under 1 % is a slip in the last digits or a rounding the text does
# not own up to (2179253 for 2179253.67); under 10 % a wrong carry or a dropped small term; under 50 % a wrong
# operand or step; under 200 % the answer is off by up to about a factor of three (a term counted twice, a
# half for a whole); beyond that it is out by an order of magnitude, or its sign is wrong (relative error 2),
# or the true value is 0 (infinite): the number is no longer about the same quantity.
SEVERITY_BOUNDS = ((0.01, 1), (0.10, 2), (0.50, 3), (2.0, 4))

# P(hallucinated) of a decided verdict. The evaluation is exact, so the doubt left is not in the arithmetic but
# in reading the claim: whether the expression found (or given) is the one the text means. 0.02 / 0.98 keeps
# that small doubt visible and keeps log-odds finite where verdicts are pooled, without pretending a model
# weighed anything.
P_RIGHT, P_WRONG = 0.02, 0.98
P_ROUNDED = 0.35  # right only if a whole number is meant (2179253 of 2179253.67 elves; not 8706257 of 8706257.9 bags)


def severity_of(relative_error: float) -> int:
    """Severity 1-5 of a wrong result with this relative error (see :data:`SEVERITY_BOUNDS`)."""
    for bound, severity in SEVERITY_BOUNDS:
        if relative_error < bound:
            return severity
    return 5


def _show(value: Fraction) -> str:
    """A value for people: integers in full (up to 30 digits), else 12 significant digits (``≈`` when cut)."""
    if value.denominator == 1 and len(str(abs(value.numerator))) <= 30:
        return str(value.numerator)
    shown = Context(prec=12).divide(Decimal(value.numerator), Decimal(value.denominator))
    text = format(shown.normalize(), "f" if abs(shown.adjusted()) < 15 else "e")
    return text if Fraction(shown) == value else "≈ " + text


def _percent(relative_error: float) -> str:
    return "∞ (the value is 0)" if math.isinf(relative_error) else f"{relative_error * 100:.3g} %"


class ArithVerifier(Verifier):
    """``arith``: the FacTool math check. Every calculation of a claim is evaluated by :func:`recompute`; no model.

    The calculations are ``check.meta["expression"]`` and ``check.meta["claimed"]`` (and
    ``meta["approximate"]``, for ``≈``) when the claim carries them (a labelled calculation), else every
    ``expression = result`` :func:`find_calculations` finds in the claim's text (a sentence, or a whole
    response: FacTool has a model extract the calculations from a response; here this deterministic
    finder is the extractor). A claim is factual when all of its calculations are right:
    ``error_severity`` 0, ``p_hallucinated`` :data:`P_RIGHT`. One wrong result makes it not factual, with
    the worst wrong result's severity (:func:`severity_of`) and ``p_hallucinated`` :data:`P_WRONG`;
    ``confidence`` is 0.98 either way. No calculation found, or one that cannot be evaluated (unparseable,
    not allowed, too big) while none is wrong, gives a failed verdict saying why; a wrong result decides the
    claim whatever its other calculations are. The trace is one turn saying what was computed.
    """

    name = "arith"
    reads_prose = False
    uses_llm = False

    def describe(self) -> dict:
        return {"arith": {"severity_bounds": [list(b) for b in SEVERITY_BOUNDS], "p_hallucinated": [P_RIGHT, P_WRONG]}}

    def verify(self, checks: Sequence[Case], engines=None, on_verdict=None, on_call=None) -> list[Verdict]:
        t0 = time.perf_counter()
        out = []
        for i, c in enumerate(checks):
            v = self.verdict(c)
            out.append(v)
            if on_verdict is not None:
                on_verdict(i, v)
        self.costs = {self.name: Cost(claims=len(checks), wall_s=time.perf_counter() - t0)}
        return out

    def verdict(self, c: Case) -> Verdict:
        """The verdict on one claim's calculations."""
        meta = c.meta or {}
        if "expression" in meta or "claimed" in meta:
            if meta.get("expression") is None or meta.get("claimed") is None:
                return failed_verdict(self.name, "the claim's meta gives an expression or a claimed result, not both")
            results = [recompute(str(meta["expression"]), str(meta["claimed"]), approximate=bool(meta.get("approximate")))]
        else:
            results = [calc.recompute() for calc in find_calculations(c.claim.text)]
            if not results and c.claim.kind == "calculation" and "=" in c.claim.text:
                # a calculation the model listed, "expression = result", in a form the finder does not read
                expression, _, claimed = c.claim.text.rpartition("=")
                results = [recompute(expression.strip(), claimed.strip())]
        if not results:
            return failed_verdict(self.name, "no calculation found in the claim")
        lines = [self._line(r) for r in results]
        opinion = lines[0] if len(lines) == 1 else " ".join(f"[{k}] {line}" for k, line in enumerate(lines, 1))
        wrong = [r for r in results if r.matches is False]
        broken = [r for r in results if r.matches is None]
        if broken and not wrong:
            error = "; ".join(f"cannot evaluate {r.expression} = {r.claimed}: {r.error}" for r in broken)
            turn = Turn(state="S0", role="initial", opinion=opinion, factuality=None, error_severity=None,
                        error=error, verifier=self.name)
            return failed_verdict(self.name, error, turn)
        factual = not wrong
        severity = 0 if factual else max(severity_of(r.relative_error) for r in wrong)  # type: ignore[arg-type]
        p = (P_ROUNDED if any(r.rounded for r in results) else P_RIGHT) if factual else P_WRONG
        turn = Turn(state="S0", role="initial", opinion=opinion, factuality=factual, error_severity=severity,
                    p_factual=1.0 - p, verifier=self.name)
        return Verdict(factuality=factual, error_severity=severity, confidence=max(p, 1.0 - p), chain=[turn],
                       p_hallucinated=p, verifier=self.name)

    @staticmethod
    def _line(r: ArithResult) -> str:
        """``48 x 125 = 6000 (claimed 5800; off by 3.33 %)``: what was computed and how the claim fares."""
        if r.matches is None:
            return f"{r.expression} = ? (claimed {r.claimed}; cannot evaluate: {r.error})"
        shown = _show(r.value)  # type: ignore[arg-type]
        if r.matches:
            how = ("right" if r.value == r.claimed_value else "right, rounded to a whole number" if r.rounded
                   else "right to the precision stated")
        else:
            how = f"off by {_percent(r.relative_error)}"  # type: ignore[arg-type]
        rel = "≈" if shown.startswith("≈") else "="
        return f"{r.expression} {rel} {shown.removeprefix('≈ ')} (claimed {r.claimed}; {how})"
