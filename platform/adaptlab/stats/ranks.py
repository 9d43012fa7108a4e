"""Rank intervals and the set of systems tied with the best.

**Simultaneous ranks from the paired tests** (:func:`ranks_from_tests`, :func:`simultaneous_ranks`;
the default everywhere). For ``S`` systems on the same queries, every pair gets its two-sided
paired test (the sign-flip test, :mod:`adaptlab.stats.signflip`) and the p-values are adjusted
within the family of all ``S (S - 1) / 2`` pairs (Holm by default), exactly as the significance
letters of :func:`adaptlab.compare` are. System ``s`` is *significantly worse* than ``t`` when
their adjusted p is below ``alpha`` and ``t``'s mean is higher. Then

* ``rank_low(s) = 1 + #{t : s significantly worse than t}``,
  ``rank_high(s) = S - #{t : s significantly better than t}``;
* tied with the best: ``rank_low(s) == 1`` (no system is significantly better than ``s``).

Guarantee: with Holm, the probability that any rejection is false is at most ``alpha`` (Holm
1979); whenever no rejection is false, every system's true rank lies in its interval at the same
time and no system whose true mean is the highest is left out of the tied set. So with
probability at least ``1 - alpha``, simultaneously over all systems, the intervals hold and the
set contains every best system (Klein, Wright & Wieczorek 2020, "A joint confidence region for an
overall ranking of populations", JRSS C 69: rank intervals from simultaneous pairwise
comparisons). The tests' null is the symmetry of the per-query differences; directions are read
from the observed means. With ``adjustment="bh"`` or ``"none"`` there is no such guarantee
(:attr:`RankIntervals.guarantee` says so). Because the column and the letters come from the same
adjusted p-values, a system is marked tied with the best exactly when no letter says another
system is better than it. Measured (tests/stats/test_simulation_ranks.py): with K equal systems,
P(any excluded) at most 0.05 for K = 2 to 20.

**Bootstrap rank intervals** (:func:`rank_intervals`; kept for comparison, not simultaneous):
every shared resample ``j`` gives each system's competition rank ``r_{s,j} = 1 + #{t : x*_{t,j}
> x*_{s,j}}``, and the interval is ``[F_s^-1(alpha/2), F_s^-1(1 - alpha/2)]``. The plain
bootstrap of ranks fails under ties (Hall & Miller 2009, "Using the bootstrap to quantify the
authority of an empirical ranking", Ann. Statist. 37): with 10 truly equal systems at least one
was marked not tied with the best in almost every data set, which is why it is no longer used
for the tied-with-best column.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from adaptlab.errors import ConfigError
from adaptlab.stats.pvalues import adjust_pvalues, check_adjustment
from adaptlab.stats.resample import FLIP_KEY, check_seed, check_sizes, iter_resample_indices, stream
from adaptlab.stats.signflip import family_sign_flip

__all__ = ["RankIntervals", "rank_intervals", "ranks_from_tests", "simultaneous_ranks"]


@dataclass(frozen=True)
class RankIntervals:
    """Per system (row order of the values): observed rank, rank interval, tied-with-best."""

    rank: np.ndarray
    rank_low: np.ndarray
    rank_high: np.ndarray
    tied_with_best: np.ndarray
    confidence: float
    n_resamples: int
    sample_size: int
    seed: int
    guarantee: str = ""  # what holds simultaneously ("" for the bootstrap intervals: nothing)

    def row(self, i: int) -> dict[str, Any]:
        return {
            "rank": int(self.rank[i]),
            "rank_low": int(self.rank_low[i]),
            "rank_high": int(self.rank_high[i]),
            "tied_with_best": bool(self.tied_with_best[i]),
        }


def _guarantee(alpha: float, adjustment: str, n_systems: int) -> str:
    n_pairs = n_systems * (n_systems - 1) // 2
    if adjustment != "holm":
        return (
            f"no simultaneous guarantee: the {n_pairs} paired tests are adjusted by {adjustment}, which does not "
            "control the family-wise error; use adjustment holm for one"
        )
    return (
        f"simultaneous: with probability >= {1 - alpha:g} every rank interval holds and the tied set contains "
        f"the best system (Holm over the {n_pairs} paired tests, alpha {alpha:g})"
    )


def ranks_from_tests(
    means: Any,
    pairs: Sequence[tuple[int, int]],
    p_adjusted: Sequence[float] | np.ndarray,
    *,
    alpha: float = 0.05,
    adjustment: str = "holm",
    n_resamples: int = 0,
    sample_size: int = 0,
    seed: int = 0,
) -> RankIntervals:
    """Simultaneous rank intervals and the tied-with-best set (module doc) of systems with
    observed ``means`` [S], from the adjusted p-values ``p_adjusted`` of the paired tests of
    every pair ``pairs[i] = (a, b)`` (all ``S (S - 1) / 2`` pairs, any order and direction)."""
    mu = np.asarray(means, dtype=np.float64).ravel()
    n = mu.size
    if not 0.0 < float(alpha) < 1.0:
        raise ConfigError(f"alpha must be strictly between 0 and 1, got {alpha!r}")
    seen = {frozenset(p) for p in pairs}
    if len(seen) != n * (n - 1) // 2 or len(pairs) != len(p_adjusted) or any(len(p) != 2 for p in seen):
        raise ConfigError(
            f"ranks_from_tests needs the tests of all {n * (n - 1) // 2} pairs of {n} systems, "
            f"got {len(pairs)} pair(s) and {len(p_adjusted)} p-value(s)"
        )
    worse = np.zeros(n, dtype=np.int64)  # significantly worse than this many
    better = np.zeros(n, dtype=np.int64)  # significantly better than this many
    for (a, b), p in zip(pairs, p_adjusted):
        if float(p) < float(alpha) and mu[a] != mu[b]:
            win, lose = (a, b) if mu[a] > mu[b] else (b, a)
            better[win] += 1
            worse[lose] += 1
    low = 1 + worse
    high = n - better
    rank = _competition_rank(mu[None, :])[0]
    return RankIntervals(
        rank,
        low,
        high,
        low == 1,
        1.0 - float(alpha),
        int(n_resamples),
        int(sample_size),
        int(seed),
        _guarantee(float(alpha), adjustment, n),
    )


def simultaneous_ranks(
    values: Any, *, alpha: float = 0.05, adjustment: str = "holm", n_resamples: int = 1000, seed: int = 0
) -> RankIntervals:
    """:func:`ranks_from_tests` of the rows of ``values`` [S, Q] (higher is better): the sign-flip
    test of every pair ``(i, j)``, ``i < j`` (exact where it can count, else Monte Carlo sign
    vectors from the stream :func:`adaptlab.stats.paired_bootstrap` uses with the same ``seed``,
    at least ``n_resamples`` of them), adjusted by ``adjustment`` over all pairs.

    >>> r = simultaneous_ranks([[1.0] * 12, [0.0] * 12, [0.0] * 11 + [1.0]])
    >>> r.rank.tolist(), r.rank_low.tolist(), r.tied_with_best.tolist()
    ([1, 3, 2], [1, 2, 2], [True, False, False])
    """
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ConfigError(f"values must be a non-empty [n_systems, n_queries] array, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ConfigError("values must be finite")
    adjustment = check_adjustment(adjustment)
    seed = check_seed(seed)
    s = arr.shape[0]
    pairs = [(i, j) for i in range(s) for j in range(i + 1, s)]
    if not pairs:
        return ranks_from_tests(arr.mean(axis=1), [], [], alpha=alpha, adjustment=adjustment, seed=seed)
    res = family_sign_flip(arr, pairs, int(n_resamples), stream(seed, FLIP_KEY), 1e-10)  # paired_bootstrap's vectors
    return ranks_from_tests(
        arr.mean(axis=1),
        pairs,
        adjust_pvalues(res.p, adjustment),
        alpha=alpha,
        adjustment=adjustment,
        n_resamples=res.n_vectors,
        sample_size=arr.shape[1],
        seed=seed,
    )


def _competition_rank(means: np.ndarray) -> np.ndarray:
    """[B, S] means -> [B, S] ranks, 1 = best, ties share the better rank."""
    return 1 + (means[:, None, :] > means[:, :, None]).sum(axis=2)


def rank_intervals(
    values: Any,
    *,
    n_resamples: int = 1000,
    sample_size: int | None = None,
    seed: int = 0,
    confidence: float = 0.95,
    allow_oversampling: bool = False,
) -> RankIntervals:
    """Rank intervals of the rows of ``values`` [S, Q] (per-query values, higher is better)."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ConfigError(f"values must be a non-empty [n_systems, n_queries] array, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ConfigError("values must be finite")
    if not 0.0 < float(confidence) < 1.0:
        raise ConfigError(f"confidence must be strictly between 0 and 1, got {confidence!r}")
    seed = check_seed(seed)
    s, q = arr.shape
    m, l = check_sizes(q, n_resamples, sample_size, allow_oversampling)
    ranks = np.empty((m, s), dtype=np.int64)
    row = 0
    for blk in iter_resample_indices(
        q, n_resamples=m, sample_size=sample_size, seed=seed, allow_oversampling=allow_oversampling
    ):
        nb = blk.shape[0]
        offs = (np.arange(nb, dtype=np.int64) * q)[:, None]
        counts = np.bincount((blk + offs).ravel(), minlength=nb * q).reshape(nb, q)
        ranks[row : row + nb] = _competition_rank(counts @ arr.T / l)
        row += nb
    alpha = 1.0 - float(confidence)
    lo = np.quantile(ranks, alpha / 2, axis=0, method="inverted_cdf").astype(np.int64)
    hi = np.quantile(ranks, 1 - alpha / 2, axis=0, method="inverted_cdf").astype(np.int64)
    observed = _competition_rank(arr.mean(axis=1)[None, :])[0]
    return RankIntervals(observed, lo, hi, lo == 1, float(confidence), m, l, seed)
