import numpy as np
import pytest

from adaptlab.analysis import overlap_from_arrays, overlap_metrics, similarity_distributions
from adaptlab.errors import ConfigError

TOPK = np.array([[0.9, 0.7], [0.6, 0.5], [0.8, 0.2]])
CORR = np.array([0.9, 0.4, 0.8])
RAND = np.array([0.1, 0.58, 0.3])
IDX = np.array([[0, 1], [1, 1], [2, 0], [1, 2]])


def test_hand_checked_coe_roe():
    r = overlap_from_arrays(CORR, TOPK, RAND, psi=50, indices=IDX)
    # all queries: median of the 6 top-K similarities = 0.65
    assert r.theta == pytest.approx(0.65)
    assert r.coe == pytest.approx(2 / 3) and r.roe == 0.0
    # resamples: theta_j = .65, .55, .75, .55 ; C_corr = .5, 0, 1, .5 ; C_rand = 0, 1, 0, .5
    assert r.theta_boot_mean == pytest.approx((0.65 + 0.55 + 0.75 + 0.55) / 4)
    assert r.coe_boot_mean == pytest.approx(0.5)
    assert r.roe_boot_mean == pytest.approx(0.375)
    assert r.coe_ci_low == pytest.approx(np.percentile([0.5, 0, 1, 0.5], 2.5))
    assert r.roe_ci_high == pytest.approx(np.percentile([0, 1, 0, 0.5], 97.5))
    assert r.k == 2 and r.n_resamples == 4 and r.sample_size == 2


def test_rows_and_distributions(records_good):
    r = overlap_metrics(records_good, k=5, n_resamples=100, seed=0)
    rows = {row["measure"]: row for row in r.to_metric_rows()}
    assert set(rows) == {"coe", "roe"}
    assert 0 <= rows["roe"]["value"] <= rows["coe"]["value"] <= 1
    assert rows["coe"]["ci_low"] <= rows["coe"]["boot_mean"] <= rows["coe"]["ci_high"]
    d = similarity_distributions(records_good, k=5)
    assert d.corr.size == len(records_good) and d.topk.size == 5 * len(records_good)


def test_better_model_has_higher_coe(records_good, records_bad):
    good = overlap_metrics(records_good, k=5, n_resamples=100)
    bad = overlap_metrics(records_bad, k=5, n_resamples=100)
    assert good.coe > bad.coe


def test_unjudged_queries_are_excluded(make_records):
    rec = make_records("x", n_unjudged=4)
    r = overlap_metrics(rec, k=3, n_resamples=20)
    assert r.n_queries == len(rec) - 4 and r.n_excluded == 4


def test_errors():
    with pytest.raises(ConfigError, match="psi"):
        overlap_from_arrays(CORR, TOPK, RAND, psi=101, indices=IDX)
    with pytest.raises(ConfigError, match="shape"):
        overlap_from_arrays(CORR[:2], TOPK, RAND, indices=IDX)
    with pytest.raises(ConfigError, match="confidence"):
        overlap_from_arrays(CORR, TOPK, RAND, indices=IDX, confidence=95)


def test_unknown_similarities_keep_the_resamples_aligned_with_accuracy(make_records):
    import dataclasses

    from adaptlab.stats import resample_indices

    rec = make_records("x", seed=4)
    sim = np.asarray(rec.sim_random, dtype=float).copy()
    sim[[3, 17]] = np.nan
    rec_nan = dataclasses.replace(rec, sim_random=sim)
    r = overlap_metrics(rec_nan, k=3, n_resamples=100, seed=5)
    # all 50 judged queries stay in the resampling: the same indices as the accuracy CIs
    assert r.n_queries == len(rec) and r.n_missing_rand == 2 and r.n_excluded == 0
    idx = resample_indices(len(rec), n_resamples=100, seed=5)
    ref = overlap_from_arrays(
        np.asarray(rec.sim_gold, float), np.asarray(rec.topk_scores, float)[:, :3], sim, indices=idx
    )
    assert r.coe_ci_low == ref.coe_ci_low and r.roe_boot_mean == pytest.approx(ref.roe_boot_mean)
    # by hand for resample 0: the fraction over the drawn queries whose random similarity is known
    i0 = idx[0]
    theta = np.percentile(np.asarray(rec.topk_scores, float)[i0, :3].ravel(), 5)
    known = ~np.isnan(sim[i0])
    assert ((sim[i0][known] > theta).mean()) == pytest.approx(
        overlap_from_arrays(
            np.asarray(rec.sim_gold, float), np.asarray(rec.topk_scores, float)[:, :3], sim, indices=idx[:1]
        ).roe_boot_mean
    )
    rows = r.to_metric_rows()
    assert '"n_missing_rand": 2' in rows[0]["extra"]
