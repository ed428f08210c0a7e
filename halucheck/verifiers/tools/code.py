"""Check code answers by running them: FacTool's code check, inside the bubblewrap sandbox.

A code claim is an answer (``claim.text``: Python source) to a task (``claim.question``: a function
signature with its docstring, as in HumanEval, or a description). :class:`CodeCheck` (``--verifier code``):

1. **Queries** (one ``generate`` call for every claim at once, on the ``initial`` role's engine): from the
   task alone, never the answer, the model writes :attr:`CodeCheck.tests` test inputs (one greedy request,
   reply ``{"inputs": ["<arguments of one call>", ...]}``: the arguments as Python literals, read with
   :func:`ast.literal_eval` only) and :attr:`CodeCheck.solutions` independent solutions (one sampled
   request each, a seed apiece, free text whose code block is the solution: a small model writing code
   inside a JSON string breaks it). Identical requests (answers to the same task) are sent once. The calls
   the task itself states as examples (``>>> f(2)``, ``f([1]) == 3``; :func:`~halucheck.verifiers.tools.code_source.examples_of`,
   at most :attr:`CodeCheck.max_examples`) come first among the inputs. The reply first types the
   parameters (the task's annotations win); written inputs that do not fit those types are dropped or read
   as meant (:mod:`~halucheck.verifiers.tools.code_inputs`), inputs drawn from the types fill in for them (up
   to :attr:`CodeCheck.typed`), and :attr:`CodeCheck.edges` edge cases made from the inputs that fit follow.
2. **Execution**: the answer and every solution run in the sandbox (:func:`halucheck.verifiers.tools.sandbox.run_python`),
   one run per program with all inputs. The program run there is the fixed
   :data:`~halucheck.verifiers.tools.code_run.HARNESS`; the task, the code and the inputs reach it as JSON
   on its stdin and are compiled and called only inside the sandbox.
   Nothing the model or the answer wrote is ever executed in this process (here it is only parsed with
   :mod:`ast`). Each call has :attr:`CodeCheck.input_timeout_s` seconds; the run as a whole has that per
   input plus a margin, and outputs already printed survive a run that is killed.
3. **Reference**: per input, the output that more than half of the requested solutions return (a solution
   whose reply was invalid, or that raises or times out on the input, votes for nothing). An input without
   such a majority is skipped: tied or scattered solutions, or an input most solutions reject (they raise).
   On a drawn input or an edge case the reference must be that of every working solution (one that returned
   a value somewhere), one in five aside (such an input may lie outside what the task allows); and where two
   solutions or more return the answer's own output, no majority stands against it.
   While an input has outputs but no majority, or no input has a reference at all (solutions that crashed
   or gave no code), :attr:`CodeCheck.more` solutions more are asked for and run, up to
   :attr:`CodeCheck.max_solutions`; the majority is then of all the solutions asked for. So too while a
   reference that contradicts the answer is thin (fewer than three votes, or a solution on the answer's side):
   it must hold when more solutions are asked, as the math check's programs must.
4. **Verdict**: the answer fails when, on any input with a reference, it returns something else or
   raises, times out or does not load; it is factual when it matches the reference on every such input.
   No usable input (no valid test, or no majority anywhere) gives a failed verdict saying why, except for
   an answer that does not even parse: it can run on no input, so it fails without any model call.

Decoding is the check's own: greedy for the test inputs, ``VerifierOptions.sample_temperature`` with seeds
``seed + 100 * j`` for solution j, and token budgets for code (:attr:`CodeCheck.tests_tokens`,
:attr:`CodeCheck.solution_tokens`). The ``initial`` role's ``sampling:`` settings are not applied: they are
tuned for the debate's prose, and a repetition penalty or an n-gram ban breaks code, which repeats itself.

Outputs are compared in a canonical form (``_canon`` in the harness): floats to 9 significant digits and
``2.0`` as ``2`` (HumanEval compares with ``==``), sets and dicts sorted, long outputs by a hash.

Severity (0-5, as the debate's): 0 factual; **3** a wrong output (the code runs but computes something
else); **4** a crash, timeout or code that does not load on an input with a reference (it fails outright).

P(hallucinated), from the share d of usable inputs the answer got wrong (crashes included):
``0.5 + 0.5 * d`` when it fails (one wrong input of five: 0.6; all wrong: 1.0), ``0.5 / (1 + u)`` when it
agrees on all u usable inputs (one input: 0.25; five: 0.083): more agreeing inputs, less doubt. An answer
that does not parse: 1.0. ``confidence`` is that probability for the side the verdict took.

The trace is one turn (state S0, role ``initial``, verifier ``code``) listing every input with the
reference, the votes behind it and the answer's output, and which inputs disagreed.

The entry point is ``check.meta["entry_point"]`` when given; else the function the task leaves to write
(the last top-level ``def`` of the task whose body is only a docstring, else its last top-level ``def``: in
HumanEval helpers such as ``poly`` come first); else, for a task in prose, the answer's last top-level
``def``, whose signature the model is then given.

Reading code and test inputs (``ast`` only) is in :mod:`halucheck.verifiers.tools.code_source`; running
programs in the sandbox and the majority reference in :mod:`halucheck.verifiers.tools.code_run`.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Sequence

from halucheck.verifiers.tools import sandbox
from halucheck.engines.base import Request, Result, SamplingParams
from halucheck.errors import ConfigError
from halucheck.prompts import load as load_prompts
from halucheck.records import Check, Turn, Verdict
from halucheck.verifiers.base import Cost, Verifier, failed_verdict, failed_with_reason, turn_tokens
from halucheck.verifiers.tools.code_inputs import (
    TYPES,
    Param,
    call_fits,
    edge_calls,
    joined,
    parameters_of,
    read_input,
    typed_calls,
    with_declared,
)
from halucheck.verifiers.tools.code_run import Output, reference_of, run_program, shorten
from halucheck.verifiers.tools.code_source import (
    MAX_CODE_CHARS,
    arity_of,
    code_of,
    entry_point,
    examples_of,
    function_defs,
    parse_call,
    parse_source,
    program_of,
    reshaped,
    signature_of,
    syntax_error,
)

if TYPE_CHECKING:
    from halucheck.engines.pool import EnginePool

ROLE = "initial"
SEVERITY_WRONG = 3  # runs, but returns something other than the reference
SEVERITY_CRASH = 4  # raises, times out or does not load where the reference has a value
SEED_STEP = 100  # solution j is sampled with seed + SEED_STEP * (j + 1)
DRAWN = ("typed", "edge")  # inputs no model wrote (code_inputs): a reference there needs every working solution


# ---------------------------------------------------------------- the verifier


@dataclass
class _Task:
    """One claim's work: what to ask, what to run, what came back."""

    task: str
    entry: str
    signature: str | None
    program: str
    setup: str | None
    requests: list[int]  # indices into the replies of every round: tests first, then the solutions
    calls: list[str] | None = None
    origins: list[str] = field(default_factory=list)  # per call: "example", "model", "typed" or "edge"
    examples: int = 0  # the first calls are the examples the task states
    annotated: list[Param] | None = None  # the function's parameters, typed by the task's annotations alone
    params: list[Param] | None = None  # the function's parameters, typed by the task or the model
    drawn_for: list[Param] | None = None  # the types inputs are drawn for (the model's, even where params drop them)
    conflict: list[str] = field(default_factory=list)  # written inputs none of which fit the declared types
    unfit: list[str] = field(default_factory=list)  # inputs written that do not fit the parameters
    tests_error: str | None = None
    solutions: list[str | None] = field(default_factory=list)  # each solution's program, None when invalid
    solution_errors: list[str | None] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # test inputs written that were not literal arguments
    rejected: list[str] = field(default_factory=list)  # first inputs written, which every program refused alike
    rejected_with: str | None = None  # the error they all raised
    reshaped: bool = False  # the rejected inputs were read again as arguments wrapped in one list
    runs: list[list[Output]] = field(default_factory=list)  # the answer's outputs, then each solution's


class CodeCheck(Verifier):
    """``code``: FacTool's code check, run in the bubblewrap sandbox (see the module docstring)."""

    name = "code"
    reads_prose = False
    uses_llm = True
    tests = 5  # test inputs asked for (FacTool generated 3)
    typed = 5  # at most this many inputs drawn for the parameters' types, filling in up to `tests` inputs
    edges = 5  # edge cases made from the inputs that fit (code_inputs.edge_calls)
    solutions = 3  # independent solutions asked for first (FacTool: 3); the reference needs more than half
    more = 2  # asked for next, while an input has outputs but no majority or no input has a reference
    max_solutions = 7
    max_examples = 5  # calls taken from the examples the task states
    input_timeout_s = 2.0  # per call, and per load of the task or the code
    memory_mb = 512
    workers = 2  # sandbox runs at once
    tests_tokens = 384
    solution_tokens = 768

    def least_calls(self) -> int:
        return 1 + self.solutions

    def describe(self) -> dict:
        return {"code": {"tests": self.tests, "typed": self.typed, "edges": self.edges,
                         "solutions": self.solutions, "more": self.more,
                         "max_solutions": self.max_solutions, "max_examples": self.max_examples,
                         "input_timeout_s": self.input_timeout_s,
                         "sample_temperature": self.options.sample_temperature,
                         "severity": {"wrong": SEVERITY_WRONG, "crash": SEVERITY_CRASH},
                         "p_hallucinated": "fails: 0.5 + 0.5 * share of usable inputs wrong; "
                                           "passes: 0.5 / (1 + usable inputs); does not parse: 1"}}

    def check(self) -> None:
        reason = sandbox.available()
        if reason is not None:
            raise ConfigError(f"the code verifier runs code only in the bubblewrap sandbox, unavailable here: {reason}")

    # -- requests -----------------------------------------------------------------------------

    def _messages(self, section: str, work: _Task) -> tuple[dict, ...]:
        p = load_prompts("codecheck")[section]
        ctx = {"task": work.task.strip("\n"), "entry": work.entry, "signature": work.signature, "k": self.tests,
               "types": ", ".join(f'"{t}"' for t in TYPES),
               "names": [p.name for p in work.annotated or []],
               "rejected": work.rejected, "rejected_with": work.rejected_with}
        return ({"role": "system", "content": p["system"].render(**ctx)},
                {"role": "user", "content": p["task"].render(**ctx)})

    def _tests_request(self, work: _Task) -> Request:
        parameter = {"type": "object", "additionalProperties": False, "required": ["name", "type"],
                     "properties": {"name": {"type": "string"}, "type": {"enum": list(TYPES)}}}
        schema = {"type": "object", "additionalProperties": False, "required": ["parameters", "inputs"], "properties": {
            "parameters": {"type": "array", "maxItems": 8, "items": parameter},
            "inputs": {"type": "array", "minItems": 1, "maxItems": self.tests,
                       "items": {"type": "string"}}}}
        return Request(messages=self._messages("tests", work), schema=schema,
                       sampling=SamplingParams(temperature=0.0, max_tokens=self.tests_tokens), tag="code:tests")

    def _solution_requests(self, work: _Task, first: int, stop: int) -> list[Request]:
        """Solutions ``first`` to ``stop - 1``: free text, the code in its code block (a small model writing code
        inside a JSON string breaks it)."""
        base = SamplingParams(temperature=max(self.options.sample_temperature, 1e-3), max_tokens=self.solution_tokens)
        # seeds far apart: a retry adds its attempt number to the seed, and must not repeat another solution
        return [Request(messages=self._messages("solution", work),
                        sampling=replace(base, seed=self.options.seed + SEED_STEP * (j + 1)), tag="code:solution")
                for j in range(first, stop)]

    # -- verify -------------------------------------------------------------------------------

    def verify(self, checks: Sequence[Check], engines: "EnginePool | None", on_verdict=None,
               on_call=None) -> list[Verdict]:
        self.check()  # never run anything unsandboxed
        t0 = time.perf_counter()
        cost = Cost(claims=len(checks))
        verdicts: list[Verdict | None] = [None] * len(checks)
        works: dict[int, _Task] = {}
        unique: dict[str, int] = {}
        batch: list[Request] = []

        def add(request: Request) -> int:
            key = request.key()
            if key not in unique:
                unique[key] = len(batch)
                batch.append(request)
            return unique[key]

        for i, c in enumerate(checks):
            task, answer = c.claim.question, c.claim.text
            if not task or not task.strip():
                verdicts[i] = failed_with_reason(
                    self.name, "the code check needs the task the code answers (the claim's question)")
                continue
            entry = entry_point(task, answer, c.meta)
            if entry is None:
                verdicts[i] = failed_with_reason(
                    self.name, "no function to test: give meta entry_point, or a def in the task or answer")
                continue
            program = program_of(task, answer, entry)
            broken = syntax_error(program)
            if broken is not None:  # runs on no input whatever the reference: decided without the model
                verdicts[i] = self._unparsable(entry, broken)
                continue
            in_task = any(d.name == entry for d in function_defs(task))
            work = _Task(task=task, entry=entry, signature=None if in_task else signature_of(code_of(answer), entry),
                         program=program, setup=task if parse_source(task) is not None else None, requests=[],
                         annotated=parameters_of([task, program], entry))
            work.requests = [add(self._tests_request(work)), *(add(r) for r in self._solution_requests(work, 0, self.solutions))]
            works[i] = work

        results: list[Result] = engines.engine_for(ROLE).generate(batch) if batch else []
        cost.add_results(results)
        for work in works.values():
            self._read_tests(work, results[work.requests[0]])
            self._read_solutions(work, [results[k] for k in work.requests[1:]])
        self._run_all(works)
        # inputs every program refused with one error: read again where they wrap the arguments in one list
        # (no call), else asked again once
        refused = {i: w for i, w in works.items() if self._refuse_inputs(w)}
        again = {i: w for i, w in refused.items() if not self._reshape(w)}
        read_again = {i: w for i, w in refused.items() if i not in again}
        for w in read_again.values():
            w.runs = []
        self._run_all(read_again)
        if again:
            more = engines.engine_for(ROLE).generate([self._tests_request(w) for w in again.values()])
            cost.add_results(more)
            for (i, w), res in zip(again.items(), more):
                w.requests[0] = len(results)
                results.append(res)
                self._read_tests(w, res)
                w.runs = []
            self._run_all(again)
        while True:  # more solutions where an input has outputs but no majority yet
            todo = {i: w for i, w in works.items() if len(w.solutions) < self.max_solutions
                    and (self._undecided(w) or self._challenged(w))}
            if not todo:
                break
            batch, unique, first = [], {}, {}
            for i, w in todo.items():
                first[i] = len(w.solutions)
                for r in self._solution_requests(w, first[i], min(self.max_solutions, first[i] + self.more)):
                    w.requests.append(len(results) + unique.setdefault(r.key(), len(batch)))
                    if len(unique) > len(batch):
                        batch.append(r)
            more = engines.engine_for(ROLE).generate(batch)
            cost.add_results(more)
            results += more
            for i, w in todo.items():
                self._read_solutions(w, [results[k] for k in w.requests[1 + first[i]:]])
            self._run_all(todo)
        for i, work in works.items():
            verdicts[i] = self._verdict(work, [results[k] for k in work.requests])
        for i, v in enumerate(verdicts):
            if on_call is not None and i in works:
                asked_again = bool(works[i].rejected) and not works[i].reshaped
                for n in range(1, len(works[i].requests) + asked_again + 1):  # + inputs asked again
                    on_call(n)
            if on_verdict is not None:
                on_verdict(i, v)  # type: ignore[arg-type]
        cost.wall_s = time.perf_counter() - t0
        self.costs = {self.name: cost}
        return verdicts  # type: ignore[return-value]

    def _undecided(self, work: _Task) -> bool:
        """Whether more solutions could decide: an input has outputs from the solutions but none with a
        majority of those asked for, or no input has a reference at all (solutions that crashed or whose
        reply held no code vote for nothing: the task would go undecided). Drawn inputs and edge cases may lie
        outside what the task allows: a split on one of them is never worth a call."""
        referenced = 0
        for t in range(len(work.calls or [])):
            ref = self._majority(work, t)[0]  # on a written input, the plain majority
            referenced += ref is not None
            written = work.origins[t] not in DRAWN
            if ref is None and written and any(run[t].value is not None for run in work.runs[1:] if run):
                return True
        return bool(work.calls) and not referenced

    def _majority(self, work: _Task, t: int) -> tuple[str | None, int, str | None]:
        """Input ``t``'s majority output among the solutions, its votes, and why a majority is left out: on a
        drawn input or an edge case it must be every working solution's (one that returned a value on some input;
        one in five may dissent): such an input may lie outside what the task allows, where the answer need
        not do anything."""
        outputs = [run[t] for run in work.runs[1:] if run]
        ref, votes = reference_of(outputs, len(work.solutions) or self.solutions)
        working = sum(any(o.value is not None for o in run) for run in work.runs[1:])
        if ref is not None and work.origins[t] in DRAWN and votes < max(3, working - working // 5):
            what = "an edge case" if work.origins[t] == "edge" else "a drawn input"
            return None, votes, (f"{what} with {votes} of the {working} working solutions agreeing: counted only "
                                 "when all do, but one in five")
        return ref, votes, None

    def _reference(self, work: _Task, t: int) -> tuple[str | None, int, str | None]:
        """Input ``t``'s reference, its votes, and why it has none although it may have a majority
        (:meth:`_majority`): no reference stands against the answer where two solutions or more return the
        answer's own output (a majority of a small model's solutions is no proof)."""
        ref, votes, why = self._majority(work, t)
        if ref is None:
            return None, votes, why
        outputs = [run[t] for run in work.runs[1:] if run]
        answer = _answer(work, t)
        same = sum(o.value == answer.value for o in outputs) if answer.value not in (None, ref) else 0
        if same >= 2:
            return None, votes, f"{same} solutions return the answer's output"
        return ref, votes, None

    def _challenged(self, work: _Task) -> bool:
        """Whether a reference that contradicts the answer is thin: fewer than three votes, or a solution that
        returns the answer's own output. More solutions then decide whether it holds (as the math check asks
        more programs)."""
        for t in range(len(work.calls or [])):
            ref, votes, _ = self._reference(work, t)
            answer = _answer(work, t)
            if ref is None or answer.value == ref:
                continue
            siding = answer.value is not None and any(run[t].value == answer.value for run in work.runs[1:] if run)
            if votes < 3 or siding:
                return True
        return False

    def _refuse_inputs(self, work: _Task) -> bool:
        """Whether the answer and every solution that ran raised one and the same error on every model-written
        input (not a timeout): the inputs, not the programs, are then wrong. Marks them as rejected, to be
        asked again once (never for the task's own examples, never twice)."""
        written = [t for t, origin in enumerate(work.origins) if origin == "model"]
        if work.rejected or not written:
            return False
        runs = [run for run in work.runs if run]
        errors = {run[t].error for run in runs for t in written}
        error = next(iter(errors)) if len(errors) == 1 else None
        if len(runs) < 2 or error is None or error.startswith(("Timeout", "killed", "not run", "no output")):
            return False
        work.rejected, work.rejected_with = [work.calls[t] for t in written], error
        return True

    def _reshape(self, work: _Task) -> bool:
        """Whether the refused inputs (a TypeError) all read as the model meant them: one list holding the
        arguments (``f([3, 4])`` for ``f(a, b)``), or several inputs of a one-parameter function
        (``code_source.reshaped``). Then they are replaced by those calls, without asking the model again."""
        arity = arity_of([work.task, work.program], work.entry)
        if arity is None or not (work.rejected_with or "").startswith("TypeError"):
            return False
        calls = [reshaped(c, work.entry, arity) for c in work.rejected]
        if not all(calls):
            return False
        self._set_calls(work, list(dict.fromkeys(c for group in calls for c in group)))
        work.reshaped = True
        return True

    def _read_tests(self, work: _Task, tests: Result) -> None:
        """The calls to run: the examples the task states, the test inputs the model wrote that fit the
        parameters (as typed by the task, else by the model's reply; invalid ones are noted, never raised),
        typed draws for those that do not, then edge cases made from them."""
        work.dropped, work.unfit, work.tests_error = [], [], None
        written: list = []
        declared = None
        if not tests.ok:
            work.tests_error = f"the test inputs reply was invalid ({tests.error})"
        elif isinstance(tests.parsed, dict):
            written, declared = tests.parsed.get("inputs", []), tests.parsed.get("parameters")
        annotated = work.annotated
        typed = with_declared(annotated, declared) if annotated is not None else None
        texts = [t for t in written if isinstance(t, str)]
        work.params = work.drawn_for = typed
        calls = self._written_calls(work, texts)
        if not calls and work.unfit and typed != annotated:
            # the types the model declared fit none of its inputs: either may be wrong, so the inputs are sorted
            # by the task's annotations alone and run beside numbers drawn for the declared types; the
            # sandbox tells which ones the programs take
            work.conflict, work.params, work.dropped, work.unfit = list(work.unfit), annotated, [], []
            calls = self._written_calls(work, texts)
        work.dropped += [str(t) for t in written if not isinstance(t, str)]
        self._set_calls(work, calls)
        if not work.calls:
            work.tests_error = work.tests_error or "none of the test inputs written was literal arguments"

    def _written_calls(self, work: _Task, written: list[str]) -> list[str]:
        """The calls the model's inputs make, fitted to ``work.params``; those not literal go to
        ``work.dropped``, those that do not fit to ``work.unfit``."""
        calls: list[str] = []
        for text in written:
            read, why = read_input(text, work.entry, work.params)
            if why == "literal":
                work.dropped.append(text)
            elif why == "unfit":
                work.unfit.append(parse_call(text, work.entry) or text)
            calls += read
        if not calls and work.unfit:  # one argument an input, the way a small model lists the parameters' values
            calls = joined(written, work.entry, work.params)
            work.unfit = [] if calls else work.unfit
        return calls

    def _set_calls(self, work: _Task, written: list[str]) -> None:
        """``work.calls``: the task's examples, then ``written`` (each once), then typed draws up to
        :attr:`tests` inputs, then up to :attr:`edges` edge cases of all those."""
        calls = examples_of(work.task, work.entry)[: self.max_examples]
        work.examples = len(calls)
        origins = ["example"] * len(calls)

        def add(group: list[str], origin: str, most: int | None = None) -> None:
            for call in group:
                call = parse_call(call, work.entry)  # drawn values are literals too: checked the same way
                if call is not None and call not in calls and (most is None or origins.count(origin) < most):
                    calls.append(call)
                    origins.append(origin)

        add(written, "model", self.tests)
        fitting = sum(o == "model" and call_fits(c, work.drawn_for or []) for c, o in zip(calls, origins))
        k = min(self.typed, self.tests - fitting)
        add(typed_calls(work.entry, work.drawn_for, k, calls) if k > 0 else [], "typed")
        base = [c for c, o in zip(calls, origins) if o != "typed"] or calls  # the drawn only where none was written
        add(edge_calls(work.entry, base, self.edges, calls) if self.edges else [], "edge")
        work.calls, work.origins = calls, origins

    def _read_solutions(self, work: _Task, results: list[Result]) -> None:
        """Solution programs from their replies (an invalid one is noted and runs nowhere)."""
        for res in results:
            code = code_of(res.text) if res.ok and isinstance(res.text, str) else None
            if not code or not code.strip() or len(code) > MAX_CODE_CHARS:
                why = f"longer than {MAX_CODE_CHARS} characters" if code and code.strip() else res.error or "no code"
                work.solutions.append(None)
                work.solution_errors.append(f"invalid reply ({why})")
                continue
            program = program_of(work.task, code, work.entry)
            broken = syntax_error(program)
            work.solutions.append(None if broken else program)
            work.solution_errors.append(broken)

    def _run_all(self, works: dict[int, _Task]) -> None:
        """Run in the sandbox, on every input of its claim, what has not run yet: the answer, then the
        solutions; an invalid solution gets no outputs."""
        jobs = []
        for i, w in works.items():
            programs = [w.program, *w.solutions]
            jobs += [(i, j, programs[j]) for j in range(len(w.runs), len(programs))
                     if programs[j] is not None and w.calls]
            w.runs += [[] for _ in range(len(w.runs), len(programs))]

        def one(job):
            i, _, program = job
            w = works[i]
            return run_program(w.setup, program, w.entry, w.calls or [], self.input_timeout_s, self.memory_mb)

        with ThreadPoolExecutor(max_workers=max(1, self.workers)) as pool:
            for (i, j, _), outputs in zip(jobs, pool.map(one, jobs)):
                works[i].runs[j] = outputs

    def _verdict(self, work: _Task, results: list[Result]) -> Verdict:
        runs = work.runs or [[]]
        solution_runs = runs[1:]
        calls = work.calls or []
        n = len(work.solutions) or self.solutions
        ran = [k for k, s in enumerate(work.solutions) if s is not None]
        head = (f"Ran the answer and {len(ran)} of {n} model-written solutions for `{work.entry}` on "
                f"{len(calls)} test input{'s' if len(calls) != 1 else ''} in the sandbox"
                + (f" ({work.examples} of them the task's own examples)." if work.examples else "."))
        if work.dropped:
            head += (f" Dropped {len(work.dropped)} test input{'s' if len(work.dropped) > 1 else ''} that "
                     f"{'are' if len(work.dropped) > 1 else 'is'} not literal arguments: "
                     + "; ".join(shorten(d, 40) for d in work.dropped) + ".")
        if work.conflict:
            declared = ", ".join(f"{p.name}: {p.type}" for p in work.drawn_for or [])
            head += (f" The types the model declared ({declared}) fit none of its inputs ("
                     + "; ".join(shorten(c, 40) for c in work.conflict)
                     + "): both run, inputs drawn for those types beside them.")
        if work.unfit:
            typed = ", ".join(f"{p.name}: {p.type}" for p in work.params or [])
            which = "inputs that do" if len(work.unfit) > 1 else "input that does"
            head += (f" Dropped {len(work.unfit)} test {which} not fit the parameters ({typed}): "
                     + "; ".join(shorten(c, 40) for c in work.unfit) + ".")
        if work.rejected:
            how = ("read as their arguments wrapped in one list" if work.reshaped else "written again")
            head += (f" The first test inputs ({'; '.join(shorten(c, 40) for c in work.rejected)}) were {how}: "
                     f"every program raised {work.rejected_with} on each of them.")
        bad_solutions = [f"solution {k + 1}: {e}" for k, e in enumerate(work.solution_errors) if e]
        if bad_solutions:
            head += " Not run: " + "; ".join(bad_solutions) + "."
        lines = [head]
        if work.tests_error:
            lines.append(f"No test input: {work.tests_error}.")
        usable, wrong, crashed = [], [], []
        for t, call in enumerate(calls):
            outputs = [runs_k[t] for runs_k in solution_runs if runs_k]
            ref, votes, left_out = self._reference(work, t)
            answer = _answer(work, t)
            shown_call = shorten(call) + {"typed": " (drawn for the types)", "edge": " (edge case)"}.get(
                work.origins[t] if t < len(work.origins) else "", "")
            if ref is None:
                seen = ", ".join(o.shown() for o in outputs) or "none ran"
                why = left_out or "no majority among the solutions"
                lines.append(f"[{t + 1}] {shown_call}: {why} ({seen}); answer {answer.shown()}: skipped")
                continue
            usable.append(t)
            if answer.value == ref:
                how = "agrees"
            elif answer.value is None:
                how = "CRASHED"
                crashed.append(t)
            else:
                how = "DISAGREES"
                wrong.append(t)
            lines.append(f"[{t + 1}] {shown_call}: reference {shorten(ref)} ({votes} of {n} solutions); "
                         f"answer {answer.shown()}: {how}")
        tokens = turn_tokens(results)
        if not usable:
            why = work.tests_error or (
                "no input has a majority output among the solutions" if calls else "no test input")
            error = f"no usable test input: {why}"
            lines.append(f"Undecided: {error}.")
            turn = Turn(state="S0", role="initial", opinion="\n".join(lines), factuality=None, error_severity=None,
                        error=error, verifier=self.name, **tokens)
            return failed_verdict(self.name, error, turn)
        bad = sorted(wrong + crashed)
        if bad:
            share = len(bad) / len(usable)
            p = 0.5 + 0.5 * share
            severity = SEVERITY_CRASH if crashed else SEVERITY_WRONG
            lines.append(f"Disagreed on input{'s' if len(bad) > 1 else ''} {', '.join(str(t + 1) for t in bad)} "
                         f"({len(bad)} of {len(usable)} usable"
                         + (f"; crashed on {', '.join(str(t + 1) for t in crashed)}" if crashed else "") + ").")
        else:
            p = 0.5 / (1 + len(usable))
            severity = 0
            lines.append(f"Agreed on all {len(usable)} usable input{'s' if len(usable) > 1 else ''}.")
        factual = not bad
        turn = Turn(state="S0", role="initial", opinion="\n".join(lines), factuality=factual, error_severity=severity,
                    p_factual=1.0 - p, verifier=self.name, **tokens)
        return Verdict(factuality=factual, error_severity=severity, confidence=p if bad else 1.0 - p, chain=[turn],
                       p_hallucinated=p, verifier=self.name)

    def _unparsable(self, entry: str, broken: str) -> Verdict:
        opinion = f"The answer does not parse ({broken}): `{entry}` can run on no input. Nothing was run."
        turn = Turn(state="S0", role="initial", opinion=opinion, factuality=False, error_severity=SEVERITY_CRASH,
                    p_factual=0.0, verifier=self.name)
        return Verdict(factuality=False, error_severity=SEVERITY_CRASH, confidence=1.0, chain=[turn],
                       p_hallucinated=1.0, verifier=self.name)


def _answer(work: _Task, t: int) -> Output:
    """What the answer did on input ``t`` (an input it never ran on says so)."""
    return work.runs[0][t] if work.runs and t < len(work.runs[0]) else Output(error="not run")


__all__ = ["CodeCheck"]
