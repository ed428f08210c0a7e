"""The bubblewrap sandbox: normal programs run, and each kind of abuse is contained and reported."""

import json
import socket
import time
import uuid
from pathlib import Path

import pytest

from halucheck.verifiers.tools import sandbox
from halucheck.verifiers.tools.sandbox import Limits, SandboxUnavailable, run_python

UNAVAILABLE = sandbox.available()
needs_bwrap = pytest.mark.skipif(UNAVAILABLE is not None, reason=f"sandbox unavailable: {UNAVAILABLE}")
FAST = Limits(wall_s=5, cpu_s=2, memory_mb=256, processes=8, output_bytes=65536)


def _sandbox_processes() -> list[int]:
    """Pids of processes still running a sandboxed script (bwrap, its launcher or the program)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if sandbox.SCRIPT.encode() in cmdline:
                pids.append(int(entry.name))
    return pids


def _assert_nothing_left() -> None:
    deadline = time.monotonic() + 3
    while _sandbox_processes() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _sandbox_processes() == []


@needs_bwrap
def test_normal_program_returns_its_stdout():
    result = run_python("import sys\nprint(sum(int(x) for x in sys.stdin.read().split()))", stdin="1 2 3\n",
                        limits=FAST)
    assert result.ok and result.returncode == 0
    assert result.stdout == "6\n" and result.stderr == ""
    assert result.killed_reason is None and not result.timed_out and not result.output_truncated


@needs_bwrap
def test_exception_is_reported_on_stderr():
    result = run_python("raise ValueError('boom')", limits=FAST)
    assert not result.ok and result.returncode == 1
    assert "ValueError: boom" in result.stderr and 'File "/sandbox/main.py", line 1' in result.stderr
    assert result.killed_reason is None


@needs_bwrap
def test_environment_is_scrubbed_and_not_root(monkeypatch):
    monkeypatch.setenv("HALUCHECK_SECRET", "s3cret")
    result = run_python("import json, os\nprint(json.dumps([dict(os.environ), os.getcwd(), os.getuid()]))",
                        limits=FAST)
    assert result.ok, result.stderr
    env, cwd, uid = json.loads(result.stdout)
    assert set(env) <= {"PATH", "LANG", "HOME", "PWD"} and env["HOME"] == cwd == "/sandbox"
    assert uid != 0  # under root, a spare uid (RLIMIT_NPROC is not enforced for root)


@needs_bwrap
def test_fork_bomb_hits_the_process_limit():
    result = run_python("import os\nwhile True:\n    os.fork()", limits=FAST)
    assert result.killed_reason == "processes"
    assert "Resource temporarily unavailable" in result.stderr
    assert not result.ok and result.wall_s < FAST.wall_s + 3
    _assert_nothing_left()


@needs_bwrap
def test_persistent_fork_bomb_is_killed_whole_at_the_wall_clock():
    code = """
import os, sys, time
while True:
    try:
        os.fork()
    except OSError as exc:
        print(exc, file=sys.stderr, flush=True)
        time.sleep(0.5)
"""
    result = run_python(code, limits=Limits(wall_s=2, processes=8))
    assert result.timed_out and result.killed_reason == "processes"
    assert "Resource temporarily unavailable" in result.stderr
    _assert_nothing_left()


@needs_bwrap
def test_infinite_loop_hits_the_cpu_limit():
    result = run_python("while True:\n    pass", limits=Limits(wall_s=30, cpu_s=1))
    assert result.killed_reason == "cpu" and not result.timed_out and not result.ok
    _assert_nothing_left()


@needs_bwrap
def test_cpu_limit_holds_when_the_program_ignores_sigxcpu():
    code = "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True:\n    pass"
    result = run_python(code, limits=Limits(wall_s=30, cpu_s=1))
    assert result.killed_reason == "cpu" and not result.timed_out


@needs_bwrap
def test_wall_clock_timeout_kills_every_process():
    code = "import os, time\nif os.fork() == 0:\n    time.sleep(600)\ntime.sleep(600)"
    result = run_python(code, limits=Limits(wall_s=1))
    assert result.timed_out and result.killed_reason == "timeout" and not result.ok
    assert result.wall_s < 1 + 3
    _assert_nothing_left()


@needs_bwrap
@pytest.mark.parametrize("code", ["x = bytearray(10**9)",
                                  "chunks = []\nwhile True:\n    chunks.append(' ' * 10**6)"])
def test_memory_hog_hits_the_memory_limit(code):
    result = run_python(code, limits=Limits(wall_s=10, memory_mb=128))
    assert result.killed_reason == "memory" and "MemoryError" in result.stderr and not result.ok


@needs_bwrap
def test_big_file_hits_the_disk_limits():
    result = run_python("open('big', 'wb').write(b'x' * 8 * 2**20)", limits=Limits(wall_s=10, file_size_mb=4))
    assert result.killed_reason == "disk" and "File too large" in result.stderr
    code = "for i in range(10):\n    open(f'/tmp/f{i}', 'wb').write(b'x' * 2**20)"
    result = run_python(code, limits=Limits(wall_s=10, disk_mb=4))
    assert result.killed_reason == "disk" and "No space left on device" in result.stderr


@needs_bwrap
def test_writes_stay_inside_the_sandbox():
    name = f"halucheck-sandbox-{uuid.uuid4().hex}"
    code = f"""
for path in ('/root/{name}', '/usr/{name}', '/{name}', '/tmp/{name}', '/sandbox/{name}'):
    try:
        with open(path, 'w') as handle:
            handle.write('x')
        print(path, 'written')
    except OSError as exc:
        print(path, 'refused', type(exc).__name__)
"""
    result = run_python(code, limits=FAST)
    assert result.ok, result.stderr
    lines = result.stdout.splitlines()
    assert [line.split()[1] for line in lines] == ["refused", "refused", "refused", "written", "written"]
    for host_dir in ("/root", "/tmp", "/"):
        assert not Path(host_dir, name).exists()


@needs_bwrap
def test_network_is_unreachable():
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        code = f"""
import socket
try:
    socket.create_connection(('127.0.0.1', {port}), timeout=2).close()
    print('connected')
except OSError as exc:
    print('blocked', type(exc).__name__)
"""
        result = run_python(code, limits=FAST)
        listener.settimeout(0.2)
        with pytest.raises(TimeoutError):
            listener.accept()
    assert result.ok, result.stderr
    assert result.stdout.startswith("blocked")


@needs_bwrap
def test_output_flood_is_truncated_and_killed():
    code = "import sys\nfor _ in range(100):\n    sys.stdout.write('x' * 10**6)"
    result = run_python(code, limits=FAST)
    assert result.killed_reason == "output" and result.output_truncated and not result.ok
    assert result.stdout == "x" * FAST.output_bytes
    assert result.wall_s < FAST.wall_s
    _assert_nothing_left()


def test_missing_bwrap_refuses_to_run(monkeypatch):
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    sandbox.available.cache_clear()
    try:
        reason = sandbox.available()
        assert reason is not None and "apt-get install bubblewrap" in reason
        with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
            run_python("print('never runs')")
    finally:
        sandbox.available.cache_clear()


def test_limits_must_be_positive():
    with pytest.raises(ValueError, match="wall_s"):
        Limits(wall_s=0)


@needs_bwrap
def test_no_writable_mount_holds_more_than_the_disk_limit():
    """/dev/shm, /dev and every other writable mount are bounded: no path takes more than disk_mb."""
    name = f"halucheck-sandbox-{uuid.uuid4().hex}"
    code = f"""
import json, os
paths = set()
for line in open('/proc/self/mountinfo'):
    fields = line.split()
    mountpoint, options = fields[4], fields[5].split(',')
    if 'rw' in options and os.path.isdir(mountpoint):
        paths.add(mountpoint)
paths |= {{'/dev/shm', '/dev', '/tmp', '/sandbox', '.'}}
written = {{}}
for path in sorted(paths):
    total = 0
    try:
        with open(os.path.join(path, '{name}'), 'wb') as handle:
            for _ in range(8):
                handle.write(b'x' * 2**20)
                handle.flush()
                total += 2**20
    except OSError:
        pass
    written[path] = total
print(json.dumps(written))
"""
    result = run_python(code, limits=Limits(wall_s=20, disk_mb=4, file_size_mb=64))
    written = json.loads(result.stdout)
    assert {"/dev/shm", "/dev", "/tmp", "/sandbox"} <= set(written)
    assert {path: total for path, total in written.items() if total > 4 * 2**20} == {}
    for host_dir in ("/dev/shm", "/tmp", "/"):
        assert not Path(host_dir, name).exists()


@needs_bwrap
def test_dev_shm_still_takes_small_files():
    code = "open('/dev/shm/x', 'wb').write(b'x' * 1000); print(len(open('/dev/shm/x', 'rb').read()))"
    result = run_python(code, limits=FAST)
    assert result.ok and result.stdout == "1000\n", result.stderr
