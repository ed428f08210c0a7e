"""A math answer's final result, found: the number it gives as its result (``\\boxed{}``, ``#### N``, "the answer
is N", else its last new number), and whether it answers a math question at all. That result becomes a claim of
kind ``result``, checked by program (:mod:`halucheck.verifiers.tools.program`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from halucheck.arithmetic import numbers_in
from halucheck.kinds.calculations import find_calculations

NUMBER = r"[-−]?(?:[$€£¥₹]\s?)?(?:\d{1,3}(?:,\d{3})+(?![\d])|\d+)(?:\.\d+)?(?:\s?%)?"
_NUMBER = re.compile(rf"(?<![\w.:]){NUMBER}(?!:\d)")  # not a clock time (5:00 PM)
_FINAL = [  # where an answer states its final result, most explicit first (the last such place counts)
    re.compile(rf"\\boxed\{{\s*(?P<n>{NUMBER})\s*\}}"),
    re.compile(rf"####\s*(?P<n>{NUMBER})"),
    re.compile(rf"\b(?:final\s+answer|the\s+answer|answer)\s*(?:is|:|=|would\s+be|will\s+be)\s*"
               rf"(?:\*\*|approximately\s+|about\s+)?(?P<n>{NUMBER})", re.IGNORECASE),
]
_UNIT = re.compile(r"\s*(?:(?:more|less|fewer)\s+)?([A-Za-z][A-Za-z/]*(?:\s+(?:per|an|a)\s+[A-Za-z]+)?)")
_QUANTITY_QUESTION = re.compile(
    r"\b(how\s+(?:many|much|long|far|fast|old|often|tall|heavy|big)|calculate|compute|what\s+percent(?:age)?|"
    r"what\s+(?:is|was|will\s+be|are)\s+(?:the\s+)?(?:\w+\s+)?(?:total|sum|number|amount|cost|price|average|"
    r"percentage|value|area|volume|speed|difference|product|ratio|profit|result|distance|time|weight|age))\b",
    re.IGNORECASE)
_NUMBER_WORD = re.compile(
    r"\b(two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|forty|fifty|hundred|thousand|"
    r"million|half|twice|double|triple|third|quarter|percent)\b", re.IGNORECASE)
_YEAR = re.compile(r"^(1[0-9]|20)\d\d$")


@dataclass(frozen=True)
class FinalResult:
    """The number an answer gives as its result: as written (``$26,823,825``), its offsets, the unit after it."""

    text: str
    start: int
    end: int
    unit: str = ""


def final_result(answer: str, question: str | None = None) -> FinalResult | None:
    """The answer's final result: the last ``\\boxed{}``, ``#### N`` or "the answer is N" (the result of the
    calculation N starts, if it starts one), else the last number of the answer that the question does not
    give ("... 50 miles in 7 hours": 50, when the question gives the 7 hours; a quantity asked for is seldom
    one given) or that a written calculation computes ("9 - 6 = 3 more hours": 3, even where the question
    gives a 3), else its last number; None when the answer has no number."""
    calculations = find_calculations(answer)
    for pattern in _FINAL:
        found = list(pattern.finditer(answer))
        if found:
            m = found[-1]  # "the answer is 1007458 + 1007423 = 2014881": the calculation's result
            start, end = next((c.claimed_span for c in calculations if c.span[0] <= m.start("n") < c.span[1]),
                              m.span("n"))
            return _result(answer, start, end)
    numbers = list(_NUMBER.finditer(answer))
    if not numbers:
        return None
    given = numbers_in(question or "")
    results = [c.claimed_span for c in calculations]
    new = [m for m in numbers if not numbers_in(m.group()) <= given
           or any(a <= m.start() < b for a, b in results)]
    m = (new or numbers)[-1]
    return _result(answer, m.start(), m.end())


def _result(answer: str, start: int, end: int) -> FinalResult:
    unit = _UNIT.match(answer, end)
    return FinalResult(answer[start:end].strip(), start, end, unit.group(1) if unit else "")


def is_math_question(question: str | None, answer: str, strict: bool = False) -> bool:
    """Whether ``answer`` answers a math question, so its final result is checked by program: the question
    has a number in digits (a year alone does not count) and either asks for a quantity ("how many", "what is
    the total", "calculate") with two quantities or more (numbers, or words such as "twice" and "half"), or
    the answer writes out a calculation. ``strict`` (an answer with evidence of its own to search: a question
    about the documents may well hold numbers): two numbers in digits and a question for a quantity."""
    if not question or final_result(answer, question) is None:
        return False
    numbers = [m.group().strip("$€£¥₹% ") for m in _NUMBER.finditer(question)]
    numbers = [n for n in numbers if not _YEAR.match(n)]
    if not numbers:
        return False
    asks = bool(_QUANTITY_QUESTION.search(question))
    if strict:
        return len(numbers) >= 2 and asks
    quantities = len(numbers) + len(_NUMBER_WORD.findall(question))
    return (quantities >= 2 and asks) or bool(find_calculations(answer))


def result_claim(result: FinalResult) -> str:
    """The text of a ``result`` claim: what the answer gives as its final result."""
    return f"The final answer is {result.text}{' ' + result.unit if result.unit else ''}."


def claimed_of(text: str) -> str | None:
    """The number a ``result`` claim states (its first number)."""
    m = _NUMBER.search(text)
    return m.group().strip() if m else None
