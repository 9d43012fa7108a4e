"""Shared bootstrap plumbing: resample indices and chunked per-resample statistics.

Every analysis draws its resamples through :func:`adaptlab.stats.resample_indices`, so the
same ``(n, n_resamples, sample_size, seed)`` gives the same query samples for every system and
every analysis (paired, DESIGN.md).
"""

from __future__ import annotations

import numpy as np

from adaptlab.errors import ConfigError

__all__ = ["check_confidence", "draw_indices", "percentile_ci", "resample_means"]

_CHUNK_ELEMS = 1 << 22  # elements per temporary block (~32 MB of float64)


def check_confidence(confidence: float) -> None:
    if not 0.0 < float(confidence) < 1.0:
        raise ConfigError(f"confidence must be in (0, 1), got {confidence!r}")


def draw_indices(
    n: int,
    *,
    n_resamples: int,
    sample_size: int | None,
    seed: int,
    indices: np.ndarray | None = None,
) -> np.ndarray:
    """``indices`` when given (validated), else ``adaptlab.stats.resample_indices(...)``."""
    if indices is not None:
        idx = np.asarray(indices)
        if idx.ndim != 2 or idx.shape[0] < 1 or idx.shape[1] < 1:
            raise ConfigError(f"indices must be a non-empty [n_resamples, sample_size] array, got shape {idx.shape}")
        if not np.issubdtype(idx.dtype, np.integer):
            raise ConfigError(f"indices must be integers, got dtype {idx.dtype}")
        if idx.min() < 0 or idx.max() >= n:
            raise ConfigError(f"indices must lie in [0, {n}), got [{idx.min()}, {idx.max()}]")
        return idx.astype(np.int64, copy=False)
    if int(n_resamples) < 1:
        raise ConfigError(f"n_resamples must be >= 1, got {n_resamples!r}")
    if sample_size is not None and int(sample_size) < 1:
        raise ConfigError(f"sample_size must be >= 1, got {sample_size!r}")
    from adaptlab.stats import resample_indices

    return np.asarray(
        resample_indices(n, n_resamples=int(n_resamples), sample_size=sample_size, seed=int(seed)),
        dtype=np.int64,
    )


def resample_means(values: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Means of ``values`` [P, Q] over each resample of ``idx`` [B, l] -> [B, P].

    Counts how often each query is drawn (one ``bincount`` per block of resamples) and takes
    a matrix product, so the cost is O(B * (l + Q * P)) without a [B, l, P] gather.
    """
    values = np.atleast_2d(np.asarray(values, dtype=np.float64))
    p, q = values.shape
    b, l = idx.shape
    out = np.empty((b, p), dtype=np.float64)
    step = max(1, _CHUNK_ELEMS // max(q, 1))
    for s in range(0, b, step):
        blk = idx[s : s + step]
        nb = blk.shape[0]
        offs = (np.arange(nb, dtype=np.int64) * q)[:, None]
        counts = np.bincount((blk + offs).ravel(), minlength=nb * q).reshape(nb, q)
        out[s : s + nb] = counts @ values.T / l
    return out


def percentile_ci(samples: np.ndarray, confidence: float, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval ``(100 * (1 - c) / 2, 100 * (1 + c) / 2)`` of ``samples`` along ``axis``."""
    lo = 100.0 * (1.0 - confidence) / 2.0
    hi = 100.0 * (1.0 + confidence) / 2.0
    return np.percentile(samples, lo, axis=axis), np.percentile(samples, hi, axis=axis)
