"""Exact arithmetic: an expression as written in an answer evaluated with exact numbers, and a claimed result
compared with its value (``48 x 125 = 5800``).

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

A foundation: the claim finders (:mod:`halucheck.kinds.calculations`) and the tool checks
(:mod:`halucheck.verifiers.tools.arith`, :mod:`halucheck.verifiers.tools.program`) both use it.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

MAX_LENGTH = 500  # characters of an expression or a claimed result, as written
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


def numbers_in(text: str) -> set[str]:
    """The numbers written in ``text``, without separators and signs (``$1,200.50`` -> ``1200.5``)."""
    out = set()
    for m in re.finditer(r"\d[\d,]*(?:\.\d+)?", text):
        n = m.group().replace(",", "")
        out.add(n.rstrip("0").rstrip(".") if "." in n else n)
    return out
