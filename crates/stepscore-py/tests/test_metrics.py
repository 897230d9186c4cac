"""The core's metrics from Python, against their definitions computed here."""

import itertools

import numpy as np
import pytest

import stepscore


def test_auroc_is_the_share_of_correct_wrong_pairs_ordered_right():
    rng = np.random.default_rng(3)
    scores = np.round(rng.random(60), 1)  # rounded: ties count one half
    labels = rng.random(60) < 0.6
    pos, neg = scores[labels], scores[~labels]
    want = np.mean([1.0 if p > n else 0.5 if p == n else 0.0 for p, n in itertools.product(pos, neg)])
    assert stepscore.auroc(scores.tolist(), labels.tolist()) == pytest.approx(want, abs=1e-12)
    assert stepscore.auroc([0.3, 0.4], [True, True]) is None
    with pytest.raises(ValueError, match=r"scores\[1\] is None or NaN"):
        stepscore.auroc([0.3, None], [True, False])
    with pytest.raises(stepscore.InvalidArgumentError):
        stepscore.auroc([0.3], [True, False])


def test_calibration_bins_and_ece_follow_the_definition():
    probs = [0.05, 0.15, 0.12, 0.95, 0.91, 0.5]
    labels = [False, False, True, True, True, False]
    got = stepscore.calibration(probs, labels, n_bins=10)
    assert [(b["lo"], b["count"]) for b in got["bins"]] == [
        (0.0, 1), (pytest.approx(0.1), 2), (pytest.approx(0.5), 1), (pytest.approx(0.9), 2)]
    # sum over bins of count/N * |accuracy - mean confidence|
    want = (1 * abs(0 - 0.05) + 2 * abs(0.5 - 0.135) + 1 * abs(0 - 0.5) + 2 * abs(1 - 0.93)) / 6
    assert got["ece"] == pytest.approx(want, abs=1e-12)
    assert stepscore.calibration([], []) is None
    with pytest.raises(stepscore.InvalidArgumentError, match="outside"):
        stepscore.calibration([1.5], [True])


def test_processbench_f1_is_the_harmonic_mean_of_the_two_accuracies():
    samples = [
        {"split": "gsm8k", "label": 2, "prediction": 2},
        {"split": "gsm8k", "label": 1, "prediction": -1},
        {"split": "gsm8k", "label": -1, "prediction": -1},
        {"split": "math", "label": 0, "prediction": 0},
        {"split": "math", "label": -1, "prediction": 3},
        {"split": "math", "label": -1, "prediction": -1},
    ]
    r = stepscore.processbench_f1(samples, 0.5)
    gsm, math = r["splits"]
    assert (gsm["acc_erroneous"], gsm["acc_correct"]) == (0.5, 1.0)
    assert gsm["f1"] == pytest.approx(2 * 0.5 * 1.0 / 1.5)
    assert (math["acc_erroneous"], math["acc_correct"]) == (1.0, 0.5)
    assert r["mean_f1"] == pytest.approx((gsm["f1"] + math["f1"]) / 2)
    assert r["threshold"] == 0.5
    with pytest.raises(ValueError, match=r"samples\[0\] has no `prediction`"):
        stepscore.processbench_f1([{"split": "x", "label": 0}], 0.5)
    with pytest.raises(TypeError, match=r'samples\[0\]\["label"\] must be an int'):
        stepscore.processbench_f1([{"split": "x", "label": "2", "prediction": 0}], 0.5)
