"""The clean panel: its committed ids are what its rule selects, and its paired comparison says what it should."""

from __future__ import annotations

import collections

import numpy as np
import pytest

from halucheck.errors import InputError
from halucheck.evaluation import panel
from halucheck.evaluation.datasets import dataset_root


def _rows(labels, preds, scores, sets):
    return {f"{s}:{k}": {"id": f"{s}:{k}", "dataset": s, "label": y, "prediction": p, "score": q}
            for k, (y, p, q, s) in enumerate(zip(labels, preds, scores, sets))}


def _data(n=120, seed=1):
    rng = np.random.default_rng(seed)
    labels = [bool(x) for x in rng.integers(0, 2, n)]
    sets = ["one" if k % 2 else "two" for k in range(n)]
    return labels, sets, rng


def test_a_run_compared_with_itself_differs_by_nothing():
    labels, sets, rng = _data()
    scores = rng.random(len(labels))
    rows = _rows(labels, [s > 0.5 for s in scores], scores, sets)
    out = panel.paired(rows, rows, list(rows), n_boot=200)
    assert set(out) == {"two", "one", "all", "mean"}
    for scope in out.values():
        for d in scope.values():
            assert d.diff == 0 and d.low == d.high == 0 and d.holds_zero


def test_a_perfect_judge_beats_a_coin_with_an_interval_above_zero():
    labels, sets, rng = _data()
    perfect = _rows(labels, labels, [0.9 if y else 0.1 for y in labels], sets)
    coin = rng.random(len(labels))
    random = _rows(labels, [c > 0.5 for c in coin], coin, sets)
    out = panel.paired(perfect, random, list(perfect), n_boot=300)
    for scope in ("one", "two", "all", "mean"):
        ba = out[scope]["balanced_accuracy"]
        assert ba.a == 1.0 and ba.low > 0 and not ba.holds_zero
        assert out[scope]["auroc"].low > 0
    backwards = panel.paired(random, perfect, list(perfect), n_boot=300)["all"]["balanced_accuracy"]
    assert backwards.high < 0


def test_an_undecided_item_counts_as_a_wrong_verdict():
    labels, sets, _ = _data(40)
    right = _rows(labels, labels, [float(y) for y in labels], sets)
    undecided = {i: {**r, "prediction": None, "score": None} for i, r in right.items()}
    out = panel.paired(undecided, right, list(right), n_boot=50)["all"]
    assert out["balanced_accuracy"].a == 0.0 and out["auroc"].a == 0.5


def test_the_table_shows_every_scope():
    labels, sets, _ = _data(40)
    rows = _rows(labels, labels, [float(y) for y in labels], sets)
    text = panel.table(panel.paired(rows, rows, list(rows), n_boot=20), "new", "old")
    assert text.splitlines()[0].startswith("| set | BalAcc new | BalAcc old")
    assert [line.split("|")[1].strip() for line in text.splitlines()[2:]] == ["two", "one", "all", "mean"]


@pytest.fixture(scope="module")
def datasets():
    try:
        root = dataset_root()
    except InputError as e:
        pytest.skip(str(e))
    missing = [s for s in panel.SETS if not (root / s.split("-qa")[0]).is_dir()]  # halueval-qa: halueval/
    if missing:
        pytest.skip(f"dataset folders absent: {', '.join(missing)}")
    return root


def test_the_committed_panel_is_what_its_rule_selects(datasets):
    """A loader that changes what it yields must not change the panel silently: a new rule is a new version."""
    ids = panel.select()
    assert ids == panel.read_ids(), "the panel's rule no longer gives scripts/panel/v1.ids: make a new version"
    items = panel.load_panel()
    assert [it.id for it in items][:len(ids)] == ids and len(ids) >= 300
    simple = items[len(ids):]
    assert len(simple) == 48 and sum(it.label for it in simple) == 24 and {it.dataset for it in simple} == {"simple"}
    assert all(it.evidence for it in simple)
    items = items[:len(ids)]
    per = collections.Counter((it.dataset, it.label) for it in items)
    assert set(per.values()) == {panel.PER_CLASS} and {d for d, _ in per} == set(panel.SETS)
    assert all(it.split == "dev" for it in items)
    groups = [it.group or it.id for it in items]
    assert len(set(groups)) == len(groups)  # one item per group: a HaluEval-QA row gives one of its answers
    assert max(panel._shown_chars(it) for it in items) <= panel.MAX_CHARS
