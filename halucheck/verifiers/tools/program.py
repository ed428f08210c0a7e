"""Math answers checked by program: the question solved independently, the answer's final result compared.

A written calculation (``48 x 125 = 5800``) is checked by :mod:`halucheck.verifiers.tools.arith`; a wrong
*reasoning* with right arithmetic (a wrong equation set up from the question) is not. So a math answer's
final result is a claim of its own (kind ``result``, made by :func:`halucheck.claims.claims_of_answers`
for an answer :func:`halucheck.kinds.results.is_math_question` recognises), and :class:`ProgramCheck` (``--verifier program``)
checks it the way FacTool's and the program-of-thought papers do:

1. **Programs.** From the question alone, never the answer, the model writes a Python program that prints
   the result (``prompts/program.yaml``; free text, the program its first code block: a small model writing
   code inside a JSON string breaks it), :attr:`ProgramCheck.samples` of them at
   ``VerifierOptions.sample_temperature`` with a seed apiece. Identical requests (answers to the same
   question) are sent once.
2. **Execution.** Every program runs in the bubblewrap sandbox (:func:`halucheck.verifiers.tools.sandbox.run_python`,
   :data:`LIMITS`); its output's last number is its vote. Nothing is run in this process.
3. **Reference.** The value printed by more than half of the programs that printed a number, and by two at
   least (:func:`reference_of`; values equal to 12 significant digits count as one; a program that crashed
   casts no vote, but lowers the agreement below). Without such a majority, :attr:`ProgramCheck.more`
   programs more are asked for, up to :attr:`ProgramCheck.max_samples` (the first majority stops it).
4. **Verdict.** The claimed result matches the reference within the precision it is written with (as a
   calculation's result: :func:`halucheck.arithmetic.recompute`; ``15%`` also as 15): factual;
   else not factual, with a calculation's severity for its relative error
   (:func:`halucheck.verifiers.tools.arith.severity_of`). P(hallucinated) rests on the programs' agreement
   a (votes for the reference over programs asked): ``0.5 + 0.45 a`` when it differs, ``0.5 - 0.45 a``
   when it matches. No majority at all: the check **abstains** (a verdict without factuality, its index in
   :attr:`ProgramCheck.abstained`: ``eval`` counts it missing), and ``run`` settles it as an unsure "factual"
   (:meth:`ProgramCheck.settle`, P(hallucinated) :data:`P_UNSURE`), the programs' disagreement in its trace.
   So does a majority that contradicts the answer while :attr:`ProgramCheck.disputed_votes` programs or more
   printed the answer's own result: two independent programs reproduced it (on Factool math dev, a right
   answer was flagged by 5 programs of 7 against 2 that printed its result; no caught wrong answer had two).

The trace is one turn (state S0, verifier ``program``) with every program's output, the reference and its
votes, the comparison, and the first program that printed the reference, so the report shows what was run.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Sequence

from halucheck.engines.base import Request, Result, SamplingParams
from halucheck.errors import ConfigError
from halucheck.prompts import load as load_prompts
from halucheck.records import Case, Claim, Turn, Verdict
from halucheck.verifiers.base import Cost, Verifier, failed_verdict, failed_with_reason, turn_tokens
from halucheck.verifiers.tools import sandbox
from halucheck.arithmetic import recompute
from halucheck.kinds.calculations import find_calculations, list_calculations, unseen_calculations
from halucheck.kinds.results import claimed_of, final_result, result_claim
from halucheck.verifiers.tools.arith import severity_of
from halucheck.verifiers.tools.code_source import code_of

if TYPE_CHECKING:
    from halucheck.engines.pool import EnginePool

ROLE = "initial"
P_UNSURE = 0.45  # a result no program reference decides, not contradicted by anything: not flagged, unsure
SEED_STEP = 100  # program j is sampled with seed + SEED_STEP * (j + 1)
MAX_PROGRAM_CHARS = 4000
LIMITS = sandbox.Limits(wall_s=10.0, cpu_s=5.0, memory_mb=256, output_bytes=100_000)

def value_of(output: str) -> str | None:
    """A program's vote: the last number it printed, canonical (integers in full, other values to 12
    significant digits), or None."""
    found = re.findall(r"[-−]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", output.replace(",", ""))
    if not found:
        return None
    try:
        d = Decimal(found[-1].replace("−", "-"))
    except InvalidOperation:
        return None
    if not d.is_finite():
        return None
    if d == d.to_integral_value():
        return str(int(d))
    rounded = Decimal(format(d, ".12g"))
    return str(int(rounded)) if rounded == rounded.to_integral_value() else format(rounded.normalize(), "f")


def program_text(reply: str) -> str | None:
    """The program in a reply: its first fenced code block, else the whole reply; None when empty."""
    code = code_of(reply or "", first=True).strip("\n")
    return code if code.strip() else None


def _agrees(value: str, claimed: str):
    """The calculation check's outcome of ``claimed`` against a program's ``value`` (``15%`` also as 15)."""
    outcome = recompute(value, claimed)
    if outcome.matches is False and claimed.rstrip().endswith("%"):  # "15%" where the programs print 15
        plain = recompute(value, claimed.rstrip().rstrip("%"))
        outcome = plain if plain.matches else outcome
    return outcome


def reference_of(votes: Sequence[str | None]) -> tuple[str | None, int]:
    """(the value printed by more than half of the programs that printed one, and by two at least; its votes),
    else (None, the top value's votes). A program that crashed or printed no number casts no vote."""
    counted = Counter(v for v in votes if v is not None)
    if not counted:
        return None, 0
    value, n = counted.most_common(1)[0]
    return (value if n >= 2 and 2 * n > sum(counted.values()) else None), n


@dataclass
class _Problem:
    """One claim's work: the question, the claimed result, the programs asked for and what they printed."""

    question: str
    claimed: str
    unit: str
    requests: list[int] = field(default_factory=list)  # indices into the unique requests, one per program
    programs: list[str | None] = field(default_factory=list)
    votes: list[str | None] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # per program: what went wrong, or ""


def _backing(w: "_Problem") -> int:
    """How many programs printed the answer's own result."""
    return sum(1 for v in w.votes if v is not None and _agrees(v, w.claimed).matches)


class ProgramCheck(Verifier):
    """``program``: a math answer's final result against the majority of model-written programs run in the
    sandbox (see the module docstring)."""

    name = "program"
    reads_prose = False
    uses_llm = True
    samples = 3  # programs asked for first
    more = 2  # asked for next, while no majority has formed or a thin one contradicts the answer (_needs_more)
    max_samples = 7
    contradict_votes = 3  # a reference that contradicts the answer with fewer votes is asked again
    disputed_votes = 2  # programs printing the answer's own result that leave a contradicting majority undecided
    program_tokens = 512

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self.abstained: set[int] = set()

    def least_calls(self) -> int:
        return self.samples

    def describe(self) -> dict:
        return {"program": {"samples": self.samples, "more": self.more, "max_samples": self.max_samples,
                            "sample_temperature": self.options.sample_temperature,
                            "p_hallucinated": "differs: 0.5 + 0.45 * agreement; matches: 0.5 - 0.45 * agreement"}}

    def preflight(self) -> None:
        reason = sandbox.available()
        if reason is not None:
            raise ConfigError(f"the program check runs code only in the bubblewrap sandbox, unavailable here: {reason}")

    def _request(self, question: str, j: int) -> Request:
        p = load_prompts("program")["solve"]
        sampling = SamplingParams(temperature=max(self.options.sample_temperature, 1e-3),
                                  max_tokens=self.program_tokens, seed=self.options.seed + SEED_STEP * (j + 1))
        return Request(messages=({"role": "system", "content": p["system"].render()},
                                 {"role": "user", "content": p["task"].render(question=question.strip())}),
                       sampling=sampling, tag="program:solve")

    def verify(self, checks: Sequence[Case], engines: "EnginePool | None", on_verdict=None,
               on_call=None) -> list[Verdict]:
        self.preflight()  # never run anything unsandboxed
        t0 = time.perf_counter()
        cost = Cost(claims=len(checks))
        self.abstained = set()
        verdicts: list[Verdict | None] = [None] * len(checks)
        problems: dict[int, _Problem] = {}
        for i, c in enumerate(checks):
            given = (c.meta or {}).get("answer")  # a labelled final answer: "418826.8" or "The grooming costs $418826.8"
            claimed = claimed_of(str(given)) if given not in (None, "") else claimed_of(c.claim.text)
            if not c.claim.question or not c.claim.question.strip():
                verdicts[i] = failed_with_reason(
                    self.name, "the program check needs the question the answer solves")
            elif claimed is None:
                verdicts[i] = failed_with_reason(
                    self.name, "no number in the claim to compare with the programs' result")
            else:
                unit = re.sub(r"^.*?" + re.escape(str(claimed)), "", c.claim.text, count=1).strip(" .") \
                    if str(claimed) in c.claim.text else ""
                problems[i] = _Problem(c.claim.question, str(claimed), unit)
        results: list[Result] = []
        asked = 0
        while problems and asked < self.max_samples:
            size = self.samples if asked == 0 else min(self.max_samples, asked + self.more)
            todo = [i for i, w in problems.items() if asked == 0 or self._needs_more(w)]
            if not todo:
                break
            batch: list[Request] = []
            unique: dict[str, int] = {}
            for i in todo:
                for j in range(asked, size):
                    r = self._request(problems[i].question, j)
                    problems[i].requests.append(len(results) + unique.setdefault(r.key(), len(batch)))
                    if len(unique) > len(batch):
                        batch.append(r)
            results += engines.engine_for(ROLE).generate(batch) if batch else []
            cost.add_results(results[len(results) - len(batch):])
            self._run([(i, j) for i in todo for j in range(asked, size)], problems, results)
            for i in todo:
                if on_call is not None:
                    for n in range(asked + 1, size + 1):
                        on_call(n)
            asked = size
        for i, w in problems.items():
            verdicts[i] = self._verdict(w, [results[k] for k in w.requests])
            if verdicts[i].factuality is None:
                self.abstained.add(i)
        for i, v in enumerate(verdicts):
            if on_verdict is not None:
                on_verdict(i, v)  # type: ignore[arg-type]
        cost.wall_s = time.perf_counter() - t0
        self.costs = {self.name: cost}
        return verdicts  # type: ignore[return-value]

    def _run(self, jobs: list[tuple[int, int]], problems: dict[int, _Problem], results: list[Result]) -> None:
        """Program j of each claim i in ``jobs``: read from its reply and run in the sandbox."""
        for i, j in jobs:
            w = problems[i]
            res = results[w.requests[j]]
            code = program_text(res.text) if res.ok else None
            if not code or len(code) > MAX_PROGRAM_CHARS:
                w.programs.append(None)
                w.notes.append("invalid reply" + (f" ({res.error})" if res.error else ""))
            else:
                w.programs.append(code)
                w.notes.append("")
            w.votes.append(None)

        def one(job: tuple[int, int]) -> tuple[str | None, str]:
            i, j = job
            code = problems[i].programs[j]
            if code is None:
                return None, problems[i].notes[j]
            run = sandbox.run_python(code, limits=LIMITS)
            if not run.ok:
                why = run.killed_reason or f"exit code {run.returncode}"
                last = run.stderr.strip().splitlines()[-1:] if run.stderr.strip() else []
                return None, f"failed ({why}{': ' + last[0][:120] if last else ''})"
            vote = value_of(run.stdout)
            return vote, "" if vote is not None else "printed no number"

        with ThreadPoolExecutor(max_workers=2) as pool:
            for (i, j), (vote, note) in zip(jobs, pool.map(one, jobs)):
                problems[i].votes[j], problems[i].notes[j] = vote, note

    def _needs_more(self, w: _Problem) -> bool:
        """Whether more programs are asked for: no result has a majority yet, or the majority contradicts the
        answer while it is thin (fewer than :attr:`contradict_votes` programs) or a program printed the answer's
        own result: a reference that calls an answer wrong must hold when more programs are asked."""
        ref, votes = reference_of(w.votes)
        if ref is None:
            return True
        if _agrees(ref, w.claimed).matches is not False:
            return False
        return votes < self.contradict_votes or _backing(w) > 0

    def _verdict(self, w: _Problem, results: list[Result]) -> Verdict:
        asked = len(w.votes)
        ref, votes = reference_of(w.votes)
        cast = sum(v is not None for v in w.votes)
        shown = ", ".join(v if v is not None else f"none ({note})" for v, note in zip(w.votes, w.notes))
        lines = [f"Solved the question independently: {asked} programs written by the model, run in the sandbox; "
                 f"they printed {shown}."]
        tokens = turn_tokens(results)
        if ref is None:
            error = f"undecided: no result has a majority among the {asked} programs"
            lines.append(f"No reference: no result has a majority (the commonest has {votes} of the {cast} printed).")
            turn = Turn(state="S0", role="initial", opinion="\n".join(lines), factuality=None, error_severity=None,
                        error=error, verifier=self.name, **tokens)
            return failed_verdict(self.name, error, turn)
        outcome = _agrees(ref, w.claimed)
        agreement = votes / asked
        unit = f" {w.unit}" if w.unit else ""
        if outcome.matches is None:
            error = f"cannot compare {w.claimed} with the reference {ref}: {outcome.error}"
            turn = Turn(state="S0", role="initial", opinion="\n".join(lines + [error]), factuality=None,
                        error_severity=None, error=error, verifier=self.name, **tokens)
            return failed_verdict(self.name, error, turn)
        backed = _backing(w)
        if not outcome.matches and backed >= self.disputed_votes:
            why = (f"{ref} has {votes} of the {cast} printed, but {backed} programs printed the answer's own result "
                   f"{w.claimed}")
            error = f"undecided: {why}"
            lines.append(f"No reference: {why}.")
            turn = Turn(state="S0", role="initial", opinion="\n".join(lines), factuality=None, error_severity=None,
                        error=error, verifier=self.name, **tokens)
            return failed_verdict(self.name, error, turn)
        if outcome.matches:
            factual, severity, p = True, 0, 0.5 - 0.45 * agreement
            lines.append(f"Reference {ref} ({votes} of {cast} results printed, {asked} programs run); the answer's "
                         f"final result {w.claimed}{unit} matches it.")
        else:
            factual, severity, p = False, severity_of(outcome.relative_error or 0.0), 0.5 + 0.45 * agreement
            rel = outcome.relative_error
            off = "∞" if rel is None or rel == float("inf") else f"{rel * 100:.3g} %"
            lines.append(f"Reference {ref} ({votes} of {cast} results printed, {asked} programs run); the answer's "
                         f"final result {w.claimed}{unit} differs from it (off by {off}).")
        program = next(p for p, v in zip(w.programs, w.votes) if v == ref)
        lines.append(f"A program that printed {ref}:\n{program.strip()}")
        turn = Turn(state="S0", role="initial", opinion="\n".join(lines), factuality=factual, error_severity=severity,
                    p_factual=1.0 - p, verifier=self.name, **tokens)
        return Verdict(factuality=factual, error_severity=severity, confidence=max(p, 1.0 - p), chain=[turn],
                       p_hallucinated=p, verifier=self.name)

    @staticmethod
    def settle(v: Verdict) -> Verdict:
        """What ``run`` makes of an abstention (no majority among the programs): the result is neither
        contradicted nor confirmed, so it is not flagged, at P(hallucinated) :data:`P_UNSURE`; a model asked to
        solve the question closed-book instead flagged a right answer on dev (the 1.5B guesses)."""
        turn = replace(v.chain[0], factuality=True, error_severity=0, error=None, p_factual=1.0 - P_UNSURE,
                       opinion=v.chain[0].opinion + "\nNot contradicted, not confirmed: the result is not flagged.")
        return Verdict(factuality=True, error_severity=0, confidence=1.0 - P_UNSURE, chain=[turn],
                       p_hallucinated=P_UNSURE, verifier=v.verifier)


def merge_arith(a: Verdict, b: Verdict) -> Verdict:
    """One arith verdict from two on the same answer: a wrong calculation in either decides; their turns kept."""
    decided = [v for v in (a, b) if v.factuality is not None]
    if not decided:
        return replace(a, chain=a.chain + b.chain)
    worst = next((v for v in decided if v.factuality is False), decided[0])
    return replace(worst, error_severity=max(v.error_severity or 0 for v in decided), chain=a.chain + b.chain,
                   error=None)


class MathAnswer(Verifier):
    """``math``: a whole math answer checked by tools, FacTool's math check on a response: its written
    calculations (:class:`~halucheck.verifiers.tools.arith.ArithVerifier`) and its final result (``meta["answer"]``,
    else :func:`halucheck.kinds.results.final_result` of the text) against the programs' reference (:class:`ProgramCheck`). Not factual
    when either finds an error (the worse P(hallucinated) and severity); factual when every part that could
    decide says so, with P(hallucinated) :data:`P_UNSURE` when only the calculations could (right arithmetic
    says nothing of the reasoning: on the dev split 9 of the 17 such answers are labelled wrong). A final result
    the programs found no majority for is settled as ``run`` settles it (:meth:`ProgramCheck.settle`: not
    flagged, P :data:`P_UNSURE`), so ``eval -v math`` scores what a user gets; no verdict only when there is
    neither a calculation nor a final result."""

    name = "math"
    reads_prose = False
    uses_llm = True

    def __init__(self, options=None) -> None:
        from halucheck.verifiers.tools.arith import ArithVerifier

        super().__init__(options)
        self.arith, self.program = ArithVerifier(self.options), ProgramCheck(self.options)

    def least_calls(self) -> int:
        return self.program.least_calls()

    def describe(self) -> dict:
        return {**self.arith.describe(), **self.program.describe()}

    def preflight(self) -> None:
        self.program.preflight()

    def verify(self, checks, engines, on_verdict=None, on_call=None):
        # the calculations the regex finder reads, and those the model lists that it missed (FacTool's step)
        listed = list_calculations(engines.engine_for(ROLE), [c.claim.text for c in checks])
        found = [[(c.expression + " = " + c.claimed, 0, 0) for c in find_calculations(k.claim.text)] for k in checks]
        extra = [Case(Claim(text, None, "calculation")) for i, out in enumerate(listed)
                 for text in unseen_calculations(out.value or [], found[i])]
        owner = [i for i, out in enumerate(listed) for _ in unseen_calculations(out.value or [], found[i])]
        calcs = self.arith.verify(checks)
        for i, v in zip(owner, self.arith.verify(extra)):
            calcs[i] = merge_arith(calcs[i], v)
        results = []
        for c in checks:
            answer = (c.meta or {}).get("answer")
            found = final_result(c.claim.text, c.claim.question) if answer is None else None
            text = result_claim(found) if found is not None else f"The final answer is {answer}."
            results.append(Case(Claim(text, c.claim.question, "result"), meta={"answer": answer} if answer else {}))
        solved = self.program.verify(results, engines, on_call=on_call)
        for j in self.program.abstained:  # no majority among the programs: not contradicted, not confirmed
            solved[j] = ProgramCheck.settle(solved[j])
        listing = Cost()
        for out in listed:
            listing = listing.merged(out.cost)
        self.costs = {"math": self.program.costs["program"].merged(listing)}
        out = []
        for i, (a, p) in enumerate(zip(calcs, solved)):
            decided = [v for v in (a, p) if v.factuality is not None]
            if not decided:
                v = failed_verdict(self.name, f"{a.error}; {p.error}", None)
                v = replace(v, chain=a.chain + p.chain)
            else:
                wrong = [v for v in decided if v.factuality is False]
                worst = max(wrong or decided, key=lambda v: v.p_hallucinated or 0.0)
                severity = max((v.error_severity or 0 for v in wrong), default=0)
                v = replace(worst, error_severity=severity, chain=a.chain + p.chain, verifier=self.name,
                            factuality=not wrong)
                if not wrong and p.factuality is None:  # right arithmetic vouches for no reasoning: unsure
                    v = replace(v, p_hallucinated=P_UNSURE, confidence=1.0 - P_UNSURE)
            out.append(v)
            if on_verdict is not None:
                on_verdict(i, v)
        return out


__all__ = ["MathAnswer", "ProgramCheck", "reference_of", "program_text", "value_of"]
