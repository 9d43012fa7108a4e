"""Coverage of every interval method (issue 23).

For 0/1 values (accuracy@k) a data set is summarised by its number of hits k, so the coverage at
(Q, p) is computed exactly, ``sum_k Binom(k; Q, p) 1[p in CI(k)]``, with each CI computed once
per k; the bootstrap methods draw their resampled means exactly (Binomial(Q, k/Q) / Q), so
their only error is the bootstrap's own Monte Carlo error. Graded values (nDCG-like) are
simulated. The default interval of accuracy must cover >= 0.93 on the grid
p in {0.9, 0.95, 0.98} x Q in {30, 100, 1000}; the percentile interval is shown to fail near 1,
which is why it is no longer the default for 0/1 measures.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import scipy.stats as ss

from adaptlab.stats import bootstrap_ci, percentile_interval
from adaptlab.stats.intervals import bca_interval, jeffreys_interval, wilson_interval

GRID_Q = (30, 100, 1000)
GRID_P = (0.5, 0.9, 0.95, 0.98)
CONF = 0.95
M = 1000  # bootstrap resamples per CI


def _ones(k: int, q: int) -> np.ndarray:
    return np.r_[np.ones(k), np.zeros(q - k)]


def _boot(k: int, q: int, rng: np.random.Generator) -> np.ndarray:
    """Resampled means of k ones among q values: exactly Binomial(q, k/q) / q."""
    return rng.binomial(q, k / q, size=M) / q


def _method(name: str) -> Callable[[int, int, np.random.Generator], tuple[float, float]]:
    def default(k: int, q: int, rng: np.random.Generator) -> tuple[float, float]:
        r = bootstrap_ci(
            _ones(k, q), n_resamples=200, seed=int(rng.integers(2**31)), measure="acc@1"
        )  # the shipped default of a 0/1 measure
        return r.ci_low, r.ci_high

    def percentile(k: int, q: int, rng: np.random.Generator) -> tuple[float, float]:
        lo, hi = percentile_interval(_boot(k, q, rng), CONF)
        return float(lo), float(hi)

    def bca(k: int, q: int, rng: np.random.Generator) -> tuple[float, float]:
        return bca_interval(_ones(k, q), _boot(k, q, rng), CONF) if 0 < k < q else (k / q, k / q)

    return {
        "default": default,
        "percentile": percentile,
        "bca": bca,
        "wilson": lambda k, q, rng: wilson_interval(_ones(k, q), CONF),
        "jeffreys": lambda k, q, rng: jeffreys_interval(_ones(k, q), CONF),
    }[name]


def _coverage(name: str, q: int, seed: int = 0) -> dict[float, float]:
    """Exact-in-k coverage at every p of GRID_P (k outside the 1e-12 tails skipped)."""
    rng = np.random.default_rng(seed)
    ks = np.arange(q + 1)
    pmf = {p: ss.binom.pmf(ks, q, p) for p in GRID_P}
    needed = np.flatnonzero(np.max(list(pmf.values()), axis=0) > 1e-12)
    f = _method(name)
    ends = {int(k): f(int(k), q, rng) for k in needed}
    return {p: float(sum(pmf[p][k] for k, (lo, hi) in ends.items() if lo <= p <= hi)) for p in GRID_P}


@pytest.mark.parametrize("q", GRID_Q)
def test_default_interval_of_accuracy_covers_on_the_grid(q: int) -> None:
    cov = _coverage("default", q)
    print(f"default (auto -> wilson) Q={q}: " + ", ".join(f"p={p}: {c:.3f}" for p, c in cov.items()))
    assert min(cov.values()) >= 0.93


@pytest.mark.parametrize("q", GRID_Q)
def test_wilson_and_jeffreys_cover_on_the_grid(q: int) -> None:
    for name in ("wilson", "jeffreys"):
        cov = _coverage(name, q)
        print(f"{name} Q={q}: " + ", ".join(f"p={p}: {c:.3f}" for p, c in cov.items()))
        assert min(cov.values()) >= 0.93 and max(cov.values()) <= 0.99


@pytest.mark.parametrize("name", ["percentile", "bca"])
def test_bootstrap_intervals_cover_away_from_the_boundary_and_fail_near_it(name: str) -> None:
    """Nominal within ~1.5 points at p = 0.5 and at Q = 1000; far below it at p = 0.98, Q = 30
    (the reason 0/1 measures default to Wilson)."""
    for q in GRID_Q:
        cov = _coverage(name, q, seed=q)
        print(f"{name} Q={q}: " + ", ".join(f"p={p}: {c:.3f}" for p, c in cov.items()))
        assert cov[0.5] >= 0.935
        if q == 1000:
            assert min(cov.values()) >= 0.935
    assert _coverage(name, 30)[0.98] < 0.6


def _graded(q: int, reps: int, rng: np.random.Generator) -> tuple[np.ndarray, float]:
    """``reps`` data sets of q nDCG-like values 1/log2(rank + 1) (rank ~ Geometric(0.4), 0 past
    rank 10) and their true mean."""
    ranks = np.arange(1, 11)
    true = float((ss.geom.pmf(ranks, 0.4) / np.log2(ranks + 1.0)).sum())
    r = rng.geometric(0.4, size=(reps, q))
    return np.where(r <= 10, 1.0 / np.log2(r + 1.0), 0.0), true


@pytest.mark.parametrize("q", [30, 100])
def test_percentile_and_bca_cover_graded_values(q: int) -> None:
    """Simulated: 1000 data sets, the default interval (percentile for graded values) and BCa,
    coverage at least nominal minus 1.5 points minus 3 Monte Carlo standard errors."""
    reps, m = 1000, 400
    rng = np.random.default_rng(q)
    data, true = _graded(q, reps, rng)
    idx = rng.integers(0, q, size=(m, q))
    covered = {"percentile": 0, "bca": 0}
    for x in data:
        boot = x[idx].mean(axis=1)
        lo, hi = percentile_interval(boot, CONF)
        covered["percentile"] += lo <= true <= hi
        lo, hi = bca_interval(x, boot, CONF)
        covered["bca"] += lo <= true <= hi
    auto = bootstrap_ci(data[0], n_resamples=50, seed=0, measure="ndcg@10")
    assert auto.interval == "studentized"  # the default of graded measures (percentile and BCa still measured)
    bound = CONF - 0.015 - 3 * np.sqrt(CONF * (1 - CONF) / reps)
    print(f"graded Q={q}: " + ", ".join(f"{k}: {v / reps:.3f}" for k, v in covered.items()))
    assert all(v / reps >= bound for v in covered.values())
