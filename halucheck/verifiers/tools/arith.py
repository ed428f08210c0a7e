"""Check arithmetic stated in answers ("48 x 125 = 5800") with exact numbers.

Expressions are normalised from everyday notation (``x``/``×``/``·`` multiply, ``÷`` divides, ``^`` and
superscripts raise, ``1,234`` and ``$`` lose their separators and signs, ``15% of 80`` is a percentage,
``times``/``plus``/``minus``/``divided by``), parsed with :mod:`ast` in ``eval`` mode and walked against a
whitelist: numbers, ``+ - * / // % **``, unary signs, parentheses and the functions ``sqrt``, ``abs``
and ``round``. Nothing is ever handed to ``eval``. Values are :class:`fractions.Fraction`, so big
integers and rationals are exact; only ``sqrt`` of a non-square and non-integer powers go through
floats, and the result then says it is inexact. Exponents, result sizes, expression length and
nesting depth are bounded, so hostile input (``9**9**9``) is refused at once instead of hanging.

A claimed result with *d* decimals matches when it is within half a unit of its last decimal
(``60444034 / 12 = 5037002.83`` is right), plus a relative 1e-12 for inexact values; with
``approximate=True`` (written ``≈``) an integer's trailing zeros count as rounding too (``≈ 5000``).
:func:`find_calculations` finds ``expression = result`` in free text for :func:`recompute`.

:class:`ArithVerifier` (``--verifier arith``) is the FacTool-style math check: each calculation of a
claim is evaluated by this module, never judged by a model (see its docstring for the verdicts it gives).
"""

from __future__ import annotations

import ast
import math
import operator
import re
import time
from dataclasses import dataclass
from decimal import Context, Decimal
from fractions import Fraction
from typing import TYPE_CHECKING, Callable, Sequence

if TYPE_CHECKING:
    from halucheck.claims import StageOutput
    from halucheck.engines.base import Engine
    from halucheck.records import Cost

from halucheck.engines.base import Request, SamplingParams
from halucheck.records import Case, Turn, Verdict
from halucheck.text import sentence_spans
from halucheck.verifiers.base import Cost, Verifier, failed_verdict

MAX_LENGTH = 500  # characters of an expression or a claimed result, as written
MAX_OPERATIONS_IN_TEXT = 30  # operators in one expression that find_calculations takes
MAX_DEPTH = 100  # nested operations
MAX_BITS = 20_000  # bits of a numerator or denominator (about 6,000 decimal digits)
MAX_DECIMAL_EXPONENT = 1_000  # the e in a literal such as 1e400
MAX_ROUND_DIGITS = 100
RELATIVE_EPSILON = Fraction(1, 10**12)  # slack for values computed through floats
# A whole-number result that cuts a fraction off ("6537761 / 3 = 2179253" elves) is right, rounded to a whole
# number either way, when that changes it by at most this share (a count of people is whole; "7 / 2 = 3" is not
# a rounding but an error: 14 %).
WHOLE_ROUNDING = Fraction(1, 100)

_DASHES = str.maketrans({"\u2212": "-", "\u2013": "-", "\u2012": "-", "\ufe63": "-", "\uff0d": "-"})
_SIGNS = str.maketrans({"÷": "/", "[": "(", "]": ")", "^": "**"})
_SUPERSCRIPTS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻", "0123456789-")
_SUPERSCRIPT_RUN = re.compile(r"[⁻]?[⁰¹²³⁴⁵⁶⁷⁸⁹]+")
_WORD_OPERATORS = [
    (re.compile(r"\s*\bmultiplied\s+by\b\s*", re.IGNORECASE), "*"),
    (re.compile(r"\s*\btimes\b\s*", re.IGNORECASE), "*"),
    (re.compile(r"\s*\bdivided\s+by\b\s*", re.IGNORECASE), "/"),
    (re.compile(r"\s*\bplus\b\s*", re.IGNORECASE), "+"),
    (re.compile(r"\s*\bminus\b\s*", re.IGNORECASE), "-"),
    (re.compile(r"\s*\bper\s*cent\b", re.IGNORECASE), "%"),
]
_CURRENCY = re.compile(r"[$€£¥₹]")
_THOUSANDS = re.compile(r"(?<![\d.])\d{1,3}(?:[,\u202f\u2009\u00a0]\d{3})+(?![\d])")
_PERCENT_OF = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*%\s*of\b\s*", re.IGNORECASE)
_PERCENT = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*%(?!\s*[\d(.])")
_TIMES = re.compile(r"(?<=[\d)])\s*[xX×✕⋅·∙]\s*(?=[\d(.])|[×✕⋅·∙]")
_IMPLICIT_TIMES = re.compile(r"(?<=[\d)])\s*(?=\()")
_FLOAT_EXPONENT = re.compile(r"[eE]([-+]?\d+)")
_PLAIN_NUMBER = re.compile(r"[-+]?(?P<int>\d+)(?:\.(?P<frac>\d*))?(?:[eE](?P<exp>[-+]?\d+))?(?P<pct>%?)")

_BINARY: dict[type[ast.operator], Callable[[Fraction, Fraction], Fraction]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: lambda a, b: Fraction(a // b), ast.Mod: operator.mod,
}
_FUNCTIONS = ("sqrt", "abs", "round")


class ArithError(ValueError):
    """An expression that cannot be evaluated safely: unparseable, not allowed, undefined or too big."""


@dataclass(frozen=True)
class Value:
    """A number and whether it is exact (False once a float was involved)."""

    value: Fraction
    exact: bool


@dataclass(frozen=True)
class ArithResult:
    """The outcome of checking ``expression = claimed``.

    ``matches`` is None when either side could not be evaluated; ``error`` then says why. ``tolerance``
    is the largest difference that still matches; ``relative_error`` is ``|value - claimed| / |value|``
    (``inf`` when the value is 0 and the claim is not).
    """

    expression: str
    claimed: str
    value: Fraction | None
    exact: bool
    claimed_value: Fraction | None
    tolerance: Fraction | None
    matches: bool | None
    relative_error: float | None
    error: str | None
    rounded: bool = False  # right only as a whole number rounded past the written precision (WHOLE_ROUNDING)


@dataclass(frozen=True)
class Calculation:
    """An ``expression = result`` found in text; spans are ``(start, end)`` offsets into that text."""

    expression: str
    claimed: str
    approximate: bool
    span: tuple[int, int]
    claimed_span: tuple[int, int]

    def recompute(self) -> ArithResult:
        """This calculation recomputed (see :func:`recompute`)."""
        return recompute(self.expression, self.claimed, approximate=self.approximate)


def normalize(expression: str) -> str:
    """Rewrite everyday notation as Python arithmetic (the text :func:`evaluate` parses)."""
    text = expression.strip().translate(_DASHES).translate(_SIGNS)
    text = _SUPERSCRIPT_RUN.sub(lambda m: "**" + m.group().translate(_SUPERSCRIPTS), text)
    for pattern, symbol in _WORD_OPERATORS:
        text = pattern.sub(symbol, text)
    text = _CURRENCY.sub("", text)
    text = _THOUSANDS.sub(lambda m: re.sub(r"\D", "", m.group()), text)
    text = _PERCENT_OF.sub(r"(\1/100)*", text)
    text = _PERCENT.sub(r"(\1/100)", text)
    text = _TIMES.sub("*", text)
    return _IMPLICIT_TIMES.sub("*", text)


def evaluate(expression: str) -> Value:
    """The value of an arithmetic expression in everyday notation; raises ArithError."""
    if len(expression) > MAX_LENGTH:
        raise ArithError(f"expression longer than {MAX_LENGTH} characters")
    source = normalize(expression)
    if not source:
        raise ArithError("empty expression")
    try:
        tree = ast.parse(source, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        raise ArithError(f"unparseable: {source!r}") from exc
    return _Evaluator(source).visit(tree.body, 0)


def recompute(expression: str, claimed: str, approximate: bool = False) -> ArithResult:
    """Whether ``claimed`` is the value of ``expression``, within the rounding the claim states."""
    try:
        computed = evaluate(expression)
        stated, tolerance = _claimed(claimed, approximate)
    except ArithError as exc:
        return ArithResult(expression, claimed, None, False, None, None, None, None, str(exc))
    value, claimed_value = computed.value, stated.value
    if not (computed.exact and stated.exact):
        tolerance += RELATIVE_EPSILON * max(abs(value), abs(claimed_value))
    difference = abs(value - claimed_value)
    rounded = difference > tolerance and _whole_rounding(value, claimed_value, tolerance, claimed)
    if rounded:
        tolerance = difference
    try:
        relative_error = float(difference / abs(value)) if value else (math.inf if claimed_value else 0.0)
    except OverflowError:
        relative_error = math.inf
    return ArithResult(expression, claimed, value, computed.exact, claimed_value, tolerance,
                       difference <= tolerance, relative_error, None, rounded)


def _whole_rounding(value: Fraction, claimed_value: Fraction, tolerance: Fraction, claimed: str) -> bool:
    """Whether a claim written as a whole number (no decimals, no percent) is ``value`` rounded down or up to a
    whole number, within :data:`WHOLE_ROUNDING` of it."""
    if tolerance != Fraction(1, 2) or claimed_value.denominator != 1 or value.denominator == 1 or "%" in claimed:
        return False
    return abs(value - claimed_value) < 1 and abs(value - claimed_value) <= WHOLE_ROUNDING * abs(value)


def _claimed(claimed: str, approximate: bool) -> tuple[Value, Fraction]:
    """A claimed result's value and the tolerance its written precision allows."""
    if len(claimed) > MAX_LENGTH:
        raise ArithError(f"claimed result longer than {MAX_LENGTH} characters")
    text = _THOUSANDS.sub(lambda m: re.sub(r"\D", "", m.group()),
                          _CURRENCY.sub("", claimed.strip().translate(_DASHES))).replace(" ", "")
    plain = _PLAIN_NUMBER.fullmatch(text)
    if plain is None:  # an expression such as 1/3 claims its value exactly
        return evaluate(claimed), Fraction(0)
    exponent = int(plain["exp"] or 0)
    if abs(exponent) > MAX_DECIMAL_EXPONENT:
        raise ArithError(f"exponent too large in {claimed!r}")
    value = Fraction(text.rstrip("%"))
    places = len(plain["frac"] or "") - exponent
    if approximate and not plain["frac"] and int(plain["int"]):
        places -= len(plain["int"]) - len(plain["int"].rstrip("0"))
    tolerance = Fraction(1, 2) * Fraction(10) ** -places
    if plain["pct"]:
        value, tolerance = value / 100, tolerance / 100
    return Value(value, True), tolerance


class _Evaluator:
    """Walks a parsed expression, allowing only the whitelisted nodes."""

    def __init__(self, source: str):
        self.source = source

    def visit(self, node: ast.expr, depth: int) -> Value:
        if depth > MAX_DEPTH:
            raise ArithError(f"nested deeper than {MAX_DEPTH}")
        if isinstance(node, ast.Constant):
            return self._constant(node)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
            operand = self.visit(node.operand, depth + 1)
            return operand if isinstance(node.op, ast.UAdd) else Value(-operand.value, operand.exact)
        if isinstance(node, ast.BinOp) and (type(node.op) in _BINARY or isinstance(node.op, ast.Pow)):
            left, right = self.visit(node.left, depth + 1), self.visit(node.right, depth + 1)
            exact = left.exact and right.exact
            try:
                if isinstance(node.op, ast.Pow):
                    result = _power(left, right)
                    exact = exact and result.exact
                    return _sized(result.value, exact)
                return _sized(_BINARY[type(node.op)](left.value, right.value), exact)
            except ZeroDivisionError as exc:
                raise ArithError("division by zero") from exc
        if isinstance(node, ast.Call):
            return self._call(node, depth)
        if isinstance(node, ast.Name):
            raise ArithError(f"names are not allowed: {node.id!r}")
        if isinstance(node, ast.Attribute):
            raise ArithError("attribute access is not allowed")
        raise ArithError(f"not allowed in arithmetic: {type(node).__name__}")

    def _constant(self, node: ast.Constant) -> Value:
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise ArithError(f"not a number: {node.value!r}")
        if isinstance(node.value, int):
            return _sized(Fraction(node.value), True)
        literal = (ast.get_source_segment(self.source, node) or repr(node.value)).replace("_", "")
        exponent = _FLOAT_EXPONENT.search(literal)
        if exponent and abs(int(exponent[1])) > MAX_DECIMAL_EXPONENT:
            raise ArithError(f"number too large: {literal}")
        return _sized(Fraction(literal), True)

    def _call(self, node: ast.Call, depth: int) -> Value:
        name = node.func.id if isinstance(node.func, ast.Name) else None
        if name not in _FUNCTIONS or node.keywords:
            raise ArithError(f"only {', '.join(_FUNCTIONS)} may be called")
        args = [self.visit(arg, depth + 1) for arg in node.args]
        if name == "round" and len(args) in (1, 2):
            digits = args[1].value if len(args) == 2 else Fraction(0)
            if digits.denominator != 1 or abs(digits) > MAX_ROUND_DIGITS:
                raise ArithError(f"round() takes a whole number of digits up to {MAX_ROUND_DIGITS}")
            return Value(round(args[0].value, int(digits)), all(a.exact for a in args))
        if len(args) != 1:
            raise ArithError(f"{name}() takes one argument")
        (arg,) = args
        if name == "abs":
            return Value(abs(arg.value), arg.exact)
        return _sqrt(arg)


def _power(base: Value, exponent: Value) -> Value:
    """``base ** exponent``: exact for whole exponents within the size limit, else through floats."""
    power = exponent.value
    if power.denominator == 1:
        bits = max(base.value.numerator.bit_length(), base.value.denominator.bit_length())
        if bits * abs(power) > MAX_BITS:
            raise ArithError(f"result too large: exponent {power}")
        return Value(base.value ** int(power), True)
    if base.value < 0:
        raise ArithError("a fractional power of a negative number is not real")
    try:
        return Value(Fraction(float(base.value) ** float(power)), False)
    except OverflowError as exc:
        raise ArithError("result too large") from exc


def _sqrt(arg: Value) -> Value:
    """The square root: exact for squares of rationals, else through floats."""
    if arg.value < 0:
        raise ArithError("square root of a negative number")
    num, den = arg.value.numerator, arg.value.denominator
    root_num, root_den = math.isqrt(num), math.isqrt(den)
    if root_num * root_num == num and root_den * root_den == den:
        return Value(Fraction(root_num, root_den), arg.exact)
    try:
        return Value(Fraction(math.sqrt(float(arg.value))), False)
    except OverflowError as exc:
        raise ArithError("number too large for sqrt") from exc


def _sized(value: Fraction, exact: bool) -> Value:
    """Refuse values whose numerator or denominator grew past MAX_BITS."""
    if max(value.numerator.bit_length(), value.denominator.bit_length()) > MAX_BITS:
        raise ArithError(f"result too large (over {MAX_BITS} bits)")
    return Value(value, exact)


# --- finding calculations in text ---

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


# --- calculations a model lists (FacTool's extraction step) ---

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
    cost: "Cost"


def numbers_in(text: str) -> set[str]:
    """The numbers written in ``text``, without separators and signs (``$1,200.50`` -> ``1200.5``)."""
    out = set()
    for m in re.finditer(r"\d[\d,]*(?:\.\d+)?", text):
        n = m.group().replace(",", "")
        out.add(n.rstrip("0").rstrip(".") if "." in n else n)
    return out


def list_calculations(engine: "Engine", texts: Sequence[str],
                      sampling: SamplingParams = CALCULATIONS_SAMPLING) -> list["StageOutput"]:
    """The calculations each math answer writes out, as the model lists them (FacTool's step; the regex
    finder misses steps such as ``2(5364765) + 16094295 = 26823825``): value a list of ``expression = result``
    texts, kept only when every number in them is written in one sentence of the answer (a model must not
    invent one, nor join numbers of different steps) and
    the expression can be evaluated (:func:`halucheck.verifiers.tools.arith.evaluate`, never ``eval``)."""
    from halucheck.prompts import load as load_prompts
    from halucheck.records import Cost

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



# --- the verifier ---

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
