import dataclasses

import numpy as np
import pytest
import scipy.stats as ss

from adaptlab.errors import ConfigError
from adaptlab.stats import BootstrapConfig, bootstrap_ci, paired_bootstrap, resample_indices
from adaptlab.stats.intervals import bca_interval, jeffreys_interval, wilson_interval
from adaptlab.stats.pvalues import adjust_pvalues, ci_label, exact_paired_tests, format_p_value


def test_holm_by_hand_and_bh_equals_scipy():
    p = np.array([0.01, 0.04, 0.03, 0.5])
    # Holm: sorted 0.01, 0.03, 0.04, 0.5 -> 4*0.01, max(., 3*0.03), max(., 2*0.04), max(., 0.5)
    np.testing.assert_allclose(adjust_pvalues(p, "holm"), [0.04, 0.09, 0.09, 0.5])
    rng = np.random.default_rng(0)
    for _ in range(5):
        q = rng.random(int(rng.integers(1, 30))) ** 3
        np.testing.assert_allclose(adjust_pvalues(q, "bh"), ss.false_discovery_control(q, method="bh"))
    np.testing.assert_array_equal(adjust_pvalues(p, "none"), p)
    with pytest.raises(ConfigError, match="adjustment"):
        adjust_pvalues(p, "bonferroni")


def test_exact_tests_on_three_queries_equal_scipy():
    # Q = 3, A better on every query: the bootstrap p-value would be 0.002, the exact sign test
    # and the sign-flip randomization test (the paired test below PERMUTATION_Q queries) 0.25
    a, b = np.array([1.0, 1.0, 1.0]), np.zeros(3)
    t = exact_paired_tests(a, b)
    assert t.sign_p == pytest.approx(ss.binomtest(3, 3).pvalue) == pytest.approx(0.25)
    assert t.wilcoxon_p == pytest.approx(0.25)
    boot = paired_bootstrap(np.vstack([a, b]), n_resamples=999, seed=0)[0]
    assert boot.test == "sign-flip-exact" and boot.p_value == 0.25  # 2 of the 2**3 sign patterns
    d = np.array([0.5, -0.2, 0.9, 0.3, 0.0, 0.7, -0.1, 0.4])
    t = exact_paired_tests(d)
    assert t.n_nonzero == 7 and t.n_positive == 5
    assert t.sign_p == pytest.approx(ss.binomtest(5, 7).pvalue)
    assert t.wilcoxon_p == pytest.approx(ss.wilcoxon(d[d != 0], method="exact").pvalue)
    assert exact_paired_tests(np.zeros(4)).sign_p == 1.0


def test_p_value_printing():
    assert format_p_value(2 / 40002, n_resamples=40001) == "<= 5.0e-05"
    assert format_p_value(1 / 40002, n_resamples=40001, sides=1) == "<= 2.5e-05"
    assert format_p_value(2 / 1000, n_resamples=999) == "<= 0.002"
    assert format_p_value(0.01, n_resamples=999) == "0.01"
    assert format_p_value(3e-127) == "3.00e-127"
    assert format_p_value(0.04321) == "0.04321"
    assert format_p_value(None) == "n/a"
    assert "0.0000" not in format_p_value(0.0)


def test_ci_label_from_confidence():
    assert ci_label(0.95) == "95% CI" and ci_label(0.9) == "90% CI" and ci_label(0.975, "bca") == "97.5% CI (bca)"


def test_oversampling_is_an_error_unless_asked_for():
    values = (np.random.default_rng(0).random(50) < 0.5).astype(float)
    with pytest.raises(ConfigError, match="exceeds the 50 queries"):
        bootstrap_ci(values, n_resamples=100, sample_size=5000)
    with pytest.raises(ConfigError, match="paper setting"):
        resample_indices(80, n_resamples=500, sample_size=100)
    with pytest.raises(ConfigError, match="allow_oversampling"):
        paired_bootstrap(np.vstack([values, values[::-1]]), n_resamples=100, sample_size=51)
    wide = bootstrap_ci(values, n_resamples=2000, seed=0)
    narrow = bootstrap_ci(values, n_resamples=2000, sample_size=5000, seed=0, allow_oversampling=True)
    assert narrow.ci_high - narrow.ci_low < 0.2 * (wide.ci_high - wide.ci_low)
    cfg = BootstrapConfig(n_resamples=100, sample_size=5000, allow_oversampling=True)
    assert bootstrap_ci(values, **cfg.kwargs()).sample_size == 5000


def test_config_fields_validated_and_defaults_keep_todays_numbers():
    assert BootstrapConfig().interval == "auto" and BootstrapConfig().adjustment == "holm"
    with pytest.raises(ConfigError, match="interval"):
        BootstrapConfig(interval="basic")
    with pytest.raises(ConfigError, match="adjustment"):
        BootstrapConfig(adjustment="bonf")
    v = np.random.default_rng(3).random((2, 120))
    assert bootstrap_ci(v, n_resamples=50, seed=4).interval == "studentized"  # the default of graded values
    r = bootstrap_ci(v, n_resamples=500, seed=4, method="index", keep_distribution=True, interval="percentile")
    lo, hi = np.percentile(r.distribution, [2.5, 97.5], axis=1)
    np.testing.assert_allclose(r.ci_low, lo) and np.testing.assert_allclose(r.ci_high, hi)
    assert r.interval == "percentile"


def _scipy_bca(x, dist, conf):
    seed_res = ss.bootstrap((x,), np.mean, n_resamples=10, method="BCa", confidence_level=conf, random_state=0)
    given = dataclasses.replace(seed_res, bootstrap_distribution=dist)
    return ss.bootstrap(
        (x,), np.mean, n_resamples=0, method="BCa", confidence_level=conf, bootstrap_result=given
    ).confidence_interval


def test_bca_equals_scipy_on_the_same_resamples():
    x = np.random.default_rng(1).exponential(size=80)
    r = bootstrap_ci(x, n_resamples=3000, seed=0, method="index", keep_distribution=True, interval="bca")
    ci = _scipy_bca(x, r.distribution, 0.95)
    assert r.interval == "bca"
    assert r.ci_low == pytest.approx(ci.low) and r.ci_high == pytest.approx(ci.high)
    lo, hi = bca_interval(x, r.distribution, 0.9)
    ci = _scipy_bca(x, r.distribution, 0.9)
    assert (lo, hi) == pytest.approx((ci.low, ci.high))
    with pytest.raises(ConfigError, match="bca"):
        bootstrap_ci(x, n_resamples=100, sample_size=40, interval="bca")
    d = paired_bootstrap(np.vstack([x, x[::-1] * 0.9]), n_resamples=500, seed=0, interval="bca")[0]
    assert d.interval == "bca" and d.ci_low < d.diff < d.ci_high


def test_wilson_and_jeffreys_for_accuracies():
    acc = np.r_[np.ones(990), np.zeros(10)]
    perc = bootstrap_ci(acc, n_resamples=2000, seed=0, interval="percentile")
    assert perc.interval == "percentile"
    w = bootstrap_ci(acc, n_resamples=2000, seed=0, interval="wilson")
    ref = ss.binomtest(990, 1000).proportion_ci(confidence_level=0.95, method="wilson")
    assert w.interval == "wilson" and (w.ci_low, w.ci_high) == pytest.approx((ref.low, ref.high))
    j = bootstrap_ci(acc, n_resamples=2000, seed=0, interval="jeffreys")
    assert j.ci_low == pytest.approx(ss.beta.ppf(0.025, 990.5, 10.5))
    assert j.ci_high < 1.0 and w.ci_high < 1.0
    assert perc.point == w.point and perc.boot_mean == w.boot_mean
    all_right = np.ones(20)
    assert wilson_interval(all_right, 0.95)[0] < 1.0 and jeffreys_interval(all_right, 0.95)[1] == 1.0
    # Wilson on values that are not 0/1: an error without a measure; a graded measure gets its own interval
    with pytest.raises(ConfigError, match="needs 0/1 values"):
        bootstrap_ci(np.linspace(0, 1, 30), n_resamples=200, interval="wilson")
    assert (
        bootstrap_ci(np.linspace(0, 1, 30), n_resamples=200, interval="wilson", measure="ndcg@10").interval
        == "studentized"
    )


def test_tied_wilcoxon_enumeration_equals_scipys_permutation_test():
    """With ties and up to 13 non-zero differences SciPy's ``wilcoxon(method="auto")`` runs an
    exact sign-flip permutation test in Python; the NumPy enumeration gives the same p-values,
    bit for bit, on binary (accuracy-like) differences of every n from 2 to 13, graded and
    real-valued tied differences, and all-equal samples."""
    import warnings

    from adaptlab.stats.pvalues import SIGN_FLIP_MAX_N, wilcoxon_sign_flip_p

    rng = np.random.default_rng(7)
    cases = [np.ones(n) for n in (2, 5, 9, SIGN_FLIP_MAX_N)]
    cases += [rng.choice([-1.0, 1.0], size=n) for n in range(2, SIGN_FLIP_MAX_N + 1)]
    cases += [rng.choice([-1.0, -0.5, 0.5, 1.0, 0.25], size=int(rng.integers(2, 10))) for _ in range(15)]
    cases += [np.round(rng.normal(0.1, 0.3, size=int(rng.integers(3, 10))), 1) for _ in range(15)]
    checked = 0
    for d in cases:
        d = d[d != 0]
        if d.size == 0 or np.unique(np.abs(d)).size == d.size:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = float(ss.wilcoxon(d, method="auto").pvalue)
        assert wilcoxon_sign_flip_p(d) == ref, d
        assert exact_paired_tests(d).wilcoxon_p == ref, d
        checked += 1
    assert checked >= 35
    with pytest.raises(ConfigError, match="1 to 13"):
        wilcoxon_sign_flip_p(np.ones(14))
