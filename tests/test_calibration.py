"""Calibration: ECE/Brier by hand, each method on a known distortion, the choice by cross-validated ECE,
threshold and undecided band against brute force, storage, and the reliability diagram."""

from __future__ import annotations

import itertools
import json
import math
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from halucheck.verifiers import calibration as cal
from halucheck.verifiers.calibration import (
    Calibrator,
    band_for,
    brier_score,
    choose_threshold,
    expected_calibration_error,
    fit,
    fitting,
    load,
    reliability_svg,
    reliability_table,
    save,
)
from halucheck.errors import ConfigError, InputError

SVG = "{http://www.w3.org/2000/svg}"


def _sigmoid(u):
    return 1 / (1 + np.exp(-u))


def _auroc(s, y):
    from sklearn.metrics import roc_auc_score

    return roc_auc_score(y, s)


def _data(distort, n=4000, seed=1):
    """True P from a spread of log-odds, labels drawn from it, and the verifier's distorted report."""
    rng = np.random.default_rng(seed)
    z = rng.normal(0.0, 1.5, n)
    p = _sigmoid(z)
    y = rng.random(n) < p
    return distort(z, p), y


# ---------------------------------------------------------------- ECE and Brier by hand

# bins of width 0.1: [0,.1): 0.05 (y0) | [.1,.2): 0.1 (y0; 0.1 opens bin 1), 0.15 (y1) | [.4,.5): 0.45 (y0)
# [.5,.6): 0.55 (y1) | [.9,1]: 0.95 (y1), 1.0 (y1; 1.0 belongs to the last bin)
HAND_S = [0.05, 0.1, 0.15, 0.45, 0.55, 0.95, 1.0]
HAND_Y = [0, 0, 1, 0, 1, 1, 1]


def test_ece_and_brier_by_hand():
    # bin 0: |0 - .05| * 1/7; bin 1: mean score .125, observed .5 -> .375 * 2/7; bin 4: .45 * 1/7;
    # bin 5: .45 * 1/7; bin 9: mean .975, observed 1 -> .025 * 2/7
    ece = (0.05 + 0.375 * 2 + 0.45 + 0.45 + 0.025 * 2) / 7
    assert ece == pytest.approx(1.75 / 7)
    assert expected_calibration_error(HAND_S, HAND_Y) == pytest.approx(ece, abs=1e-12)
    brier = (0.05**2 + 0.1**2 + 0.85**2 + 0.45**2 + 0.45**2 + 0.05**2 + 0.0**2) / 7
    assert brier_score(HAND_S, HAND_Y) == pytest.approx(brier, abs=1e-12)
    # two bins over [0, 1]: [0, .5) has .05 .1 .15 .45 with labels 0 0 1 0; [.5, 1] the rest, all 1
    two = 4 / 7 * abs(0.25 - 0.1875) + 3 / 7 * abs(1 - (0.55 + 0.95 + 1.0) / 3)
    assert expected_calibration_error(HAND_S, HAND_Y, bins=2) == pytest.approx(two, abs=1e-12)
    assert math.isnan(expected_calibration_error([], []))


def test_reliability_table_bins_by_hand():
    table = reliability_table(HAND_S, HAND_Y)
    assert [r["n"] for r in table] == [1, 2, 0, 0, 1, 1, 0, 0, 0, 2]
    assert table[1]["mean_score"] == pytest.approx(0.125) and table[1]["observed"] == pytest.approx(0.5)
    assert table[2]["mean_score"] is None and table[2]["observed"] is None
    assert table[9]["lo"] == pytest.approx(0.9) and table[9]["hi"] == pytest.approx(1.0)


def test_evaluation_metrics_use_the_same_definitions():
    from halucheck.evaluation.metrics import brier, ece

    rng = np.random.default_rng(0)
    s = rng.random(300)
    y = (rng.random(300) < s**2).astype(int)
    assert ece(y, y, s) == expected_calibration_error(s, y)
    assert brier(y, y, s) == pytest.approx(float(np.mean((s - y) ** 2)), abs=1e-15)


# ---------------------------------------------------------------- each method on a known distortion


def test_temperature_recovers_an_overconfident_verifier():
    # reported = sigmoid(3 z): three times too sure; the true map is T = 3
    s, y = _data(lambda z, p: _sigmoid(3 * z))
    c = fit(s, y, methods=("temperature",))
    assert c.method == "temperature"
    assert c.parameters["T"] == pytest.approx(3.0, rel=0.12)
    assert c.ece_before > 0.08 and c.ece_after < 0.03
    assert c.brier_after < c.brier_before
    after = c.apply_many(s)
    assert _auroc(after, y) == pytest.approx(_auroc(s, y), abs=1e-12)  # strictly monotone: order kept


def test_platt_recovers_a_shifted_and_scaled_verifier():
    # reported = sigmoid(2 z + 1): z = 0.5 * logit(reported) - 0.5
    s, y = _data(lambda z, p: _sigmoid(2 * z + 1))
    c = fit(s, y, methods=("platt",))
    assert c.method == "platt"
    assert c.parameters["a"] == pytest.approx(0.5, abs=0.06)
    assert c.parameters["b"] == pytest.approx(-0.5, abs=0.1)
    assert c.ece_before > 0.1 and c.ece_after < 0.03
    assert _auroc(c.apply_many(s), y) == pytest.approx(_auroc(s, y), abs=1e-12)


def test_every_method_undoes_a_cubed_probability():
    # reported = p**3: far too low everywhere but near 1
    s, y = _data(lambda z, p: p**3)
    before = expected_calibration_error(s, y)
    assert before > 0.2
    for method in cal.METHODS:
        c = fit(s, y, methods=(method,))
        after = np.asarray(c.apply_many(s))
        assert c.ece_after == pytest.approx(expected_calibration_error(after, y))
        # temperature cannot move 0.5, so it undoes only part of a shift; the two others nearly all of it
        gain = 0.6 if method == "temperature" else 1 / 3
        assert c.ece_after < before * gain, method
        assert c.cv_ece[method] < before * gain, method  # out of fold too, not only in-sample
        if method == "isotonic":
            assert c.ece_after < 0.02
        # strictly increasing, isotonic's flat steps included: the ranking, hence AUROC, is kept
        # (raw scores are clipped to [EPS, 1 - EPS] first, calibrated ones kept there)
        order = np.argsort(s, kind="stable")
        apart = np.diff(np.clip(s[order], cal.EPS, 1 - cal.EPS)) > 0
        inside = (after[order][1:] > cal.EPS) & (after[order][:-1] < 1 - cal.EPS)
        assert np.all(np.diff(after[order])[apart & inside] > 0), method
        assert _auroc(after, y) == pytest.approx(_auroc(s, y), abs=1e-12)


def test_isotonic_apply_matches_scikit_learn_and_stays_inside_the_succession_bounds():
    from sklearn.isotonic import IsotonicRegression

    s, y = _data(lambda z, p: p**3, n=500, seed=4)
    c = fit(s, y, methods=("isotonic",))
    iso = IsotonicRegression(out_of_bounds="clip", y_min=1 / 502, y_max=501 / 502).fit(s, y.astype(float))
    grid = np.linspace(0, 1, 1001)
    out = np.asarray(c.apply_many(grid))
    # scikit-learn's step function, tilted by at most TIE_BREAK so that its flat steps keep the raw order
    tilt = out - np.clip(iso.predict(grid), cal.EPS, 1 - cal.EPS)
    assert np.all(tilt >= -1e-12) and np.all(tilt <= cal.TIE_BREAK + 1e-12)
    assert np.all(np.diff(out) > 0)
    assert out.min() >= 1 / 502 - 1e-12 and out.max() <= 501 / 502 + cal.TIE_BREAK


# ---------------------------------------------------------------- ECE of calibrated scores on few items


def _binomial_mean_abs_dev(n: int, p: float) -> float:
    """E|k/n - p| for k ~ Binomial(n, p), exactly."""
    return sum(math.comb(n, k) * p**k * (1 - p) ** (n - k) * abs(k / n - p) for k in range(n + 1))


def test_ece_if_calibrated_against_the_exact_binomial_expectation():
    # two bins: 12 items at 0.25 and 8 at 0.85; each bin's ECE share is its weight x E|k/n - p|
    s = [0.25] * 12 + [0.85] * 8
    exact = 12 / 20 * _binomial_mean_abs_dev(12, 0.25) + 8 / 20 * _binomial_mean_abs_dev(8, 0.85)
    out = cal.ece_if_calibrated(s, draws=40_000, seed=5)
    assert out["mean"] == pytest.approx(exact, abs=0.003)
    assert out["mean"] < out["p95"] and out["n"] == 20 and "p_value" not in out
    # the bias falls with the number of items (about as 1 / sqrt(n))
    big = cal.ece_if_calibrated(s * 25, draws=4000, seed=5)
    assert big["mean"] == pytest.approx(exact / 5, rel=0.15)


def test_ece_if_calibrated_tells_miscalibration_from_small_sample_scatter():
    rng = np.random.default_rng(8)
    s = rng.uniform(0.05, 0.95, 40)
    honest = rng.random(40) < s  # labels drawn from the scores: calibrated
    ok = cal.ece_if_calibrated(s, honest, seed=1)
    assert ok["observed"] == pytest.approx(expected_calibration_error(s, honest))
    assert ok["p_value"] > 0.05 and ok["observed"] > 0.05  # a visible ECE, and no evidence against the scores
    off = cal.ece_if_calibrated(np.clip(s + 0.3, 0, 1), honest, seed=1)  # the same labels, scores 0.3 too high
    assert off["p_value"] < 0.05 and off["observed"] > off["p95"]
    assert math.isnan(cal.ece_if_calibrated([], [])["mean"])
    with pytest.raises(ValueError):
        cal.ece_if_calibrated([0.2, 1.3])


# ---------------------------------------------------------------- choice by cross-validated ECE


def test_a_step_shaped_distortion_picks_isotonic_by_cv_ece():
    # the truth is a step (0.1 below a reported 0.5, 0.9 above) that no sigmoid of the logit can follow
    rng = np.random.default_rng(7)
    s = rng.random(3000)
    y = rng.random(3000) < np.where(s < 0.5, 0.1, 0.9)
    c = fit(s, y)
    assert set(c.cv_ece) == set(cal.METHODS)
    assert c.method == "isotonic"
    assert c.cv_ece["isotonic"] < min(c.cv_ece["temperature"], c.cv_ece["platt"]) - 0.02
    assert c.folds == 5 and "5-fold" in c.selection


def test_a_cubed_probability_is_not_left_to_temperature():
    s, y = _data(lambda z, p: p**3)
    c = fit(s, y)
    assert c.method != "temperature"
    assert c.cv_ece["temperature"] > 2 * c.cv_ece[c.method]


def test_the_choice_is_the_lowest_cv_ece_and_ties_go_to_fewer_parameters():
    s, y = _data(lambda z, p: _sigmoid(2 * z + 1), n=1500, seed=3)
    c = fit(s, y)
    assert c.cv_ece[c.method] == min(c.cv_ece.values())
    # reproducible for one seed
    assert fit(s, y).cv_ece == c.cv_ece


def test_a_tie_in_cv_ece_goes_to_the_method_with_fewer_parameters(monkeypatch):
    s, y = _data(lambda z, p: p**3, n=300, seed=3)
    monkeypatch.setattr(fitting, "expected_calibration_error", lambda scores, labels, bins=10: 0.1)
    assert fit(s, y).method == "temperature"
    assert fit(s, y, methods=("isotonic", "platt")).method == "platt"


def test_few_items_of_one_class_shrink_the_folds_and_say_so():
    s = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.15, 0.25]
    y = [0, 0, 0, 0, 0, 0, 1, 0, 1, 1, 0, 0]  # 3 hallucinated
    c = fit(s, y)
    assert c.folds == 3
    assert "3 folds instead of 5" in c.selection and "3 hallucinated" in c.selection
    assert c.threshold_basis == "out-of-fold"


def test_a_single_item_of_a_class_falls_back_to_temperature_without_cv():
    s = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95]
    y = [0, 0, 0, 0, 0, 0, 0, 0, 0, 1]
    c = fit(s, y)
    assert c.method == "temperature" and c.folds == 0
    assert "no cross-validation" in c.selection and "only 1 hallucinated item" in c.selection
    assert all(v is None for v in c.cv_ece.values())
    assert c.threshold_basis == "in-sample"
    json.loads(c.to_json())  # the Nones serialise


@pytest.mark.parametrize(
    "scores,labels,got",
    [
        ([0.2] * 9, [True, False] * 4 + [True], "got 9 items: 5 hallucinated, 4 not"),
        ([0.2] * 20, [False] * 20, "got 20 items: 0 hallucinated, 20 not"),
        ([0.9] * 12, [True] * 12, "got 12 items: 12 hallucinated, 0 not"),
    ],
)
def test_too_little_data_is_an_input_error(scores, labels, got):
    with pytest.raises(InputError, match="need at least 10 labelled items of both kinds") as e:
        fit(scores, labels)
    assert got in str(e.value)


def test_bad_inputs_are_refused():
    ok_y = [True, False] * 6
    with pytest.raises(InputError, match="item 3: score None"):
        fit([0.5, 0.5, 0.5, None] + [0.5] * 8, ok_y)
    with pytest.raises(InputError, match="item 0: score 1.5"):
        fit([1.5] + [0.5] * 11, ok_y)
    with pytest.raises(InputError, match="12 scores but 11 labels"):
        fit([0.5] * 12, ok_y[:-1])
    with pytest.raises(ValueError, match="unknown calibration method"):
        fit([0.5] * 12, ok_y, methods=("histogram",))
    with pytest.raises(ValueError, match="folds"):
        fit([0.5] * 12, ok_y, folds=1)


# ---------------------------------------------------------------- threshold and band against brute force


def _precision(s, y, t):
    f = s >= t
    return (y[f].sum() / f.sum()) if f.any() else math.nan


def _balanced(s, y, t):
    f = s >= t
    return (f[y == 1].mean() + (~f[y == 0]).mean()) / 2


TS = np.array([0.05, 0.1, 0.2, 0.3, 0.35, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95])
TY = np.array([0, 0, 1, 0, 0, 1, 0, 1, 1, 0, 1, 1])


def test_threshold_for_a_target_precision():
    # flagged from the top: .95 1, .9 1, .8 0, .7 1, .6 1, .5 0, .4 1 ...; precision of "P >= .6" is 4/5
    t = choose_threshold(TS, TY, target_precision=0.8)
    assert t == pytest.approx(0.55)  # halfway between 0.5 and 0.6
    assert _precision(TS, TY, t) >= 0.8
    # smallest: every lower cut (0 and the midpoints below) misses the target
    cuts = [0.0] + [(a + b) / 2 for a, b in zip(TS[:-1], TS[1:])]
    assert all(_precision(TS, TY, c) < 0.8 for c in cuts if c < t - 1e-12)
    # precision 1 is first reached by flagging only .9 and .95
    assert choose_threshold(TS, TY, target_precision=1.0) == pytest.approx(0.85)


def test_threshold_without_a_reachable_target_maximises_balanced_accuracy():
    s = np.array([0.9, 0.8, 0.7, 0.3, 0.2, 0.1, 0.6, 0.4, 0.55, 0.45, 0.65, 0.35])
    y = np.array([0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0])  # the top item is wrong: precision 1 is unreachable
    best = max(_balanced(s, y, c) for c in [0.0] + list((np.sort(s)[:-1] + np.sort(s)[1:]) / 2))
    for target in (None, 1.0):
        t = choose_threshold(s, y, target_precision=target)
        assert _balanced(s, y, t) == pytest.approx(best)
    with pytest.raises(InputError):
        choose_threshold([0.1, 0.9], [0, 0])


def _brute_band(s, y, t, min_accuracy):
    """Every (lo, hi) from the candidate cuts: the one with the most decided items at the accuracy."""
    u = np.unique(s)
    cuts = sorted(set([0.0, t, 1.0] + list((u[:-1] + u[1:]) / 2)))
    best = None
    for lo, hi in itertools.product([c for c in cuts if c <= t], [c for c in cuts if c >= t]):
        cleared = s < lo
        flagged = (s >= hi) if hi < 1 else np.zeros_like(s, dtype=bool)
        n = cleared.sum() + flagged.sum()
        if not n:
            continue
        acc = ((y[cleared] == 0).sum() + (y[flagged] == 1).sum()) / n
        if acc >= min_accuracy and (best is None or (n, acc, -(hi - lo)) > best[0]):
            best = ((n, acc, -(hi - lo)), (lo, hi))
    return best[1] if best else (0.0, 1.0)


def test_band_is_the_brute_force_optimum():
    t = choose_threshold(TS, TY)
    for min_acc in (0.6, 0.75, 0.8, 0.9, 1.0):
        lo, hi = band_for(TS, TY, min_accuracy=min_acc, threshold=t)
        assert lo <= t <= hi
        assert (lo, hi) == pytest.approx(_brute_band(TS, TY, t, min_acc)), min_acc
        decided = (TS < lo) | ((TS >= hi) & (hi < 1))
        right = ((TS < lo) & (TY == 0)) | ((TS >= hi) & (TY == 1))
        assert right[decided].mean() >= min_acc
    # random data, several thresholds
    rng = np.random.default_rng(5)
    s = rng.random(40).round(2)
    y = (rng.random(40) < s).astype(int)
    for t in (0.3, 0.5, 0.7):
        assert band_for(s, y, 0.85, threshold=t) == pytest.approx(_brute_band(s, y, t, 0.85))


def test_band_is_empty_when_every_decision_is_right_and_full_when_none_reaches():
    s = np.array([0.1, 0.2, 0.3, 0.7, 0.8, 0.9])
    assert band_for(s, [0, 0, 0, 1, 1, 1], 0.99) == (0.5, 0.5)
    assert band_for(s, [1, 1, 1, 0, 0, 0], 0.6, threshold=0.5) == (0.0, 1.0)


def test_fit_stores_threshold_and_band_and_decide_uses_them():
    s, y = _data(lambda z, p: p**3, n=2000, seed=9)
    c = fit(s, y, target_precision=0.85, min_accuracy=0.85)
    lo, hi = c.band
    assert lo < c.threshold < hi  # a realistic verifier is unsure near its threshold
    assert 0 < c.undecided_share < 1 and c.decided_accuracy >= 0.85
    assert "precision >= 0.85" in c.threshold_rule and c.threshold_basis == "out-of-fold"
    assert f"({c.undecided_share:.1%})" in c.band_rule and ">= 0.85" in c.band_rule
    q = np.asarray(c.apply_many(s))
    inside = (q >= lo) & (q < hi)
    for raw, cq, ins in list(zip(s, q, inside))[:200]:
        assert c.decide(raw) == (None if ins else bool(cq >= c.threshold))
    assert c.decide(None) is None
    # the in-sample decided claims reach about the accuracy promised out of fold
    decided = ~inside
    assert ((q[decided] >= c.threshold) == y[decided]).mean() >= 0.8
    no_band = fit(s, y, min_accuracy=None)
    assert no_band.band == [no_band.threshold, no_band.threshold] and no_band.undecided_share == 0.0
    assert not any(no_band.undecided(q) for q in (0.0, no_band.threshold, 1.0))


def test_a_verifier_that_never_reaches_the_accuracy_leaves_everything_undecided():
    s = [0.7] * 200  # one score for every claim, half of them hallucinated: no decision is better than a coin
    y = [True, False] * 100
    c = fit(s, y, min_accuracy=0.95)
    assert c.apply(0.7) == pytest.approx(0.5, abs=0.01)
    assert c.band == [0.0, 1.0] and c.undecided_share == 1.0 and c.decided_accuracy is None
    assert "every claim is undecided" in c.band_rule
    assert all(c.decide(p) is None for p in (0.0, 0.3, 0.99, 1.0))


def test_a_calibrator_record_refuses_an_impossible_band():
    with pytest.raises(ValueError, match="band"):
        Calibrator(method="temperature", parameters={"T": 1.0}, band=[0.7, 0.3])
    with pytest.raises(ValueError, match="positive"):
        Calibrator(method="temperature", parameters={"T": -1.0})


# ---------------------------------------------------------------- the record and its storage


def _fitted(model="qwen2.5-coder-1.5b-instruct", verifier="selfcheck", profile="cpu-1.5b"):
    s, y = _data(lambda z, p: p**3, n=400, seed=2)
    return fit(s, y, verifier=verifier, profile=profile, model=model, datasets=["wice", "data:mine.jsonl"],
               files=["/data/mine.jsonl"], split="dev"), s


def test_apply_keeps_none_and_refuses_non_probabilities():
    c, _ = _fitted()
    assert c.apply(None) is None
    assert c.apply_many([0.2, None, 0.9])[1] is None
    assert c.apply(0.0) == c.apply(cal.EPS) and c.apply(1.0) == c.apply(1 - cal.EPS)
    with pytest.raises(ValueError):
        c.apply(1.2)
    with pytest.raises(ValueError):
        c.apply(float("nan"))


def test_json_round_trip_is_pure_json_and_applies_the_same(tmp_path):
    for method in cal.METHODS:
        s, y = _data(lambda z, p: p**3, n=300, seed=8)
        c = fit(s, y, methods=(method,), verifier="nli", profile=None, model="/models/nli")
        d = json.loads(c.to_json())
        assert d["method"] == method and d["format"] == cal.FORMAT and d["n"] == 300
        assert d["version"] and d["created_at"].endswith("+00:00")
        back = Calibrator.from_json(c.to_json())
        assert back == c
        assert back.apply_many(s) == c.apply_many(s)
    for bad in ("{", "[]", json.dumps({**d, "format": 99}), json.dumps({**d, "method": "histogram"}),
                json.dumps({**d, "parameters": {"x": [0.2, 0.1], "y": [0.1, 0.2]}}), json.dumps({"format": 1})):
        with pytest.raises(ValueError):
            Calibrator.from_json(bad)


def test_save_and_load_round_trip_in_the_user_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HALUCHECK_HOME", str(tmp_path))
    c, s = _fitted()
    path = save(c)
    assert path == tmp_path / "calibration" / "selfcheck--cpu-1.5b.json"
    d = json.loads(path.read_text())
    assert d["datasets"] == ["wice", "data:mine.jsonl"] and d["split"] == "dev" and d["model"] == c.model
    back = load("selfcheck", "cpu-1.5b", "qwen2.5-coder-1.5b-instruct")
    assert back == c and back.apply_many(s) == c.apply_many(s)
    assert load("selfcheck", "cpu-0.5b", "qwen2.5-coder-1.5b-instruct") is None
    assert load("debate", "cpu-1.5b", "qwen2.5-coder-1.5b-instruct") is None
    assert [p.name for p in (tmp_path / "calibration").iterdir()] == [path.name]  # no temp file left


def test_a_calibrator_is_never_applied_to_another_model(tmp_path):
    c, _ = _fitted(model="qwen2.5-coder-1.5b-instruct")
    save(c, root=tmp_path)
    with pytest.raises(ConfigError) as e:
        load("selfcheck", "cpu-1.5b", "qwen2.5-7b-instruct", root=tmp_path)
    msg = str(e.value)
    assert "selfcheck/cpu-1.5b was fitted on model qwen2.5-coder-1.5b-instruct" in msg
    assert "this run uses model qwen2.5-7b-instruct" in msg and "halucheck calibrate" in msg
    with pytest.raises(ConfigError):
        load("selfcheck", "cpu-1.5b", None, root=tmp_path)


def test_names_are_encoded_into_one_file_inside_the_folder(tmp_path):
    c, _ = _fitted(verifier="selfcheck,debate", profile="../../etc/x")
    path = save(c, root=tmp_path)
    assert path.parent == tmp_path and path.name == "selfcheck%2Cdebate--..%2F..%2Fetc%2Fx.json"
    assert load("selfcheck,debate", "../../etc/x", c.model, root=tmp_path) == c
    assert cal.calibration_path("a,b", "c", tmp_path) != cal.calibration_path("a_b", "c", tmp_path)
    assert cal.calibration_path("nli", None, tmp_path).name == "nli--.json"


def test_named_calibrators_sit_beside_the_default_one(tmp_path):
    default, _ = _fitted()
    s, y = _data(lambda z, p: p**2, n=300, seed=5)
    kw = dict(verifier="selfcheck", profile="cpu-1.5b", model=default.model, split="dev")
    medical = fit(s, y, name="medical", datasets=["medical"], **kw)
    odd = fit(s[:150], y[:150], name="a/b@c d", **kw)
    paths = [save(c, root=tmp_path) for c in (default, medical, odd)]
    assert paths[0].name == "selfcheck--cpu-1.5b.json" and paths[1].name == "selfcheck--cpu-1.5b@medical.json"
    assert paths[2].parent == tmp_path and paths[2].name == "selfcheck--cpu-1.5b@a%2Fb%40c%20d.json"
    assert cal.names("selfcheck", "cpu-1.5b", tmp_path) == ["a/b@c d", "medical"]
    assert cal.names("selfcheck", "cpu-0.5b", tmp_path) == [] and cal.names("debate", "cpu-1.5b", tmp_path) == []
    assert load("selfcheck", "cpu-1.5b", default.model, root=tmp_path) == default
    assert load("selfcheck", "cpu-1.5b", default.model, root=tmp_path, name="medical") == medical
    assert load("selfcheck", "cpu-1.5b", default.model, root=tmp_path, name="a/b@c d") == odd
    assert medical.apply(0.3) != default.apply(0.3)
    assert "map 'medical' for selfcheck/cpu-1.5b fitted on medical" in medical.describe()
    # a name asked for and not stored is an error that lists the stored ones, never "uncalibrated"
    with pytest.raises(ConfigError) as e:
        load("selfcheck", "cpu-1.5b", default.model, root=tmp_path, name="legal")
    assert "no calibrator named 'legal'" in str(e.value) and "medical" in str(e.value)
    assert "halucheck calibrate ... -v selfcheck -p cpu-1.5b --name legal" in str(e.value)
    # a named file renamed by hand to another name is refused, as a file of another verifier is
    paths[1].rename(cal.calibration_path("selfcheck", "cpu-1.5b", tmp_path, "legal"))
    with pytest.raises(ConfigError, match="named 'medical'"):
        load("selfcheck", "cpu-1.5b", default.model, root=tmp_path, name="legal")
    with pytest.raises(ValueError, match="empty"):
        cal.calibration_path("selfcheck", "cpu-1.5b", tmp_path, " ")


def test_resolve_takes_a_name_or_a_file_checked_for_verifier_and_model(tmp_path):
    c, _ = _fitted(profile="vllm-1.5b")
    save(c, root=tmp_path / "store")
    f = tmp_path / "shared" / "calibrator.json"
    f.parent.mkdir()
    f.write_text(c.to_json())
    # a file fitted on another profile of the same model is taken (its description names the profile)
    got, path = cal.resolve("selfcheck", "cpu-1.5b", c.model, str(f), root=tmp_path / "store")
    assert got == c and path == f and "selfcheck/vllm-1.5b" in got.describe()
    # none stored for this profile: the package's for this verifier and model (none for another model)
    assert cal.resolve("selfcheck", "cpu-1.5b", c.model, None, root=tmp_path / "store") == cal.shipped("selfcheck", c.model)
    assert cal.resolve("selfcheck", "cpu-1.5b", "m2", None, root=tmp_path / "store") == (None, None)
    assert cal.resolve("selfcheck", "vllm-1.5b", c.model, None, root=tmp_path / "store") == (
        c, cal.calibration_path("selfcheck", "vllm-1.5b", tmp_path / "store"))
    with pytest.raises(ConfigError, match="fitted on model qwen2.5-coder-1.5b-instruct, this run uses model m2"):
        cal.resolve("selfcheck", "cpu-1.5b", "m2", str(f))
    with pytest.raises(ConfigError, match="is for verifier selfcheck, this run uses debate"):
        cal.resolve("debate", "cpu-1.5b", c.model, str(f))
    with pytest.raises(ConfigError, match="does not exist"):
        cal.resolve("selfcheck", "cpu-1.5b", c.model, str(tmp_path / "nope.json"))
    with pytest.raises(ConfigError, match="no calibrator named 'nope'"):  # no separator, no .json: a name
        cal.resolve("selfcheck", "cpu-1.5b", c.model, "nope", root=tmp_path / "store")
    # a file written before calibrators had names reads as the unnamed one
    d = json.loads(c.to_json())
    del d["name"]
    assert Calibrator.from_dict(d) == c


def test_the_shipped_calibrator_is_the_default_one_and_none_turns_it_off(tmp_path):
    from halucheck.config import Settings

    model = Settings.load().profile_for("initial").model  # the default profile's
    shipped, path = cal.shipped("selfcheck", model)
    assert shipped is not None and path.parent == cal.SHIPPED and path.name == f"selfcheck--{model}.json"
    # fitted on dev items only, with every verdict decided (no undecided band), and it calibrates: the raw
    # P(hallucinated) of a 0/1-like judge is squeezed towards the base rate
    assert shipped.split == "dev" and shipped.band[0] == shipped.band[1] and shipped.n >= 100
    assert shipped.ece_after < shipped.ece_before and 0.05 < shipped.apply(0.001) < shipped.apply(0.999) < 0.95
    assert cal.resolve("selfcheck", "cpu-1.5b", model, None, root=tmp_path) == (shipped, path)
    assert cal.resolve("selfcheck", "cpu-1.5b", model, "none", root=tmp_path) == (None, None)
    assert cal.resolve("debate", "cpu-1.5b", model, None, root=tmp_path) == (None, None)  # none shipped for it
    mine, _ = _fitted(profile="cpu-1.5b")  # one the user stored wins
    save(mine, root=tmp_path)
    assert cal.resolve("selfcheck", "cpu-1.5b", mine.model, None, root=tmp_path)[0] == mine


def test_a_damaged_file_is_a_config_error(tmp_path):
    c, _ = _fitted()
    path = save(c, root=tmp_path)
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="unreadable"):
        load("selfcheck", "cpu-1.5b", c.model, root=tmp_path)
    with pytest.raises(ValueError, match="verifier"):
        save(fit(*_data(lambda z, p: p, n=50)), root=tmp_path)


def test_summary_names_the_method_and_the_ece():
    c, _ = _fitted()
    line = c.summary()
    assert line.startswith(c.method) and f"{c.ece_before:.3f} -> {c.ece_after:.3f}" in line and "400 items" in line


# ---------------------------------------------------------------- reliability diagram


def test_reliability_svg_parses_and_holds_the_bins():
    svg = reliability_svg(HAND_S, HAND_Y, title="selfcheck <cpu> & co")
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    bars = [e for e in root.iter(f"{SVG}rect") if e.get("class") == "bar"]
    assert [(int(b.get("data-bin")), int(b.get("data-n"))) for b in bars] == [(0, 1), (1, 2), (4, 1), (5, 1), (9, 2)]
    assert [float(b.get("data-observed")) for b in bars] == [0.0, 0.5, 0.0, 1.0, 1.0]
    counts = [e.text for e in root.iter(f"{SVG}text") if e.get("class") == "count"]
    assert counts == ["1", "2", "0", "0", "1", "1", "0", "0", "0", "2"]
    caption = next(e.text for e in root.iter(f"{SVG}text") if e.get("class") == "caption")
    assert f"raw {expected_calibration_error(HAND_S, HAND_Y):.3f}" in caption and "7 items" in caption
    assert "selfcheck <cpu> & co" in "".join(root.itertext())
    # taller bars for higher observed share
    h = {int(b.get("data-bin")): float(b.get("height")) for b in bars}
    assert h[5] > h[1] > h[0] == 0.0
    for banned in ("<script", "href", "@import", "url(", "<image", "foreignObject"):
        assert banned not in svg


def test_reliability_svg_two_series_with_legend():
    s, y = _data(lambda z, p: p**3, n=600, seed=6)
    c = fit(s, y, methods=("isotonic",))
    svg = reliability_svg(s, y, bins=5, calibrated=c.apply_many(s), names=("raw", "isotonic"))
    root = ET.fromstring(svg)
    bars = [e for e in root.iter(f"{SVG}rect") if e.get("class") == "bar"]
    series = {b.get("data-series") for b in bars}
    assert series == {"0", "1"}
    assert {b.get("fill") for b in bars} == set(cal.COLORS)
    for k in ("0", "1"):
        assert sum(int(b.get("data-n")) for b in bars if b.get("data-series") == k) == 600
        assert max(int(b.get("data-bin")) for b in bars if b.get("data-series") == k) <= 4
    assert len([e for e in root.iter(f"{SVG}rect") if e.get("class") == "legend"]) == 2
    text = "".join(root.itertext())
    assert "isotonic" in text and "5 bins" in text
    assert f"isotonic {expected_calibration_error(c.apply_many(s), y, 5):.3f}" in text
    with pytest.raises(ValueError):
        reliability_svg(s, y, calibrated=s[:10])


def test_reliability_svg_consistency_bars_are_binomial_ranges():
    # bin 2 holds 0.2 and 0.25 (mean 0.225, n 2); bin 7: 40 items at 0.7, of which 10 hallucinated
    s = [0.2, 0.25] + [0.7] * 40
    y = [0, 1] + [1] * 10 + [0] * 30
    root = ET.fromstring(reliability_svg(s, y))
    whiskers = {int(e.get("data-bin")): e for e in root.iter(f"{SVG}line") if e.get("class") == "consistency"}
    assert set(whiskers) == {2, 7}

    def quantile(n, p, q):  # the smallest k with P(K <= k) >= q, K ~ Binomial(n, p)
        acc = 0.0
        for k in range(n + 1):
            acc += math.comb(n, k) * p**k * (1 - p) ** (n - k)
            if acc >= q - 1e-12:
                return k

    for b, (n, p) in {2: (2, 0.225), 7: (40, 0.7)}.items():
        assert float(whiskers[b].get("data-lo")) == pytest.approx(quantile(n, p, 0.05) / n, abs=1e-4)
        assert float(whiskers[b].get("data-hi")) == pytest.approx(quantile(n, p, 0.95) / n, abs=1e-4)
    # 10 of 40 at P 0.7 lies far below the range calibrated scores would give; 1 of 2 at 0.225 inside it
    bars = {int(e.get("data-bin")): float(e.get("data-observed")) for e in root.iter(f"{SVG}rect")
            if e.get("class") == "bar"}
    assert bars[7] < float(whiskers[7].get("data-lo")) and float(whiskers[2].get("data-lo")) <= bars[2]


def test_the_default_verifier_ships_a_calibrator_that_a_head_of_your_own_is_not_given(tmp_path, monkeypatch):
    from halucheck.config import Settings, VerifierOptions
    from halucheck.verifiers import get_verifier

    monkeypatch.setenv("HALUCHECK_HOME", str(tmp_path))  # no calibrator stored by a user
    settings = Settings.load()
    default = settings.profile_for("initial")
    shipped, path = cal.shipped(default.verifier, default.model)
    # every verdict of the default path carries a calibrated P: its map was fitted on dev, all of it decided
    assert shipped is not None and shipped.split == "dev" and shipped.band[0] == shipped.band[1]
    assert cal.for_run(get_verifier(default.verifier), settings, None) == (shipped, path)
    if default.verifier == "probe":  # the map was fitted on the shipped head's scores, not on another head's
        mine = get_verifier("probe", VerifierOptions(head="my-team"))
        assert cal.for_run(mine, settings, None) == (None, None)
        assert cal.for_run(get_verifier("probe", VerifierOptions(head="default")), settings, None) == (shipped, path)
