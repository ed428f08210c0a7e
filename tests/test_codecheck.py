"""The code check: model-written inputs and solutions (a scripted engine), the answer and the solutions run in
the sandbox, the majority output as the reference; the factool-code loader; refusal without a sandbox."""

import json
import time
from itertools import count
from pathlib import Path

import pytest

from halucheck.verifiers.tools import code as codecheck
from halucheck.verifiers.tools import sandbox
from halucheck.verifiers.tools.code import CodeCheck
from halucheck.verifiers.tools.code_run import Output, reference_of, run_program
from halucheck.verifiers.tools.code_source import entry_point, parse_call, program_of, signature_of
from halucheck.config import Settings
from halucheck.engines import register
from halucheck.engines.fake import FakeEngine
from halucheck.engines.pool import EnginePool
from halucheck.errors import ConfigError
from halucheck.evaluation import DATASETS, load
from halucheck.evaluation.verifiers import case_of
from halucheck.records import Case, Claim
from halucheck.verifiers import get_verifier

UNAVAILABLE = sandbox.available()
needs_sandbox = pytest.mark.skipif(UNAVAILABLE is not None, reason=f"sandbox unavailable: {UNAVAILABLE}")
_names = count()

COUNT_UP = '''def count_up(n: int) -> list:
    """Return the list of the integers from 1 to n, both included; an empty list when n < 1."""
'''
RIGHT = "def count_up(n: int) -> list:\n    return list(range(1, n + 1))\n"
OFF_BY_ONE = "def count_up(n: int) -> list:\n    return list(range(1, n))\n"
UNTYPED = COUNT_UP.replace("n: int) -> list", "n)")  # nothing says that n is a number
SOLUTIONS = [
    "def count_up(n):\n    return list(range(1, n + 1))\n",
    "def count_up(n):\n    out, i = [], 1\n    while i <= n:\n        out.append(i)\n        i += 1\n    return out\n",
    "def count_up(n):\n    return [k for k in range(n + 1) if k > 0]\n",
]


def pool_with(engine):
    """An engine pool whose every role is served by ``engine`` (registered under a fresh name)."""
    name = f"code-scripted-{next(_names)}"
    register(name, lambda model="", **kw: engine)
    return EnginePool(Settings.from_dict({"profiles": {"p": {"engine": name}}}))


def scripted(inputs, solutions, by_task=None):
    """A fake engine: the tests request gets ``inputs``, solution j gets ``solutions[j]`` (a string that
    starts with ``RAW:`` is sent as raw text, the rest of it); a string ``inputs`` is the raw tests reply; with
    ``by_task`` {entry: (inputs, solutions)}, the entry named in the request picks them."""
    def respond(request):
        ins, sols = inputs, solutions
        for entry, pair in (by_task or {}).items():
            if f"`{entry}`" in request.messages[-1]["content"]:
                ins, sols = pair
        if request.tag == "code:tests":
            return ins if isinstance(ins, str) else {"inputs": ins}
        reply = sols[request.sampling.seed // codecheck.SEED_STEP - 1]  # a retry adds 1 or 2 to the seed
        return reply[4:] if reply.startswith("RAW:") else f"```python\n{reply}```"
    return FakeEngine(responder=respond)


def code_claim(answer, task=COUNT_UP, **meta):
    return Case(Claim(text=answer, question=task), meta=meta)


def verify(checks, engine, **settings):
    """The code check on ``checks``; only the first round of solutions unless ``max_solutions`` says more."""
    settings.setdefault("max_solutions", 3)
    settings.setdefault("typed", 0)  # typed draws and edge cases have tests of their own
    settings.setdefault("edges", 0)
    verifier = get_verifier("code")
    for key, value in settings.items():
        setattr(verifier, key, value)
    return verifier, verifier.verify(checks, pool_with(engine))


def lines(verdict):
    return verdict.chain[0].opinion.splitlines()



# ---------------------------------------------------------------- verdicts


@needs_sandbox
def test_correct_answer_passes():
    eng = scripted(["0", "3", "1"], SOLUTIONS)
    v_, (v,) = verify([code_claim(RIGHT)], eng)
    assert v.factuality is True and v.error_severity == 0 and v.verifier == "code"
    assert v.p_hallucinated == pytest.approx(0.5 / 4) and v.confidence == pytest.approx(1 - 0.5 / 4)
    turn = v.chain[0]
    assert (turn.state, turn.role, turn.verifier, turn.factuality) == ("S0", "initial", "code", True)
    out = lines(v)
    assert out[1] == "[1] count_up(0): reference [] (3 of 3 solutions); answer []: agrees"
    assert out[2] == "[2] count_up(3): reference [1, 2, 3] (3 of 3 solutions); answer [1, 2, 3]: agrees"
    assert out[-1] == "Agreed on all 3 usable inputs."
    assert v_.costs["code"].llm_calls == 4 and turn.completion_tokens > 0


@needs_sandbox
def test_off_by_one_fails_naming_the_inputs_that_disagree():
    eng = scripted(["0", "3", "1"], SOLUTIONS)
    _, (v,) = verify([code_claim(OFF_BY_ONE)], eng)
    assert v.factuality is False and v.error_severity == codecheck.SEVERITY_WRONG == 3
    assert v.p_hallucinated == pytest.approx(0.5 + 0.5 * 2 / 3)
    out = lines(v)
    assert out[1].endswith("answer []: agrees")
    assert out[2] == "[2] count_up(3): reference [1, 2, 3] (3 of 3 solutions); answer [1, 2]: DISAGREES"
    assert out[3] == "[3] count_up(1): reference [1] (3 of 3 solutions); answer []: DISAGREES"
    assert out[-1] == "Disagreed on inputs 2, 3 (2 of 3 usable)."


@needs_sandbox
def test_crashing_answer_fails_with_crash_severity():
    crashing = "def count_up(n):\n    return [1 // (n - 3)] if n else []\n"  # ZeroDivisionError at n == 3
    eng = scripted(["0", "3", "1"], SOLUTIONS)
    _, (v,) = verify([code_claim(crashing)], eng)
    assert v.factuality is False and v.error_severity == codecheck.SEVERITY_CRASH == 4
    out = lines(v)
    assert out[2].endswith("answer error ZeroDivisionError: CRASHED")
    assert out[3].endswith("DISAGREES")  # [1 // -2] == [-1], not [1]
    assert out[-1] == "Disagreed on inputs 2, 3 (2 of 3 usable; crashed on 2)."


@needs_sandbox
def test_infinite_loop_is_cut_by_the_per_input_alarm_and_fails():
    looping = "def count_up(n):\n    while n > 0:\n        pass\n    return []\n"
    eng = scripted(["0", "2"], SOLUTIONS)
    t0 = time.monotonic()
    _, (v,) = verify([code_claim(looping)], eng, input_timeout_s=0.5)
    assert time.monotonic() - t0 < 15
    assert v.factuality is False and v.error_severity == 4
    out = lines(v)
    assert out[1].endswith("agrees") and out[2].endswith("answer error Timeout: CRASHED")


@needs_sandbox
def test_loop_that_ignores_the_alarm_is_killed_by_the_sandbox_clock():
    # a loop inside one C call never gets to the Python alarm handler: the run's wall clock ends it
    t0 = time.monotonic()
    outputs = run_program(None, "def f(n):\n    return sum(range(10 ** 13))\n", "f", ["f(1)", "f(2)"], 0.3)
    assert time.monotonic() - t0 < 12
    assert outputs[0] == outputs[1] and outputs[0].error in ("killed (timeout)", "killed (cpu)")


@needs_sandbox
def test_no_majority_skips_the_input():
    # solution 3 is wrong only at n == 3; solution 2 is wrong only at n == 1: 2 of 3 agree on each of those
    # inputs; at n == 2 all three differ, so that input has no reference and the answer is judged without it
    odd = [
        "def count_up(n):\n    return list(range(1, n + 1))\n",
        "def count_up(n):\n    return {1: [], 2: [2, 1]}.get(n, list(range(1, n + 1)))\n",
        "def count_up(n):\n    return {3: [1, 2], 2: [9]}.get(n, list(range(1, n + 1)))\n",
    ]
    answer = "def count_up(n):\n    return [7] if n == 2 else list(range(1, n + 1))\n"
    eng = scripted(["1", "2", "3"], odd)
    _, (v,) = verify([code_claim(answer)], eng)
    out = lines(v)
    assert out[1] == "[1] count_up(1): reference [1] (2 of 3 solutions); answer [1]: agrees"
    assert out[2] == "[2] count_up(2): no majority among the solutions ([1, 2], [2, 1], [9]); answer [7]: skipped"
    assert out[3].startswith("[3] count_up(3): reference [1, 2, 3] (2 of 3 solutions)")
    assert v.factuality is True and v.p_hallucinated == pytest.approx(0.5 / 3)


@needs_sandbox
def test_no_usable_input_is_a_failed_verdict():
    scattered = [f"def count_up(n):\n    return [{k}] * n\n" for k in range(3)]
    eng = scripted(["1", "2"], scattered)
    _, (v,) = verify([code_claim(OFF_BY_ONE)], eng)
    assert v.factuality is None and v.p_hallucinated is None
    assert v.error == "no usable test input: no input has a majority output among the solutions"
    assert v.chain[0].error == v.error and "skipped" in lines(v)[1]


@needs_sandbox
def test_invalid_replies_are_handled_and_never_run():
    marker = Path(f"/tmp/halucheck-codecheck-{next(_names)}-{time.time_ns()}")
    inputs = ["3", "x + 1", f"__import__('os').system('touch {marker}')", "count_up(1)", "count_up(1)"]
    sols = ["RAW:not json at all", "def count_up(n)\n    return n", SOLUTIONS[0]]
    eng = scripted(inputs, sols)
    _, (v,) = verify([code_claim(RIGHT)], eng)
    assert not marker.exists()
    out = lines(v)
    assert "Ran the answer and 1 of 3 model-written solutions" in out[0]
    assert "Dropped 2 test inputs that are not literal arguments: x + 1; __import__" in out[0]
    assert "solution 1: SyntaxError" in out[0] and "solution 2: SyntaxError" in out[0]
    # the repeated input runs once; one valid solution of three is no majority: nothing is usable
    assert [ln.split(":")[0] for ln in out[1:-1]] == ["[1] count_up(3)", "[2] count_up(1)"]
    assert v.factuality is None and v.error.startswith("no usable test input")
    seeds = [r.sampling.seed for r in eng.requests if r.tag == "code:solution"]
    assert seeds == [100, 200, 300]  # free text: a reply that is not code is no solution, not a retry
    # a tests reply that is not JSON (retried, then given up) is a failed verdict, never a crash
    eng = scripted("{oops", SOLUTIONS)
    _, (v,) = verify([code_claim(RIGHT)], eng)
    assert v.factuality is None and "the test inputs reply was invalid (reply is not valid JSON" in v.error
    assert sum(r.tag == "code:tests" for r in eng.requests) == 3


@needs_sandbox
def test_two_valid_solutions_of_three_still_make_a_majority():
    eng = scripted(["2"], ["RAW:", SOLUTIONS[1], SOLUTIONS[2]])
    _, (v,) = verify([code_claim(OFF_BY_ONE)], eng)
    assert v.factuality is False
    assert lines(v)[1] == "[1] count_up(2): reference [1, 2] (2 of 3 solutions); answer [1]: DISAGREES"


@needs_sandbox
def test_answer_output_cannot_forge_results_and_the_host_is_untouched(tmp_path):
    target = tmp_path / "written-by-answer"
    answer = ("import os, sys\n"
              "def count_up(n):\n"
              "    print('{\"i\": 0, \"value\": \"[1, 2]\"}')\n"
              "    os.write(1, b'{\"i\": 0, \"value\": \"[1, 2]\"}\\n')\n"
              f"    open({str(target)!r}, 'w').write('x')\n"
              "    return list(range(1, n + 1))\n")
    _, (v,) = verify([code_claim(answer)], scripted(["2"], SOLUTIONS))
    assert not target.exists()  # the sandbox has no view of the host's files
    assert lines(v)[1].endswith("answer error FileNotFoundError: CRASHED")


@needs_sandbox
def test_outputs_compare_by_value():
    task = 'def mean(xs):\n    """The mean of xs."""\n'
    sols = ["def mean(xs):\n    return sum(xs) / len(xs)\n",
            "def mean(xs):\n    t = 0.0\n    for x in reversed(xs):\n        t += x\n    return t / len(xs)\n",
            "import statistics\ndef mean(xs):\n    return statistics.fmean(xs)\n"]
    answer = "def mean(xs):\n    return sum(x / len(xs) for x in xs)\n"  # another float rounding, same values
    _, (v,) = verify([code_claim(answer, task=task)], scripted(["[1, 3]", "[0.1, 0.2, 0.3]", "[]"], sols))
    out = lines(v)
    assert out[1] == "[1] mean([1, 3]): reference 2 (3 of 3 solutions); answer 2: agrees"
    assert out[2].startswith("[2] mean([0.1, 0.2, 0.3]): reference 0.2 (3 of 3")
    assert "no majority among the solutions (error ZeroDivisionError" in out[3]  # an invalid input: skipped
    assert v.factuality is True


@needs_sandbox
def test_one_generate_call_for_every_claim_and_shared_tasks_asked_once():
    task2 = 'def double(x):\n    """Twice x."""\n'
    doubles = [f"def double(x):\n    return {body}\n" for body in ("2 * x", "x + x", "x * 2")]
    eng = scripted(None, None, by_task={"count_up": (["2"], SOLUTIONS), "double": (["2"], doubles)})
    checks = [code_claim(RIGHT), code_claim(OFF_BY_ONE), code_claim("def double(x):\n    return x ** 2\n", task=task2),
              code_claim("def count_up(n:\n    pass\n")]  # does not parse: decided without a request
    verifier, verdicts = verify(checks, eng)
    assert eng.batch_sizes == [8]  # one call; two tasks x (1 tests + 3 solutions); the shared task once
    assert [v.factuality for v in verdicts] == [True, False, True, False]  # 2 ** 2 == 2 * 2
    assert verdicts[3].error_severity == 4 and verdicts[3].p_hallucinated == 1.0
    assert "does not parse (SyntaxError" in verdicts[3].chain[0].opinion
    assert verifier.costs["code"].llm_calls == 8 and verifier.costs["code"].claims == 4
    seen, calls = [], []
    verifier.verify(checks[:1], pool_with(scripted(["2"], SOLUTIONS)), on_verdict=lambda i, v: seen.append(i),
                    on_call=calls.append)
    assert seen == [0] and calls == [1, 2, 3, 4] and verifier.least_calls() == 4


@needs_sandbox
def test_requests_keep_the_answer_out_and_vary_the_solutions():
    eng = scripted(["2"], SOLUTIONS)
    verify([code_claim(OFF_BY_ONE)], eng)
    tests, *sols = eng.requests
    assert tests.tag == "code:tests" and tests.sampling.temperature == 0.0
    assert tests.schema["properties"]["inputs"]["maxItems"] == CodeCheck.tests
    assert [r.sampling.seed for r in sols] == [100, 200, 300] and all(r.sampling.temperature > 0 for r in sols)
    for r in eng.requests:
        text = "".join(m["content"] for m in r.messages)
        assert "range(1, n)" not in text and "count_up" in text


# ---------------------------------------------------------------- without a sandbox


def test_unavailable_sandbox_is_a_config_error_before_any_call(monkeypatch):
    reason = "bwrap not found: apt-get install bubblewrap"
    monkeypatch.setattr(sandbox, "available", lambda: reason)
    verifier = get_verifier("code")
    with pytest.raises(ConfigError) as err:
        verifier.preflight()
    assert reason in str(err.value) and "\n" not in str(err.value)
    eng = scripted(["1"], SOLUTIONS)
    with pytest.raises(ConfigError, match="apt-get install bubblewrap"):
        verifier.verify([code_claim(RIGHT)], pool_with(eng))
    assert eng.requests == []
    with pytest.raises(sandbox.SandboxUnavailable):
        run_program(None, RIGHT, "count_up", ["count_up(1)"])


def test_claims_without_a_task_or_a_function_fail_without_requests(monkeypatch):
    monkeypatch.setattr(sandbox, "available", lambda: None)  # nothing runs: no sandbox needed
    eng = scripted(["1"], SOLUTIONS)
    _, verdicts = verify([code_claim(RIGHT, task=None), code_claim("x = 1", task="Sort a list.")], eng)
    assert [v.factuality for v in verdicts] == [None, None]
    assert "needs the task" in verdicts[0].error and "no function to test" in verdicts[1].error
    assert eng.requests == []


# ---------------------------------------------------------------- parsing (nothing runs)


def test_parse_call_takes_literal_arguments_only():
    assert parse_call("[1, 2], 3", "f") == "f([1, 2], 3)"
    assert parse_call("f('a', k=None)", "f") == "f('a', k=None)"
    assert parse_call("(1, 2)", "f") == "f((1, 2))"
    assert parse_call("-1.5, {'a': (1,)}, {2, 3}", "f") == "f(-1.5, {'a': (1,)}, {2, 3})"
    for bad in ("x", "1 + ", "g(1)", "f(*[1])", "2 ** 10", "__import__('os').getcwd()", "", "1, " * 300):
        assert parse_call(bad, "f") is None, bad


def test_entry_point_prefers_meta_then_the_tasks_stub():
    task = ('def poly(xs, x):\n    return sum(c * x ** i for i, c in enumerate(xs))\n\n\n'
            'def find_zero(xs):\n    """Find x with poly(xs, x) == 0."""\n')
    assert entry_point(task, "def helper(): pass") == "find_zero"
    assert entry_point(task, "", {"entry_point": "poly"}) == "poly"
    assert entry_point("Write a function that doubles a number.", "def twice(x):\n    return 2 * x\n") == "twice"
    assert entry_point("Write something.", "print(1)") is None
    assert signature_of("def twice(x: int = 2) -> int:\n    return 2 * x\n", "twice") == "def twice(x: int=2) -> int"


def test_program_of_handles_full_definitions_and_bare_bodies():
    task = 'from typing import List\n\n\ndef total(xs: List[int]) -> int:\n    """Sum of xs."""\n'
    full = "def total(xs: List[int]) -> int:\n    return sum(xs)"
    assert program_of(task, full, "total") == full
    body = "    s = 0\n    for x in xs:\n        s += x\n    return s\n"
    assert program_of(task, body, "total") == task + body
    lost = "s = 0\n    for x in xs:\n        s += x\n    return s"  # first line lost its indentation
    assert program_of(task, lost, "total") == task + "    " + lost + "\n"
    flat = "return sum(xs)"
    assert program_of(task, flat, "total") == task + "    return sum(xs)\n"
    helper = "def helper(x):\n    return x\n"  # defines something else: the task's stub stays the entry point
    assert program_of(task, helper, "total") == task + helper
    fenced = "Here it is:\n```python\n" + full + "\n```\nDone."
    assert program_of(task, fenced, "total") == full
    assert program_of("Sum a list.", "    return 1", "total") == "    return 1"  # prose is never prepended


def test_reference_needs_more_than_half_of_the_requested_solutions():
    a, b, err = Output(value="1"), Output(value="2"), Output(error="ValueError")
    assert reference_of([a, a, b], 3) == ("1", 2)
    assert reference_of([a, err, err], 3) == (None, 1)
    assert reference_of([a, b], 3) == (None, 1)
    assert reference_of([a, a], 4) == (None, 2)  # a tie of 2 against 2 missing votes
    assert reference_of([err, err, err], 3) == (None, 0)


# ---------------------------------------------------------------- the factool-code set


def _fixture(root: Path) -> list[dict]:
    prompt = 'from typing import List\n\n\ndef total(xs: List[int]) -> int:\n    """Sum of xs."""\n'
    rows = [
        {"response": "def total(xs: List[int]) -> int:\n    return sum(xs)", "label": True},
        {"response": "    return sum(xs) + 1\n", "label": False},
        {"response": "s = 0\n    for x in xs:\n        s += x\n    return s", "label": True},
        {"response": "def helper(x):\n    return x\n", "label": False},
        {"response": "def total(xs):\n    return sum(xs)\n}", "label": False},
        {"response": "def total(xs):\n    return sum(xs)\n", "label": True},
    ]
    folder = root / "factool"
    folder.mkdir(parents=True)
    with open(folder / "code.jsonl", "w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps({"prompt": prompt, "entry_point": "total", "claims": [], **r}) + "\n")
    return rows


def test_factool_code_loader(tmp_path, monkeypatch):
    rows = _fixture(tmp_path)
    monkeypatch.setenv("HALUCHECK_DATASETS", str(tmp_path))
    assert "factool-code" in DATASETS
    items = load("factool-code", "all")
    prompt = items[0].question
    assert [i.id for i in items] == [f"factool-code:{k}" for k in range(6)]
    assert [i.label for i in items] == [not r["label"] for r in rows]  # hallucinated = not label
    assert [i.split for i in items] == ["dev"] * 4 + ["test", "dev"]
    assert [i.id for i in load("factool-code", "test")] == ["factool-code:4"]
    assert all(i.meta["entry_point"] == "total" and i.evidence == [] for i in items)
    assert items[0].claim == rows[0]["response"] and "response" not in items[0].meta
    assert items[1].claim == prompt + rows[1]["response"] and items[1].meta["response"] == rows[1]["response"]
    assert items[2].claim == prompt + "    " + rows[2]["response"] + "\n"
    assert items[3].claim == prompt + rows[3]["response"]
    assert items[4].claim == rows[4]["response"]  # a full definition, broken or not, stays as written
    check = case_of(items[1])
    assert (check.claim.question, check.claim.text, check.meta) == (prompt, items[1].claim, items[1].meta)


@needs_sandbox
def test_factool_code_items_run_as_written(tmp_path, monkeypatch):
    _fixture(tmp_path)
    monkeypatch.setenv("HALUCHECK_DATASETS", str(tmp_path))
    items = load("factool-code", "all")
    sums = ["def total(xs):\n    return sum(xs)\n", "def total(xs):\n    return sum(list(xs))\n",
            "def total(xs):\n    t = 0\n    for x in xs:\n        t += x\n    return t\n"]
    _, verdicts = verify([case_of(i) for i in items], scripted(["[1, 2, 3]", "[]"], sums))
    assert [v.factuality for v in verdicts] == [True, False, True, False, False, True]
    assert [v.error_severity for v in verdicts] == [0, 3, 0, 3, 4, 0]  # the helper-only answer returns None
    assert [v.factuality is not None for v in verdicts] == [True] * 6


def test_reply_schemas_bound_no_string_length():
    """A long string bound in a schema ({0,6000} in its regex) takes structured-output backends minutes and
    gigabytes to compile; the caps are checked after parsing instead: an over-long solution is not used."""
    long_solution = "def count_up(n):\n    return list(range(1, n + 1))\n" + "# pad\n" * 2000
    engine = FakeEngine(responder=lambda r: {"inputs": ["3", "0"]} if r.tag == "code:tests"
                       else long_solution if r.sampling.seed // codecheck.SEED_STEP == 1 else SOLUTIONS[1])
    verifier = get_verifier("code")
    task = codecheck._Task(COUNT_UP, "count_up", "count_up(n: int)", program="", setup=None, requests=[])
    for request in (verifier._tests_request(task), *verifier._solution_requests(task, 0, 3)):
        assert "maxLength" not in json.dumps(request.schema)
    if UNAVAILABLE is None:
        [v] = verifier.verify([code_claim(RIGHT)], pool_with(engine))
        assert v.factuality is True and "longer than 6000 characters" in v.chain[0].opinion, v.chain[0].opinion


@needs_sandbox
def test_more_solutions_are_asked_for_only_while_an_input_has_no_majority():
    wrong = "def count_up(n):\n    return [n]\n"
    other = "def count_up(n):\n    return []\n"
    # first three disagree on count_up(3) ([1, 2, 3], [3], []): two more make [1, 2, 3] a majority of five
    eng = scripted(["3"], [SOLUTIONS[0], wrong, other, SOLUTIONS[1], SOLUTIONS[2], wrong, wrong])
    verifier, (v,) = verify([code_claim(OFF_BY_ONE)], eng, max_solutions=7)
    assert v.factuality is False
    assert lines(v)[1] == "[1] count_up(3): reference [1, 2, 3] (3 of 5 solutions); answer [1, 2]: DISAGREES"
    assert [r.sampling.seed for r in eng.requests if r.tag == "code:solution"] == [100, 200, 300, 400, 500]
    assert verifier.costs["code"].llm_calls == 6  # the tests and five solutions
    # agreeing solutions: no second round
    eng = scripted(["3"], SOLUTIONS)
    verify([code_claim(RIGHT)], eng, max_solutions=7)
    assert sum(r.tag == "code:solution" for r in eng.requests) == 3


@needs_sandbox
def test_more_solutions_are_asked_for_when_crashes_leave_no_reference_anywhere():
    crash = "def count_up(n):\n    raise ValueError(n)\n"
    # the first three crash or hold no code: no input has a reference; four more give [1, 2, 3] 3 votes of 7
    eng = scripted(["3"], [crash, "RAW:I cannot help with that.", crash, SOLUTIONS[0], crash, SOLUTIONS[1],
                           SOLUTIONS[2]])
    verifier, (v,) = verify([code_claim(OFF_BY_ONE)], eng, max_solutions=7)
    assert sum(r.tag == "code:solution" for r in eng.requests) == 7
    assert v.factuality is None and "no input has a majority" in v.error  # 3 of 7 is no majority
    eng = scripted(["3"], [crash, crash, SOLUTIONS[0], SOLUTIONS[1], SOLUTIONS[2], crash, crash])
    verifier, (v,) = verify([code_claim(OFF_BY_ONE)], eng, max_solutions=7)
    assert sum(r.tag == "code:solution" for r in eng.requests) == 5  # 3 of 5 is a majority: stop there
    assert v.factuality is False
    assert lines(v)[1] == "[1] count_up(3): reference [1, 2, 3] (3 of 5 solutions); answer [1, 2]: DISAGREES"


def test_the_examples_a_task_states_are_test_inputs():
    task = ('def add(a, b):\n    """Add two numbers.\n    >>> add(1, 2)\n    3\n    add([1], [2]) == [1, 2]; '
            'add(x, 3) is no literal\n    """\n')
    from halucheck.verifiers.tools.code_source import examples_of

    assert examples_of(task, "add") == ["add(1, 2)", "add([1], [2])"]
    assert examples_of("def add(a, b): ...", "add") == []


@needs_sandbox
def test_examples_run_first_and_are_named_in_the_trace():
    task = COUNT_UP.replace('"""Return', '"""count_up(2) == [1, 2]. Return')
    eng = scripted(["3"], SOLUTIONS)
    _, (v,) = verify([code_claim(RIGHT, task=task)], eng)
    out = lines(v)
    assert "on 2 test inputs in the sandbox (1 of them the task's own examples)" in out[0]
    assert out[1].startswith("[1] count_up(2): reference [1, 2]") and out[2].startswith("[2] count_up(3)")


@needs_sandbox
def test_inputs_every_program_refuses_alike_are_written_again_once():
    # the first inputs are lists where count_up takes a number: the answer and every solution raise TypeError
    asked = []

    def respond(request):
        if request.tag == "code:tests":
            asked.append(request.messages[-1]["content"])
            return {"inputs": ["[1, 2, 3], 4", "'abc'"] if len(asked) == 1 else ["3", "0"]}
        return f"```python\n{SOLUTIONS[request.sampling.seed // codecheck.SEED_STEP - 1]}```"

    eng = FakeEngine(responder=respond)
    verifier, (v,) = verify([code_claim(OFF_BY_ONE, task=UNTYPED)], eng)
    assert len(asked) == 2 and "TypeError" in asked[1] and '"[1, 2, 3], 4"' not in asked[1]
    # two arguments for one parameter is no input at all: dropped before anything runs, never shown again
    assert "count_up('abc')" in asked[1] and "[1, 2, 3], 4" not in asked[1] and "TypeError" not in asked[0]
    assert v.factuality is False and verifier.costs["code"].llm_calls == 5  # two tests replies, three solutions
    out = lines(v)
    assert "written again: every program raised TypeError" in out[0]
    assert out[1] == "[1] count_up(3): reference [1, 2, 3] (3 of 3 solutions); answer [1, 2]: DISAGREES"
    # inputs the programs run, even with an error here and there, are kept: nothing is asked again
    crash = "def count_up(n):\n    raise ValueError(n)\n"
    eng = scripted(["3", "[1]"], [SOLUTIONS[0], SOLUTIONS[1], crash])
    verify([code_claim(OFF_BY_ONE, task=UNTYPED)], eng)
    assert sum(r.tag == "code:tests" for r in eng.requests) == 1


@needs_sandbox
def test_inputs_that_wrap_the_arguments_in_one_list_are_read_as_meant_without_asking_again():
    # count_up takes one number: "[1, 2, 3]" lists three inputs
    # untyped, they are read again once every program has raised TypeError on them; typed (n: int), at once
    for task, said in ((UNTYPED, True), (COUNT_UP, False)):
        eng = scripted(["[1, 2, 3]", "[4]"], SOLUTIONS)
        verifier, (v,) = verify([code_claim(OFF_BY_ONE, task=task)], eng)
        assert sum(r.tag == "code:tests" for r in eng.requests) == 1 and verifier.costs["code"].llm_calls == 4
        out = lines(v)
        assert ("read as their arguments wrapped in one list: every program raised TypeError" in out[0]) is said
        assert [line.split(":")[0] for line in out[1:5]] == ["[1] count_up(1)", "[2] count_up(2)", "[3] count_up(3)",
                                                             "[4] count_up(4)"]
        assert v.factuality is False  # off by one on every input
    # a two-parameter function: "[3, 4]" is its two arguments
    task = 'def add(a: int, b: int) -> int:\n    """Return a + b."""\n'
    eng = scripted(["[3, 4]", "[10, -2]"], ["def add(a, b):\n    return a + b\n"] * 3)
    verifier, (v,) = verify([code_claim("def add(a, b):\n    return a + b\n", task=task)], eng)
    assert v.factuality is True and "[1] add(3, 4): reference 7 (3 of 3 solutions); answer 7: agrees" in lines(v)


def test_reshaped_reads_a_list_as_the_arguments_or_as_several_inputs():
    from halucheck.verifiers.tools.code_source import arity_of, reshaped

    assert arity_of(["def f(a, b=1):\n    pass\n"], "f") == (1, 2)
    assert arity_of(["class C: pass", "def f(*xs):\n    pass\n"], "f") is None
    assert reshaped("f([3, 4])", "f", (2, 2)) == ["f(3, 4)"]
    assert reshaped("f([1, 2])", "f", (1, 1)) == ["f(1)", "f(2)"]
    assert reshaped("f([1, 2, 3])", "f", (2, 2)) == []  # three items for two parameters
    assert reshaped("f([1], 2)", "f", (2, 2)) == [] and reshaped("f([])", "f", (1, 1)) == []


# ---------------------------------------------------------------- inputs fitted to the parameters' types


def test_types_come_from_annotations_then_from_the_model():
    from halucheck.verifiers.tools.code_inputs import Param, parameters_of, type_of, with_declared
    import ast as _ast

    ann = lambda text: _ast.parse(text, mode="eval").body  # noqa: E731
    assert [type_of(ann(t)) for t in ("int", "List[int]", "list[str]", "typing.List[List[int]]", "Dict[str, int]",
                                      "Optional[int]", "Tuple[int, int]")] == [
        "int", "list[int]", "list[str]", "list[list[int]]", "dict", "any", "tuple"]
    params = parameters_of(["def f(a, b: str, c=2):\n    pass\n"], "f")
    assert params == [Param("a", False, "any"), Param("b", False, "str"), Param("c", True, "any")]
    assert parameters_of(["def f(*xs):\n    pass\n"], "f") is None
    # by name; an annotation is never overridden; an unknown type is no declaration
    typed = with_declared(params, [{"name": "a", "type": "int"}, {"name": "b", "type": "int"},
                                   {"name": "c", "type": "set[int]"}])
    assert [p.type for p in typed] == ["int", "str", "any"]
    # by position when the model named as many parameters, under other names
    assert [p.type for p in with_declared(params, [{"name": "x", "type": "list[int]"}, {"name": "y", "type": "str"},
                                                    {"name": "z", "type": "bool"}])] == ["list[int]", "str", "bool"]
    assert with_declared(params, "int") == params


def test_calls_fit_the_parameters_or_are_read_as_meant_or_dropped():
    from halucheck.verifiers.tools.code_inputs import Param, call_fits, fit_call, fits

    assert fits(3, "float") and not fits(True, "int") and not fits(2.5, "int") and fits([[1], []], "list[list[int]]")
    assert not fits([1, "a"], "list[int]") and fits((1,), "tuple") and fits({"a": 1}, "dict") and fits(None, "any")
    add = [Param("x", False, "int"), Param("y", False, "int")]
    assert call_fits("add(1, 2)", add) and call_fits("add(1, y=2)", add)
    assert not call_fits("add([1, 2, 3], 4)", add) and not call_fits("add(1)", add)
    assert not call_fits("add(1, 2, 3)", add) and not call_fits("add(1, z=2)", add)
    assert not call_fits("add(1, x=2)", add)  # x twice
    assert fit_call("add([3, 4])", "add", add) == ["add(3, 4)"]
    assert fit_call("add([1, 2, 3], 4)", "add", add) == []
    one = [Param("n", False, "int")]
    assert fit_call("f([1, 2, 3])", "f", one) == ["f(1)", "f(2)", "f(3)"]
    assert fit_call("f(['a'])", "f", one) == []
    assert fit_call("f([1, 2])", "f", None) == ["f([1, 2])"]  # no parameters known: nothing to check against
    from halucheck.verifiers.tools.code_inputs import read_input

    brackets = [Param("brackets", False, "str")]
    assert read_input("'(()'", "f", brackets) == (["f('(()')"], None)
    assert read_input("(())()", "f", brackets) == (["f('(())()')"], None)  # a string written without quotes
    assert read_input("()", "f", brackets) == (["f('()')"], None)  # not the empty tuple
    pair = [Param("strings", False, "list[str]"), Param("sub", False, "str")]
    assert read_input("['abc', 'de'], 'a']", "f", pair) == (["f(['abc', 'de'], 'a')"], None)  # lost its opening [
    assert read_input("[1, 2], 3", "add", add) == ([], "unfit") and read_input("x + 1", "add", add) == ([], "literal")
    from halucheck.verifiers.tools.code_inputs import joined

    pair = [Param("string", False, "str"), Param("sub", False, "str")]
    assert joined(["'abc'", "'a'", "'xyz'", "'y'"], "f", pair) == ["f('abc', 'a')", "f('xyz', 'y')"]
    assert joined(["'abc'", "'a'", "'b'"], "f", pair) == []  # not whole calls
    assert joined(["'abc'", "1"], "f", pair) == [] and joined(["'abc', 'a'", "'b'"], "f", pair) == []
    assert joined(["1"], "f", one) == []  # one parameter: nothing to join
    untyped = [Param("a", False), Param("b", False), Param("c", False)]
    assert fit_call("t([3, 4, 5])", "t", untyped) == ["t(3, 4, 5)"]  # the count alone says how to read it


def test_typed_draws_and_edge_cases():
    from halucheck.verifiers.tools.code_inputs import Param, edge_calls, typed_calls
    from halucheck.verifiers.tools.code_source import parse_call

    add = [Param("x", False, "int"), Param("y", False, "int")]
    drawn = typed_calls("add", add, 4)
    assert len(drawn) == 4 and len(set(drawn)) == 4 and all(parse_call(c, "add") == c for c in drawn)
    assert typed_calls("add", add, 3, seen=drawn[:1]) == drawn[1:4]
    assert typed_calls("f", [Param("a", False), Param("b", False, "int")], 3) == []  # a is of no known type
    assert typed_calls("f", [Param("a", False, "float"), Param("b", True)], 2) == ["f(2.5)", "f(1.0)"]
    # a string or a dict has a form the task sets (brackets, digits, words): never drawn
    assert typed_calls("f", [Param("a", False, "str")], 2) == [] == typed_calls("f", [Param("a", False, "dict")], 2)
    edges = edge_calls("f", ["f([3, 1, 2], 'ab')", "f([5], 'c')"], 6)
    assert edges[:2] == ["f([], 'ab')", "f([5], '')"]  # each call starts at another argument or kind of change
    assert all(parse_call(c, "f") == c for c in edges) and len(set(edges)) == 6
    assert "f([3, 1, 2], 'ab')" not in edges and edge_calls("f", [], 5) == []
    # a negative number only where an input already has one
    assert not any("-" in c for c in edge_calls("g", ["g(4)"], 10))
    assert "g(-4)" in edge_calls("g", ["g(4)", "g(-1)"], 10)


ADD = '''def add(x: int, y: int) -> int:
    """Add two integers."""
'''
ADD_SOLUTIONS = ["def add(x, y):\n    return x + y\n", "def add(x, y):\n    return sum([x, y])\n",
                 "def add(x, y):\n    return y + x\n"]


@needs_sandbox
def test_inputs_that_do_not_fit_the_types_are_dropped_and_typed_draws_fill_in():
    # every written input wraps a list where add takes two integers: before, no input was usable
    eng = scripted(["[1, 2, 3], 4", "[5, 6, 7], 8"], ADD_SOLUTIONS)
    _, (right, wrong) = verify([code_claim("def add(x, y):\n    return x + y\n", task=ADD),
                                code_claim("def add(x, y):\n    return x - y if y > 5 else x + y\n", task=ADD)],
                               eng, typed=5)
    out = lines(right)
    assert "Dropped 2 test inputs that do not fit the parameters (x: int, y: int): add([1, 2, 3], 4); add([5, 6, 7], 8)." in out[0]
    assert "on 5 test inputs" in out[0] and all("(drawn for the types)" in line for line in out[1:6])
    assert right.factuality is True and out[-1] == "Agreed on all 5 usable inputs."
    assert wrong.factuality is False  # y > 5 among the draws
    # the request names the parameters an input must give (a small model otherwise writes one per parameter)
    asked = next(r for r in eng.requests if r.tag == "code:tests").messages[-1]["content"]
    assert "it gives all 2 arguments of `add` (x, y),\nin that order" in asked
    # one argument an input, as a small model lists the parameters' values: read as the call they make
    _, (v,) = verify([code_claim("def add(x, y):\n    return x + y\n", task=ADD)], scripted(["12", "34"], ADD_SOLUTIONS))
    assert lines(v)[1].startswith("[1] add(12, 34): reference 46") and "Dropped" not in lines(v)[0]
    # the model's declared types do the same for a task without annotations
    untyped = ADD.replace("x: int, y: int) -> int", "x, y")
    eng = scripted(None, ADD_SOLUTIONS)
    eng.responder = lambda r: ({"parameters": [{"name": "x", "type": "int"}, {"name": "y", "type": "int"}],
                                "inputs": ["[1, 2, 3], 4", "12, 34"]} if r.tag == "code:tests"
                               else f"```python\n{ADD_SOLUTIONS[r.sampling.seed // codecheck.SEED_STEP - 1]}```")
    _, (v,) = verify([code_claim("def add(x, y):\n    return x + y\n", task=untyped)], eng, typed=5)
    out = lines(v)
    assert "Dropped 1 test input that does not fit the parameters (x: int, y: int): add([1, 2, 3], 4)." in out[0]
    assert out[1].startswith("[1] add(12, 34): reference 46") and v.factuality is True


FIRST = '''def first(xs: list):
    """Return the first element of xs, or None when xs is empty."""
'''


@needs_sandbox
def test_edge_cases_catch_what_the_written_inputs_miss_and_count_only_when_every_solution_agrees():
    solutions = ["def first(xs):\n    return xs[0] if xs else None\n",
                 "def first(xs):\n    return None if not xs else xs[0]\n",
                 "def first(xs):\n    for x in xs:\n        return x\n    return None\n"]
    crashes_on_empty = "def first(xs):\n    return xs[0]\n"
    eng = scripted(["[1, 2]", "[3]"], solutions)
    _, (v,) = verify([code_claim(crashes_on_empty, task=FIRST)], eng, edges=3)
    out = lines(v)
    assert out[3] == "[3] first([]) (edge case): reference None (3 of 3 solutions); answer error IndexError: CRASHED"
    assert v.factuality is False and v.error_severity == codecheck.SEVERITY_CRASH
    # solutions that split on an edge case leave it out, and never cost another solution
    split = [solutions[0], solutions[1], "def first(xs):\n    return xs[0] if xs else []\n"]
    eng = scripted(["[1, 2]", "[3]"], split)
    verifier, (v,) = verify([code_claim(crashes_on_empty, task=FIRST)], eng, edges=3, max_solutions=7)
    assert lines(v)[3].startswith("[3] first([]) (edge case): an edge case with 2 of the 3 working solutions agreeing")
    assert v.factuality is True and sum(r.tag == "code:solution" for r in eng.requests) == 3


@needs_sandbox
def test_a_thin_reference_against_the_answer_must_hold_when_more_solutions_are_asked():
    # 2 of 3 solutions against the answer, the third returns the answer's output: two more are asked
    wrong = "def count_up(n):\n    return list(range(1, n))\n"
    eng = scripted(["3"], [SOLUTIONS[0], SOLUTIONS[1], wrong, wrong, SOLUTIONS[2]])
    verifier, (v,) = verify([code_claim(OFF_BY_ONE)], eng, max_solutions=7)
    assert sum(r.tag == "code:solution" for r in eng.requests) == 5
    # 3 of 5 is a majority, but two solutions return the answer's own output: no reference stands against it
    assert lines(v)[1] == ("[1] count_up(3): 2 solutions return the answer's output ([1, 2, 3], [1, 2, 3], [1, 2], "
                           "[1, 2], [1, 2, 3]); answer [1, 2]: skipped")
    assert v.factuality is None
    # the same majority with no solution on the answer's side stands after the first three
    eng = scripted(["3"], SOLUTIONS)
    verifier, (v,) = verify([code_claim(OFF_BY_ONE)], eng, max_solutions=7)
    assert v.factuality is False and sum(r.tag == "code:solution" for r in eng.requests) == 3


@needs_sandbox
def test_declared_types_that_fit_no_written_input_run_beside_them_and_the_sandbox_decides():
    task = 'def shout(s):\n    """Return s in capitals."""\n'
    sols = ["def shout(s):\n    return s.upper()\n"] * 3

    def respond(request):
        if request.tag == "code:tests":  # the model calls s a number, then writes strings
            return {"parameters": [{"name": "s", "type": "int"}], "inputs": ["'abc'", "'Hello'"]}
        return f"```python\n{sols[0]}```"

    _, (v,) = verify([code_claim("def shout(s):\n    return s.lower()\n", task=task)], FakeEngine(responder=respond),
                     typed=5)
    out = lines(v)
    assert "The types the model declared (s: int) fit none of its inputs (shout('abc'); shout('Hello')): both run" in out[0]
    assert out[1] == "[1] shout('abc'): reference 'ABC' (3 of 3 solutions); answer 'abc': DISAGREES"
    # the numbers drawn for the declared type make every program raise: skipped, never counted
    assert all("(drawn for the types): no majority" in line for line in out[3:8]) and v.factuality is False
