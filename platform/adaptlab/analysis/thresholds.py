"""Similarity thresholds chosen by a paired bootstrap (reference 000, Section 2.2).

For bootstrap sample ``j`` (``l`` queries drawn with replacement) let ``T_j`` hold the top-K
similarities of its queries and ``gamma_j = min(T_j)``. With ``Gamma = {gamma_j}``, the
threshold at percentile ``psi`` is ``tau(psi) = percentile(Gamma, psi)`` (NumPy's default
linear interpolation). Applying a threshold keeps a retrieved document only when its
similarity is ``>= tau``, so with a single gold document per query the thresholded top-K
accuracy of a query is::

    hit_q(tau) = 1[1 <= rank_q <= K and s_q >= tau]

where ``s_q`` is the similarity of the gold document at ``rank_q``. Every ``psi`` in
``5, 10, ..., 100`` is compared with the unthresholded accuracy on the same resamples
(paired). The test is one-sided (thresholding can only lower accuracy): with
``a_j`` and ``a_j(tau)`` the accuracies of resample ``j``,
``p(psi) = (1/m) * sum_j 1[a_j(tau(psi)) >= a_j]`` (Koehn 2004's paired bootstrap), and the
accuracy at ``tau(psi)`` is *significantly lower* when ``p(psi) < alpha``. The chosen
threshold is the highest ``tau(psi)`` that is not significantly lower. Because at most
``100 - psi`` percent of the ``gamma_j`` lie below ``tau(psi)``, ``psi = 5`` always passes at
``alpha = 0.05``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from adaptlab.analysis._inputs import query_arrays
from adaptlab.analysis._resample import bootstrap_settings, draw_indices, resample_means
from adaptlab.analysis._rows import metric_row
from adaptlab.errors import ConfigError
from adaptlab.stats import BootstrapConfig, percentile_interval

__all__ = ["PSI_GRID", "ThresholdResult", "similarity_thresholds", "thresholds_from_arrays"]

PSI_GRID: tuple[float, ...] = tuple(float(p) for p in range(5, 101, 5))
"""The percentiles of ``Gamma`` tried by default: 5, 10, ..., 100."""


@dataclass(frozen=True)
class ThresholdResult:
    """Thresholds ``tau(psi)`` on a grid of ``psi`` and the one chosen.

    Arrays are indexed like ``psi``. ``acc`` is the thresholded accuracy on all queries;
    ``acc_boot_mean`` / ``acc_ci_*`` its bootstrap mean and percentile CI; ``p_value`` the
    one-sided paired p-value against the unthresholded accuracy (``base_*``). ``chosen`` is
    the index of the chosen ``psi`` (``None`` when every threshold is significantly lower).
    Accuracies are fractions in [0, 1].
    """

    system: str
    dataset: str
    k: int
    psi: np.ndarray
    tau: np.ndarray
    acc: np.ndarray
    acc_boot_mean: np.ndarray
    acc_ci_low: np.ndarray
    acc_ci_high: np.ndarray
    p_value: np.ndarray
    base_acc: float
    base_boot_mean: float
    base_ci_low: float
    base_ci_high: float
    chosen: int | None
    alpha: float
    confidence: float
    n_queries: int
    n_excluded: int
    n_resamples: int
    sample_size: int
    seed: int

    @property
    def chosen_psi(self) -> float:
        return float(self.psi[self.chosen]) if self.chosen is not None else float("nan")

    @property
    def chosen_tau(self) -> float:
        return float(self.tau[self.chosen]) if self.chosen is not None else float("nan")

    def at_chosen(self) -> dict[str, float]:
        """Accuracy at the chosen threshold: value, boot_mean, ci_low, ci_high, p_value."""
        if self.chosen is None:
            nan = float("nan")
            return {"value": nan, "boot_mean": nan, "ci_low": nan, "ci_high": nan, "p_value": nan}
        i = self.chosen
        return {"value": float(self.acc[i]), "boot_mean": float(self.acc_boot_mean[i]),
                "ci_low": float(self.acc_ci_low[i]), "ci_high": float(self.acc_ci_high[i]),
                "p_value": float(self.p_value[i])}

    def to_metric_rows(self) -> list[dict[str, Any]]:
        """Rows ``threshold`` (value = tau; extra: k, psi, alpha and the whole grid) and
        ``acc_at_threshold`` (accuracy at tau with bootstrap mean, CI and p-value)."""
        common = {"n_queries": self.n_queries, "n_resamples": self.n_resamples,
                  "sample_size": self.sample_size, "seed": self.seed}
        at = self.at_chosen()
        grid = {"psi": [float(x) for x in self.psi], "tau": [float(x) for x in self.tau],
                "acc_boot_mean": [float(x) for x in self.acc_boot_mean],
                "p_value": [float(x) for x in self.p_value]}
        return [
            metric_row(self.system, self.dataset, "threshold", self.chosen_tau, p_value=at["p_value"],
                       extra={"k": self.k, "psi": self.chosen_psi, "alpha": self.alpha, "grid": grid,
                              "n_excluded": self.n_excluded}, **common),
            metric_row(self.system, self.dataset, "acc_at_threshold", at["value"], boot_mean=at["boot_mean"],
                       ci_low=at["ci_low"], ci_high=at["ci_high"], p_value=at["p_value"],
                       extra={"k": self.k, "psi": self.chosen_psi, "tau": self.chosen_tau,
                              "base_acc": self.base_acc, "base_boot_mean": self.base_boot_mean,
                              "confidence": self.confidence}, **common),
        ]


def _threshold_kernel(
    topk: np.ndarray, gold_rank: np.ndarray, idx: np.ndarray, psi: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """tau [P], per-query hits [1 + P, Q] (row 0 unthresholded), resample means [B, 1 + P]."""
    q = topk.shape[0]
    qmin = np.where(np.isnan(topk), np.inf, topk).min(axis=1)  # lowest top-K similarity per query
    gamma = qmin[idx].min(axis=1)  # [B]
    tau = np.percentile(gamma, psi)
    hit = gold_rank > 0
    gold_score = np.full(q, -np.inf)
    gold_score[hit] = topk[np.flatnonzero(hit), gold_rank[hit] - 1]
    hits = np.vstack([hit[None, :], hit[None, :] & (gold_score[None, :] >= tau[:, None])]).astype(np.float64)
    return tau, hits, resample_means(hits, idx)


def thresholds_from_arrays(
    topk_scores: np.ndarray,
    gold_rank: np.ndarray,
    *,
    k: int | None = None,
    psi_grid: Sequence[float] = PSI_GRID,
    alpha: float = 0.05,
    n_resamples: int = 1000,
    sample_size: int | None = None,
    seed: int = 0,
    confidence: float = 0.95,
    indices: np.ndarray | None = None,
    bootstrap: BootstrapConfig | None = None,
    system: str = "",
    dataset: str = "",
    n_excluded: int = 0,
) -> ThresholdResult:
    """:func:`similarity_thresholds` on arrays: ``topk_scores`` [Q, K] (descending rows; NaN
    where fewer were retrieved) and ``gold_rank`` [Q] (1-based rank of the gold document in
    the top-K, 0 if absent). ``indices`` [m, l] overrides the drawn resamples."""
    topk = np.asarray(topk_scores, dtype=np.float64)
    if topk.ndim != 2 or topk.shape[0] == 0:
        raise ConfigError(f"topk_scores must be a non-empty [Q, K] array, got shape {topk.shape}")
    k = topk.shape[1] if k is None else int(k)
    if not 1 <= k <= topk.shape[1]:
        raise ConfigError(f"k must be in [1, {topk.shape[1]}], got {k}")
    topk = topk[:, :k]
    rank = np.asarray(gold_rank, dtype=np.int64)
    if rank.shape != (topk.shape[0],):
        raise ConfigError(f"gold_rank must have shape ({topk.shape[0]},), got {rank.shape}")
    rank = np.where((rank >= 1) & (rank <= k), rank, 0)
    psi = np.asarray(list(psi_grid), dtype=np.float64)
    if psi.size == 0 or np.any((psi < 0) | (psi > 100)):
        raise ConfigError(f"psi_grid must be non-empty percentiles in [0, 100], got {list(psi_grid)}")
    psi = np.sort(psi)
    if not 0.0 < alpha < 1.0:
        raise ConfigError(f"alpha must be in (0, 1), got {alpha!r}")
    cfg = bootstrap_settings(bootstrap, n_resamples=n_resamples, sample_size=sample_size, seed=seed,
                             confidence=confidence)
    idx = draw_indices(topk.shape[0], cfg, indices=indices)
    tau, hits, means = _threshold_kernel(topk, rank, idx, psi)
    base, thr = means[:, 0], means[:, 1:]
    p_value = (thr >= base[:, None]).mean(axis=0)
    lo, hi = percentile_interval(means, cfg.confidence, axis=0)
    ok = np.flatnonzero(p_value >= alpha)
    chosen = int(ok.max()) if ok.size else None
    point = hits.mean(axis=1)
    return ThresholdResult(
        system=system, dataset=dataset, k=k, psi=psi, tau=tau, acc=point[1:],
        acc_boot_mean=thr.mean(axis=0), acc_ci_low=lo[1:], acc_ci_high=hi[1:], p_value=p_value,
        base_acc=float(point[0]), base_boot_mean=float(base.mean()), base_ci_low=float(lo[0]),
        base_ci_high=float(hi[0]), chosen=chosen, alpha=float(alpha), confidence=float(cfg.confidence),
        n_queries=int(topk.shape[0]), n_excluded=int(n_excluded), n_resamples=int(idx.shape[0]),
        sample_size=int(idx.shape[1]), seed=cfg.seed,
    )


def similarity_thresholds(
    records: object,
    *,
    k: int = 5,
    psi_grid: Sequence[float] = PSI_GRID,
    alpha: float = 0.05,
    n_resamples: int = 1000,
    sample_size: int | None = None,
    seed: int = 0,
    confidence: float = 0.95,
    indices: np.ndarray | None = None,
    bootstrap: BootstrapConfig | None = None,
) -> ThresholdResult:
    """Choose a similarity threshold for one system's :class:`PerQueryRecords` (000, Sec. 2.2).

    ``k`` is the K of top-K accuracy (the paper uses 5); the resamples come from
    :func:`adaptlab.stats.resample_indices` with ``n_resamples``, ``sample_size`` (default:
    all judged queries; the paper's setting is 500 and 100) and ``seed``, so every system is
    resampled alike. Queries without a gold document are excluded.
    """
    qa = query_arrays(records, k)
    if qa.n_queries == 0:
        raise ConfigError(f"system {qa.system!r} on {qa.dataset!r}: no query has a gold document")
    return thresholds_from_arrays(
        qa.topk, qa.gold_rank, k=k, psi_grid=psi_grid, alpha=alpha, n_resamples=n_resamples,
        sample_size=sample_size, seed=seed, confidence=confidence, indices=indices, bootstrap=bootstrap,
        system=qa.system, dataset=qa.dataset, n_excluded=qa.n_excluded,
    )
