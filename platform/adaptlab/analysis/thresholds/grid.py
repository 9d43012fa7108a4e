"""The threshold grid: ``tau(psi)``, the percentiles of the pooled K-th similarities ``Gamma`` of the
resamples (or of one minimum per resample), computed from per-query draw counts.
"""

from __future__ import annotations

import numpy as np

from adaptlab.errors import ConfigError


def _weighted_percentile(values: np.ndarray, weights: np.ndarray, psi: np.ndarray) -> np.ndarray:
    """``np.percentile(np.repeat(values, weights), psi)`` (linear) without the repeat."""
    keep = weights > 0
    v, w = values[keep], weights[keep]
    order = np.argsort(v, kind="stable")
    v, cum = v[order], np.cumsum(w[order])
    n = int(cum[-1])
    h = (n - 1) * psi / 100.0
    lo = np.floor(h).astype(np.int64)
    hi = np.minimum(lo + 1, n - 1)
    vlo = v[np.searchsorted(cum, lo, side="right")]
    vhi = v[np.searchsorted(cum, hi, side="right")]
    return vlo + (h - lo) * (vhi - vlo)


def _taus(qmin: np.ndarray, idx: np.ndarray, psi: np.ndarray, gamma: str) -> np.ndarray:
    if gamma == "resample_min":
        return np.percentile(np.where(np.isfinite(qmin), qmin, np.inf)[idx].min(axis=1), psi)
    counts = np.bincount(idx.ravel(), minlength=qmin.shape[0])
    counts[~np.isfinite(qmin)] = 0  # a query that retrieved nothing has no K-th similarity
    if counts.sum() == 0:
        raise ConfigError("no resampled query retrieved any document: no similarity to threshold")
    return _weighted_percentile(qmin, counts, psi)


def _pooled_psi(qmin: np.ndarray, idx: np.ndarray, tau: float) -> float:
    """The percentage of the pooled ``Gamma`` values (per-query K-th similarities over the
    resamples) below ``tau``: the ``psi`` of a threshold that is not a grid percentile."""
    counts = np.bincount(idx.ravel(), minlength=qmin.shape[0]).astype(np.float64)
    counts[~np.isfinite(qmin)] = 0.0
    return float(100.0 * counts[np.isfinite(qmin) & (qmin < tau)].sum() / max(counts.sum(), 1.0))
