"""Metrics against hand computations and brute-force reference implementations on fixed inputs."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

from halucheck.verifiers import calibration
from halucheck.errors import InputError
from halucheck.records import Cost
from halucheck.evaluation import EvalItem, Prediction, compare, compute_metrics, read_predictions, read_run, write_run
from halucheck.evaluation.metrics import METRICS, bootstrap_indices, length_controlled, register_metric, stratified_auroc

# Fixed example: 10 items, 4 hallucinated (label 1).
Y = [1, 1, 1, 1, 0, 0, 0, 0, 0, 0]
S = [0.9, 0.8, 0.35, 0.6, 0.7, 0.2, 0.1, 0.35, 0.05, 1.0]
P = [s >= 0.5 for s in S]  # 1 1 0 1 1 0 0 0 0 1 -> TP 3, FN 1, FP 2, TN 4


def _value(res, name):
    return res["metrics"][name]["value"]


def _brute_auroc(y, s):
    pos = [b for a, b in zip(y, s) if a]
    neg = [b for a, b in zip(y, s) if not a]
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p, n in itertools.product(pos, neg))
    return wins / (len(pos) * len(neg))


def test_threshold_metrics_by_hand():
    res = compute_metrics(Y, P, S, n_boot=0)
    tp, fn, fp, tn = 3, 1, 2, 4
    assert res["n"] == 10 and res["n_positive"] == 4
    assert _value(res, "accuracy") == pytest.approx((tp + tn) / 10)
    assert _value(res, "precision") == pytest.approx(tp / (tp + fp))
    assert _value(res, "recall") == pytest.approx(tp / (tp + fn))
    prec, rec = tp / (tp + fp), tp / (tp + fn)
    assert _value(res, "f1") == pytest.approx(2 * prec * rec / (prec + rec))
    assert _value(res, "balanced_accuracy") == pytest.approx((tp / (tp + fn) + tn / (tn + fp)) / 2)


def test_auroc_matches_pairwise_count_with_ties():
    res = compute_metrics(Y, P, S, n_boot=0)
    # 0.35 appears in both classes: that pair counts one half.
    assert _value(res, "auroc") == pytest.approx(_brute_auroc(Y, S))
    assert _value(res, "auroc") == pytest.approx(17.5 / 24)
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 60)
    s = rng.integers(0, 7, 60) / 6  # many ties
    got = _value(compute_metrics(y.astype(bool), s > 0.5, s, n_boot=0), "auroc")
    assert got == pytest.approx(_brute_auroc(y, s))


def test_ece_by_hand():
    # Bins (width 0.1): [0.0,0.1): 0.05 -> y 0 | [0.1,0.2): 0.1 -> 0 | [0.2,0.3): 0.2 -> 0
    # [0.3,0.4): 0.35 (y1), 0.35 (y0) | [0.6,0.7): 0.6 -> 1 | [0.7,0.8): 0.7 -> 0
    # [0.8,0.9): 0.8 -> 1 | [0.9,1.0]: 0.9 (y1), 1.0 (y0; 1.0 falls in the last bin)
    gaps = [
        (1, abs(0 - 0.05)),
        (1, abs(0 - 0.1)),
        (1, abs(0 - 0.2)),
        (2, abs(0.5 - 0.35)),
        (1, abs(1 - 0.6)),
        (1, abs(0 - 0.7)),
        (1, abs(1 - 0.8)),
        (2, abs(0.5 - 0.95)),
    ]
    expected = sum(n / 10 * g for n, g in gaps)
    assert _value(compute_metrics(Y, P, S, n_boot=0), "ece") == pytest.approx(expected)


def test_ece_perfect_and_worst():
    y = [1, 0, 1, 0]
    assert _value(compute_metrics(y, y, [1.0, 0.0, 1.0, 0.0], n_boot=0), "ece") == pytest.approx(0.0)
    assert _value(compute_metrics(y, y, [0.0, 1.0, 0.0, 1.0], n_boot=0), "ece") == pytest.approx(1.0)


def test_brier_by_hand():
    expected = sum((s - y) ** 2 for s, y in zip(S, Y)) / 10
    assert _value(compute_metrics(Y, P, S, n_boot=0), "brier") == pytest.approx(expected)


def test_one_class_gives_nan_not_crash():
    res = compute_metrics([False] * 5, [False, True, False, False, False], [0.1, 0.9, 0.2, 0.3, 0.4], n_boot=50)
    assert math.isnan(_value(res, "auroc")) and math.isnan(_value(res, "balanced_accuracy"))
    assert math.isnan(res["metrics"]["auroc"]["ci_low"])
    assert _value(res, "accuracy") == pytest.approx(0.8)
    assert _value(res, "precision") == 0.0 and _value(res, "recall") == 0.0  # zero_division convention


def test_scores_default_to_predictions_and_are_checked():
    res = compute_metrics(Y, P, None, n_boot=0)
    assert _value(res, "brier") == pytest.approx(1 - _value(res, "accuracy"))
    with pytest.raises(ValueError):
        compute_metrics(Y, P, [1.5] * 10, n_boot=0)
    with pytest.raises(ValueError):
        compute_metrics(Y, P[:5], S, n_boot=0)


def test_directions_registered():
    lower = {m for m, spec in METRICS.items() if not spec.higher_is_better}
    assert lower == {"ece", "brier"}
    assert list(METRICS)[:8] == ["accuracy", "precision", "recall", "f1", "balanced_accuracy", "auroc", "ece", "brier"]


def test_register_metric_is_picked_up():
    @register_metric("positive_rate_test", False)
    def _rate(y, p, s):
        return float(np.mean(p))

    res = compute_metrics(Y, P, S, n_boot=0)  # the registries are restored after each test (conftest)
    assert _value(res, "positive_rate_test") == pytest.approx(0.5)


# ---------------------------------------------------------------- bootstrap


def test_bootstrap_is_deterministic_and_brackets_the_value():
    rng = np.random.default_rng(0)
    y = rng.random(300) < 0.4
    s = np.clip(y * 0.3 + rng.random(300) * 0.7, 0, 1)
    a = compute_metrics(y, s > 0.5, s, n_boot=200, seed=1)
    b = compute_metrics(y, s > 0.5, s, n_boot=200, seed=1)
    assert a == b
    for name, m in a["metrics"].items():
        assert m["ci_low"] <= m["value"] <= m["ci_high"], name
    # Reference: the normal-approximation interval for a proportion, p ± 1.96 sqrt(p(1-p)/n).
    acc = a["metrics"]["accuracy"]
    half = 1.96 * math.sqrt(acc["value"] * (1 - acc["value"]) / 300)
    assert acc["ci_low"] == pytest.approx(acc["value"] - half, abs=0.02)
    assert acc["ci_high"] == pytest.approx(acc["value"] + half, abs=0.02)


def test_group_bootstrap_keeps_groups_whole():
    groups = ["a", "a", "a", "b", "c", "c", "d", "e", "e", "e"]
    for idx in bootstrap_indices(10, groups, n_boot=50, seed=0):
        picked = [groups[i] for i in idx]
        for g in set(picked):
            assert picked.count(g) % groups.count(g) == 0  # whole copies of each group only


def test_group_bootstrap_is_wider_for_correlated_items():
    # 20 responses of 10 identical-outcome claims each: the item bootstrap pretends n=200.
    y = np.repeat(np.arange(20) % 2 == 0, 10)
    p = np.repeat(np.array([True, False, False, True] * 5), 10)
    groups = np.repeat(np.arange(20), 10)
    item = compute_metrics(y, p, None, n_boot=300, metrics=["accuracy"])["metrics"]["accuracy"]
    grp = compute_metrics(y, p, None, groups=groups, n_boot=300, metrics=["accuracy"])["metrics"]["accuracy"]
    assert (grp["ci_high"] - grp["ci_low"]) > 2 * (item["ci_high"] - item["ci_low"])


# ---------------------------------------------------------------- length control


def _brute_stratified(y, s, z):
    num = den = 0.0
    for (yi, si, zi), (yj, sj, zj) in itertools.product(zip(y, s, z), repeat=2):
        if yi == 1 and yj == 0 and zi == zj:
            den += 1
            num += 1.0 if si > sj else 0.5 if si == sj else 0.0
    return num / den


def test_stratified_auroc_matches_brute_force():
    rng = np.random.default_rng(5)
    y = rng.integers(0, 2, 80)
    s = rng.integers(0, 5, 80) / 4
    z = rng.integers(1, 6, 80)
    value, pairs = stratified_auroc(y, s, z)
    assert value == pytest.approx(_brute_stratified(y, s, z))
    assert pairs == sum(((z == k) & (y == 1)).sum() * ((z == k) & (y == 0)).sum() for k in np.unique(z))


def test_length_controlled_view():
    # Length separates the classes except in the 3-word stratum.
    lengths = [1, 1, 3, 3, 3, 3, 8, 9, 12]
    y = [0, 0, 0, 0, 1, 1, 1, 1, 1]
    length_score = [n / 12 for n in lengths]
    lc = length_controlled(y, [s > 0.2 for s in length_score], length_score, lengths, n_boot=0)
    assert lc["length_only_auroc"] == pytest.approx(_brute_auroc(y, lengths))
    assert lc["length_matched_auroc"]["value"] == pytest.approx(0.5)  # the shortcut gets nothing
    assert lc["matched_pairs"] == 4 and lc["matched_items"] == 4
    # A detector right on the matched items scores 1 there.
    good = [0.1, 0.1, 0.2, 0.3, 0.8, 0.9, 0.9, 0.9, 0.9]
    lc = length_controlled(y, [s > 0.5 for s in good], good, lengths, n_boot=20)
    assert lc["length_matched_auroc"]["value"] == pytest.approx(1.0)
    b3 = next(b for b in lc["buckets"] if b["words"] == "3")
    assert (b3["n_hallucinated"], b3["n_correct"], b3["accuracy"]) == (2, 2, 1.0)


# ---------------------------------------------------------------- run directories


def _items(name, n, label_every=2):
    return [
        EvalItem(id=f"{name}:{i}", dataset=name, claim=f"c{i}", label=i % label_every == 0, group=f"{name}:{i // 2}", position=i // 2, meta={"answer_words": 1 + i % 4})
        for i in range(n)
    ]


def test_write_and_read_run(tmp_path):
    items = _items("halueval-qa", 40)
    preds = [Prediction(i.label if k % 5 else not i.label, 0.8 if i.label else 0.3) for k, i in enumerate(items)]
    preds[3] = Prediction(None, None, "reply never matched the schema")
    out = write_run(tmp_path / "run", items, preds, Cost(llm_calls=7, prompt_tokens=1000, completion_tokens=300, wall_s=12.5), verifier="debate", n_boot=50)
    back = read_run(tmp_path / "run")
    assert back == json.loads(json.dumps(out))
    assert back["verifier"] == "debate" and back["cost"]["llm_calls"] == 7
    res = back["results"]["halueval-qa"]
    assert res["n"] == 39 and res["n_missing"] == 1
    assert "length_controlled" in res
    rows = read_predictions(tmp_path / "run")
    assert len(rows) == 40 and rows[3]["prediction"] is None and rows[3]["error"]
    assert set(rows[0]) >= {"id", "label", "prediction", "score"}
    assert isinstance(rows[0]["label"], bool) and isinstance(rows[0]["prediction"], bool)
    # metrics.json equals a direct computation on the answered items
    done = [(i, p) for i, p in zip(items, preds) if p.prediction is not None]
    direct = compute_metrics([i.label for i, _ in done], [p.prediction for _, p in done], [p.score for _, p in done], [i.group for i, _ in done], n_boot=50)
    for m in METRICS:
        assert res["metrics"][m]["value"] == pytest.approx(direct["metrics"][m]["value"])


def test_nan_written_as_null(tmp_path):
    items = [EvalItem(id=f"w:{i}", dataset="wice", claim="c", label=True, group=f"w:{i}", position=i) for i in range(4)]
    write_run(tmp_path, items, [(True, 0.9)] * 4, n_boot=10)
    text = (tmp_path / "metrics.json").read_text()
    assert "NaN" not in text
    assert read_run(tmp_path)["results"]["wice"]["metrics"]["auroc"]["value"] is None


def test_compare_table(tmp_path):
    items = _items("wice", 30)
    write_run(tmp_path / "a", items, [(i.label, 0.9 if i.label else 0.1) for i in items], {"llm_calls": 3}, verifier="oracle", n_boot=20)
    write_run(tmp_path / "b", items, [(True, 0.6)] * 30, verifier="always-yes", n_boot=20)
    table = compare([tmp_path / "a", tmp_path / "b"])
    lines = table.strip().splitlines()
    assert lines[0].startswith("| verifier | dataset | split | n |") and "AUROC" in lines[0] and "ECE" in lines[0]
    oracle = next(line for line in lines if line.startswith("| oracle"))
    assert "**1.000**" in oracle  # best accuracy bold
    always = next(line for line in lines if line.startswith("| always-yes"))
    assert "| 0.500 [0.500, 0.500] |" in always  # AUROC of a constant score
    assert "Length-controlled" not in table


def test_compare_missing_run_dir(tmp_path):
    with pytest.raises(InputError, match="metrics.json"):
        compare([tmp_path / "nope"])


def test_calibration_effect_against_a_reference_computation():
    from halucheck.evaluation.metrics import calibration_effect

    rng = np.random.default_rng(3)
    n = 120
    y = rng.random(n) < 0.4
    raw = np.clip(np.where(y, 0.55, 0.25) + rng.normal(0, 0.2, n), 0, 1)
    cal = raw ** 3  # strictly increasing: the ranking, hence AUROC, cannot move
    words = rng.integers(1, 4, n)
    groups = [f"g{i // 2}" for i in range(n)]
    out = calibration_effect(y, raw, cal, groups=groups, lengths=words, n_boot=200)
    assert out["n"] == n

    def ece_ref(s):  # 10 equal-width bins, the last one closed
        b = np.minimum((s * 10).astype(int), 9)
        return sum((b == k).sum() / n * abs(y[b == k].mean() - s[b == k].mean()) for k in range(10) if (b == k).any())

    for side, s in (("before", raw), ("after", cal)):
        cells = out[side]
        assert cells["ece"]["value"] == pytest.approx(ece_ref(s))
        assert cells["brier"]["value"] == pytest.approx(float(np.mean((s - y) ** 2)))
        pos, neg = s[y], s[~y]
        ref = np.mean([(a > b) + 0.5 * (a == b) for a in pos for b in neg])
        assert cells["auroc"]["value"] == pytest.approx(ref)
        assert cells["length_matched_auroc"]["value"] == pytest.approx(stratified_auroc(y, s, words)[0])
        for cell in cells.values():
            assert cell["ci_low"] <= cell["value"] <= cell["ci_high"]
    assert out["after"]["auroc"]["value"] == pytest.approx(out["before"]["auroc"]["value"])
    assert out["after"]["ece"]["value"] != pytest.approx(out["before"]["ece"]["value"])
    for side, s in (("before", raw), ("after", cal)):  # what calibrated scores would show, per side
        c = out["ece_if_calibrated"][side]
        assert c["observed"] == pytest.approx(ece_ref(s)) and 0 < c["mean"] < c["p95"] < 1
        assert c["p_value"] == pytest.approx(calibration.ece_if_calibrated(s, y)["p_value"])
    # the same resamples on both sides: an identity map gives identical intervals
    same = calibration_effect(y, raw, raw, groups=groups, n_boot=50)
    assert same["before"] == same["after"] and "length_matched_auroc" not in same["before"]
    with pytest.raises(ValueError):
        calibration_effect(y, raw, cal[:-1])


def test_calibration_report_writes_undefined_values_as_null(tmp_path):
    from halucheck.verifiers import calibration
    from halucheck.evaluation.harness import calibration_report

    # HaluEval QA items whose answer lengths never match across the classes: no length-matched pair
    items = [EvalItem(id=f"q{i}", dataset="halueval-qa", claim="c", label=i % 2 == 0, group=f"q{i}", position=i,
                      meta={"answer_words": 1 if i % 2 == 0 else 7}) for i in range(20)]
    preds = [Prediction(prediction=i % 3 == 0, score=0.9 if i % 3 == 0 else 0.2) for i in range(20)]
    cal = calibration.fit([p.score for p in preds], [it.label for it in items], methods=["platt"], verifier="v",
                          split="dev")
    rep = calibration_report(cal, "v", None, items, preds, tmp_path, n_boot=20)
    cells = rep["results"]["halueval-qa"]
    assert cells["before"]["length_matched_auroc"]["value"] is None
    assert cells["after"]["auroc"]["value"] == pytest.approx(cells["before"]["auroc"]["value"])
    json.dumps(rep, allow_nan=False)  # what metrics.json needs
    assert (tmp_path / "reliability.svg").is_file()
