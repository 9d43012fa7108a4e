"""Private vectorised kernels of the bootstrap engine.

* categories: distinct values of one system, of the difference of two systems, or of the
  joint value tuples of all systems, with their query counts (input of the exact multinomial
  path, :mod:`adaptlab.stats._multinomial`);
* the index path: gather the resampled queries and sum them, block by block;
* the percentile interval and the two-sided bootstrap p-value;
* a cost model (nanoseconds, measured on a 2-core x86 machine) used by ``method="auto"``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import ModuleType
from typing import TypeVar

import numpy as np

from adaptlab.stats.backend import is_numpy, to_numpy
from adaptlab.stats.resample import block_rows, index_block, n_blocks

__all__: list[str] = []

T = TypeVar("T")

_GATHER_ELEMS = 1 << 17  # gathered values per CPU step (1 MiB of float64: stays in L2)
_GATHER_ELEMS_GPU = 1 << 24  # per GPU step


# ----------------------------------------------------------------------------- categories
@dataclass(frozen=True)
class Categories:
    """Distinct values of a per-query vector: ``values[k]`` occurs ``counts[k]`` times;
    ``codes[q]`` is the category of query ``q``."""

    values: np.ndarray  # [K] float64
    counts: np.ndarray  # [K] int64
    codes: np.ndarray  # [Q] int64

    @property
    def size(self) -> int:
        return int(self.values.size)


def categories(row: np.ndarray) -> Categories:
    """Distinct values of a 1-D float array with counts and per-query codes."""
    values, codes, counts = np.unique(row, return_inverse=True, return_counts=True)
    return Categories(values, counts.astype(np.int64), codes.astype(np.int64).reshape(-1))


def difference_categories(a: Categories, b: Categories) -> tuple[np.ndarray, np.ndarray]:
    """Distinct per-query differences ``v_a - v_b`` and their counts.

    Built from the joint (value_a, value_b) cells, then cells with equal difference are merged:
    the mean difference of a resample depends only on how often each difference occurs, so
    this is exact for the paired difference and keeps the pairing of the two systems.
    """
    n_cells = a.size * b.size
    if n_cells <= 4 * a.codes.size:
        cell_counts = np.bincount(a.codes * b.size + b.codes, minlength=n_cells)
        cells = np.flatnonzero(cell_counts)
        counts = cell_counts[cells]
    else:  # many distinct values: only the occupied cells
        cells, counts = np.unique(a.codes * b.size + b.codes, return_counts=True)
    diff = a.values[cells // b.size] - b.values[cells % b.size]
    d_values, inverse = np.unique(diff, return_inverse=True)
    d_counts = np.bincount(inverse.reshape(-1), weights=counts).astype(np.int64)
    return d_values, d_counts


def joint_categories(cats: Sequence[Categories], values: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Distinct joint value tuples of all systems: ``(U [G, S], counts [G])``.

    ``None`` when the tuples cannot be coded in one int64 (then the joint path is not used).
    """
    radix = [c.size for c in cats]
    if float(np.prod(np.asarray(radix, dtype=np.float64))) >= 2.0**62:
        return None
    code = np.zeros(values.shape[1], np.int64)
    for c in cats:
        code *= c.size
        code += c.codes
    uniq, first, counts = np.unique(code, return_index=True, return_counts=True)
    return np.ascontiguousarray(values[:, first].T), counts.astype(np.int64)


# ----------------------------------------------------------------------------- index path
def _gather_sums(vt: object, idx: np.ndarray, xp: ModuleType) -> np.ndarray:
    """Sums over each resample (row of ``idx``) of the rows of ``vt [Q, S]``: ``[rows, S]``.

    The gathered values are processed in pieces of about ``_GATHER_ELEMS`` numbers (L2-sized on
    the CPU, large on a GPU); a long resample of many systems is split and accumulated.
    """
    rows, l = idx.shape
    s = vt.shape[1]  # type: ignore[attr-defined]
    elems = _GATHER_ELEMS if is_numpy(xp) else _GATHER_ELEMS_GPU
    dev = (lambda a: a) if is_numpy(xp) else xp.asarray
    out = np.empty((rows, s), np.float64)
    if s == 1:  # one system: 1-D gather, contiguous row sums
        v = vt[:, 0]  # type: ignore[index]
        step = max(1, elems // l)
        for r0 in range(0, rows, step):
            g = xp.take(v, dev(idx[r0 : r0 + step]))
            out[r0 : r0 + step, 0] = to_numpy(g.sum(axis=1))
        return out
    piece = max(1, elems // s)
    if piece >= l:  # whole resamples per step; the sum over a resample is a BLAS product
        step = piece // l
        ones = xp.ones(l, dtype=xp.float64)
        for r0 in range(0, rows, step):
            sub = idx[r0 : r0 + step]
            g = xp.take(vt, dev(sub.reshape(-1)), axis=0).reshape(sub.shape[0], l, s)
            out[r0 : r0 + step] = to_numpy(xp.matmul(ones, g))
        return out
    ones = xp.ones(piece, dtype=xp.float64)
    for r in range(rows):  # long resamples of many systems: accumulate pieces
        acc = xp.zeros(s, dtype=xp.float64)
        for c0 in range(0, l, piece):
            seg = idx[r, c0 : c0 + piece]
            acc += xp.matmul(ones[: seg.size], xp.take(vt, dev(seg), axis=0))
        out[r] = to_numpy(acc)
    return out


def index_sums(
    values: np.ndarray,
    *,
    sample_size: int,
    n_resamples: int,
    seed: int,
    xp: ModuleType,
    n_jobs: int,
    rowwise: bool = False,
) -> np.ndarray:
    """``[n_resamples, S]`` sums of each system's values over the shared index resamples.
    ``rowwise``: each system summed on its own, in the order one system alone gets, so its
    sums are bit-identical whatever other systems are passed (else one product for all)."""
    n = values.shape[1]
    vt = np.ascontiguousarray(values.T)
    if not is_numpy(xp):
        vt = xp.asarray(vt)
    rows = block_rows(sample_size)
    out = np.empty((n_resamples, values.shape[0]), np.float64)

    def work(b: int) -> None:
        idx = index_block(n, sample_size, n_resamples, seed, b)
        if not rowwise:
            out[b * rows : b * rows + idx.shape[0]] = _gather_sums(vt, idx, xp)
            return
        for c in range(values.shape[0]):
            out[b * rows : b * rows + idx.shape[0], c] = _gather_sums(vt[:, c : c + 1], idx, xp)[:, 0]

    run_parallel(work, range(n_blocks(n_resamples, sample_size)), n_jobs if is_numpy(xp) else 1)
    return out


# ----------------------------------------------------------------------------- inference
def percentile_interval(boot: np.ndarray, confidence: float, axis: int = -1) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval of the bootstrap replicates along ``axis`` (default: the last):
    the quantiles ``(1 - c) / 2`` and ``(1 + c) / 2`` at ``c = confidence``, with linear
    interpolation (numpy's default; ``scipy.stats.bootstrap(method="percentile")`` uses the same
    rule; Efron & Tibshirani 1993, "An Introduction to the Bootstrap", section 13.3)."""
    alpha = (1.0 - confidence) / 2.0
    q = np.quantile(boot, [alpha, 1.0 - alpha], axis=axis)
    return q[0], q[1]


def two_sided_p_value(d_star: np.ndarray, tol: float) -> np.ndarray:
    """``min(1, 2 * min(1 + #{D* <= 0}, 1 + #{D* >= 0}) / (B + 1))`` along the last axis;
    ``|D*| <= tol`` counts as zero (floating-point rounding of exactly tied resamples)."""
    b = d_star.shape[-1]
    le = np.count_nonzero(d_star <= tol, axis=-1)
    ge = np.count_nonzero(d_star >= -tol, axis=-1)
    return np.minimum(1.0, 2.0 * (np.minimum(le, ge) + 1.0) / (b + 1.0))


# ----------------------------------------------------------------------------- cost model
_NS_INDEX = 4.0  # per resampled index: RNG + bookkeeping
_NS_INDEX_SYS = 0.8  # per resampled index and system: gather + add
_NS_TABLE = 4.0  # per Poisson table draw
_NS_PROPOSAL = 40.0  # per proposal: totals, acceptance test
_NS_ENTRY = 50.0  # per table entry built


def multinomial_cost_bound(n_categories: int, n_resamples: int) -> float:
    """Table draws alone for ``n_categories`` categories (a rough size gate)."""
    return float(n_categories) * n_resamples * _NS_TABLE


def index_cost(n_resamples: int, sample_size: int, n_systems: int) -> float:
    """Estimated ns of the index path for ``n_systems`` systems sharing the resamples."""
    return n_resamples * sample_size * (_NS_INDEX + _NS_INDEX_SYS * n_systems)


def multinomial_cost(counts: np.ndarray, sample_size: int, n_resamples: int) -> float:
    """Estimated ns of :func:`adaptlab.stats._multinomial.multinomial_sums` for categories of
    sizes ``counts``."""
    counts = np.asarray(counts, dtype=np.float64)
    if counts.size <= 1:
        return 0.0
    p = counts / counts.sum()
    big = int(np.argmax(p))
    lam = sample_size * np.delete(p, big)
    entries = float(np.sum(10.0 * np.sqrt(lam) + 13.0))
    proposals = n_resamples / np.sqrt(p[big])
    return proposals * (lam.size * _NS_TABLE + _NS_PROPOSAL) + entries * _NS_ENTRY


# ----------------------------------------------------------------------------- threads
def default_jobs() -> int:
    """Worker threads: the CPUs this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def run_parallel(fn: Callable[[T], object], items: Iterable[T], n_jobs: int) -> None:
    """Call ``fn`` on every item, with ``n_jobs`` threads (numpy releases the GIL in the
    kernels); results must not depend on the order, which threads do not fix."""
    todo = list(items)
    if n_jobs <= 1 or len(todo) <= 1:
        for it in todo:
            fn(it)
        return
    with ThreadPoolExecutor(max_workers=min(n_jobs, len(todo))) as ex:
        for fut in [ex.submit(fn, it) for it in todo]:
            fut.result()
