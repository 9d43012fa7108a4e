"""The sign-flip test of issue 29: exact counts equal brute-force enumeration and SciPy, and the
Monte Carlo resolution fits the family, so clearly different systems are all found different
whatever the number of pairs."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest

from adaptlab.stats import adjust_pvalues, paired_bootstrap
from adaptlab.stats.signflip import (
    EXACT_MAX_N,
    FAMILY_ALPHA,
    RESOLUTION,
    exact_sign_flip_p,
    family_sign_flip,
    flip_count,
)


def _enumerated(d: np.ndarray) -> float:
    """The exact p-value by listing all 2**n sign patterns (small n only)."""
    signs = ((np.arange(2**d.size)[:, None] >> np.arange(d.size)) & 1) * 2.0 - 1.0
    return float(np.mean(np.abs(signs @ d) >= abs(d.sum()) - 1e-9))


def test_exact_counts_equal_enumeration_and_the_sign_test() -> None:
    rng = np.random.default_rng(0)
    for n in (1, 2, 5, 9, 13):
        d = rng.normal(size=n)  # no common unit: meet in the middle
        assert exact_sign_flip_p(d) == pytest.approx(_enumerated(d), abs=1e-12)
        mrr = 1.0 / rng.integers(1, 11, size=n) - 1.0 / rng.integers(1, 11, size=n)  # MRR@10: multiples of 1/2520
        assert exact_sign_flip_p(mrr) == pytest.approx(_enumerated(mrr), abs=1e-12)
    acc = np.r_[np.ones(40), -np.ones(22), np.zeros(300)]  # 0/1 measure: the sign test
    assert exact_sign_flip_p(acc) == pytest.approx(binomtest(40, 62).pvalue, rel=1e-9)
    graded = 1.0 / np.log2(rng.integers(2, 12, size=EXACT_MAX_N + 1))
    assert exact_sign_flip_p(graded[:EXACT_MAX_N]) is not None and exact_sign_flip_p(graded) is None
    assert exact_sign_flip_p(np.zeros(5)) == 1.0


def test_lattice_and_middle_counts_agree_on_twenty_differences() -> None:
    """The issue's case: 20 non-zero differences get the exact p-value, by either count."""
    rng = np.random.default_rng(1)
    d = 1.0 / rng.integers(1, 11, size=20) - 1.0 / rng.integers(1, 11, size=20) + 1e-3 * 0  # MRR-like
    d = d[d != 0]
    from adaptlab.stats.signflip import _middle_p

    assert exact_sign_flip_p(d) == pytest.approx(_middle_p(d, 1e-10 * np.abs(d).sum()), abs=1e-12)


def test_the_floor_of_every_family_up_to_300_pairs_is_far_below_alpha() -> None:
    """With every pair at the Monte Carlo floor 1/(N+1), Holm's largest adjusted p is K/(N+1):
    at most alpha/RESOLUTION for every family size (with 1,000 vectors it passed 0.05 at K = 51)."""
    for k in range(1, 301):
        n = flip_count(1000, k)
        assert k / (n + 1) <= FAMILY_ALPHA / RESOLUTION
    assert 51 / 1001 > FAMILY_ALPHA


def _clearly_different(n_systems: int, q: int, seed: int) -> np.ndarray:
    """nDCG@10-like values with one gold document: system s finds it at a rank drawn from the
    same uniform per query (common random numbers), better systems never worse on a query, mean
    nDCG@10 from about 0.3 to 0.95; graded differences, so the test is the Monte Carlo one."""
    u = np.random.default_rng(seed).random(q)
    p = np.linspace(0.1, 0.9, n_systems)[:, None]
    rank = np.maximum(1.0, np.ceil(np.log(u[None, :]) / np.log1p(-p)))
    return np.where(rank <= 10, 1.0 / np.log2(rank + 1.0), 0.0)


@pytest.mark.parametrize("n_systems", [2, 3, 5, 11, 12, 25])
def test_clearly_different_systems_are_all_significant_at_every_family_size(n_systems: int) -> None:
    """All pairs of 2 to 25 systems (1 to 300 pairs) and every system against a baseline: system
    s scores ``base_q + s delta_q`` (``delta_q`` in [0.01, 0.02], irrational: no exact count),
    so every pair differs on every one of 40 queries, and no sign vector but the observed ones
    reaches its sum."""
    rng = np.random.default_rng(n_systems)
    v = rng.random(40)[None, :] + np.arange(n_systems)[:, None] * rng.uniform(0.01, 0.02, 40)[None, :]
    pairs = [(i, j) for i in range(n_systems) for j in range(i + 1, n_systems)]
    res = family_sign_flip(v, pairs, 1000, np.random.default_rng(0))
    assert res.n_vectors == flip_count(1000, len(pairs))
    assert (adjust_pvalues(res.p, "holm") < FAMILY_ALPHA).all()
    base = paired_bootstrap(v, baseline=0, n_resamples=1000, seed=0)
    assert (adjust_pvalues([d.p_value for d in base], "holm") < FAMILY_ALPHA).all()


def test_the_footer_counts_and_the_stream_are_the_family_s() -> None:
    v = _clearly_different(4, 60, seed=3)
    out = paired_bootstrap(v, n_resamples=1000, seed=5)
    mc = [d for d in out if d.test == "sign-flip"]
    assert mc and {d.p_draws for d in mc} == {flip_count(1000, 6)}
    assert all(d.p_draws == 0 for d in out if d.test == "sign-flip-exact")
    again = paired_bootstrap(v, n_resamples=1000, seed=5)
    assert [d.p_value for d in again] == [d.p_value for d in out]


def test_family_size_sizes_the_vectors_for_one_test_when_asked() -> None:
    """plan_sample_size simulates many single tests in one call: family_size=1 sizes the vectors
    for one test (max(m, 400)), not for the call's pairs."""
    v = _clearly_different(6, 60, seed=4)
    one = paired_bootstrap(v, baseline=0, n_resamples=99, seed=0, family_size=1)
    assert {d.p_draws for d in one if d.test == "sign-flip"} == {flip_count(99, 1)} == {400}
    from adaptlab.errors import ConfigError

    with pytest.raises(ConfigError, match="family_size"):
        paired_bootstrap(v, n_resamples=99, family_size=0)
