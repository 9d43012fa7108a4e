"""bootstrap_ci / paired_bootstrap: results, agreement with scipy and between the exact paths
(tolerances from the Monte Carlo standard error of a bootstrap quantile), pairing, p-values,
validation."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from adaptlab.errors import ConfigError, DataError
from adaptlab.stats import (
    PERMUTATION_Q,
    BootstrapResult,
    PairedDifference,
    bootstrap_ci,
    paired_bootstrap,
    resample_indices,
)

CONF = 0.95


def ndcg_like(n_queries: int, n_systems: int, seed: int) -> np.ndarray:
    """nDCG@10 with one gold document: 11 distinct values, correlated systems."""
    rng = np.random.default_rng(seed)
    z = np.linspace(-0.3, 0.6, n_systems)[:, None] - rng.normal(size=n_queries)
    z = z + 0.8 * rng.normal(size=(n_systems, n_queries))
    rank = np.clip(np.ceil((0.6 - z) / 0.18), 1, 11).astype(int)  # 11 = missed
    return np.where(rank <= 10, 1.0 / np.log2(rank + 1.0), 0.0)


def quantile_mc_se(boot: np.ndarray, b: int, alpha: float = 0.025) -> float:
    """MC standard error of the alpha-quantile of b bootstrap means (normal density at it):
    sqrt(alpha (1 - alpha) / b) / f(q_alpha), f = phi(z_alpha) / sd*."""
    z = stats.norm.ppf(alpha)
    return float(np.std(boot) * np.sqrt(alpha * (1 - alpha) / b) / stats.norm.pdf(z))


@pytest.fixture(scope="module")
def values() -> np.ndarray:
    return ndcg_like(400, 3, seed=7)


# ----------------------------------------------------------------------------- results
def test_result_fields_and_row(values: np.ndarray) -> None:
    r = bootstrap_ci(values, n_resamples=500, seed=1)
    assert isinstance(r, BootstrapResult) and r.n_systems == 3
    for arr in (r.point, r.boot_mean, r.ci_low, r.ci_high):
        assert arr.shape == (3,)
    np.testing.assert_allclose(r.point, values.mean(axis=1))
    assert np.all(r.ci_low < r.point) and np.all(r.point < r.ci_high)
    meta = (r.n_queries, r.n_resamples, r.sample_size, r.seed, r.confidence)
    assert meta == (400, 500, 400, 1, CONF)
    row = r.row(2)
    assert row["system"] == 2 and row["ci_low"] == float(r.ci_low[2]) and row["method"] == r.method
    with pytest.raises(AttributeError):
        r.seed = 3  # type: ignore[misc]  # frozen


def test_one_dimensional_input_and_hand_checkable_cases() -> None:
    r = bootstrap_ci([0.0, 1.0, 1.0, 1.0], n_resamples=200, seed=0)
    assert r.point == 0.75
    const = bootstrap_ci(np.full(50, 0.3), n_resamples=100)
    assert const.ci_low == pytest.approx(0.3) and const.ci_high == pytest.approx(0.3)
    # two queries, values 0 and 1, resamples of 2: means 0, .5, 1 with prob 1/4, 1/2, 1/4
    two = bootstrap_ci([0.0, 1.0], n_resamples=4000, seed=3, keep_distribution=True, interval="percentile")
    assert two.distribution is not None
    freq = np.array([(two.distribution == v).mean() for v in (0.0, 0.5, 1.0)])
    np.testing.assert_allclose(freq, [0.25, 0.5, 0.25], atol=0.03)
    assert (two.ci_low, two.ci_high) == (0.0, 1.0)


@pytest.mark.parametrize("method", ["index", "multinomial"])
def test_one_system_gives_floats_and_no_system_axis(values: np.ndarray, method: str) -> None:
    kw = dict(n_resamples=60, seed=4, method=method, keep_distribution=True)
    one = bootstrap_ci(values[1], **kw)  # [n_queries]
    row = bootstrap_ci(values[1:2], **kw)  # [1, n_queries]: the system axis stays
    for name in ("point", "boot_mean", "ci_low", "ci_high"):
        got, ref = getattr(one, name), getattr(row, name)
        assert type(got) is float and ref.shape == (1,) and got == ref[0], name  # same numbers
    assert one.scalar and not row.scalar and one.n_systems == row.n_systems == 1
    assert one.distribution.shape == (60,) and row.distribution.shape == (1, 60)
    np.testing.assert_array_equal(one.distribution, row.distribution[0])
    assert one.row() == {k: v for k, v in row.row(0).items() if k != "system"}
    assert "system" not in one.row() and row.row(0)["system"] == 0
    with pytest.raises(ConfigError, match=r"no system axis .* call row\(\)"):
        one.row(0)
    with pytest.raises(ConfigError, match=r"give a system index in 0\.\.0"):
        row.row()


def test_paper_setting_m500_l100(values: np.ndarray) -> None:
    r = bootstrap_ci(values, n_resamples=500, sample_size=100, seed=0)
    assert r.sample_size == 100 and r.n_resamples == 500
    full = bootstrap_ci(values, n_resamples=500, seed=0)
    assert np.all(r.ci_high - r.ci_low > 1.5 * (full.ci_high - full.ci_low))  # ~ sqrt(400/100)


# ----------------------------------------------------------------------------- agreement
@pytest.mark.parametrize("method", ["index", "multinomial"])
def test_ci_matches_scipy_percentile_bootstrap(values: np.ndarray, method: str) -> None:
    b = 4000
    ours = bootstrap_ci(values, n_resamples=b, seed=2, method=method, keep_distribution=True)
    for s in range(values.shape[0]):
        ref = stats.bootstrap(
            (values[s],),
            np.mean,
            n_resamples=b,
            vectorized=True,
            method="percentile",
            random_state=np.random.default_rng(s),
        )
        tol = 4 * np.sqrt(2) * quantile_mc_se(ours.distribution[s], b)  # two independent runs
        assert abs(ours.ci_low[s] - ref.confidence_interval.low) < tol
        assert abs(ours.ci_high[s] - ref.confidence_interval.high) < tol
        se_b = float(np.std(ours.distribution[s]))
        assert abs(ours.boot_mean[s] - values[s].mean()) < 4 * se_b / np.sqrt(b)


@pytest.mark.parametrize("l", [None, 60])
def test_index_and_multinomial_paths_agree_in_distribution(values: np.ndarray, l: int | None) -> None:
    b = 4000
    kw = dict(n_resamples=b, sample_size=l, keep_distribution=True)
    a = bootstrap_ci(values, seed=5, method="index", **kw)
    m = bootstrap_ci(values, seed=6, method="multinomial", **kw)
    for s in range(values.shape[0]):
        tol = 4 * np.sqrt(2) * quantile_mc_se(a.distribution[s], b)
        assert abs(a.ci_low[s] - m.ci_low[s]) < tol and abs(a.ci_high[s] - m.ci_high[s]) < tol
        assert stats.ks_2samp(a.distribution[s], m.distribution[s]).pvalue > 1e-3


def test_auto_picks_the_cheaper_path() -> None:
    few = ndcg_like(5000, 2, seed=1)
    assert bootstrap_ci(few, n_resamples=2000).method == "multinomial"
    cont = np.random.default_rng(0).random((2, 5000))
    assert bootstrap_ci(cont, n_resamples=200).method == "index"
    tiny = bootstrap_ci(few[:, :50], n_resamples=100, sample_size=20)
    assert tiny.method in ("index", "multinomial")


@pytest.mark.parametrize("method", ["index", "multinomial"])
def test_deterministic_and_thread_independent(values: np.ndarray, method: str) -> None:
    r1 = bootstrap_ci(values, n_resamples=300, seed=11, method=method, n_jobs=1)
    r2 = bootstrap_ci(values, n_resamples=300, seed=11, method=method, n_jobs=2)
    np.testing.assert_array_equal(r1.ci_low, r2.ci_low)
    np.testing.assert_array_equal(r1.boot_mean, r2.boot_mean)
    p1 = paired_bootstrap(values, n_resamples=300, seed=11, method=method, n_jobs=1)
    p2 = paired_bootstrap(values, n_resamples=300, seed=11, method=method, n_jobs=2)
    assert p1 == p2


# ----------------------------------------------------------------------------- paired
def test_pairs_order_names_and_baseline(values: np.ndarray) -> None:
    res = paired_bootstrap(values, n_resamples=200, names=["x", "y", "z"])
    assert [(d.a, d.b) for d in res] == [("x", "y"), ("x", "z"), ("y", "z")]
    assert all(isinstance(d, PairedDifference) for d in res)
    assert res[0].diff == pytest.approx(values[0].mean() - values[1].mean())
    base = paired_bootstrap(values, n_resamples=200, baseline=1)
    assert [(d.a, d.b) for d in base] == [(0, 1), (2, 1)]
    named = paired_bootstrap(values, n_resamples=200, names=["x", "y", "z"], baseline="z")
    assert [(d.a, d.b) for d in named] == [("x", "z"), ("y", "z")]
    assert named[0].as_dict()["n_resamples"] == 200


@pytest.mark.parametrize("method", ["index", "multinomial"])
def test_explicit_pairs_equal_the_baseline_pairs_they_name(values: np.ndarray, method: str) -> None:
    names = ["x", "y", "z"]
    base = paired_bootstrap(values, n_resamples=300, seed=4, names=names, baseline="x", method=method)
    listed = paired_bootstrap(
        values, n_resamples=300, seed=4, names=names, pairs=[("y", "x"), ("z", "x")], method=method
    )
    assert listed == base
    mixed = paired_bootstrap(values, n_resamples=300, seed=4, names=names, pairs=[("z", "y"), (0, 2)], method=method)
    assert [(d.a, d.b) for d in mixed] == [("z", "y"), ("x", "z")]
    assert mixed[0].diff == pytest.approx(values[2].mean() - values[1].mean())


@pytest.mark.parametrize(
    "kw",
    [
        dict(pairs=[("x", "x")]),
        dict(pairs=[("x", "q")]),
        dict(pairs=[]),
        dict(pairs=[("x", "y"), ("x", "y")]),
        dict(pairs=["xy"]),
        dict(pairs=[("x", "y")], baseline="z"),
        dict(pairs=[(0, 7)]),
    ],
)
def test_bad_pairs_are_config_errors(values: np.ndarray, kw: dict) -> None:
    with pytest.raises(ConfigError, match="pairs|baseline"):
        paired_bootstrap(values, n_resamples=50, names=["x", "y", "z"], **kw)


def test_p_value_definition_matches_resampled_differences() -> None:
    b = 999
    values = ndcg_like(PERMUTATION_Q, 3, seed=4)  # the bootstrap p-value from PERMUTATION_Q queries on
    # ... asked for with test="bootstrap"; the default is the sign-flip test at every Q
    res = [
        paired_bootstrap(
            values, pairs=[p], n_resamples=b, seed=3, method="index", interval="percentile", test="bootstrap"
        )[0]
        for p in [(0, 1), (0, 2), (1, 2)]
    ]
    assert {d.test for d in paired_bootstrap(values, n_resamples=b, seed=3)} <= {"sign-flip", "sign-flip-exact"}
    dist = bootstrap_ci(values, n_resamples=b, seed=3, method="index", keep_distribution=True).distribution
    for d in res:
        ds = dist[d.a] - dist[d.b]
        p = min(1.0, 2 * (min((ds <= 0).sum(), (ds >= 0).sum()) + 1) / (b + 1))
        assert d.p_value == pytest.approx(p) and d.test == "bootstrap"
        assert d.boot_mean == pytest.approx(ds.mean())
        assert (d.ci_low, d.ci_high) == pytest.approx(tuple(np.quantile(ds, [0.025, 0.975])))


@pytest.mark.parametrize("method", ["index", "multinomial"])
def test_p_value_extremes(method: str) -> None:
    base = ndcg_like(300, 1, seed=2)[0]
    same = paired_bootstrap(np.stack([base, base]), n_resamples=400, method=method)[0]
    assert (same.diff, same.ci_low, same.ci_high, same.p_value) == (0.0, 0.0, 0.0, 1.0)
    better = paired_bootstrap(np.stack([base + 0.01, base]), n_resamples=400, method=method)[0]
    # the sign-flip test, exact here (300 equal differences): only the two
    # all-same sign patterns of 2**300 reach the observed sum
    assert better.test == "sign-flip-exact" and better.p_value == pytest.approx(2.0**-299) and better.ci_low > 0
    assert better.p_draws == 0
    big = ndcg_like(PERMUTATION_Q, 1, seed=2)[0]
    # at PERMUTATION_Q queries and beyond the same test (earlier versions switched to the bootstrap p)
    better = paired_bootstrap(np.stack([big + 0.01, big]), n_resamples=999, method=method)[0]
    assert better.test == "sign-flip-exact" and better.p_value == pytest.approx(2.0 ** -(PERMUTATION_Q - 1))
    asked = paired_bootstrap(np.stack([big + 0.01, big]), n_resamples=999, method=method, test="bootstrap")[0]
    assert asked.test == "bootstrap" and asked.p_value == pytest.approx(2 / 1000) and asked.p_draws == 999
    assert asked.p_bound and not better.p_bound


def test_pairing_narrows_the_interval() -> None:
    """A paired CI follows sd(a - b), not sd(a) and sd(b) separately."""
    rng = np.random.default_rng(4)
    base = rng.random(3000)
    a, b = base + 0.02 * rng.random(3000), base + 0.02 * rng.random(3000) - 0.005
    d = paired_bootstrap(np.stack([a, b]), n_resamples=3000, seed=1)[0]
    z = stats.norm.ppf(0.975)
    expected = 2 * z * np.std(a - b) / np.sqrt(3000)
    assert d.ci_high - d.ci_low == pytest.approx(expected, rel=0.1)
    unpaired = 2 * z * np.sqrt(np.var(a) + np.var(b)) / np.sqrt(3000)
    assert d.ci_high - d.ci_low < unpaired / 10


@pytest.mark.parametrize("n_sys,expect,l", [(3, "multinomial", None), (2, None, None), (4, "multinomial", 150)])
def test_paired_multinomial_agrees_with_index(n_sys: int, expect: str | None, l: int | None) -> None:
    b = 4000
    vals = ndcg_like(600, n_sys, seed=9)
    if n_sys == 3:  # binary accuracy-like values (earlier versions drew them over the joint tuples)
        vals = (vals > 0.4).astype(float)
    m = paired_bootstrap(vals, n_resamples=b, sample_size=l, seed=1, method="multinomial")
    i = paired_bootstrap(vals, n_resamples=b, sample_size=l, seed=2, method="index")
    if expect:
        assert m[0].method == expect
    dist = bootstrap_ci(vals, n_resamples=b, sample_size=l, seed=2, method="index", keep_distribution=True).distribution
    for dm, di in zip(m, i):
        tol = 4 * np.sqrt(2) * quantile_mc_se(dist[di.a] - dist[di.b], b)
        assert abs(dm.ci_low - di.ci_low) < tol and abs(dm.ci_high - di.ci_high) < tol
        assert dm.diff == di.diff


def test_pairwise_multinomial_path_is_used_for_many_joint_tuples() -> None:
    vals = ndcg_like(3000, 6, seed=3)
    res = paired_bootstrap(vals, n_resamples=1000, method="multinomial")
    assert res[0].method == "multinomial" and len(res) == 15


# ----------------------------------------------------------------------------- validation
def test_nan_is_a_clear_data_error() -> None:
    v = np.zeros((2, 5))
    v[1, 3] = np.nan
    with pytest.raises(DataError, match=r"values\[1, 3\] is nan"):
        bootstrap_ci(v)
    with pytest.raises(DataError, match=r"values\[2\]"):
        bootstrap_ci([0.1, 0.2, np.inf])
    with pytest.raises(DataError, match="shape"):
        bootstrap_ci(np.zeros((2, 2, 2)))
    with pytest.raises(DataError):
        bootstrap_ci([])
    with pytest.raises(DataError, match="at least 2 systems"):
        paired_bootstrap([0.1, 0.2])
    with pytest.raises(DataError):
        bootstrap_ci(["a", "b"])


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(confidence=1.0),
        dict(confidence=0),
        dict(confidence=True),
        dict(method="exact"),
        dict(backend="tpu"),
        dict(n_jobs=0),
        dict(n_resamples=0),
        dict(sample_size=-2),
        dict(seed=1.5),
    ],
)
def test_invalid_options_are_config_errors(kwargs: dict) -> None:
    with pytest.raises(ConfigError):
        bootstrap_ci([0.1, 0.2, 0.3], **kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(names=["a"]),
        dict(names=["a", "a"]),
        dict(baseline=5),
        dict(baseline="q"),
        dict(baseline="q", names=["a", "b"]),
        dict(baseline=1.0),
    ],
)
def test_invalid_paired_options(kwargs: dict) -> None:
    with pytest.raises(ConfigError):
        paired_bootstrap(np.zeros((2, 4)), **kwargs)


def test_resample_indices_match_index_path_for_paired(values: np.ndarray) -> None:
    idx = resample_indices(values.shape[1], n_resamples=50, seed=8)
    res = paired_bootstrap(values[:2], n_resamples=50, seed=8, method="index")[0]
    ds = values[0, idx].mean(axis=1) - values[1, idx].mean(axis=1)
    assert res.boot_mean == pytest.approx(ds.mean(), abs=1e-12)
