"""Check code answers by running them: FacTool's code check, inside the bubblewrap sandbox.

A code claim is an answer (``claim.text``: Python source) to a task (``claim.question``: a function
signature with its docstring, as in HumanEval, or a description). :class:`CodeCheck` (``--verifier code``):

1. **Queries** (one ``generate`` call for every claim at once, on the ``initial`` role's engine): from the
   task alone, never the answer, the model writes :attr:`CodeCheck.tests` test inputs (one greedy request,
   reply ``{"inputs": ["<arguments of one call>", ...]}``: the arguments as Python literals, read with
   :func:`ast.literal_eval` only) and :attr:`CodeCheck.solutions` independent solutions (one sampled
   request each, a seed apiece, reply ``{"code": "<source>"}``). Identical requests (answers to the same
   task) are sent once.
2. **Execution**: the answer and every solution run in the sandbox (:func:`halucheck.verifiers.tools.sandbox.run_python`),
   one run per program with all inputs. The program run there is the fixed :data:`HARNESS`; the task, the
   code and the inputs reach it as JSON on its stdin and are compiled and called only inside the sandbox.
   Nothing the model or the answer wrote is ever executed in this process (here it is only parsed with
   :mod:`ast`). Each call has :attr:`CodeCheck.input_timeout_s` seconds; the run as a whole has that per
   input plus a margin, and outputs already printed survive a run that is killed.
3. **Reference**: per input, the output that more than half of the requested solutions return (a solution
   whose reply was invalid, or that raises or times out on the input, votes for nothing). An input without
   such a majority is skipped: tied or scattered solutions, or an input most solutions reject (they raise).
4. **Verdict**: the answer fails when, on any input with a reference, it returns something else or
   raises, times out or does not load; it is factual when it matches the reference on every such input.
   No usable input (no valid test, or no majority anywhere) gives a failed verdict saying why, except for
   an answer that does not even parse: it can run on no input, so it fails without any model call.

Decoding is the check's own: greedy for the test inputs, ``VerifierOptions.sample_temperature`` with seeds
``seed + 100 * j`` for solution j, and token budgets for code (:attr:`CodeCheck.tests_tokens`,
:attr:`CodeCheck.solution_tokens`). The ``initial`` role's ``sampling:`` settings are not applied: they are
tuned for the debate's prose, and a repetition penalty or an n-gram ban breaks code, which repeats itself.

Outputs are compared in a canonical form (:func:`_canon` in the harness): floats to 9 significant digits and
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
"""

from __future__ import annotations

import ast
import json
import re
import secrets
import textwrap
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Sequence

from halucheck.verifiers.tools import sandbox
from halucheck.engines.base import Request, Result, SamplingParams
from halucheck.errors import ConfigError
from halucheck.prompts import load as load_prompts
from halucheck.records import Check, Turn, Verdict
from halucheck.verifiers.base import Cost, Verifier, failed_verdict

if TYPE_CHECKING:
    from halucheck.engines.pool import EnginePool

ROLE = "initial"
SEVERITY_WRONG = 3  # runs, but returns something other than the reference
SEVERITY_CRASH = 4  # raises, times out or does not load where the reference has a value
# Length caps are checked after parsing, not written into the reply schemas: a string bounded as
# {0,6000} in the schema's regex takes structured-output backends minutes and gigabytes to compile (vLLM's
# outlines backend timed out at 120 s, then its engine was killed for memory). max_tokens bounds the reply.
MAX_INPUT_CHARS = 400  # one test input as written by the model
MAX_CODE_CHARS = 6000  # one solution
MAX_SHOWN = 80  # characters of a value or a call in the trace
SEED_STEP = 100  # solution j is sampled with seed + SEED_STEP * (j + 1)

_FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)


# ---------------------------------------------------------------- the program run in the sandbox

# Fixed text: what it runs comes as data on stdin ({"marker", "setup", "code", "entry", "calls",
# "timeout"}). It runs the task (its imports and helpers), then the code, then calls the entry point on
# every input under an alarm, and prints one line per input: the marker, then {"i", "value"} (the result
# in canonical form) or {"i", "error"} (the exception's type, "Timeout", or why the code cannot be called).
# The code's own prints go nowhere; the marker keeps a stray write to the real stdout from passing as a
# result.
HARNESS = r'''
import ast
import hashlib
import io
import json
import math
import signal
import sys
import types

_JOB = json.loads(sys.stdin.read())
_OUT = sys.stdout
_MARK = _JOB["marker"]
_LIMIT = float(_JOB["timeout"])
_LONG = 200


class _Timeout(BaseException):
    pass


def _alarm(signum, frame):
    raise _Timeout()


class _Sink(io.TextIOBase):
    def write(self, text):
        return len(text)


def _emit(i, key, text):
    _OUT.write(_MARK + json.dumps({"i": i, key: text}) + "\n")
    _OUT.flush()


def _limited(fn):
    signal.setitimer(signal.ITIMER_REAL, _LIMIT)
    try:
        return fn()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _name(exc):
    try:
        return str(type(exc).__name__)
    except BaseException:
        return "Exception"


def _canon(x, depth=0):
    if depth > 30:
        return "..."
    if x is None or isinstance(x, (bool, str, bytes)):
        return repr(x)
    if isinstance(x, int):
        try:
            return repr(x)
        except ValueError:
            return hex(x)
    if isinstance(x, float):
        if math.isnan(x):
            return "nan"
        if math.isinf(x):
            return repr(x)
        if x.is_integer() and abs(x) < 2 ** 53:
            return repr(int(x))
        return repr(float("%.9g" % x))
    if isinstance(x, complex):
        return "complex(" + _canon(x.real, depth + 1) + ", " + _canon(x.imag, depth + 1) + ")"
    if isinstance(x, list):
        return "[" + ", ".join(_canon(v, depth + 1) for v in x) + "]"
    if isinstance(x, tuple):
        return "(" + ", ".join(_canon(v, depth + 1) for v in x) + ("," if len(x) == 1 else "") + ")"
    if isinstance(x, (set, frozenset)):
        return type(x).__name__ + "({" + ", ".join(sorted(_canon(v, depth + 1) for v in x)) + "})"
    if isinstance(x, dict):
        return "{" + ", ".join(sorted(_canon(k, depth + 1) + ": " + _canon(v, depth + 1) for k, v in x.items())) + "}"
    if isinstance(x, types.GeneratorType):
        return "generator:" + _canon(list(x), depth + 1)
    text = repr(x)
    if " at 0x" in text:
        text = "<object>"
    return _name(x) + ":" + text


def _shown(text):
    if len(text) <= _LONG:
        return text
    digest = hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:16]
    return text[:160] + "... (%d chars, sha256 %s)" % (len(text), digest)


def _parse(call):
    node = ast.parse(call, mode="eval").body
    return ([ast.literal_eval(a) for a in node.args],
            {k.arg: ast.literal_eval(k.value) for k in node.keywords})


signal.signal(signal.SIGALRM, _alarm)
sys.stdout = _Sink()
sys.stderr = _Sink()
sys.stdin = io.StringIO("")
_ns = {"__name__": "__solution__", "__builtins__": __builtins__}
_stub = None
_broken = None
if _JOB["setup"] is not None:
    try:
        _limited(lambda: exec(compile(_JOB["setup"], "<task>", "exec"), _ns))
    except BaseException:
        pass
    _stub = _ns.get(_JOB["entry"])
try:
    _limited(lambda: exec(compile(_JOB["code"], "<code>", "exec"), _ns))
except BaseException as exc:
    _broken = "does not load: " + _name(exc)
_fn = _ns.get(_JOB["entry"])
if _broken is None and (_fn is None or _fn is _stub):
    _broken = "does not define " + _JOB["entry"]
elif _broken is None and not callable(_fn):
    _broken = _JOB["entry"] + " is not callable"
for _i, _call in enumerate(_JOB["calls"]):
    if _broken is not None:
        _emit(_i, "error", _broken)
        continue
    try:
        _args, _kwargs = _parse(_call)
        _value = _limited(lambda: _shown(_canon(_fn(*_args, **_kwargs))))
    except _Timeout:
        _emit(_i, "error", "Timeout")
    except BaseException as exc:
        _emit(_i, "error", _name(exc))
    else:
        _emit(_i, "value", _value)
'''


@dataclass(frozen=True)
class Output:
    """What one program did on one input: ``value`` (canonical form) or ``error`` (why there is none)."""

    value: str | None = None
    error: str | None = None

    def shown(self) -> str:
        return _short(self.value) if self.value is not None else f"error {self.error}"


def run_program(setup: str | None, code: str, entry: str, calls: Sequence[str], input_timeout_s: float = 2.0,
                memory_mb: int = 512) -> list[Output]:
    """Run ``code`` (after ``setup``, the task's own source) in the sandbox and call ``entry`` on every
    call of ``calls`` (``entry(<literal arguments>)``, as :func:`parse_call` returns them). One Output per
    call; an input the run never reached (it was killed) says how the run ended."""
    if not calls:
        return []
    marker = secrets.token_hex(16)
    job = {"marker": marker, "setup": setup, "code": code, "entry": entry, "calls": list(calls),
           "timeout": input_timeout_s}
    budget = input_timeout_s * (len(calls) + 2) + 5.0
    limits = sandbox.Limits(wall_s=budget, cpu_s=budget, memory_mb=memory_mb, output_bytes=1_000_000)
    result = sandbox.run_python(HARNESS, stdin=json.dumps(job), limits=limits)
    outputs: dict[int, Output] = {}
    for line in result.stdout.splitlines():
        if not line.startswith(marker):
            continue
        try:
            record = json.loads(line[len(marker):])
            i = int(record["i"])
        except (ValueError, KeyError, TypeError):
            continue
        if 0 <= i < len(calls) and i not in outputs:
            value, error = record.get("value"), record.get("error")
            outputs[i] = Output(value=str(value)) if value is not None else Output(error=str(error or "no output"))
    if result.killed_reason is not None:
        missing = f"killed ({result.killed_reason})"
    else:
        missing = f"no output (the program exited with code {result.returncode})"
    return [outputs.get(i, Output(error=missing)) for i in range(len(calls))]


# ---------------------------------------------------------------- reading code and test inputs (ast only)


def code_of(text: str) -> str:
    """The code in ``text``: the contents of its Markdown code blocks if it has any, else the text."""
    blocks = _FENCE.findall(text or "")
    return "\n\n".join(b.strip("\n") for b in blocks) if blocks else (text or "")


def _parse(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _module_return(tree: ast.Module) -> ast.AST | None:
    """A ``return`` or ``yield`` outside any function (the parser accepts one; compiling it fails)."""
    todo: list[ast.AST] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Return, ast.Yield, ast.YieldFrom)):
            return node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))
    return None


def syntax_error(source: str) -> str | None:
    """None when ``source`` parses as Python, else a one-line reason (parsing only, nothing runs)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return f"SyntaxError: {exc.msg} (line {exc.lineno})"
    except (ValueError, RecursionError, MemoryError) as exc:
        return f"{type(exc).__name__}: cannot parse"
    stray = _module_return(tree)
    if stray is not None:
        what = "return" if isinstance(stray, ast.Return) else "yield"
        return f"SyntaxError: '{what}' outside function (line {getattr(stray, 'lineno', '?')})"
    return None


def _defs(source: str | None) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    tree = _parse(source) if source else None
    return [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))] if tree else []


def _is_stub(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A def whose body is only a docstring (and perhaps ``pass`` or ``...``): the function to write."""
    rest = [s for s in node.body if not (isinstance(s, ast.Pass) or (
        isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, (str, type(...)))))]
    return not rest


def entry_point(task: str | None, answer: str, meta: dict | None = None) -> str | None:
    """The function to test: ``meta["entry_point"]``; else the task's function left to write (its last
    top-level stub, else its last top-level def); else the answer's last top-level def; else None."""
    given = (meta or {}).get("entry_point")
    if isinstance(given, str) and given.isidentifier():
        return given
    task_defs = _defs(task)
    if task_defs:
        stubs = [d for d in task_defs if _is_stub(d)]
        return (stubs or task_defs)[-1].name
    answer_defs = _defs(code_of(answer))
    return answer_defs[-1].name if answer_defs else None


def signature_of(source: str, name: str) -> str | None:
    """``def name(args)`` of the last top-level def of ``name`` in ``source``, or None."""
    for node in reversed(_defs(source)):
        if node.name == name:
            returns = f" -> {ast.unparse(node.returns)}" if node.returns is not None else ""
            return f"def {name}({ast.unparse(node.args)}){returns}"
    return None


def is_full_definition(answer: str, entry: str) -> bool:
    """Whether ``answer`` has a top-level ``def entry(`` line (read as text, so code with a syntax error
    elsewhere still counts as a definition of its own)."""
    return re.search(rf"^(?:async[ \t]+)?def[ \t]+{re.escape(entry)}[ \t]*\(", answer, re.MULTILINE) is not None


def program_of(task: str | None, answer: str, entry: str) -> str:
    """The answer as a program: the answer itself when it defines ``entry`` in full; else (a function
    body, as HumanEval completions are) the task's source followed by the answer, re-indented under the
    task's def when the body lost its indentation. A task that is not Python is never prepended."""
    answer = code_of(answer)
    if not task or is_full_definition(answer, entry) or _parse(task) is None:
        return answer
    head = task.rstrip("\n") + "\n"
    body = answer.strip("\n")
    lines = body.splitlines()
    candidates = [body, textwrap.indent(textwrap.dedent(body), "    ")]
    rest = [ln for ln in lines[1:] if ln.strip()]
    if lines and rest and not lines[0][:1].isspace():  # first line stripped of the indentation the rest keeps
        indent = min(len(ln) - len(ln.lstrip()) for ln in rest)
        if indent:
            candidates.append("\n".join([" " * indent + lines[0], *lines[1:]]))
    for candidate in candidates:
        if syntax_error(head + candidate + "\n") is None:
            return head + candidate + "\n"
    return head + body + "\n"


def parse_call(text: str, entry: str) -> str | None:
    """A model-written test input as the call ``entry(...)`` to run, or None when it is not literal
    arguments. Takes the arguments alone (``"[1, 2], 3"``) or a whole call of ``entry``; every argument
    must be a literal for :func:`ast.literal_eval` (nothing else reads it, here or in the sandbox)."""
    text = (text or "").strip()
    if not text or len(text) > MAX_INPUT_CHARS:
        return None
    for candidate in (text, f"{entry}({text})"):
        try:
            node = ast.parse(candidate, mode="eval").body
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == entry):
            continue
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            continue
        try:
            for value in [*node.args, *(k.value for k in node.keywords)]:
                ast.literal_eval(value)
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
            continue
        return ast.unparse(node)
    return None


def reference_of(outputs: Sequence[Output], requested: int) -> tuple[str | None, int]:
    """(the majority value, its votes): a value returned by more than half of the ``requested``
    solutions, else (None, the top value's votes)."""
    votes = Counter(o.value for o in outputs if o.value is not None)
    if not votes:
        return None, 0
    value, count = votes.most_common(1)[0]
    return (value if 2 * count > requested else None), count


def _short(text: str, limit: int = MAX_SHOWN) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ---------------------------------------------------------------- the verifier


@dataclass
class _Task:
    """One claim's work: what to ask, what to run, what came back."""

    task: str
    entry: str
    signature: str | None
    program: str
    setup: str | None
    requests: list[int]  # indices into the batch of unique requests: tests first, then the solutions
    calls: list[str] | None = None
    tests_error: str | None = None
    solutions: list[str | None] | None = None  # the program of each solution, None when the reply was invalid
    solution_errors: list[str | None] | None = None
    dropped: list[str] = field(default_factory=list)  # test inputs written that were not literal arguments


class CodeCheck(Verifier):
    """``code``: FacTool's code check, run in the bubblewrap sandbox (see the module docstring)."""

    name = "code"
    uses_llm = True
    tests = 5  # test inputs asked for (FacTool generated 3)
    solutions = 3  # independent solutions asked for (FacTool: 3); the reference needs more than half of them
    input_timeout_s = 2.0  # per call, and per load of the task or the code
    memory_mb = 512
    workers = 2  # sandbox runs at once
    tests_tokens = 384
    solution_tokens = 768

    def least_calls(self) -> int:
        return 1 + self.solutions

    def describe(self) -> dict:
        return {"code": {"tests": self.tests, "solutions": self.solutions, "input_timeout_s": self.input_timeout_s,
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
        ctx = {"task": work.task.strip("\n"), "entry": work.entry, "signature": work.signature, "k": self.tests}
        return ({"role": "system", "content": p["system"].render(**ctx)},
                {"role": "user", "content": p["task"].render(**ctx)})

    def _tests_request(self, work: _Task) -> Request:
        schema = {"type": "object", "additionalProperties": False, "required": ["inputs"], "properties": {
            "inputs": {"type": "array", "minItems": 1, "maxItems": self.tests,
                       "items": {"type": "string"}}}}
        return Request(messages=self._messages("tests", work), schema=schema,
                       sampling=SamplingParams(temperature=0.0, max_tokens=self.tests_tokens), tag="code:tests")

    def _solution_requests(self, work: _Task) -> list[Request]:
        schema = {"type": "object", "additionalProperties": False, "required": ["code"], "properties": {
            "code": {"type": "string"}}}
        base = SamplingParams(temperature=max(self.options.sample_temperature, 1e-3), max_tokens=self.solution_tokens)
        # seeds far apart: a retry adds its attempt number to the seed, and must not repeat another solution
        return [Request(messages=self._messages("solution", work), schema=schema,
                        sampling=replace(base, seed=self.options.seed + SEED_STEP * (j + 1)), tag="code:solution")
                for j in range(self.solutions)]

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
                verdicts[i] = self._failed("the code check needs the task the code answers (the claim's question)")
                continue
            entry = entry_point(task, answer, c.meta)
            if entry is None:
                verdicts[i] = self._failed("no function to test: give meta entry_point, or a def in the task or answer")
                continue
            program = program_of(task, answer, entry)
            broken = syntax_error(program)
            if broken is not None:  # runs on no input whatever the reference: decided without the model
                verdicts[i] = self._unparsable(entry, broken)
                continue
            in_task = any(d.name == entry for d in _defs(task))
            work = _Task(task=task, entry=entry, signature=None if in_task else signature_of(code_of(answer), entry),
                         program=program, setup=task if _parse(task) is not None else None, requests=[])
            work.requests = [add(self._tests_request(work)), *(add(r) for r in self._solution_requests(work))]
            works[i] = work

        results: list[Result] = engines.engine_for(ROLE).generate(batch) if batch else []
        cost.add_results(results)
        for i, work in works.items():
            self._read_replies(work, [results[k] for k in work.requests])

        runs = self._run_all(works)
        for i, work in works.items():
            verdicts[i] = self._verdict(work, runs[i], [results[k] for k in work.requests])
        for i, v in enumerate(verdicts):
            if on_call is not None and i in works:
                for n in range(1, self.least_calls() + 1):
                    on_call(n)
            if on_verdict is not None:
                on_verdict(i, v)  # type: ignore[arg-type]
        cost.wall_s = time.perf_counter() - t0
        self.costs = {self.name: cost}
        return verdicts  # type: ignore[return-value]

    def _read_replies(self, work: _Task, results: list[Result]) -> None:
        """Test inputs and solution programs from the replies (invalid ones are noted, never raised)."""
        tests, *solutions = results
        calls: list[str] = []
        if not tests.ok:
            work.tests_error = f"the test inputs reply was invalid ({tests.error})"
        else:
            written = tests.parsed.get("inputs", []) if isinstance(tests.parsed, dict) else []
            for text in written:
                call = parse_call(text, work.entry) if isinstance(text, str) else None
                if call is None:
                    work.dropped.append(str(text))
                elif call not in calls:
                    calls.append(call)
            if not calls:
                work.tests_error = f"none of the {len(written)} test inputs written was literal arguments"
        work.calls = calls[: self.tests]
        work.solutions, work.solution_errors = [], []
        for res in solutions:
            code = res.parsed.get("code") if res.ok and isinstance(res.parsed, dict) else None
            if not isinstance(code, str) or not code.strip() or len(code) > MAX_CODE_CHARS:
                why = f"longer than {MAX_CODE_CHARS} characters" if isinstance(code, str) and code.strip() else \
                    res.error or "no code"
                work.solutions.append(None)
                work.solution_errors.append(f"invalid reply ({why})")
                continue
            program = program_of(work.task, code, work.entry)
            broken = syntax_error(program)
            work.solutions.append(None if broken else program)
            work.solution_errors.append(broken)

    def _run_all(self, works: dict[int, _Task]) -> dict[int, list[list[Output]]]:
        """Every claim's programs on its inputs, in the sandbox: [answer, solution 1, ...] per claim; an
        invalid solution gets no outputs."""
        jobs = [(i, j, program) for i, w in works.items() if w.calls
                for j, program in enumerate([w.program, *(w.solutions or [])]) if program is not None]
        out: dict[int, list[list[Output]]] = {i: [[] for _ in range(1 + self.solutions)] for i in works}

        def one(job):
            i, j, program = job
            w = works[i]
            return run_program(w.setup, program, w.entry, w.calls or [], self.input_timeout_s, self.memory_mb)

        with ThreadPoolExecutor(max_workers=max(1, self.workers)) as pool:
            for (i, j, _), outputs in zip(jobs, pool.map(one, jobs)):
                out[i][j] = outputs
        return out

    def _verdict(self, work: _Task, runs: list[list[Output]], results: list[Result]) -> Verdict:
        answer_runs, solution_runs = runs[0], runs[1:]
        calls = work.calls or []
        n = self.solutions
        ran = [k for k, s in enumerate(work.solutions or []) if s is not None]
        head = (f"Ran the answer and {len(ran)} of {n} model-written solutions for `{work.entry}` on "
                f"{len(calls)} test input{'s' if len(calls) != 1 else ''} in the sandbox.")
        if work.dropped:
            head += (f" Dropped {len(work.dropped)} test input{'s' if len(work.dropped) > 1 else ''} that "
                     f"{'are' if len(work.dropped) > 1 else 'is'} not literal arguments: "
                     + "; ".join(_short(d, 40) for d in work.dropped) + ".")
        bad_solutions = [f"solution {k + 1}: {e}" for k, e in enumerate(work.solution_errors or []) if e]
        if bad_solutions:
            head += " Not run: " + "; ".join(bad_solutions) + "."
        lines = [head]
        if work.tests_error:
            lines.append(f"No test input: {work.tests_error}.")
        usable, wrong, crashed = [], [], []
        for t, call in enumerate(calls):
            outputs = [runs_k[t] for runs_k in solution_runs if runs_k]
            ref, votes = reference_of(outputs, n)
            answer = answer_runs[t] if t < len(answer_runs) else Output(error="not run")
            shown_call = _short(call)
            if ref is None:
                seen = ", ".join(o.shown() for o in outputs) or "none ran"
                lines.append(f"[{t + 1}] {shown_call}: no majority among the solutions ({seen}); "
                             f"answer {answer.shown()}: skipped")
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
            lines.append(f"[{t + 1}] {shown_call}: reference {_short(ref)} ({votes} of {n} solutions); "
                         f"answer {answer.shown()}: {how}")
        tokens = {"prompt_tokens": sum(r.prompt_tokens for r in results),
                  "completion_tokens": sum(r.completion_tokens for r in results),
                  "cached_tokens": sum(r.cached_tokens for r in results),
                  "latency_s": max((r.latency_s for r in results), default=0.0),
                  "capped": any(r.capped for r in results)}
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

    def _failed(self, error: str) -> Verdict:
        turn = Turn(state="S0", role="initial", opinion=error, factuality=None, error_severity=None, error=error,
                    verifier=self.name)
        return failed_verdict(self.name, error, turn)

    def _unparsable(self, entry: str, broken: str) -> Verdict:
        opinion = f"The answer does not parse ({broken}): `{entry}` can run on no input. Nothing was run."
        turn = Turn(state="S0", role="initial", opinion=opinion, factuality=False, error_severity=SEVERITY_CRASH,
                    p_factual=0.0, verifier=self.name)
        return Verdict(factuality=False, error_severity=SEVERITY_CRASH, confidence=1.0, chain=[turn],
                       p_hallucinated=1.0, verifier=self.name)


__all__ = ["HARNESS", "CodeCheck", "Output", "code_of", "entry_point", "is_full_definition", "parse_call",
           "program_of", "reference_of", "run_program", "signature_of", "syntax_error"]
