import numpy as np
import pytest
from scipy.spatial.distance import cdist
from scipy.stats import bootstrap, ks_2samp, wilcoxon

from adaptlab.analysis import compare_shift, domain_shift
from adaptlab.errors import ConfigError


def test_domain_shift_matches_brute_force_with_blocks():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(37, 5)), rng.normal(size=(23, 5))
    expected = cdist(a, b).min(axis=1)
    np.testing.assert_allclose(domain_shift(a, b, block_size=4), expected, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(domain_shift(a, b), expected, rtol=1e-9, atol=1e-9)
    assert domain_shift(a, a).max() == pytest.approx(0.0, abs=1e-6)


def test_unpaired_compare_shift_matches_scipy_ks():
    rng = np.random.default_rng(1)
    x, y = rng.normal(1.0, 0.2, 300), rng.normal(1.2, 0.2, 250)
    c = compare_shift(x, y, base_label="base", adapted_label="ptft")
    assert c.test == "ks" and not c.paired
    ref = ks_2samp(x, y)
    assert c.ks_statistic == pytest.approx(ref.statistic) and c.ks_pvalue == pytest.approx(ref.pvalue)
    np.testing.assert_allclose(c.base_quantiles, np.quantile(x, c.quantile_levels))
    assert c.base_median == pytest.approx(np.median(x)) and c.adapted_mean == pytest.approx(y.mean())
    rows = c.to_metric_rows("scifact")
    ks = [r for r in rows if r["measure"] == "shift_ks"][0]
    assert ks["system"] == "ptft" and ks["compared_to"] == "base" and ks["p_value"] == pytest.approx(ref.pvalue)
    assert {r["measure"] for r in rows} == {"shift_mean", "shift_median", "shift_ks"}


def test_same_documents_are_compared_paired():
    # a constant small shift of the same documents: KS on two "independent" samples calls it
    # overwhelming (p ~ 1e-127 in the issue); the paired analysis reports the per-document
    # difference with its CI and the Wilcoxon signed-rank test on it
    rng = np.random.default_rng(2)
    x = rng.normal(1.0, 0.3, 400)
    noise = rng.normal(0.0, 0.05, 400)
    y = x + 0.002 + noise
    c = compare_shift(x, y, n_resamples=2000, seed=0)
    assert c.paired and c.test == "wilcoxon"
    d = y - x
    assert c.pvalue == pytest.approx(wilcoxon(d).pvalue) and c.statistic == pytest.approx(wilcoxon(d).statistic)
    ref = bootstrap((d,), np.mean, n_resamples=2000, method="percentile", random_state=0).confidence_interval
    assert c.diff_mean == pytest.approx(d.mean())
    assert c.diff_ci_low == pytest.approx(ref.low, abs=0.003) and c.diff_ci_high == pytest.approx(ref.high, abs=0.003)
    assert c.diff_ci_low < 0.002 < c.diff_ci_high and c.pvalue > 0.05
    rows = {r["measure"]: r for r in c.to_metric_rows("d")}
    assert "shift_ks" not in rows and rows["shift_diff"]["p_value"] == pytest.approx(c.pvalue)
    assert rows["shift_diff"]["compared_to"] == "base" and rows["shift_diff"]["confidence"] == 0.95
    with pytest.raises(ConfigError, match="paired=True"):
        compare_shift(x, y[:10], paired=True)


def test_errors():
    with pytest.raises(ConfigError, match="dimensions differ"):
        domain_shift(np.ones((2, 3)), np.ones((2, 4)))
    with pytest.raises(ConfigError, match="non-empty"):
        compare_shift([], [1.0])
