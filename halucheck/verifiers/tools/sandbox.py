"""Run untrusted Python (written by a model or a user) inside a bubblewrap sandbox.

The program sees a read-only system (``/usr`` and the ``/bin``, ``/lib*`` links, a few loader files from
``/etc``, the interpreter's own prefix), a fresh read-only ``/dev`` and ``/proc``, and three small private tmpfs
mounts: ``/tmp``, ``/dev/shm`` and its working directory ``/sandbox`` (where its code lies, read-only, as
``main.py``).
Every namespace is unshared (so it has no network), nested user namespaces are refused, the environment is
cleared, and the program runs in its own session and dies with its parent. The code runs on this
interpreter, or on the system's ``python3`` when a spare uid (below) could not read this one (a Python
installed under ``/root``); the packages installed for that interpreter are importable, read-only.
Nothing falls back to running code outside the sandbox: without a working ``bwrap``, :func:`run_python`
raises :class:`SandboxUnavailable`.

How each limit is enforced:

* CPU seconds, address space, file size, open files and processes are rlimits that a tiny launcher sets
  inside the sandbox, lowering soft and hard limits alike, before it execs the interpreter on the code.
* ``RLIMIT_NPROC`` counts tasks per real uid, and the kernel never enforces it for the uid 0 of the
  initial user namespace, not even inside a new user namespace. When this process runs as root, bwrap is
  therefore started under a spare uid that no account uses, picked at random per run; since Linux 5.14
  the count is kept per user namespace, so the limit covers exactly the sandbox's own tasks.
* Memory and CPU time are per process, so a program with many processes may use up to ``processes``
  times either; the process limit and the wall clock bound the whole.
* The tmpfs mounts have a fixed size, so files cannot fill memory either; they are the only writable
  mounts (``/dev`` is read-only, apart from its device nodes), so at most three times ``disk_mb``.
* At most ``output_bytes`` of stdout and of stderr are kept; one byte more and the sandbox is killed.
* The wall-clock timeout kills bwrap's process group; bwrap's ``--die-with-parent`` then kills the
  sandbox's pid 1, and with it every process of the sandbox's pid namespace.
"""

from __future__ import annotations

import functools
import math
import os
import pwd
import random
import re
import selectors
import shutil
import signal
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Literal

from halucheck.errors import HalucheckError

KilledReason = Literal["timeout", "cpu", "memory", "output", "processes", "disk", "crash"]

WORKDIR = "/sandbox"
SCRIPT = f"{WORKDIR}/main.py"
INSTALL_HINT = "apt-get install bubblewrap"

# bwrap options this module relies on (older bubblewraps lack --size and --disable-userns).
_REQUIRED_FLAGS = ("--unshare-all", "--disable-userns", "--die-with-parent", "--new-session",
                   "--clearenv", "--size", "--remount-ro", "--ro-bind-data")
_SYSTEM_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives",
              "/etc/localtime")
_FALLBACK_PYTHONS = ("/usr/local/bin/python3", "/usr/bin/python3")
_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": WORKDIR}
_CHUNK = 65536
_KILL_GRACE_S = 2.0

# Runs first inside the sandbox: sets the rlimits given as NAME:SOFT:HARD, then execs the program.
_LAUNCHER = (
    "import os, resource, sys\n"
    "*specs, python, script = sys.argv[1:]\n"
    "for spec in specs:\n"
    "    name, soft, hard = spec.split(':')\n"
    "    resource.setrlimit(getattr(resource, name), (int(soft), int(hard)))\n"
    "os.execv(python, [python, '-I', '-B', script])\n"
)

_FORK_FAILED = re.compile(r"BlockingIOError|Resource temporarily unavailable|can't start new thread")
_OUT_OF_MEMORY = re.compile(r"^MemoryError\b|Cannot allocate memory", re.MULTILINE)
_DISK_FULL = re.compile(r"\[Errno 27\] File too large|\[Errno 28\] No space left on device")


class SandboxUnavailable(HalucheckError):
    """bubblewrap is missing or cannot start a sandbox on this machine."""


@dataclass(frozen=True)
class Limits:
    """What a sandboxed program may use.

    ``wall_s`` is real time for the whole run; ``memory_mb`` is address space per process and ``cpu_s``
    CPU time per process (whole seconds, rounded up); ``processes`` counts the program's tasks
    (processes and threads) at once, itself included; ``disk_mb`` is the size of each of the three
    tmpfs mounts (``/tmp``, ``/dev/shm``, ``/sandbox``); ``output_bytes`` applies to stdout and stderr separately.
    """

    wall_s: float = 10.0
    cpu_s: float = 5.0
    memory_mb: int = 256
    file_size_mb: int = 16
    disk_mb: int = 64
    processes: int = 16
    open_files: int = 64
    output_bytes: int = 1_000_000

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if not value > 0:
                raise ValueError(f"Limits.{name} must be positive, not {value!r}")


@dataclass(frozen=True)
class SandboxResult:
    """How a sandboxed run ended.

    ``ok`` is a clean exit 0 with no limit hit. ``killed_reason`` names the limit that ended or broke the
    run (``processes``: a fork or thread start failed for the process limit; ``crash``: killed by a
    signal no limit explains), else None. ``returncode`` is the program's exit code, 128 + N when a
    signal N killed it, or -N when the sandbox itself was killed by signal N.
    """

    ok: bool
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool
    killed_reason: KilledReason | None
    output_truncated: bool
    wall_s: float


@dataclass(frozen=True)
class _Python:
    """The interpreter run in the sandbox, and the directory tree it needs bound."""

    executable: str
    prefix: str


@dataclass
class _Exchange:
    """What the supervising loop saw of a run."""

    stdout: bytes
    stderr: bytes
    timed_out: bool
    output_exceeded: bool
    returncode: int


@functools.cache
def available() -> str | None:
    """None when sandboxed runs work here, else a one-line reason (checked once per process)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return f"bwrap not found: {INSTALL_HINT}"
    try:
        help_text = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bwrap cannot run ({exc}): {INSTALL_HINT}"
    missing = [flag for flag in _REQUIRED_FLAGS if flag not in help_text]
    if missing:
        return f"bwrap lacks {' '.join(missing)} (bubblewrap >= 0.8 needed): {INSTALL_HINT}"
    python = _python(as_spare_uid=os.getuid() == 0)
    if python is None:
        return "no Python interpreter readable by a spare uid (tried " + ", ".join(_FALLBACK_PYTHONS) + ")"
    try:
        result = _run(bwrap, python, "print('ok')", "", Limits(wall_s=20))
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bwrap cannot start ({exc}): {INSTALL_HINT}"
    if result.stdout != "ok\n":
        detail = (result.stderr.strip().splitlines() or [f"exit code {result.returncode}"])[-1]
        return f"bwrap cannot start a sandbox ({detail}; are user namespaces disabled?): {INSTALL_HINT}"
    return None


def run_python(code: str, stdin: str = "", limits: Limits = Limits()) -> SandboxResult:
    """Run ``code`` as a Python script in the sandbox, feeding it ``stdin``, within ``limits``.

    Raises SandboxUnavailable when :func:`available` gives a reason; never runs code outside the sandbox.
    """
    reason = available()
    if reason is not None:
        raise SandboxUnavailable(reason)
    bwrap = shutil.which("bwrap")
    python = _python(as_spare_uid=os.getuid() == 0)
    assert bwrap is not None and python is not None  # available() checked both
    return _run(bwrap, python, code, stdin, limits)


def _run(bwrap: str, python: _Python, code: str, stdin: str, limits: Limits) -> SandboxResult:
    """Start bwrap on the code, supervise it, and classify how it ended."""
    code_fd = os.memfd_create("sandbox-code")
    try:
        os.write(code_fd, code.encode())
        os.lseek(code_fd, 0, os.SEEK_SET)
        as_root = os.getuid() == 0
        spare = _spare_id() if as_root else None
        launcher = [python.executable, "-I", "-S", "-c", _LAUNCHER, *_rlimit_specs(limits)]
        argv = [bwrap, *_bwrap_options(python, code_fd, limits), *launcher, python.executable, SCRIPT]
        start = time.monotonic()
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            pass_fds=(code_fd,), start_new_session=True, env={}, close_fds=True,
            user=spare, group=spare, extra_groups=[] if as_root else None,
        )
    finally:
        os.close(code_fd)
    exchange = _supervise(proc, stdin.encode(), limits, start)
    wall_s = time.monotonic() - start
    stdout = exchange.stdout.decode(errors="replace")
    stderr = exchange.stderr.decode(errors="replace")
    reason = _killed_reason(exchange, stderr, wall_s, limits)
    return SandboxResult(
        ok=exchange.returncode == 0 and reason is None, returncode=exchange.returncode, stdout=stdout,
        stderr=stderr, timed_out=exchange.timed_out, killed_reason=reason,
        output_truncated=exchange.output_exceeded, wall_s=round(wall_s, 3),
    )


def _bwrap_options(python: _Python, code_fd: int, limits: Limits) -> list[str]:
    """bwrap's options up to (not including) the command."""
    options = ["--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session",
               "--hostname", "sandbox", "--ro-bind", "/usr", "/usr"]
    for path in _SYSTEM_DIRS:
        if os.path.islink(path):
            options += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            options += ["--ro-bind", path, path]
    for path in _ETC_FILES:
        options += ["--ro-bind-try", path, path]
    if not _is_under(python.prefix, "/usr"):
        options += ["--ro-bind", python.prefix, python.prefix]
    disk = str(limits.disk_mb * 2**20)
    # bwrap's /dev is an unbounded tmpfs (with /dev/shm a plain folder in it): give /dev/shm a bounded
    # tmpfs of its own and make /dev itself read-only, so every writable mount has a fixed size
    options += ["--dev", "/dev", "--size", disk, "--tmpfs", "/dev/shm", "--remount-ro", "/dev",
                "--proc", "/proc"]
    options += ["--size", disk, "--tmpfs", "/tmp", "--size", disk, "--tmpfs", WORKDIR,
                "--ro-bind-data", str(code_fd), SCRIPT, "--remount-ro", "/", "--chdir", WORKDIR,
                "--clearenv"]
    for name, value in _ENV.items():
        options += ["--setenv", name, value]
    return options + ["--"]


def _rlimit_specs(limits: Limits) -> list[str]:
    """The launcher's NAME:SOFT:HARD arguments for ``limits``."""
    cpu = max(1, math.ceil(limits.cpu_s))
    values = {
        # SIGXCPU at the soft limit, SIGKILL one second later if the program ignores it
        "RLIMIT_CPU": (cpu, cpu + 1),
        "RLIMIT_AS": (limits.memory_mb * 2**20,) * 2,
        "RLIMIT_FSIZE": (limits.file_size_mb * 2**20,) * 2,
        # the sandbox's pid 1 (bwrap's reaper) counts as one task
        "RLIMIT_NPROC": (limits.processes + 1,) * 2,
        "RLIMIT_NOFILE": (limits.open_files,) * 2,
        "RLIMIT_CORE": (0, 0),
    }
    return [f"{name}:{soft}:{hard}" for name, (soft, hard) in values.items()]


def _supervise(proc: subprocess.Popen[bytes], stdin: bytes, limits: Limits, start: float) -> _Exchange:
    """Feed stdin, collect capped output, enforce the wall clock, and reap bwrap."""
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    buffers = {out_fd: bytearray(), err_fd: bytearray()}
    pidfd = os.pidfd_open(proc.pid)
    selector = selectors.DefaultSelector()
    for fd in buffers:
        os.set_blocking(fd, False)
        selector.register(fd, selectors.EVENT_READ)
    selector.register(pidfd, selectors.EVENT_READ)
    pending = memoryview(stdin)
    if pending:
        os.set_blocking(proc.stdin.fileno(), False)
        selector.register(proc.stdin.fileno(), selectors.EVENT_WRITE)
    else:
        proc.stdin.close()
    deadline = start + limits.wall_s
    killed_at: float | None = None
    timed_out = output_exceeded = exited = False

    def kill() -> None:
        nonlocal killed_at
        if killed_at is None:
            killed_at = time.monotonic()
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    try:
        while not exited or any(fd in selector.get_map() for fd in buffers):
            now = time.monotonic()
            if killed_at is None and now >= deadline:
                timed_out = True
                kill()
            if killed_at is not None and now >= killed_at + _KILL_GRACE_S:
                break
            until = deadline if killed_at is None else killed_at + _KILL_GRACE_S
            for key, _ in selector.select(timeout=max(0.0, until - now)):
                fd = key.fd
                if fd == pidfd:
                    selector.unregister(pidfd)
                    exited = True
                elif fd in buffers:
                    chunk = os.read(fd, _CHUNK)
                    if not chunk:
                        selector.unregister(fd)
                        continue
                    buffer = buffers[fd]
                    room = limits.output_bytes - len(buffer)
                    buffer += chunk[:room]
                    if len(chunk) > room:
                        output_exceeded = True
                        kill()
                else:  # stdin is writable
                    try:
                        pending = pending[os.write(fd, pending[:_CHUNK]):]
                    except BrokenPipeError:
                        pending = pending[:0]
                    if not pending:
                        selector.unregister(fd)
                        proc.stdin.close()
        returncode = proc.wait()
    finally:
        selector.close()
        os.close(pidfd)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            stream.close()
    return _Exchange(
        stdout=bytes(buffers[out_fd]), stderr=bytes(buffers[err_fd]), timed_out=timed_out,
        output_exceeded=output_exceeded, returncode=returncode,
    )


def _killed_reason(exchange: _Exchange, stderr: str, wall_s: float, limits: Limits) -> KilledReason | None:
    """The limit that ended or broke the run, most telling first; None for a run no limit touched.

    bwrap reports a program killed by signal N as exit code 128 + N. The CPU limit sends SIGXCPU, then
    SIGKILL a second later to a program that ignores it; a SIGKILL we did not send counts as the CPU
    limit once the run has lasted that long (bwrap does not pass the program's CPU time on).
    """
    returncode = exchange.returncode
    tail = stderr[-4000:]
    if _FORK_FAILED.search(stderr):
        return "processes"
    if exchange.output_exceeded:
        return "output"
    if exchange.timed_out:
        return "timeout"
    if returncode == 128 + signal.SIGXCPU or (
            returncode == 128 + signal.SIGKILL and wall_s >= math.ceil(limits.cpu_s)):
        return "cpu"
    if returncode != 0 and _OUT_OF_MEMORY.search(tail):
        return "memory"
    if returncode != 0 and _DISK_FULL.search(tail):
        return "disk"
    if returncode < 0 or (returncode > 128 and returncode - 128 in signal.valid_signals()):
        return "crash"
    return None


def _python(as_spare_uid: bool) -> _Python | None:
    """The interpreter to sandbox: this one, unless a spare uid could not read it (e.g. under /root)."""
    executable = os.path.realpath(sys.executable)
    if not as_spare_uid or _world_readable(executable, sys.base_prefix):
        return _Python(executable, sys.base_prefix)
    for candidate in _FALLBACK_PYTHONS:
        executable = os.path.realpath(candidate)
        if os.path.isfile(executable) and _world_readable(executable, ""):
            return _Python(executable, os.path.dirname(os.path.dirname(executable)))
    return None


def _world_readable(executable: str, prefix: str) -> bool:
    """Whether any uid can run ``executable`` and read the tree under ``prefix`` (its ancestors' modes)."""
    def others_may(path: str, bits: int) -> bool:
        try:
            return os.stat(path).st_mode & bits == bits
        except OSError:
            return False

    paths = [executable, *([prefix] if prefix else [])]
    ancestors = {a for path in paths for a in _ancestors(path)}
    return (others_may(executable, stat.S_IROTH | stat.S_IXOTH)
            and all(others_may(a, stat.S_IXOTH) for a in ancestors)
            and (not prefix or others_may(prefix, stat.S_IROTH | stat.S_IXOTH)))


def _ancestors(path: str) -> list[str]:
    """The directories above ``path``, from ``/`` down."""
    parts = os.path.abspath(path).split("/")[1:-1]
    return ["/" + "/".join(parts[:i]) for i in range(len(parts) + 1)]


def _spare_id() -> int:
    """A random uid (used as gid too) that this user namespace maps and no account uses.

    A fresh one per run keeps RLIMIT_NPROC counting the run's own tasks only.
    """
    top = min(_mapped_top("/proc/self/uid_map"), _mapped_top("/proc/self/gid_map"), 2**31)
    low = 100_000 if top > 200_000 else top // 2
    while True:
        candidate = random.randrange(low, top - 2)
        try:
            pwd.getpwuid(candidate)
        except KeyError:
            return candidate


def _mapped_top(map_file: str) -> int:
    """One past the highest id of the range that starts at 0 in a ``/proc/self/[ug]id_map``."""
    with open(map_file) as handle:
        for line in handle:
            inside, _, count = (int(field) for field in line.split())
            if inside == 0:
                return count
    return 65536


def _is_under(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or lies below it."""
    return os.path.commonpath([os.path.abspath(path), root]) == root
