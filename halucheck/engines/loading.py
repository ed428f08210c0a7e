"""What the embedded engine decides as it loads a model: the dtype its weights load in (as saved, or
float32 on a CPU without native matmuls for the saved half type), how many threads it runs, and how the C
allocator treats the memory that loading frees."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
from pathlib import Path

# glibc's mallopt parameter (malloc.h) and the values set around loading (see returned_to_the_system)
M_MMAP_THRESHOLD = -3
LOAD_MMAP_THRESHOLD = 4 << 20
RUN_MMAP_THRESHOLD = 32 << 20  # where glibc's own sliding threshold ends up on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX)


@contextlib.contextmanager
def returned_to_the_system():
    """While a model loads, every allocation of 4 MiB or more gets pages of its own that go back to the system
    as soon as it is freed; then the threshold is set where glibc's would have slid to, and the heap's free
    pages are released (``malloc_trim``). Elsewhere than glibc (macOS, musl), nothing changes.

    Why: loading reads and converts hundreds of tensors of a few to a few hundred MB. glibc raises its mmap
    threshold each time such a block is freed, so the next ones of that size come from the heap, whose freed
    pages it keeps: the same ``check`` with the 1.5B in int8 peaked at anywhere from 5.0 to 6.1 GB and ran on
    at 4.3 to 5.3 GB, depending on the order threads happened to free in; with this, 4.0 to 4.1 GB."""
    libc = _glibc()
    if libc is None:
        yield
        return
    libc.mallopt(M_MMAP_THRESHOLD, LOAD_MMAP_THRESHOLD)
    try:
        yield
    finally:
        libc.mallopt(M_MMAP_THRESHOLD, RUN_MMAP_THRESHOLD)
        libc.malloc_trim(0)


def _glibc():
    """This process's C library when it is glibc, else None."""
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # glibc only
        return libc
    except (OSError, AttributeError):
        return None


def load_dtype(requested: str | None, saved: str | None, native: set[str], int8_ok: bool = False) -> str:
    """The dtype to load weights in: ``requested`` (models.yaml's ``dtype``) if given; else, when the weights
    are saved in a half type this CPU has no native matmul for (``native``, from :func:`native_half_types`),
    ``int8`` where torch runs its int8 kernels here (``int8_ok``) and float32 where it does not; else
    ``"auto"`` (as saved).

    Why: without AVX-512 (e.g. an AVX2-only AMD EPYC), torch multiplies bfloat16 matrices in a generic
    loop; measured on 2 such cores, a 1536 x 8960 layer ran at 0.8 GFLOP/s in bfloat16 and 82 GFLOP/s in
    float32 (512 rows; 11 vs 0.8 at one row), so a debate call took minutes instead of seconds. float32
    doubles the weights' memory (1.5B: 6.2 GB instead of 3.1 GB) and reads four bytes a weight at every
    decode step; int8 (``halucheck.engines.int8``) reads one, and widens to float32 only for prompt passes."""
    if requested:
        return requested
    if saved in ("bfloat16", "float16") and saved not in native:
        return "int8" if int8_ok else "float32"
    return "auto"


def saved_dtype(path) -> str | None:
    """The dtype a model folder's config.json says its weights are in (``dtype`` or ``torch_dtype``)."""
    try:
        config = json.loads((Path(path) / "config.json").read_text())
    except (OSError, ValueError):
        return None
    value = config.get("dtype") or config.get("torch_dtype")
    return value if isinstance(value, str) else None


def native_half_types() -> set[str]:
    """The half types this CPU multiplies natively (oneDNN: AVX-512 or AMX); without them torch falls back
    to a slow generic kernel. Unknown (an older torch without the check): assume native, load as saved."""
    import torch

    native = set()
    for name, check in (("bfloat16", "_is_mkldnn_bf16_supported"), ("float16", "_is_mkldnn_fp16_supported")):
        try:
            if getattr(torch.ops.mkldnn, check)():
                native.add(name)
        except (AttributeError, RuntimeError):
            native.add(name)
    return native


def usable_cores() -> int:
    if hasattr(os, "sched_getaffinity"):  # the cores this process may run on (containers, taskset)
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)
