"""One registry style: engines, verifiers, datasets and metrics are Registry objects."""

import sys

import pytest

from halucheck.engines import ENGINES
from halucheck.errors import ConfigError, InputError
from halucheck.evaluation.datasets import DATASETS
from halucheck.evaluation.metrics import METRICS
from halucheck.registry import Registry
from halucheck.verifiers import VERIFIERS


def test_every_registry_of_the_package_is_one_registry_type():
    assert all(isinstance(r, Registry) for r in (ENGINES, VERIFIERS, DATASETS, METRICS))


def test_a_path_is_imported_only_when_first_looked_up():
    r = Registry("thing")
    r.register("dec", "decimal:Decimal")
    r.register("x", "halucheck_no_such_module:X")  # never looked up, never imported
    assert "dec" in r and r.names() == ["dec", "x"]
    import decimal

    assert r["dec"] is decimal.Decimal
    assert "halucheck_no_such_module" not in sys.modules


def test_an_unknown_name_suggests_the_nearest_and_lists_the_rest():
    with pytest.raises(ConfigError, match=r"unknown verifier 'selfchek'\. Did you mean 'selfcheck'\?.*debate"):
        VERIFIERS["selfchek"]
    with pytest.raises(InputError, match="unknown dataset 'wise'. Did you mean 'wice'"):
        DATASETS["wise"]


def test_decorator_form_and_restore():
    r = Registry("metric")
    before = r.snapshot()

    @r.register("m")
    def m():
        return 1

    assert r["m"] is m and list(r) == ["m"]
    r.restore(before)
    assert "m" not in r
