"""The exact multinomial sampler (adaptlab.stats._multinomial): lookup exactness, Poisson laws,
multinomial laws by full enumeration, moments, tails."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from adaptlab.stats import _multinomial as mm
from adaptlab.stats._multinomial import PoissonTables, _poisson_tail, multinomial_sums

LAMS = np.array([1e-9, 0.003, 0.7, 3.0, 12.5, 44.0, 80.0, 1000.0, 52000.0, 7.3e5])


class _RecordingBits:
    """Stands in for ``rng.bit_generator``: real random words, recorded for replay."""

    def __init__(self, seed: int) -> None:
        self._g = np.random.Generator(np.random.PCG64(seed))
        self.calls: list[np.ndarray] = []

    def random_raw(self, n: int) -> np.ndarray:
        a = self._g.bit_generator.random_raw(n)
        self.calls.append(a.copy())
        return a


class _RecordingRng:
    def __init__(self, seed: int) -> None:
        self.bit_generator = _RecordingBits(seed)


@pytest.fixture(scope="module", params=["fine", "coarse"])
def tables(request: pytest.FixtureRequest) -> PoissonTables:
    """Default guides, and guides capped to few buckets (most draws take the slow path)."""
    if request.param == "fine":
        return PoissonTables(LAMS)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(mm, "_MAX_BUCKETS", 1 << 10)
        t = PoissonTables(LAMS)
    assert t.n_buckets <= 1 << 10
    return t


def test_every_draw_equals_reference_inversion(tables: PoissonTables) -> None:
    """Replay the random bits: each draw must be the inverse CDF of its 53-bit uniform."""
    n = 4000
    for seed in range(3):
        rng = _RecordingRng(seed)
        out = tables.sample(rng, n)  # type: ignore[arg-type]
        first, *rest = rng.bit_generator.calls
        r16 = first.view(np.uint16)[: tables.size * n].reshape(tables.size, n).astype(np.float64)
        j = np.add(
            first.view(np.uint16)[: tables.size * n].reshape(tables.size, n) >> tables._shift,
            tables._g_off,
            dtype=np.intp,
        )
        amb = np.flatnonzero(np.take(tables._gval, j).reshape(-1) < 0)
        u = (r16 * 2.0**37).reshape(-1) * 2.0**-53  # lower edge of each draw's bucket
        u_top = ((r16 + 1) * 2.0**37 - 1).reshape(-1) * 2.0**-53  # upper edge
        if rest:
            u[amb] = (r16.reshape(-1)[amb] * 2.0**37 + (rest[0] >> np.uint64(27))) * 2.0**-53
        u, u_top = u.reshape(tables.size, n), u_top.reshape(tables.size, n)
        unamb = np.ones((tables.size, n), bool)
        unamb.reshape(-1)[amb] = False
        for k, lam in enumerate(LAMS):
            a = tables._c_off[k]
            b = a + (tables.hi[k] - tables.lo[k]) + 2
            cdf = tables._cdf[a : b + 1]
            e = np.searchsorted(cdf, u[k], side="right")
            ref = tables._evalue[a + e]
            tail = ref < 0
            ref[tail] = stats.poisson.ppf(u[k][tail], lam)
            np.testing.assert_array_equal(out[k], ref)
            # an unambiguous bucket maps its whole u-range to one table entry
            e_top = np.searchsorted(cdf, u_top[k][unamb[k]], side="right")
            np.testing.assert_array_equal(e_top, e[unamb[k]])


def test_poisson_draws_follow_the_poisson_law(tables: PoissonTables) -> None:
    x = tables.sample(np.random.default_rng(11), 100_000)
    for k, lam in enumerate(LAMS):
        xs = x[k].astype(np.int64)
        lo, hi = int(stats.poisson.ppf(1e-7, lam)), int(stats.poisson.ppf(1 - 1e-7, lam))
        edges = np.unique(np.linspace(lo, hi + 1, min(40, hi - lo + 2)).round().astype(np.int64))
        obs = np.histogram(xs, bins=np.append(edges, np.iinfo(np.int64).max))[0]
        expected = np.diff(np.append(stats.poisson.cdf(edges - 1, lam), 1.0)) * xs.size
        keep = expected > 5
        if keep.sum() < 2:  # essentially a point mass at 0
            assert (xs == 0).mean() == pytest.approx(stats.poisson.pmf(0, lam), abs=1e-3)
            continue
        chi2 = float(((obs[keep] - expected[keep]) ** 2 / expected[keep]).sum())
        assert stats.chi2.sf(chi2, keep.sum() - 1) > 1e-4, (lam, chi2)


def _ref_inverse(u: float, lam: float) -> int:
    """Smallest x with u < P(X <= x), via the CDF (lower half) or survival function (upper)."""
    x = int(stats.poisson.ppf(u, lam))
    if u < 0.5:
        while x > 0 and stats.poisson.cdf(x - 1, lam) > u:
            x -= 1
        while stats.poisson.cdf(x, lam) <= u:
            x += 1
        return x
    x = max(x - 3, 0)
    while stats.poisson.sf(x, lam) >= 1.0 - u:
        x += 1
    return x


def test_table_tails_use_exact_inversion() -> None:
    t = PoissonTables(np.array([400.0, 3.0]))
    for k, lam in enumerate([400.0, 3.0]):
        for u in (1e-15, 1e-11, 0.3, 0.5, 0.9, 1 - 1e-10, 1 - 1e-13):
            assert t._invert(k, u) == _ref_inverse(u, lam), (lam, u)
    # the scalar tail walkers directly (window [300, 460] excludes these quantiles)
    assert _poisson_tail(1e-15, 400.0, 330, 500, upper=False) == _ref_inverse(1e-15, 400.0)
    assert _poisson_tail(1 - 1e-13, 400.0, 300, 460, upper=True) == _ref_inverse(1 - 1e-13, 400.0)


def test_rejects_bad_means() -> None:
    for bad in ([], [0.0], [-1.0], [np.inf], [[1.0]]):
        with pytest.raises(ValueError):
            PoissonTables(np.array(bad))


def _exact_pmf(l: int, p: np.ndarray) -> dict[tuple[int, ...], float]:
    out = {}
    for n in itertools.product(range(l + 1), repeat=p.size):
        if sum(n) == l:
            terms = (pk**nk / math.factorial(nk) for pk, nk in zip(p, n))
            out[n] = math.factorial(l) * math.prod(terms)
    return out


@pytest.mark.parametrize("counts,l", [([1, 2, 5], 5), ([3, 3, 1, 1], 4), ([7, 1], 9)])
def test_multinomial_law_by_full_enumeration(counts: list[int], l: int) -> None:
    """Every outcome of Multinomial(l, counts/Q) appears with its exact probability."""
    counts_a = np.asarray(counts, dtype=np.float64)
    p = counts_a / counts_a.sum()
    b = 60_000
    n = multinomial_sums(counts_a, np.eye(p.size), l, b, np.random.default_rng(3)).astype(np.int64)
    assert np.all(n.sum(axis=1) == l)
    pmf = _exact_pmf(l, p)
    outcomes, freq = np.unique(n, axis=0, return_counts=True)
    observed = dict(zip(map(tuple, outcomes), freq))
    exp = np.array(list(pmf.values())) * b
    obs = np.array([observed.get(k, 0) for k in pmf])
    keep = exp > 5
    chi2 = float(((obs[keep] - exp[keep]) ** 2 / exp[keep]).sum()) + float(
        (obs[~keep].sum() - exp[~keep].sum()) ** 2 / max(exp[~keep].sum(), 1e-9)
    ) * (exp[~keep].sum() > 5)
    assert stats.chi2.sf(chi2, keep.sum()) > 1e-4, chi2


def test_multinomial_moments_large_l() -> None:
    counts = np.array([3.0, 30.0, 300.0, 667.0])
    p = counts / counts.sum()
    l, b = 2000, 20_000
    n = multinomial_sums(counts, np.eye(4), l, b, np.random.default_rng(5))
    assert np.all(n.sum(axis=1) == l)
    mean_se = np.sqrt(l * p * (1 - p) / b)
    np.testing.assert_array_less(np.abs(n.mean(axis=0) - l * p), 5 * mean_se)
    var = l * p * (1 - p)
    var_se = var * np.sqrt(2.0 / b)  # ~normal: SE of a sample variance
    np.testing.assert_array_less(np.abs(n.var(axis=0) - var), 5 * var_se + 0.02 * var)
    cov = np.cov(n[:, 2], n[:, 3])[0, 1]
    assert cov == pytest.approx(-l * p[2] * p[3], rel=0.06)


def test_weighted_sums_and_single_category() -> None:
    w = np.array([[0.5, 1.0], [2.0, 1.0]])
    s = multinomial_sums(np.array([2.0, 6.0]), w, 10, 1000, np.random.default_rng(0))
    assert np.all(s[:, 1] == 10)  # second column counts draws
    assert np.all((s[:, 0] >= 5.0) & (s[:, 0] <= 20.0))
    one = multinomial_sums(np.array([4.0]), np.array([[0.25]]), 7, 5, np.random.default_rng(0))
    np.testing.assert_array_equal(one, np.full((5, 1), 1.75))
