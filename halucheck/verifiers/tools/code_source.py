"""Reading code and test inputs for the code check, with :mod:`ast` only (nothing here runs them): the code in
a reply, whether it parses, the function to test and its signature, an answer as a whole program, and a
model-written test input as a call of literal arguments."""

from __future__ import annotations

import ast
import re
import textwrap
from typing import Sequence

# Length caps are checked after parsing, not written into the reply schemas: a string bounded as
# {0,6000} in the schema's regex takes structured-output backends minutes and gigabytes to compile (vLLM's
# outlines backend timed out at 120 s, then its engine was killed for memory). max_tokens bounds the reply.
MAX_INPUT_CHARS = 400  # one test input as written by the model
MAX_CODE_CHARS = 6000  # one solution

# a Markdown code block; the last one may be cut off by the reply's token budget (no closing fence)
_FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)


def code_of(text: str, first: bool = False) -> str:
    """The code in ``text``: the contents of its Markdown code blocks if it has any (only the first with
    ``first``: a program followed by a block of its output), else the text."""
    blocks = _FENCE.findall(text or "")[: 1 if first else None]
    return "\n\n".join(b.strip("\n") for b in blocks) if blocks else (text or "")


def parse_source(source: str) -> ast.Module | None:
    """``source`` parsed as a Python module, or None when it does not parse (or is too deep or big to)."""
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


def function_defs(source: str | None) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The functions ``source`` defines at its top level (none when it does not parse)."""
    tree = parse_source(source) if source else None
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
    task_defs = function_defs(task)
    if task_defs:
        stubs = [d for d in task_defs if _is_stub(d)]
        return (stubs or task_defs)[-1].name
    answer_defs = function_defs(code_of(answer))
    return answer_defs[-1].name if answer_defs else None


def signature_of(source: str, name: str) -> str | None:
    """``def name(args)`` of the last top-level def of ``name`` in ``source``, or None."""
    for node in reversed(function_defs(source)):
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
    if not task or is_full_definition(answer, entry) or parse_source(task) is None:
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


def arity_of(sources: Sequence[str | None], entry: str) -> tuple[int, int] | None:
    """(required, most) positional parameters of the first top-level def of ``entry`` in ``sources`` (``self``
    aside), or None when there is none or it takes ``*args``."""
    for source in sources:
        for node in function_defs(source):
            if node.name == entry:
                if node.args.vararg is not None:
                    return None
                names = [a.arg for a in [*node.args.posonlyargs, *node.args.args]]
                most = len(names) - (names[:1] == ["self"])
                return most - len(node.args.defaults), most
    return None


def reshaped(call: str, entry: str, arity: tuple[int, int]) -> list[str]:
    """A call that wraps its arguments in one list, read as the model meant it, or [] when it does not:
    ``f([3, 4])`` for ``f(a, b)`` is ``f(3, 4)``; ``f([1, 2, 3])`` for ``f(n)`` is three inputs, ``f(1)``, ``f(2)``
    and ``f(3)`` (a model asked for inputs of a one-parameter function sometimes lists them as one)."""
    try:
        node = ast.parse(call, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    if not (isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords
            and isinstance(node.args[0], (ast.List, ast.Tuple)) and node.args[0].elts):
        return []
    items = [ast.unparse(e) for e in node.args[0].elts]
    required, most = arity
    if most > 1 and required <= len(items) <= most:
        return [f"{entry}({', '.join(items)})"]
    if most == 1:
        return [f"{entry}({item})" for item in items]
    return []


def examples_of(task: str, entry: str) -> list[str]:
    """The calls of ``entry`` the task states as examples (``>>> f(1, 2)``, ``f([1]) == 3``, ``f(2) ➞ 4``), as
    :func:`parse_call` gives them (literal arguments only), each once, in order; its ``def`` line is none."""
    out: list[str] = []
    for m in re.finditer(rf"(?<![\w.]){re.escape(entry)}\s*\(", task or ""):
        if re.search(r"\bdef\s+$", task[max(0, m.start() - 12):m.start()]):
            continue
        depth, end = 0, None
        for k in range(m.end() - 1, min(len(task), m.end() + MAX_INPUT_CHARS)):
            depth += {"(": 1, ")": -1}.get(task[k], 0)
            if depth == 0:
                end = k + 1
                break
        call = parse_call(task[m.start():end], entry) if end else None
        if call is not None and call not in out:
            out.append(call)
    return out


__all__ = ["MAX_CODE_CHARS", "MAX_INPUT_CHARS", "code_of", "entry_point", "examples_of", "is_full_definition", "parse_call",
           "program_of", "signature_of", "syntax_error"]
