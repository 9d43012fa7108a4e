"""Shared bootstrap plumbing of the analyses: resample indices and chunked per-resample
statistics. Their settings arrive as one :class:`~adaptlab.stats.BootstrapConfig`, resolved from
``bootstrap=`` or the loose keywords (never both) by
:func:`adaptlab.stats.settings.resolve_bootstrap`.

Every analysis draws its resamples through :func:`adaptlab.stats.resample_indices`, so the
same ``(n, n_resamples, sample_size, seed)`` gives the same query samples for every system and
every analysis (paired, DESIGN.md), and reports the percentile interval of
:func:`adaptlab.stats.percentile_interval`.
"""

from __future__ import annotations

import numpy as np

from adaptlab.errors import ConfigError
from adaptlab.stats import BootstrapConfig, resample_indices

__all__ = ["draw_indices", "resample_means"]

_CHUNK_ELEMS = 1 << 22  # elements per temporary block (~32 MB of float64)


def draw_indices(n: int, bootstrap: BootstrapConfig, *, indices: np.ndarray | None = None) -> np.ndarray:
    """``indices`` when given (validated), else ``adaptlab.stats.resample_indices(n, ...)`` with
    the settings of ``bootstrap``."""
    if indices is not None:
        idx = np.asarray(indices)
        if idx.ndim != 2 or idx.shape[0] < 1 or idx.shape[1] < 1:
            raise ConfigError(f"indices must be a non-empty [n_resamples, sample_size] array, got shape {idx.shape}")
        if not np.issubdtype(idx.dtype, np.integer):
            raise ConfigError(f"indices must be integers, got dtype {idx.dtype}")
        if idx.min() < 0 or idx.max() >= n:
            raise ConfigError(f"indices must lie in [0, {n}), got [{idx.min()}, {idx.max()}]")
        return idx.astype(np.int64, copy=False)
    return np.asarray(
        resample_indices(
            n,
            n_resamples=bootstrap.n_resamples,
            sample_size=bootstrap.sample_size,
            seed=bootstrap.seed,
            allow_oversampling=bootstrap.allow_oversampling,
        ),
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
