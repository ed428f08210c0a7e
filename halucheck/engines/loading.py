"""What the embedded engine decides as it loads a model: the dtype its weights load in (as saved, or
float32 on a CPU without native matmuls for the saved half type) and how many threads it runs."""

from __future__ import annotations

import json
import os
from pathlib import Path


def load_dtype(requested: str | None, saved: str | None, native: set[str], int8_ok: bool = False) -> str:
    """The dtype to load weights in: ``requested`` (models.yaml's ``dtype``) if given; else, when the weights
    are saved in a half type this CPU has no native matmul for (``native``, from :func:`_native_half_types`),
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


def _saved_dtype(path) -> str | None:
    """The dtype a model folder's config.json says its weights are in (``dtype`` or ``torch_dtype``)."""
    try:
        config = json.loads((Path(path) / "config.json").read_text())
    except (OSError, ValueError):
        return None
    value = config.get("dtype") or config.get("torch_dtype")
    return value if isinstance(value, str) else None


def _native_half_types() -> set[str]:
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


def _usable_cores() -> int:
    if hasattr(os, "sched_getaffinity"):  # the cores this process may run on (containers, taskset)
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)
