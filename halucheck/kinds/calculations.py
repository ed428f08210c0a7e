"""The calculations of an answer, found: ``expression = result`` written in its text (a regex, no model), and the
ones a model lists (FacTool's extraction step) that the regex misses. Each becomes a ``calculation`` claim,
evaluated by :mod:`halucheck.arithmetic` (:mod:`halucheck.verifiers.tools.arith`), never judged by a model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from halucheck.arithmetic import ArithError, ArithResult, evaluate, numbers_in, recompute
from halucheck.engines.base import Request, SamplingParams
from halucheck.prompts import load as load_prompts
from halucheck.records import Cost
from halucheck.text import sentence_spans

if TYPE_CHECKING:
    from halucheck.engines.base import Engine

MAX_OPERATIONS_IN_TEXT = 30  # operators in one expression that find_calculations takes


@dataclass(frozen=True)
class Calculation:
    """An ``expression = result`` found in text; spans are ``(start, end)`` offsets into that text."""

    expression: str
    claimed: str
    approximate: bool
    span: tuple[int, int]
    claimed_span: tuple[int, int]

    def recompute(self) -> ArithResult:
        """This calculation recomputed (see :func:`halucheck.arithmetic.recompute`)."""
        return recompute(self.expression, self.claimed, approximate=self.approximate)


_NUMBER = r"(?:[$€£¥₹]\s?)?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?(?:\s?%)?"
_OPERAND = rf"(?:[(\[]\s*){{0,10}}[-−]?{_NUMBER}(?:\s*[)\]]){{0,10}}"
# An expression never starts right after these (or these and a space): it would be the tail of a longer one.
_OPERATOR_SIGNS = r")+*/×÷^·⋅∙−–\-"
_OPERATOR = (r"(?:\s*(?:\*\*|[-+*/×xX÷^·⋅∙−–]|\btimes\b|\bplus\b|\bminus\b|\bdivided\s+by\b"
             r"|\bmultiplied\s+by\b)\s*|(?<=%)\s+of\s+)")
_RELATION = r"\s*(?P<relation>=|≈|~|\bequals\b|\bis\s+equal\s+to\b)\s*"
_CALCULATION = re.compile(
    rf"(?<![\w.,{_OPERATOR_SIGNS}])(?<![{_OPERATOR_SIGNS}]\s)"
    rf"(?P<expression>{_OPERAND}(?:{_OPERATOR}{_OPERAND}|[⁰¹²³⁴⁵⁶⁷⁸⁹]+)"
    rf"{{1,{MAX_OPERATIONS_IN_TEXT}}})"
    rf"{_RELATION}"
    rf"(?=(?P<claimed>[-−]?{_NUMBER}))(?!(?P=claimed)\s*(?:\*\*|[-+*/×÷^])\s*[\d(])",
    re.IGNORECASE,
)


def find_calculations(text: str) -> list[Calculation]:
    """Every ``expression = result`` in ``text`` whose expression has an operator or a superscript power.

    The result must be a number (``6,000``, ``-2``, ``$576``, ``15%``). A result followed by another
    operation (``48 x 125 = 6000 - 200 = 5800``) is no result but the next expression: that equation
    is skipped and the calculation starting at its right-hand number (``6000 - 200 = 5800``) is found.
    An expression has at most MAX_OPERATIONS_IN_TEXT operations; a longer one is not found at all,
    rather than found as a wrong-looking tail. Brackets must pair up inside the expression: unpaired
    ones at its edges belong to the sentence and are left out (``(100/4 = 25)`` gives ``100/4``); an
    expression with an unpaired bracket inside (``2(5364765) + 16094295``, read from ``5364765)`` on) is
    the tail of a longer one and is not found. Function calls (``sqrt(2)``) are not looked for.
    """
    found = []
    for match in _CALCULATION.finditer(text):
        span = _paired(text, *match.span("expression"))
        if span is None:
            continue
        found.append(Calculation(
            expression=text[span[0]:span[1]], claimed=match["claimed"],
            approximate=match["relation"] in ("≈", "~"),
            span=(span[0], match.end("claimed")), claimed_span=match.span("claimed"),
        ))
    return found


def _paired(text: str, start: int, end: int) -> tuple[int, int] | None:
    """``(start, end)`` of ``text[start:end]`` without its unpaired edge brackets (an opening one
    before the first number, a closing one after the last), or None when an unpaired one is inside."""
    opened: list[int] = []
    unpaired: list[int] = []
    for i in range(start, end):
        if text[i] in "([":
            opened.append(i)
        elif text[i] in ")]":
            if opened:
                opened.pop()
            else:
                unpaired.append(i)
    first = next(i for i in range(start, end) if text[i].isdigit())
    last = max(i for i in range(start, end) if text[i].isdigit())
    if any(i < first for i in unpaired) or any(first < i < last for i in opened + unpaired):
        return None
    if opened:  # unpaired openings, all before the first number: start after the last of them
        start = opened[-1] + 1
    if unpaired:  # unpaired closings, all after the last number: end before the first of them
        end = unpaired[0]
    while text[start].isspace():
        start += 1
    while text[end - 1].isspace():
        end -= 1
    return start, end


def calculations(text: str) -> list[tuple[str, int, int]]:
    """The calculations written in ``text`` (``expression = result``, see :func:`find_calculations`)
    as (exact text, start, end): each becomes a ``calculation`` claim, checked by evaluating it, not by a model."""
    out = []
    for c in find_calculations(text):
        start, end = c.span[0], c.claimed_span[1]
        out.append((text[start:end], start, end))
    return out


CALCULATIONS_SCHEMA = {
    "type": "object",
    "properties": {"calculations": {"type": "array", "maxItems": 32, "items": {
        "type": "object", "properties": {"expression": {"type": "string"}, "result": {"type": "string"}},
        "required": ["expression", "result"], "additionalProperties": False}}},
    "required": ["calculations"],
    "additionalProperties": False,
}
CALCULATIONS_SAMPLING = SamplingParams(max_tokens=512)


@dataclass
class Listed:
    """The calculations the model listed in one text (``value``: ``expression = result`` texts), or the
    ``error`` of its reply; ``cost``: what the call spent."""

    value: list | None
    error: str | None
    cost: Cost


def list_calculations(engine: "Engine", texts: Sequence[str],
                      sampling: SamplingParams = CALCULATIONS_SAMPLING) -> list[Listed]:
    """The calculations each math answer writes out, as the model lists them (FacTool's step; the regex
    finder misses steps such as ``2(5364765) + 16094295 = 26823825``): value a list of ``expression = result``
    texts, kept only when every number in them is written in one sentence of the answer (a model must not
    invent one, nor join numbers of different steps) and
    the expression can be evaluated (:func:`halucheck.arithmetic.evaluate`, never ``eval``)."""
    p = load_prompts("claims")["calculations"]
    requests = [Request(messages=({"role": "system", "content": p["system"].render()},
                                  {"role": "user", "content": p["user"].render(text=t)}),
                        schema=CALCULATIONS_SCHEMA, sampling=sampling, tag="claims:calculations") for t in texts]
    results = engine.generate(requests)
    outs = []
    for res, text in zip(results, texts):
        cost = Cost()
        cost.add_results([res])
        o = Listed(res.parsed.get("calculations") if res.ok else None, res.error, cost)
        outs.append(o)
        sentences = [numbers_in(text[a:b]) for a, b in sentence_spans(text)] or [numbers_in(text)]
        kept = []
        for c in o.value or []:
            expression, result = " ".join(str(c["expression"]).split()), " ".join(str(c["result"]).split())
            used = (numbers_in(expression) | numbers_in(result)) - {"100"}
            if not expression or not result or not any(used <= written for written in sentences):
                continue
            try:
                evaluate(expression)
            except ArithError:
                continue
            kept.append(f"{expression} = {result}")
        o.value = kept if o.value is not None else None
    return outs


def unseen_calculations(listed: list[str], written: list[tuple[str, int, int]]) -> list[str]:
    """The model-listed calculations (``expression = result``) that no calculation found in the text already
    states: not the same value claimed for the same value computed."""

    def identity(text: str):
        expression, _, claimed = text.rpartition("=")
        outcome = recompute(expression, claimed)
        return (outcome.value, outcome.claimed_value) if outcome.value is not None else None

    have = {identity(t) for t, _, _ in written} - {None}
    out, seen = [], set()
    for text in listed:
        key = identity(text)
        if key is not None and key not in have and key not in seen:
            seen.add(key)
            out.append(text)
    return out
