import numpy as np
import pytest
from scipy.spatial.distance import cdist
from scipy.stats import ks_2samp

from adaptlab.analysis import compare_shift, domain_shift
from adaptlab.errors import ConfigError


def test_domain_shift_matches_brute_force_with_blocks():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(37, 5)), rng.normal(size=(23, 5))
    expected = cdist(a, b).min(axis=1)
    np.testing.assert_allclose(domain_shift(a, b, block_size=4), expected, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(domain_shift(a, b), expected, rtol=1e-9, atol=1e-9)
    assert domain_shift(a, a).max() == pytest.approx(0.0, abs=1e-6)


def test_compare_shift_matches_scipy():
    rng = np.random.default_rng(1)
    x, y = rng.normal(1.0, 0.2, 300), rng.normal(1.2, 0.2, 250)
    c = compare_shift(x, y, base_label="base", adapted_label="ptft")
    ref = ks_2samp(x, y)
    assert c.ks_statistic == pytest.approx(ref.statistic) and c.ks_pvalue == pytest.approx(ref.pvalue)
    np.testing.assert_allclose(c.base_quantiles, np.quantile(x, c.quantile_levels))
    assert c.base_median == pytest.approx(np.median(x)) and c.adapted_mean == pytest.approx(y.mean())
    rows = c.to_metric_rows("scifact")
    ks = [r for r in rows if r["measure"] == "shift_ks"][0]
    assert ks["system"] == "ptft" and ks["compared_to"] == "base" and ks["p_value"] == pytest.approx(ref.pvalue)
    assert {r["measure"] for r in rows} == {"shift_mean", "shift_median", "shift_ks"}


def test_errors():
    with pytest.raises(ConfigError, match="dimensions differ"):
        domain_shift(np.ones((2, 3)), np.ones((2, 4)))
    with pytest.raises(ConfigError, match="non-empty"):
        compare_shift([], [1.0])
