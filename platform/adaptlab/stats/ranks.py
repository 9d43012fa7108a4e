"""Rank intervals of systems from shared bootstrap resamples.

Leaderboards print strict orders the data often cannot separate. For ``S`` systems evaluated on
the same ``Q`` queries, every resample ``j`` (the shared indices of
:func:`adaptlab.stats.resample_indices`, so all systems see the same queries) gives each
system's mean ``x*_{s,j}`` and its competition rank ``r_{s,j} = 1 + #{t : x*_{t,j} > x*_{s,j}}``
(higher is better; tied means share the better rank). The rank interval at level ``c`` is
``[F_s^-1(alpha/2), F_s^-1(1 - alpha/2)]`` with ``F_s`` the empirical CDF of ``r_{s,.}``
(inverse-CDF quantiles, so the ends are ranks), ``alpha = 1 - c``. The systems whose interval
contains rank 1 form the group statistically tied with the best (Hall & Miller 2009, "Using the
bootstrap to quantify the authority of an empirical ranking", Ann. Statist. 37; LMArena shows
such intervals and gives tied systems the same rank).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from adaptlab.errors import ConfigError
from adaptlab.stats.resample import check_seed, check_sizes, iter_resample_indices

__all__ = ["RankIntervals", "rank_intervals"]


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

    def row(self, i: int) -> dict[str, Any]:
        return {"rank": int(self.rank[i]), "rank_low": int(self.rank_low[i]), "rank_high": int(self.rank_high[i]),
                "tied_with_best": bool(self.tied_with_best[i])}


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
    for blk in iter_resample_indices(q, n_resamples=m, sample_size=sample_size, seed=seed,
                                     allow_oversampling=allow_oversampling):
        nb = blk.shape[0]
        offs = (np.arange(nb, dtype=np.int64) * q)[:, None]
        counts = np.bincount((blk + offs).ravel(), minlength=nb * q).reshape(nb, q)
        ranks[row:row + nb] = _competition_rank(counts @ arr.T / l)
        row += nb
    alpha = 1.0 - float(confidence)
    lo = np.quantile(ranks, alpha / 2, axis=0, method="inverted_cdf").astype(np.int64)
    hi = np.quantile(ranks, 1 - alpha / 2, axis=0, method="inverted_cdf").astype(np.int64)
    observed = _competition_rank(arr.mean(axis=1)[None, :])[0]
    return RankIntervals(observed, lo, hi, lo == 1, float(confidence), m, l, seed)
