"""Overlap of similarity distributions: COE and ROE (reference 000, Section 2.3).

Per query ``q``: ``s_corr(q)`` the similarity to its correct (gold) document, the ``K``
top-K similarities, and ``s_rand(q)`` the similarity to one random corpus document. Over the
queries these give ``S_corr`` (``Q`` values), ``S_topK`` (``K * Q``) and ``S_rand`` (``Q``).

For bootstrap sample ``j`` (``l`` queries drawn with replacement), ``theta_j`` is the
``psi``-th percentile (NumPy linear interpolation) of the sample's ``l * K`` top-K
similarities, and::

    C_corr(theta_j) = P_j(s_corr > theta_j)      C_rand(theta_j) = P_j(s_rand > theta_j)

where ``P_j`` is the fraction over the sample's queries (so every quantity is recomputed on
the resample, the plain bootstrap of a statistic). ``COE = mean_j C_corr(theta_j)`` and
``ROE = mean_j C_rand(theta_j)`` with percentile CIs over the samples. The point value is the
same statistic on all queries. The paper leaves ``psi`` open; adaptlab's default is
``psi = 5``: ``theta`` is then a near-minimum top-K similarity that a single outlying score
cannot move, close to the threshold statistic ``gamma_j`` of Section 2.2.

When a query has several gold documents, ``s_corr`` is the similarity of the most similar one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from adaptlab.analysis._inputs import query_arrays
from adaptlab.analysis._options import BootstrapOptions, Labels, split_options
from adaptlab.analysis._resample import draw_indices
from adaptlab.analysis._rows import metric_row
from adaptlab.errors import ConfigError
from adaptlab.stats import BootstrapConfig, percentile_interval
from adaptlab.stats.settings import resolve_bootstrap

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "DEFAULT_OVERLAP_PSI",
    "OverlapResult",
    "SimilarityDistributions",
    "overlap_from_arrays",
    "overlap_metrics",
    "similarity_distributions",
]

DEFAULT_OVERLAP_PSI = 5.0
"""Default percentile ``psi`` of the top-K similarities used as ``theta_j``."""

_CHUNK_ELEMS = 1 << 22


@dataclass(frozen=True)
class SimilarityDistributions:
    """``S_corr``, ``S_topK`` (flattened) and ``S_rand`` of one system (NaNs dropped)."""

    system: str
    dataset: str
    k: int
    corr: np.ndarray
    topk: np.ndarray
    rand: np.ndarray


def similarity_distributions(records: object, *, k: int = 5) -> SimilarityDistributions:
    """The three similarity sets of Section 2.3 from :class:`PerQueryRecords` (judged queries)."""
    qa = query_arrays(records, k)
    top = qa.topk.ravel()
    return SimilarityDistributions(
        qa.system,
        qa.dataset,
        int(k),
        qa.sim_gold[~np.isnan(qa.sim_gold)],
        top[~np.isnan(top)],
        qa.sim_random[~np.isnan(qa.sim_random)],
    )


@dataclass(frozen=True)
class OverlapResult:
    """COE and ROE of one system: point value (all queries), bootstrap mean and CI.

    Values are fractions in [0, 1] (the paper prints percentages). ``theta`` is the
    ``psi``-th percentile of ``S_topK`` on all queries; ``theta_boot_mean`` its mean over
    the resamples.
    """

    system: str
    dataset: str
    k: int
    psi: float
    theta: float
    theta_boot_mean: float
    coe: float
    coe_boot_mean: float
    coe_ci_low: float
    coe_ci_high: float
    roe: float
    roe_boot_mean: float
    roe_ci_low: float
    roe_ci_high: float
    confidence: float
    n_queries: int
    n_excluded: int
    n_resamples: int
    sample_size: int
    seed: int
    n_missing_corr: int = 0
    n_missing_rand: int = 0

    def to_metric_rows(self) -> list[dict[str, Any]]:
        """Rows ``coe`` and ``roe`` (extra: k, psi, theta, the excluded and missing counts)."""
        common: dict[str, Any] = {
            "n_queries": self.n_queries,
            "n_resamples": self.n_resamples,
            "sample_size": self.sample_size,
            "seed": self.seed,
            "confidence": self.confidence,
            "interval_method": "percentile",
        }
        extra = {
            "k": self.k,
            "psi": self.psi,
            "theta": self.theta,
            "n_excluded": self.n_excluded,
            "confidence": self.confidence,
            "n_missing_corr": self.n_missing_corr,
            "n_missing_rand": self.n_missing_rand,
        }
        return [
            metric_row(
                self.system,
                self.dataset,
                "coe",
                self.coe,
                boot_mean=self.coe_boot_mean,
                ci_low=self.coe_ci_low,
                ci_high=self.coe_ci_high,
                extra=extra,
                **common,
            ),
            metric_row(
                self.system,
                self.dataset,
                "roe",
                self.roe,
                boot_mean=self.roe_boot_mean,
                ci_low=self.roe_ci_low,
                ci_high=self.roe_ci_high,
                extra=extra,
                **common,
            ),
        ]


def _percentile_rows(x: np.ndarray, psi: float) -> np.ndarray:
    if np.isnan(x).any():
        return np.nanpercentile(x, psi, axis=1)
    return np.percentile(x, psi, axis=1)


def _overlap_kernel(corr: np.ndarray, topk: np.ndarray, rand: np.ndarray, idx: np.ndarray, psi: float) -> np.ndarray:
    """Per-resample ``[theta_j, C_corr(theta_j), C_rand(theta_j)]`` -> [B, 3]."""
    b, l = idx.shape
    k = topk.shape[1]
    out = np.empty((b, 3), dtype=np.float64)
    step = max(1, _CHUNK_ELEMS // max(l * k, 1))
    for s in range(0, b, step):
        blk = idx[s : s + step]
        theta = _percentile_rows(topk[blk].reshape(blk.shape[0], l * k), psi)
        out[s : s + blk.shape[0], 0] = theta
        out[s : s + blk.shape[0], 1] = _fraction_above(corr[blk], theta)
        out[s : s + blk.shape[0], 2] = _fraction_above(rand[blk], theta)
    return out


def _fraction_above(x: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """Per row, the fraction of the known (non-NaN) values above ``theta`` (NaN if none known)."""
    known = ~np.isnan(x)
    if known.all():
        return (x > theta[:, None]).mean(axis=1)
    n = known.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, ((x > theta[:, None]) & known).sum(axis=1) / np.maximum(n, 1), np.nan)


class _ArrayOptions(BootstrapOptions, Labels, total=False):
    """The keywords of :func:`overlap_from_arrays`: the bootstrap and the labels."""


def overlap_from_arrays(
    sim_corr: np.ndarray,
    topk_scores: np.ndarray,
    sim_rand: np.ndarray,
    *,
    psi: float = DEFAULT_OVERLAP_PSI,
    indices: np.ndarray | None = None,
    bootstrap: BootstrapConfig | None = None,
    **options: Unpack[_ArrayOptions],
) -> OverlapResult:
    """COE/ROE from arrays: ``sim_corr`` [Q], ``topk_scores`` [Q, K] (all K columns are
    used; NaN = not retrieved), ``sim_rand`` [Q]. ``indices`` [m, l] overrides the resamples.
    Bootstrap settings: ``bootstrap`` or the keywords (defaults of
    :class:`~adaptlab.stats.BootstrapConfig`), not both; ``system``, ``dataset`` and
    ``n_excluded`` (keywords) label the result."""
    boot_kw, labels = split_options("overlap_from_arrays", options, BootstrapOptions, Labels)
    cfg = resolve_bootstrap("overlap_from_arrays", bootstrap, **boot_kw)
    return _overlap(sim_corr, topk_scores, sim_rand, psi, cfg, indices, cast(Labels, labels))


def _overlap(
    sim_corr: np.ndarray,
    topk_scores: np.ndarray,
    sim_rand: np.ndarray,
    psi: float,
    cfg: BootstrapConfig,
    indices: np.ndarray | None,
    labels: Labels,
) -> OverlapResult:
    """COE/ROE of the arrays (see :func:`overlap_from_arrays`)."""
    corr = np.asarray(sim_corr, dtype=np.float64)
    rand = np.asarray(sim_rand, dtype=np.float64)
    topk = np.asarray(topk_scores, dtype=np.float64)
    if topk.ndim != 2 or topk.shape[0] == 0 or topk.shape[1] == 0:
        raise ConfigError(f"topk_scores must be a non-empty [Q, K] array, got shape {topk.shape}")
    q = topk.shape[0]
    if corr.shape != (q,) or rand.shape != (q,):
        raise ConfigError(f"sim_corr and sim_rand must have shape ({q},), got {corr.shape} and {rand.shape}")
    if not 0.0 <= float(psi) <= 100.0:
        raise ConfigError(f"psi must be a percentile in [0, 100], got {psi!r}")
    idx = draw_indices(q, cfg, indices=indices)
    boot = _overlap_kernel(corr, topk, rand, idx, float(psi))
    full = _overlap_kernel(corr, topk, rand, np.arange(q, dtype=np.int64)[None, :], float(psi))[0]
    lo, hi = percentile_interval(boot, cfg.confidence, axis=0)
    return OverlapResult(
        system=labels.get("system", ""),
        dataset=labels.get("dataset", ""),
        k=int(topk.shape[1]),
        psi=float(psi),
        theta=float(full[0]),
        theta_boot_mean=float(boot[:, 0].mean()),
        coe=float(full[1]),
        coe_boot_mean=float(boot[:, 1].mean()),
        coe_ci_low=float(lo[1]),
        coe_ci_high=float(hi[1]),
        roe=float(full[2]),
        roe_boot_mean=float(boot[:, 2].mean()),
        roe_ci_low=float(lo[2]),
        roe_ci_high=float(hi[2]),
        confidence=float(cfg.confidence),
        n_queries=q,
        n_excluded=int(labels.get("n_excluded", 0)),
        n_resamples=int(idx.shape[0]),
        sample_size=int(idx.shape[1]),
        seed=cfg.seed,
        n_missing_corr=int(np.isnan(corr).sum()),
        n_missing_rand=int(np.isnan(rand).sum()),
    )


def overlap_metrics(
    records: object,
    *,
    k: int = 5,
    psi: float = DEFAULT_OVERLAP_PSI,
    indices: np.ndarray | None = None,
    bootstrap: BootstrapConfig | None = None,
    **options: Unpack[BootstrapOptions],
) -> OverlapResult:
    """COE and ROE of one system's :class:`PerQueryRecords` with bootstrap CIs (000, Sec. 2.3).

    Queries without a gold document are excluded and counted in ``n_excluded``. Every judged
    query stays in the resampling, so the resamples are those of the accuracy CIs and of the
    thresholds (same ``(Q, m, l, seed)``, same indices); a query whose gold or random
    similarity is unknown (NaN) still counts in ``theta_j`` through its top-K similarities and
    is left out of the fractions ``C_corr`` / ``C_rand`` of the resamples that draw it (counted
    in ``n_missing_corr`` / ``n_missing_rand``). Bootstrap settings: one
    :class:`~adaptlab.stats.BootstrapConfig` (``bootstrap``) or the loose ``n_resamples``
    (default 1000), ``sample_size`` (default: all judged queries), ``seed`` (default 0) and
    ``confidence`` (default 0.95), not both.
    """
    (boot_kw,) = split_options("overlap_metrics", options, BootstrapOptions)
    cfg = resolve_bootstrap("overlap_metrics", bootstrap, **boot_kw)
    qa = query_arrays(records, k)
    if qa.n_queries == 0 or np.isnan(qa.sim_gold).all() or np.isnan(qa.sim_random).all():
        raise ConfigError(f"system {qa.system!r} on {qa.dataset!r}: no query has a gold and a random similarity")
    labels = Labels(system=qa.system, dataset=qa.dataset, n_excluded=qa.n_excluded)
    return _overlap(qa.sim_gold, qa.topk, qa.sim_random, psi, cfg, indices, labels)
