"""Running programs for the code check: the fixed :data:`HARNESS` run in the bubblewrap sandbox, which calls
a program's function on every test input and reports each output in canonical form (:class:`Output`),
and the majority output of the model-written solutions as the reference (:func:`reference_of`)."""

from __future__ import annotations

import json
import secrets
from collections import Counter
from dataclasses import dataclass
from typing import Sequence

from halucheck.verifiers.tools import sandbox

MAX_SHOWN = 80  # characters of a value or a call in the trace


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
        return shorten(self.value) if self.value is not None else f"error {self.error}"


def run_program(setup: str | None, code: str, entry: str, calls: Sequence[str], input_timeout_s: float = 2.0,
                memory_mb: int = 512) -> list[Output]:
    """Run ``code`` (after ``setup``, the task's own source) in the sandbox and call ``entry`` on every
    call of ``calls`` (``entry(<literal arguments>)``, as
    :func:`~halucheck.verifiers.tools.code_source.parse_call` returns them). One Output per
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


def reference_of(outputs: Sequence[Output], requested: int) -> tuple[str | None, int]:
    """(the majority value, its votes): a value returned by more than half of the ``requested``
    solutions, else (None, the top value's votes)."""
    votes = Counter(o.value for o in outputs if o.value is not None)
    if not votes:
        return None, 0
    value, count = votes.most_common(1)[0]
    return (value if 2 * count > requested else None), count


def shorten(text: str, limit: int = MAX_SHOWN) -> str:
    """``text`` on one line, cut to ``limit`` characters (with an ellipsis) to be shown in a trace."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


__all__ = ["HARNESS", "Output", "reference_of", "run_program"]
