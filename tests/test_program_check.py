"""The program check: a math answer's final result against the majority of model-written programs (a scripted
engine) run in the sandbox; finding the final result; recognising a math question."""

from itertools import count

import pytest

from halucheck.config import Settings
from halucheck.engines import register
from halucheck.engines.fake import FakeEngine
from halucheck.engines.pool import EnginePool
from halucheck.records import Case, Claim
from halucheck.verifiers import get_verifier
from halucheck.verifiers.tools import program as prog
from halucheck.verifiers.tools import sandbox
from halucheck.kinds.calculations import unseen_calculations
from halucheck.kinds.results import final_result, is_math_question
from halucheck.verifiers.tools.program import reference_of, value_of

UNAVAILABLE = sandbox.available()
needs_sandbox = pytest.mark.skipif(UNAVAILABLE is not None, reason=f"sandbox unavailable: {UNAVAILABLE}")
_names = count()

BOXES = "A factory packs 48 boxes with 125 items in each box. How many items does it pack?"
RIGHT_PROGRAM = "boxes = 48\nper_box = 125\nprint(boxes * per_box)\n"
WRONG_PROGRAM = "print(48 + 125)\n"


def pool_with(engine):
    name = f"program-scripted-{next(_names)}"
    register(name, lambda model="", **kw: engine)
    return EnginePool(Settings.from_dict({"profiles": {"p": {"engine": name}}}))


def scripted(programs):
    """Program j (by its seed) is ``programs[j]``; a program that is an Exception fails that request."""
    def respond(request):
        assert "5800" not in request.messages[-1]["content"]  # the model never sees the answer
        reply = programs[request.sampling.seed // prog.SEED_STEP - 1]
        return reply if isinstance(reply, Exception) else f"Here it is:\n```python\n{reply}```\n"
    engine = FakeEngine(responder=respond)
    return engine


def run(claim_text, programs, question=BOXES):
    verifier = get_verifier("program")
    engine = scripted(programs)
    verdicts = verifier.verify([Case(Claim(claim_text, question, "result"))], pool_with(engine))
    return verifier, verdicts[0]


def test_the_final_result_is_the_stated_answer_else_the_last_number():
    assert final_result("48 x 125 = 6000. So the answer is 6,000 items, in 3 days.").text == "6,000"
    assert final_result("x = 4\n#### 72").text == "72"
    assert final_result(r"so $\boxed{15}$ apples, not 16") .text == "15"
    r = final_result("Total meters = 5381445 x 60 = 322886700 meters\n")
    assert (r.text, r.unit) == ("322886700", "meters")
    answer = "Hence, Kylar needs to pay $26823825 for all the glasses."
    r = final_result(answer)
    assert answer[r.start:r.end] == "$26823825"
    assert final_result("No numbers here.") is None
    # the quantity asked for, not one the question gives
    question = "Rosie runs 10 miles per hour for 3 hours, then 5. How many miles can she run in 7 hours?"
    assert final_result("In total, Rosie can run 30 + 20 = 50 miles in 7 hours.", question).text == "50"
    assert final_result("She runs 7 hours.", question).text == "7"  # nothing else to take
    # a calculation's result is a result even where the question gives the same number
    question = "Harry slept 9 hours. James slept 2/3 of that. How many more hours did Harry sleep than James?"
    r = final_result("James slept (2/3) * 9 = 6 hours. So Harry slept 9 - 6 = 3 more hours than James.", question)
    assert (r.text, r.unit) == ("3", "hours")
    r = final_result("The total is the sum, so the answer is 1007458 + 1007423 + 2014846 = 4029727 gems.")
    assert (r.text, r.unit) == ("4029727", "gems")  # the stated answer's calculation, to its result


def test_a_math_question_needs_numbers_and_a_quantity_or_a_calculation():
    assert is_math_question(BOXES, "It packs 6000 items.")
    assert is_math_question("James runs 3 sprints of 60 meters.", "3 x 60 = 180 meters.")
    assert not is_math_question("How many moons did Jupiter have in 2020?", "It had 79 moons.")
    assert not is_math_question("Who built the Eiffel Tower?", "Gustave Eiffel's company, in 1889.")
    assert not is_math_question(None, "48 x 125 = 6000")
    assert not is_math_question(BOXES, "It packs many items.")  # no result to compare


def test_votes_are_canonical_and_a_reference_needs_more_than_half_of_the_programs():
    assert value_of("The total is 6000.0\n") == "6000"
    assert value_of("93.33333333333333") == "93.3333333333"
    assert value_of("1,234") == "1234"
    assert value_of("no number") is None
    assert reference_of(["6000", "6000", "173"]) == ("6000", 2)
    assert reference_of(["6000", "6000", None]) == ("6000", 2)  # a crash casts no vote
    assert reference_of(["6000", "173", None]) == (None, 1)
    assert reference_of(["6000", None, None]) == (None, 1)  # one vote is no majority
    assert prog.program_text("Sure:\n```python\nprint(1)\n```\nDone.") == "print(1)"
    assert prog.program_text("print(2)\n") == "print(2)" and prog.program_text("  ") is None
    # the program, not the block of its output after it; a reply cut off inside its block still has its code
    assert prog.program_text("```python\nprint(3)\n```\nOutput:\n```\n3\n```") == "print(3)"
    assert prog.program_text("```python\nx = 4\nprint(x)\n") == "x = 4\nprint(x)"


def test_a_solution_cut_off_inside_its_code_block_is_still_read_and_blocks_are_joined():
    from halucheck.verifiers.tools.code_source import code_of

    assert code_of("Here:\n```python\ndef f(x):\n    return x\n") == "def f(x):\n    return x"
    assert code_of("```py\nimport math\n```\nthen\n```python\ndef g():\n    pass\n```") == \
        "import math\n\ndef g():\n    pass"
    assert code_of("no fence here") == "no fence here"


@needs_sandbox
def test_a_result_that_differs_from_the_programs_majority_is_not_factual_with_the_program_shown():
    # 2 of 3 is a thin majority to call an answer wrong: two more programs are asked, and 3 of 5 hold
    programs = [RIGHT_PROGRAM, RIGHT_PROGRAM, WRONG_PROGRAM, RIGHT_PROGRAM, WRONG_PROGRAM]
    verifier, v = run("The final answer is 5800 items.", programs)
    assert v.factuality is False and v.error_severity == 2  # off by 3.33 %
    assert v.p_hallucinated == pytest.approx(0.5 + 0.45 * 3 / 5)
    opinion = v.chain[0].opinion
    assert "Reference 6000 (3 of 5 results printed, 5 programs run)" in opinion and "5800" in opinion
    assert "per_box = 125" in opinion  # the program that gave the reference is in the trace
    assert verifier.costs["program"].llm_calls == 5


@needs_sandbox
def test_a_reference_that_contradicts_the_answer_must_hold_when_more_programs_are_asked():
    # 173, 173 against the answer's 6000: thin; two more print 6000, and so does a third: the answer stands
    verifier, v = run("The final answer is 6000.", [WRONG_PROGRAM, WRONG_PROGRAM, RIGHT_PROGRAM, RIGHT_PROGRAM,
                                                   RIGHT_PROGRAM, WRONG_PROGRAM, WRONG_PROGRAM])
    assert v.factuality is True and verifier.costs["program"].llm_calls == 5
    # a program backed the answer: the contradicting majority is asked again up to 7, then it decides
    verifier, v = run("The final answer is 6000.", [WRONG_PROGRAM, WRONG_PROGRAM, RIGHT_PROGRAM, WRONG_PROGRAM,
                                                   WRONG_PROGRAM, WRONG_PROGRAM, WRONG_PROGRAM])
    assert v.factuality is False and verifier.costs["program"].llm_calls == 7
    assert "Reference 173 (6 of 7 results printed, 7 programs run)" in v.chain[0].opinion
    # two programs reproduced the answer's result: 5 of 7 against it do not settle it, the check abstains
    verifier, v = run("The final answer is 6000.", [WRONG_PROGRAM, WRONG_PROGRAM, RIGHT_PROGRAM, WRONG_PROGRAM,
                                                   RIGHT_PROGRAM, WRONG_PROGRAM, WRONG_PROGRAM])
    assert v.factuality is None and verifier.abstained == {0}
    assert "173 has 5 of the 7 printed, but 2 programs printed the answer's own result 6000" in v.chain[0].opinion
    # a clear majority with no program for the answer decides after the first three
    verifier, v = run("The final answer is 6000.", [WRONG_PROGRAM] * 3)
    assert v.factuality is False and verifier.costs["program"].llm_calls == 3


@needs_sandbox
def test_a_right_result_is_factual_within_the_precision_it_is_written_with():
    _, v = run("The final answer is 6,000.", [RIGHT_PROGRAM] * 3)
    assert v.factuality is True and v.error_severity == 0 and v.p_hallucinated == pytest.approx(0.05)
    third = "print(100 / 3)\n"
    _, v = run("The final answer is 33.33.", [third] * 3, question="Split 100 apples among 3 people: how many each?")
    assert v.factuality is True


@needs_sandbox
def test_without_a_majority_more_programs_are_asked_for_and_then_the_check_abstains():
    # 6000, 173, crash: no majority of the 2 printed; the next two make 6000 a majority (3 of 4)
    programs = [RIGHT_PROGRAM, WRONG_PROGRAM, "raise SystemExit(1)\n", RIGHT_PROGRAM, RIGHT_PROGRAM, "", ""]
    verifier, v = run("The final answer is 6000.", programs)
    assert v.factuality is True and "3 of 4 results printed, 5 programs run" in v.chain[0].opinion
    assert verifier.costs["program"].llm_calls == 5
    scattered = ["print(1)\n", "print(2)\n", "print(3)\n", "print(4)\n", "print(5)\n", "print(6)\n", "print(7)\n"]
    verifier, v = run("The final answer is 6000.", scattered)
    assert v.factuality is None and "no result has a majority" in v.error
    assert verifier.abstained == {0} and verifier.costs["program"].llm_calls == 7


@needs_sandbox
def test_a_program_that_escapes_nothing_and_prints_nothing_votes_for_nothing():
    hostile = ("import socket, os\ns = socket.socket()\ntry:\n    s.connect(('1.1.1.1', 80))\n    print(6000)\n"
               "except OSError:\n    pass\nopen('/etc/passwd', 'a')\n")
    _, v = run("The final answer is 6000.", [hostile, RIGHT_PROGRAM, RIGHT_PROGRAM])
    assert "they printed none (failed (exit code 1" in v.chain[0].opinion  # no network, no writable /etc
    assert v.factuality is True and "2 of 2 results printed, 3 programs run" in v.chain[0].opinion


def test_it_refuses_to_run_without_the_sandbox(monkeypatch):
    monkeypatch.setattr(sandbox, "available", lambda: "bwrap missing")
    from halucheck.errors import ConfigError

    with pytest.raises(ConfigError, match="sandbox"):
        get_verifier("program").preflight()


def test_the_model_lists_calculations_the_finder_misses_and_none_it_invents():
    from halucheck.kinds.calculations import list_calculations

    text = "So he pays 2(5364765) + 16094295 = 26823825 dollars."
    engine = FakeEngine(responder=lambda r: {"calculations": [
        {"expression": "2*(5364765) + 16094295", "result": "26823825"},
        {"expression": "7 * 9", "result": "63"},  # numbers the answer never wrote: invented
        {"expression": "x + 2", "result": "5"}]})  # an unknown: cannot be evaluated
    [listed] = list_calculations(engine, [text])
    assert listed.value == ["2*(5364765) + 16094295 = 26823825"] and listed.cost.llm_calls == 1
    # the finder does not read this step; the model's listing of it is new, a restatement of a found one is not
    assert unseen_calculations(listed.value, []) == listed.value
    assert unseen_calculations(["48 * 125 = 5800"], [("48 x 125 = 5800", 0, 15)]) == []


@needs_sandbox
def test_a_whole_math_answer_is_wrong_when_a_listed_calculation_or_its_result_is():
    question = "Kylar buys 5364765 glasses at $5 and every second one at 60% of that. How much does he pay?"
    answer = "He pays 2(5364765) + 16094295 = 26823825 dollars. Hence he pays $26823825."

    def respond(request):
        if request.tag == "claims:calculations":
            return {"calculations": [{"expression": "2*(5364765) + 16094295", "result": "26823825"}]}
        return "```python\nn = 5364765\nprint(n // 2 * 5 + (n - n // 2) * 3)\n```"
    verifier = get_verifier("math")
    [v] = verifier.verify([Case(Claim(answer, question))], pool_with(FakeEngine(responder=respond)))
    # 2 * 5364765 + 16094295 = 26823825 is right; the reasoning is not: the programs say 21459059
    assert v.factuality is False and v.verifier == "math"
    opinions = " ".join(t.opinion for t in v.chain)
    assert "(claimed 26823825; right)" in opinions and "Reference 21459059" in opinions
    assert verifier.costs["math"].llm_calls == 4  # the listing and three programs


@needs_sandbox
def test_a_labelled_final_answer_in_words_gives_its_number():
    verifier = get_verifier("program")
    check = Case(Claim("The final answer is 6000.", BOXES, "result"), meta={"answer": "The factory packs 6,000 items"})
    [v] = verifier.verify([check], pool_with(scripted([RIGHT_PROGRAM] * 3)))
    assert v.factuality is True and "final result 6,000 matches" in v.chain[0].opinion


@needs_sandbox
def test_right_arithmetic_without_a_reference_is_an_unsure_factual():
    def respond(request):
        if request.tag == "claims:calculations":
            return {"calculations": []}
        return f"```python\nprint({request.sampling.seed})\n```"  # every program prints something else
    [v] = get_verifier("math").verify([Case(Claim("48 x 125 = 6000, so 6000 items.", BOXES))],
                                      pool_with(FakeEngine(responder=respond)))
    assert v.factuality is True and v.p_hallucinated == prog.P_UNSURE and v.confidence == pytest.approx(0.55)
    # no calculation written either: settled as run settles it, not left without a verdict
    [v] = get_verifier("math").verify([Case(Claim("So the factory packs 6000 items.", BOXES))],
                                      pool_with(FakeEngine(responder=respond)))
    assert v.factuality is True and v.p_hallucinated == prog.P_UNSURE
    assert "Not contradicted, not confirmed" in " ".join(t.opinion for t in v.chain)


def test_a_clock_time_is_no_final_result_and_a_listed_calculation_keeps_to_one_sentence():
    from halucheck.kinds.calculations import list_calculations

    answer = "In 4 hours it melts 2 x 4 = 8 centimeters. So it is 8 centimeters shorter from 1:00 PM to 5:00 PM."
    assert final_result(answer).text == "8"
    engine = FakeEngine(responder=lambda r: {"calculations": [{"expression": "2 * 4", "result": "8"},
                                                               {"expression": "5 - 1", "result": "4"}]})
    [listed] = list_calculations(engine, [answer])
    assert listed.value == ["2 * 4 = 8"]  # 5 and 1 are in the answer, but as a clock's, with no 4 beside them


@needs_sandbox
def test_run_settles_a_result_without_a_reference_as_unsure_not_as_a_guess():
    from halucheck.verifiers import routed

    scattered = [f"print({k})\n" for k in range(1, 8)]
    engine = scripted(scattered)
    verifier = routed("selfcheck")
    [v] = verifier.verify([Case(Claim("The final answer is 6000.", BOXES, "result"))], pool_with(engine))
    assert v.factuality is True and v.p_hallucinated == prog.P_UNSURE and v.verifier == "program"
    assert "Not contradicted, not confirmed" in v.chain[0].opinion
    assert {r.tag for r in engine.requests} == {"program:solve"}  # no model was asked to guess
