"""Bootstrap resample indices shared by every analysis that must see the same resamples.

``m`` resamples of ``l`` query positions drawn uniformly with replacement from ``range(n)``
(``l`` defaults to ``n``; the setting of the domain-adaptation paper is ``m=500, l=100``).

Reproducibility contract: the indices depend only on ``(n, n_resamples, sample_size, seed)``
and are identical to those used by the ``"index"`` path of :func:`adaptlab.stats.bootstrap_ci`
and :func:`adaptlab.stats.paired_bootstrap`, so thresholds, COE/ROE and other analyses can
reuse exactly the bootstrap samples of the accuracy CIs. Resamples come in blocks of
``block_rows(l)`` rows; block ``b`` is drawn by its own numpy Generator,
``Generator(SFC64(SeedSequence(seed, spawn_key=(0, b))))``, so blocks can be generated in
parallel, and a larger ``n_resamples`` only appends resamples (the first ``m`` stay the same).

Every random number of the bootstrap comes from one of the seeded streams of :func:`stream`,
``Generator(SFC64(SeedSequence(seed, spawn_key=(namespace, ...))))``, with one namespace per use:
:data:`INDEX_KEY` the index blocks above, :data:`SYSTEM_KEY` a system's exact multinomial counts,
:data:`PAIR_KEY` a pair's, :data:`FLIP_KEY` the sign vectors of the paired randomization test
(shared by :func:`adaptlab.stats.paired_bootstrap` and the rank intervals).
"""

from __future__ import annotations

import numbers
from collections.abc import Iterator

import numpy as np

from adaptlab.errors import ConfigError

__all__ = [
    "FLIP_KEY",
    "INDEX_KEY",
    "PAIR_KEY",
    "SYSTEM_KEY",
    "block_rows",
    "iter_resample_indices",
    "resample_indices",
    "stream",
]

_BLOCK_ELEMS = 1 << 20  # indices per block (8 MiB of int64)

INDEX_KEY = 0
"""Spawn-key namespace of the index blocks."""
SYSTEM_KEY = 1
"""Spawn-key namespace of a system's exact multinomial counts."""
PAIR_KEY = 2
"""Spawn-key namespace of a pair's exact multinomial counts (then the pair's own key)."""
FLIP_KEY = 4
"""Spawn-key namespace of the sign vectors of the paired randomization test."""


def stream(seed: int, *key: int) -> np.random.Generator:
    """The random stream ``key`` under ``seed``: ``Generator(SFC64(SeedSequence(seed,
    spawn_key=key)))``; different keys give independent streams (NumPy's ``SeedSequence``)."""
    return np.random.Generator(np.random.SFC64(np.random.SeedSequence(seed, spawn_key=key)))


def block_rows(sample_size: int) -> int:
    """Resamples per block for resamples of ``sample_size`` queries."""
    return max(1, _BLOCK_ELEMS // int(sample_size))


def _check_int(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ConfigError(f"{name}={value!r} must be an integer >= {minimum}")
    if int(value) < minimum:
        raise ConfigError(f"{name}={value!r} must be an integer >= {minimum}")
    return int(value)


def check_seed(seed: object) -> int:
    """Validate a seed: a non-negative integer."""
    return _check_int("seed", seed, 0)


def check_sizes(
    n: int,
    n_resamples: object,
    sample_size: object,
    allow_oversampling: bool = False,
) -> tuple[int, int]:
    """Validate ``n_resamples`` and ``sample_size`` (``None`` -> ``n``); return them as ints.

    ``sample_size > n`` is a :class:`ConfigError` unless ``allow_oversampling``: a resample
    larger than the data shrinks the CI like ``1/sqrt(l)`` without any new information.
    """
    m = _check_int("n_resamples", n_resamples, 1)
    l = n if sample_size is None else _check_int("sample_size", sample_size, 1)
    if l > n and not allow_oversampling:
        paper = f" The paper setting (m=500, l={l}) needs at least {l} queries; this set has {n}." if l == 100 else ""
        raise ConfigError(
            f"sample_size={l} exceeds the {n} queries: resamples larger than the data understate the "
            f"variance and give falsely narrow CIs.{paper} Use sample_size=None (all {n} queries), a "
            f"sample_size <= {n}, or allow_oversampling=True to resample more queries than exist"
        )
    return m, l


def index_block(n: int, sample_size: int, n_resamples: int, seed: int, block: int) -> np.ndarray:
    """Block ``block`` of the resample indices, ``[rows, sample_size]`` int64 (no validation)."""
    rows = block_rows(sample_size)
    start = block * rows
    count = min(rows, n_resamples - start)
    return stream(seed, INDEX_KEY, block).integers(0, n, size=(count, sample_size), dtype=np.int64)


def n_blocks(n_resamples: int, sample_size: int) -> int:
    """Number of index blocks for ``n_resamples`` resamples of ``sample_size`` queries."""
    rows = block_rows(sample_size)
    return -(-n_resamples // rows)


def iter_resample_indices(
    n: int, *, n_resamples: int, sample_size: int | None = None, seed: int = 0, allow_oversampling: bool = False
) -> Iterator[np.ndarray]:
    """Yield the resample indices block by block: int64 arrays ``[rows, l]`` whose rows,
    concatenated, equal :func:`resample_indices` with the same arguments.

    Memory stays at one block (about 8 MiB) whatever ``n_resamples``.
    """
    n = _check_int("n", n, 1)
    seed = check_seed(seed)
    m, l = check_sizes(n, n_resamples, sample_size, allow_oversampling)
    for b in range(n_blocks(m, l)):
        yield index_block(n, l, m, seed, b)


def resample_indices(
    n: int, *, n_resamples: int, sample_size: int | None = None, seed: int = 0, allow_oversampling: bool = False
) -> np.ndarray:
    """Indices of ``n_resamples`` bootstrap resamples of ``sample_size`` queries out of ``n``.

    Returns an int64 array ``[n_resamples, sample_size]`` of positions in ``range(n)`` drawn
    uniformly with replacement (``sample_size`` defaults to ``n``; larger than ``n`` only with
    ``allow_oversampling=True``). The same arguments always
    give the same array, equal to the resamples of the ``"index"`` bootstrap path.

    >>> resample_indices(5, n_resamples=2, sample_size=3, seed=0).shape
    (2, 3)
    """
    blocks = list(
        iter_resample_indices(
            n, n_resamples=n_resamples, sample_size=sample_size, seed=seed, allow_oversampling=allow_oversampling
        )
    )
    return np.concatenate(blocks, axis=0)
