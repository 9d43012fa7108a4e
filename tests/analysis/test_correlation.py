import numpy as np
import pytest
from scipy.stats import pearsonr, spearmanr

from adaptlab.analysis import correlation_table, default_correlation_pairs, measure_values
from adaptlab.errors import ConfigError

VALUES = {
    "base": {"acc@5": 0.66, "coe": 0.88, "roe": 0.048, "threshold": 0.50, "isotropy_mu": 0.09, "isoscore": 0.28},
    "pt": {"acc@5": 0.62, "coe": 0.86, "roe": 0.022, "threshold": 0.58, "isotropy_mu": 0.06, "isoscore": 0.24},
    "ft": {"acc@5": 0.82, "coe": 0.92, "roe": 0.002, "threshold": 0.43, "isotropy_mu": 0.11, "isoscore": 0.41},
    "ptft": {"acc@5": 0.81, "coe": 0.91, "roe": 0.003, "threshold": 0.40, "isotropy_mu": 0.10},
}


def test_matches_scipy_and_skips_missing_measures():
    table = {(c.x, c.y): c for c in correlation_table(VALUES)}
    assert list(table) == default_correlation_pairs(5)
    c = table[("acc@5", "coe")]
    x = [VALUES[s]["acc@5"] for s in c.systems]
    y = [VALUES[s]["coe"] for s in c.systems]
    assert c.n == 4
    assert c.pearson_r == pytest.approx(pearsonr(x, y).statistic)
    assert c.pearson_p == pytest.approx(pearsonr(x, y).pvalue)
    assert c.spearman_rho == pytest.approx(spearmanr(x, y).statistic)
    assert c.spearman_p == pytest.approx(spearmanr(x, y).pvalue)
    assert table[("acc@5", "isoscore")].systems == ("base", "pt", "ft")  # ptft lacks isoscore


def test_too_few_systems_or_constant_give_nan():
    two = {s: VALUES[s] for s in ("base", "pt")}
    c = correlation_table(two, [("acc@5", "coe")])[0]
    assert c.n == 2 and np.isnan(c.pearson_r)
    const = {s: {"a": 1.0, "b": float(i)} for i, s in enumerate("xyz")}
    assert np.isnan(correlation_table(const, [("a", "b")])[0].spearman_rho)
    with pytest.raises(ConfigError):
        correlation_table(VALUES, min_systems=1)


def test_measure_values_and_rows():
    rows = [
        {"system": "a", "measure": "acc@5", "value": 0.5, "boot_mean": 0.52, "compared_to": None},
        {"system": "a", "measure": "acc@5", "value": 0.1, "boot_mean": 0.1, "compared_to": "b"},
        {"system": "a", "measure": "isoscore", "value": 0.3, "boot_mean": None, "compared_to": None},
    ]
    assert measure_values(rows) == {"a": {"acc@5": 0.52, "isoscore": 0.3}}
    assert measure_values(rows, prefer="value") == {"a": {"acc@5": 0.5, "isoscore": 0.3}}
    c = correlation_table(VALUES, [("acc@5", "coe")])[0]
    out = c.to_metric_rows("telecom")
    assert [r["measure"] for r in out] == ["pearson", "spearman"] and out[0]["system"] == "*"
    assert out[0]["p_value"] == pytest.approx(c.pearson_p)
