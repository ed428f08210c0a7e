"""Test inputs for the code check, fitted to the function's parameters (nothing here runs code; values are read
with :func:`ast.literal_eval` only).

A parameter's type comes from the task's annotation (``def add(x: int, y: int)``) where it has one the check
knows, else from the type the model declared for it beside its test inputs, else it is ``any``. Three steps use
the types:

- :func:`read_input`: a model-written input whose arguments do not fit the parameters (their number, their
  keywords, their types) is read as meant where it wraps the arguments in one list (``add([3, 4])`` is
  ``add(3, 4)``; ``f([1, 2, 3])`` for a function of one integer is three inputs) or, for a function of one
  string, where it is that string unquoted (``(()())`` for ``correct_bracketing(brackets: str)``), else dropped;
  :func:`joined` reads inputs written one argument apiece as the calls they make;
- :func:`typed_calls`: inputs drawn from fixed values of each type, when too few written inputs fit; numbers
  and lists of numbers only (a string or a dict has a form the task sets: brackets, digits, words);
- :func:`edge_calls`: edge cases made from the inputs written, one argument changed at a time (an empty
  list or string, one element, reversed, a repeated element, zero, the next number, ten times it):
  EvalPlus's type-aware mutation, kept to the argument's type.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any, Sequence

from halucheck.verifiers.tools.code_source import MAX_INPUT_CHARS, function_defs, parse_call, reshaped

# the types a model may declare for a parameter (the tests reply's enum); "any" first: no declaration
TYPES = ("any", "int", "float", "bool", "str", "list[int]", "list[float]", "list[str]", "list[list[int]]", "list",
         "tuple", "dict")

# values drawn for a type, in order (several parameters take different positions, so calls differ): numbers
# and lists of them, none negative; the types not here are drawn for nowhere (a plain `list` may hold anything:
# numbers drawn for a list of operators made a false alarm)
_DRAWS: dict[str, list[Any]] = {
    "int": [3, 10, 1, 0, 25, 7, 2, 100],
    "float": [2.5, 1.0, 0.5, 3.75, 10.0, 0.0],
    "bool": [True, False],
    "list[int]": [[1, 2, 3], [5, 3, 8, 1], [], [4], [2, 2, 7, 1, 9], [0, 6, 3]],
    "list[float]": [[1.5, 2.0, 3.25], [], [4.0], [1.0, 2.5, 0.0]],
}


@dataclass(frozen=True)
class Param:
    """One parameter of the function to test: its name, whether it has a default, its type (one of :data:`TYPES`)."""

    name: str
    optional: bool
    type: str = "any"


def parameters_of(sources: Sequence[str | None], entry: str) -> list[Param] | None:
    """The positional parameters of the first top-level def of ``entry`` in ``sources`` (``self`` aside), typed
    by their annotations; None when there is no such def or it takes ``*args`` or keyword-only parameters."""
    for source in sources:
        for node in function_defs(source):
            if node.name != entry:
                continue
            if node.args.vararg is not None or node.args.kwonlyargs:
                return None
            args = [*node.args.posonlyargs, *node.args.args]
            if args[:1] and args[0].arg == "self":
                args = args[1:]
            first_optional = len(args) - len(node.args.defaults)
            return [Param(a.arg, k >= first_optional, type_of(a.annotation)) for k, a in enumerate(args)]
    return None


def type_of(annotation: ast.AST | None) -> str:
    """An annotation as one of :data:`TYPES` (``List[int]`` and ``list[int]`` alike); ``any`` for what the check
    does not know (``Optional``, unions, classes)."""
    if annotation is None:
        return "any"
    text = ast.unparse(annotation).replace("typing.", "").replace(" ", "")
    for name in ("List", "Tuple", "Dict"):
        text = text.replace(f"{name}[", f"{name.lower()}[")
    text = {"List": "list", "Tuple": "tuple", "Dict": "dict"}.get(text, text)
    if text.startswith(("tuple[", "dict[")):
        return text.split("[")[0]
    return text if text in TYPES else "any"


def with_declared(params: list[Param], declared: Any) -> list[Param]:
    """``params`` whose type is ``any`` given the type the model declared (a list of {"name", "type"}, matched
    by name, else by position when the model named as many parameters)."""
    if not isinstance(declared, list):
        return params
    pairs = [(d.get("name"), d.get("type")) for d in declared if isinstance(d, dict)]
    by_name = {n: t for n, t in pairs if isinstance(n, str) and t in TYPES}
    positional = [t for _, t in pairs] if len(pairs) == len(params) else [None] * len(params)
    out = []
    for p, t in zip(params, positional):
        typed = by_name.get(p.name) or (t if t in TYPES else None)
        out.append(Param(p.name, p.optional, typed) if p.type == "any" and typed else p)
    return out


def fits(value: Any, kind: str) -> bool:
    """Whether ``value`` is of the type ``kind`` (an int is a float; a bool is no number)."""
    def number(x, floats):
        return not isinstance(x, bool) and isinstance(x, (int, float) if floats else int)
    if kind == "any":
        return True
    if kind in ("int", "float"):
        return number(value, kind == "float")
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "str":
        return isinstance(value, str)
    if kind == "tuple":
        return isinstance(value, tuple)
    if kind == "dict":
        return isinstance(value, dict)
    if not isinstance(value, list):
        return False
    item = kind[5:-1] if kind.startswith("list[") else "any"
    return all(fits(v, item) for v in value)


def _arguments(call: str) -> tuple[list[Any], dict[str, Any]] | None:
    try:
        node = ast.parse(call, mode="eval").body
        return [ast.literal_eval(a) for a in node.args], {k.arg: ast.literal_eval(k.value) for k in node.keywords}
    except (SyntaxError, ValueError, TypeError, AttributeError, RecursionError, MemoryError):
        return None


def call_fits(call: str, params: list[Param]) -> bool:
    """Whether the literal arguments of ``call`` bind to ``params`` (count, keywords) with values of their types."""
    parsed = _arguments(call)
    if parsed is None:
        return False
    args, kwargs = parsed
    if len(args) > len(params):
        return False
    bound = dict(zip((p.name for p in params), args))
    for name, value in kwargs.items():
        if name in bound or name not in {p.name for p in params}:
            return False
        bound[name] = value
    return all((p.name in bound or p.optional) and (p.name not in bound or fits(bound[p.name], p.type))
               for p in params)


def fit_call(call: str, entry: str, params: list[Param] | None) -> list[str]:
    """``call`` as the calls it stands for: itself when it fits ``params``; its list read as the arguments, or as
    several inputs of a one-parameter function, when those fit; else none (it cannot be a valid input)."""
    if params is None or call_fits(call, params):
        return [call]
    arity = (sum(not p.optional for p in params), len(params))
    calls = reshaped(call, entry, arity)
    return calls if calls and all(call_fits(c, params) for c in calls) else []


def read_input(text: str, entry: str, params: list[Param] | None) -> tuple[list[str], str | None]:
    """A test input as the model wrote it, as the calls to run: ([calls], None), or ([], why) with why
    ``"literal"`` (not literal arguments) or ``"unfit"`` (literal, but not fitting the parameters)."""
    call = parse_call(text, entry)
    stripped = text.rstrip()
    if call is None and stripped.endswith("]") and stripped.count("]") == stripped.count("[") + 1:
        call = parse_call(stripped[:-1], entry)  # a list of the arguments that lost its opening bracket
    fitted = fit_call(call, entry, params) if call is not None else []
    if fitted:
        return fitted, None
    required = [p for p in params or [] if not p.optional]
    if len(required) == 1 and params[0] is required[0] and params[0].type == "str" and len(text) <= MAX_INPUT_CHARS:
        return [f"{entry}({text.strip()!r})"], None  # the string itself, written without its quotes
    return [], "unfit" if call is not None else "literal"


def joined(texts: Sequence[str], entry: str, params: list[Param] | None) -> list[str]:
    """Inputs written one argument apiece, read as the calls they make in turn (``["'abc'", "'a'"]`` for
    ``how_many_times(string, substring)`` is ``how_many_times('abc', 'a')``), or [] when they do not all fit
    so: a function of two parameters or more, each text one literal, as many as whole calls take."""
    required = [p for p in params or [] if not p.optional]
    if len(required) < 2 or not texts or len(texts) % len(required):
        return []
    read = [_arguments(call) if call is not None else None for call in (parse_call(t, entry) for t in texts)]
    if any(r is None or len(r[0]) != 1 or r[1] for r in read):
        return []
    values = [r[0][0] for r in read]
    calls = [_call(entry, values[k:k + len(required)]) for k in range(0, len(values), len(required))]
    return calls if all(call_fits(c, required) for c in calls) else []


def _call(entry: str, args: Sequence[Any]) -> str:
    return f"{entry}({', '.join(repr(a) for a in args)})"


def typed_calls(entry: str, params: list[Param] | None, k: int, seen: Sequence[str] = ()) -> list[str]:
    """Up to ``k`` calls drawn from fixed values of each parameter's type (none unless every required parameter
    has a known type), different from ``seen``."""
    if not params or any(p.type not in _DRAWS for p in params if not p.optional):
        return []
    required = [p for p in params if not p.optional]
    out: list[str] = []
    for i in range(3 * k):
        args = [_DRAWS[p.type][(i + 2 * j) % len(_DRAWS[p.type])] for j, p in enumerate(required)]
        call = _call(entry, args)
        if call not in seen and call not in out:
            out.append(call)
        if len(out) == k:
            break
    return out


def _variants(value: Any, negatives: bool) -> list[Any]:
    """Edge cases of one argument, of its own type."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        bigger = (10 * value,) if 0 < abs(value) <= 1000 else ()  # where a bug needs a larger number to show
        return [v for v in (0, value + 1, *bigger, 2 * value + 1, 1) + ((-value,) if negatives and value else ())]
    if isinstance(value, float):
        return [0.0, value + 0.5]
    if isinstance(value, str):
        return ["", value[:1], value[::-1], value.upper(), value.swapcase(), value + " " + value]
    if isinstance(value, list):
        return [[], value[:1], value[::-1], value + value[:1], sorted(value, key=repr)]
    if isinstance(value, tuple):
        return [(), value[::-1]]
    if isinstance(value, dict):
        return [{}, dict(list(value.items())[:1])]
    return []


def edge_calls(entry: str, calls: Sequence[str], k: int, seen: Sequence[str] = ()) -> list[str]:
    """Up to ``k`` edge cases made from ``calls`` (inputs that fit): one argument of one call changed to an
    edge case of its own type, round-robin over the calls, each call starting at another argument and kind of
    change so that they differ; a negative number only where the inputs already have one."""
    parsed = [p for p in (_arguments(c) for c in calls) if p is not None and not p[1]]
    negatives = any(isinstance(a, (int, float)) and not isinstance(a, bool) and a < 0
                    for args, _ in parsed for a in args)
    options: list[list[str]] = []
    for args, _ in parsed:
        per_arg = [[_call(entry, [*args[:j], v, *args[j + 1:]]) for v in _variants(value, negatives)]
                   for j, value in enumerate(args)]
        # the first change of each argument, then the second of each, ...
        mine = [c for kind in range(max(map(len, per_arg), default=0)) for group in per_arg if kind < len(group)
                for c in [group[kind]]]
        if mine:
            options.append(mine)
    out: list[str] = []
    for depth in range(max((len(o) for o in options), default=0)):
        for c, mine in enumerate(options):
            pick = mine[(depth + c) % len(mine)]  # each input starts at another kind of change
            if pick not in seen and pick not in calls and pick not in out:
                out.append(pick)
            if len(out) == k:
                return out
    return out


__all__ = ["Param", "TYPES", "call_fits", "edge_calls", "fit_call", "fits", "joined", "parameters_of", "read_input",
           "type_of", "typed_calls", "with_declared"]
