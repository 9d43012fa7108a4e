import numpy as np
import pytest

from adaptlab.analysis import PSI_GRID, similarity_thresholds, thresholds_from_arrays
from adaptlab.errors import ConfigError

# Hand-checkable case (K = 2): per-query lowest top-K similarity qmin = [0.8, 0.55, 0.4, 0.5]
TOPK = np.array([[0.9, 0.8], [0.7, 0.55], [0.5, 0.4], [0.95, 0.5]])
RANK = np.array([1, 2, 0, 1])  # gold similarities 0.9, 0.55, (miss), 0.95
IDX = np.array([[0, 1], [0, 0], [0, 3], [2, 3]])  # gamma_j = 0.55, 0.8, 0.5, 0.4


def test_hand_checked_taus_accuracies_and_pvalues():
    r = thresholds_from_arrays(TOPK, RANK, psi_grid=(25, 50, 100), indices=IDX)
    # Gamma sorted = [0.4, 0.5, 0.55, 0.8]; linear interpolation
    np.testing.assert_allclose(r.tau, [0.475, 0.525, 0.8])
    # only tau = 0.8 drops query 1 (gold similarity 0.55)
    np.testing.assert_allclose(r.acc, [0.75, 0.75, 0.5])
    assert r.base_acc == 0.75
    # per-resample accuracies: base [1, 1, 1, .5]; at 0.8: [.5, 1, 1, .5]
    assert r.base_boot_mean == pytest.approx(0.875)
    np.testing.assert_allclose(r.acc_boot_mean, [0.875, 0.875, 0.75])
    np.testing.assert_allclose(r.p_value, [1.0, 1.0, 0.75])
    assert r.chosen == 2 and r.chosen_psi == 100.0 and r.chosen_tau == pytest.approx(0.8)
    assert r.n_resamples == 4 and r.sample_size == 2 and r.k == 2


def test_significance_level_moves_the_choice():
    r = thresholds_from_arrays(TOPK, RANK, psi_grid=(25, 50, 100), indices=IDX, alpha=0.8)
    assert r.chosen == 1 and r.chosen_tau == pytest.approx(0.525)
    at = r.at_chosen()
    assert at["value"] == 0.75 and at["p_value"] == 1.0


def test_metric_rows():
    r = thresholds_from_arrays(TOPK, RANK, psi_grid=(25, 50, 100), indices=IDX, system="s", dataset="d")
    rows = {row["measure"]: row for row in r.to_metric_rows()}
    assert set(rows) == {"threshold", "acc_at_threshold"}
    assert rows["threshold"]["value"] == pytest.approx(0.8)
    assert '"psi": 100.0' in rows["threshold"]["extra"]
    assert rows["acc_at_threshold"]["value"] == 0.5 and rows["acc_at_threshold"]["boot_mean"] == 0.75
    assert rows["acc_at_threshold"]["system"] == "s" and rows["acc_at_threshold"]["dataset"] == "d"


def test_records_default_grid_and_low_psi_always_passes(records_good):
    r = similarity_thresholds(records_good, k=5, n_resamples=200, seed=3)
    np.testing.assert_array_equal(r.psi, PSI_GRID)
    assert np.all(np.diff(r.tau) >= 0)  # tau grows with psi
    assert np.all(np.diff(r.acc) <= 0)  # accuracy can only fall
    assert r.p_value[0] >= 0.9 and r.chosen is not None  # psi = 5 leaves >= 95% of resamples intact
    assert r.acc[r.chosen] <= r.base_acc
    ok = np.flatnonzero(r.p_value >= r.alpha)
    assert r.chosen == ok.max()


def test_same_seed_same_result_and_unjudged_excluded(make_records):
    rec = make_records("x", n_unjudged=5, seed=2)
    a = similarity_thresholds(rec, k=3, n_resamples=50, seed=7)
    b = similarity_thresholds(rec, k=3, n_resamples=50, seed=7)
    np.testing.assert_array_equal(a.tau, b.tau)
    assert a.n_queries == len(rec) - 5 and a.n_excluded == 5


def test_validation_errors(records_good):
    with pytest.raises(ConfigError, match="retrieval depth"):
        similarity_thresholds(records_good, k=records_good.k + 1)
    with pytest.raises(ConfigError, match="alpha"):
        thresholds_from_arrays(TOPK, RANK, indices=IDX, alpha=1.5)
    with pytest.raises(ConfigError, match="psi_grid"):
        thresholds_from_arrays(TOPK, RANK, indices=IDX, psi_grid=(150,))
    with pytest.raises(ConfigError, match="indices"):
        thresholds_from_arrays(TOPK, RANK, indices=np.array([[0, 9]]))
    with pytest.raises(ConfigError, match="PerQueryRecords"):
        similarity_thresholds(object())
