"""Bootstrap CIs of the mean per-query value of each system: :func:`bootstrap_ci`.

One resample draws ``l`` of the ``Q`` queries with replacement and averages them; ``m`` resamples
give the resampled means ``x*_1..x*_m`` of each system, along the index or the exact multinomial
path (:mod:`adaptlab.stats.bootstrap`), and the CI comes from them (percentile, studentized, BCa)
or, for 0/1 values, from the counts (Wilson, Jeffreys; :mod:`adaptlab.stats.intervals`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from adaptlab.errors import ConfigError
from adaptlab.stats import _kernels as K
from adaptlab.stats._multinomial import multinomial_sums
from adaptlab.stats.backend import get_xp
from adaptlab.stats.intervals import (
    bca_interval,
    is_binary,
    jeffreys_interval,
    measure_interval,
    studentized_interval,
    wilson_interval,
)
from adaptlab.stats.options import CIOptions, Resampling, Unpack, as_values, resampling
from adaptlab.stats.resample import SYSTEM_KEY, stream
from adaptlab.stats.settings import BootstrapConfig

__all__ = ["BootstrapResult", "bootstrap_ci"]


@dataclass(frozen=True, eq=False)
class BootstrapResult:
    """Bootstrap CIs of the mean of each system.

    Shape rule: from ``[n_systems, n_queries]`` values, ``point``, ``boot_mean``, ``ci_low`` and
    ``ci_high`` are arrays of shape ``[n_systems]`` and ``distribution`` ``[n_systems, n_resamples]``;
    from ``[n_queries]`` values (one system) they are floats and ``distribution`` is
    ``[n_resamples]``: no system axis (``scalar`` is True).
    """

    point: np.ndarray | float
    boot_mean: np.ndarray | float
    ci_low: np.ndarray | float
    ci_high: np.ndarray | float
    n_queries: int
    n_resamples: int
    sample_size: int
    seed: int
    confidence: float
    method: str
    distribution: np.ndarray | None = None  # [n_systems, n_resamples] ([n_resamples] if scalar) if kept
    interval: str = "percentile"  # how ci_low/ci_high were computed (adaptlab.stats.intervals)

    @property
    def scalar(self) -> bool:
        """True for the result of 1-D values: floats, no system axis."""
        return np.ndim(self.point) == 0

    @property
    def n_systems(self) -> int:
        """The number of rows bootstrapped (1 for 1-D values)."""
        return 1 if self.scalar else int(np.shape(self.point)[0])

    def row(self, i: int | None = None) -> dict[str, Any]:
        """System ``i`` as a flat record (floats and ints, ready for a table); for a result of
        1-D values ``row()``, a record without ``system``."""
        if self.scalar != (i is None):
            raise ConfigError(
                "row(): this result has no system axis (1-D values), call row()"
                if self.scalar
                else f"row(): give a system index in 0..{self.n_systems - 1}"
            )
        ends = {k: getattr(self, k) for k in ("point", "boot_mean", "ci_low", "ci_high")}
        return {
            **({} if i is None else {"system": int(i)}),
            **{k: float(v if i is None else v[i]) for k, v in ends.items()},
            "n_queries": self.n_queries,
            "n_resamples": self.n_resamples,
            "sample_size": self.sample_size,
            "seed": self.seed,
            "confidence": self.confidence,
            "method": self.method,
            "interval": self.interval,
        }


def _ci_interval(interval: str, measure: object, arr: np.ndarray, l: int) -> str:
    """The interval of :func:`bootstrap_ci`: :func:`~adaptlab.stats.intervals.measure_interval`
    of ``measure``; without a measure, ``"wilson"``/``"jeffreys"`` need 0/1 values (an error
    otherwise: no other row decides a row's interval)."""
    if measure is None and interval in ("wilson", "jeffreys"):
        bad = [i for i, row in enumerate(arr) if not is_binary(row)]
        if bad:
            raise ConfigError(
                f"interval={interval!r} needs 0/1 values (e.g. accuracy@k); row {bad[0]} is not 0/1 "
                "(name the measure with measure= to get its interval, or use interval='auto')"
            )
        return interval
    return measure_interval(interval, measure, n_queries=arr.shape[1], sample_size=l)


def _intervals(
    values: np.ndarray, boot: np.ndarray, boot_sq: np.ndarray | None, plan: Resampling, used: str
) -> tuple[np.ndarray, np.ndarray, str]:
    """CIs of each row of ``values`` [S, Q] at ``plan.confidence`` by the interval ``used`` from its
    resampled means ``boot`` [S, m] (and resampled means of squares ``boot_sq`` for
    ``"studentized"``); returns ``(low, high, interval used)``."""
    conf = plan.confidence
    if used in ("wilson", "jeffreys"):
        f = wilson_interval if used == "wilson" else jeffreys_interval
        ends = np.array([f(v, conf) for v in values]).reshape(-1, 2)
        return ends[:, 0], ends[:, 1], used
    if used == "bca":
        ends = np.array([bca_interval(v, b, conf) for v, b in zip(values, boot)]).reshape(-1, 2)
        return ends[:, 0], ends[:, 1], used
    if used == "studentized":
        triples = zip(values, boot, boot_sq)  # type: ignore[arg-type]
        ends = np.array([studentized_interval(v, b, b2, plan.l, conf) for v, b, b2 in triples]).reshape(-1, 2)
        return ends[:, 0], ends[:, 1], used
    lo, hi = K.percentile_interval(boot, conf)
    return np.atleast_1d(lo), np.atleast_1d(hi), "percentile"


def _ci_paths(arr: np.ndarray, plan: Resampling) -> tuple[list[str], list[K.Categories] | None]:
    """The path of each row: ``plan.run.method`` itself, or for ``"auto"`` the cheaper one for
    that row alone (``K.index_cost`` of one system against the row's ``K.multinomial_cost``), so
    a row's path never depends on the other rows; with the per-row categories built on the way
    (``None`` when none were built)."""
    method = plan.run.method
    if method != "auto":
        return [method] * arr.shape[0], None
    idx_cost = K.index_cost(plan.m, plan.l, 1)
    cats = [K.categories(r) for r in arr]
    costs = [K.multinomial_cost(c.counts, plan.l, plan.m) for c in cats]
    return ["multinomial" if c < idx_cost else "index" for c in costs], cats


def _index_means(arr: np.ndarray, rows: list[int], plan: Resampling, squares: bool) -> np.ndarray:
    """``[2 S' if squares else S', m]`` resampled means of the rows ``rows`` of ``arr`` (then of
    their squares) over the shared ``resample_indices(Q, m, l, seed)``, summed row by row."""
    data = arr[rows] if not squares else np.vstack([arr[rows], arr[rows] ** 2])
    xp = get_xp(plan.run.backend)
    sums = K.index_sums(
        data, sample_size=plan.l, n_resamples=plan.m, seed=plan.seed, xp=xp, n_jobs=plan.jobs, rowwise=True
    )
    return sums.T / plan.l


def _resampled_means(
    arr: np.ndarray, paths: list[str], cats: list[K.Categories] | None, plan: Resampling, squares: bool = False
) -> tuple[np.ndarray, np.ndarray | None]:
    """``[n_systems, m]`` resampled means ``x*_j`` of each row of ``arr`` along its path: an
    ``"index"`` row averages the shared resamples (:func:`_index_means`); a ``"multinomial"``
    row's counts are drawn exactly from the stream ``(seed, SYSTEM_KEY)``, the same for every
    row. Either way a row's numbers depend only on its own values, Q, m, l and the seed, never on
    the other rows. With ``squares``, also the resampled means of the squared values (same
    resamples; the studentized interval's ``boot_sq``), else ``None``."""
    m, l = plan.m, plan.l
    boot = np.empty((arr.shape[0], m), np.float64)
    boot_sq = np.empty((arr.shape[0], m), np.float64) if squares else None
    index_rows = [s for s, p in enumerate(paths) if p == "index"]
    if index_rows:
        means = _index_means(arr, index_rows, plan, squares)
        boot[index_rows] = means[: len(index_rows)]
        if boot_sq is not None:
            boot_sq[index_rows] = means[len(index_rows) :]
    cats = [K.categories(r) for r in arr] if cats is None else cats

    def one(s: int) -> None:
        c = cats[s]
        weights = c.values[:, None] if not squares else np.c_[c.values, c.values**2]
        sums = multinomial_sums(c.counts, weights, l, m, stream(plan.seed, SYSTEM_KEY))
        boot[s] = sums[:, 0] / l
        if boot_sq is not None:
            boot_sq[s] = sums[:, 1] / l

    K.run_parallel(one, [s for s, p in enumerate(paths) if p == "multinomial"], plan.jobs)
    return boot, boot_sq


def _squeeze(x: np.ndarray, one: bool) -> np.ndarray | float:
    """``x`` [n_systems], or its only entry as a float for 1-D input."""
    return float(x[0]) if one else x


def _ci_result(
    arr: np.ndarray,
    boot: np.ndarray,
    paths: list[str],
    ends: tuple[np.ndarray, np.ndarray, str],
    plan: Resampling,
    *,
    one: bool,
    keep: bool,
) -> BootstrapResult:
    """The :class:`BootstrapResult` of the rows ``arr`` [S, Q] from their resampled means ``boot``
    [S, m], the ``paths`` they took and their interval ``ends`` ``(low, high, interval used)``:
    floats and no system axis when ``one`` (1-D values), the distribution when ``keep``."""
    lo, hi, used = ends
    return BootstrapResult(
        point=_squeeze(arr.mean(axis=1), one),
        boot_mean=_squeeze(boot.mean(axis=1), one),
        ci_low=_squeeze(lo, one),
        ci_high=_squeeze(hi, one),
        n_queries=arr.shape[1],
        n_resamples=plan.m,
        sample_size=plan.l,
        seed=plan.seed,
        confidence=plan.confidence,
        method=paths[0] if len(set(paths)) == 1 else "index+multinomial",
        distribution=(boot[0] if one else boot) if keep else None,
        interval=used,
    )


def bootstrap_ci(
    values: Any,
    *,
    config: BootstrapConfig | None = None,
    measure: object = None,
    keep_distribution: bool = False,
    **options: Unpack[CIOptions],
) -> BootstrapResult:
    """Bootstrap CI of the mean per-query value of each system.

    The CI is the ``(1 - c)/2`` and ``(1 + c)/2`` quantiles of ``m`` resampled means, each the
    mean of ``l`` queries drawn with replacement (Efron and Tibshirani 1993, chapter 13). Each row
    takes its own path (``"auto"``: the cheaper for that row alone; ``"index+multinomial"`` when the
    rows took both), so a system's CI and ``boot_mean`` depend only on its own values, Q, m, l and
    the seed. They are marginal: compare systems with :func:`paired_bootstrap` (docs/metrics.md).

    Parameters
    ----------
    values : array-like
        ``[n_queries]`` or ``[n_systems, n_queries]`` finite per-query metric values.
    config : BootstrapConfig, optional
        The settings as one value; or give its fields as the keyword options below, not both
        (the defaults are the config's).
    measure : str or Measure, optional
        The measure the values are of ("acc@10", "ndcg@10", "mrr"): decides the ``"auto"`` interval.
    keep_distribution : bool
        Keep the resampled means ``[n_systems, n_resamples]``.
    n_resamples : int
        ``m``, the number of resamples (default 1000).
    sample_size : int or None
        ``l``, queries per resample (None: all ``Q``); more than ``Q`` only with ``allow_oversampling``.
    seed : int
        Seeds the resamples (a seeded NumPy Generator; default 0).
    confidence : float
        ``c``, coverage of the interval (default 0.95: the 2.5th and 97.5th percentiles).
    allow_oversampling : bool
        Allow ``sample_size > Q``.
    interval : str
        One of :data:`adaptlab.stats.intervals.INTERVALS`; ``"auto"``: by the measure's definition
        (:func:`adaptlab.stats.intervals.measure_interval`: Wilson for 0/1 measures such as
        acc@k, studentized for the others and for bare values; percentile when ``sample_size`` <
        Q). The one used is ``BootstrapResult.interval``; it never depends on the values.
    method : str
        ``"auto"``, ``"index"`` or ``"multinomial"`` (exact counts over the distinct values;
        :mod:`adaptlab.stats.bootstrap`). With ``backend`` and ``n_jobs``, an execution option
        (:class:`~adaptlab.stats.options.Execution`) allowed beside ``config``.
    backend : str
        ``"auto"``, ``"numpy"`` or ``"cupy"`` (the index path's arithmetic).
    n_jobs : int or None
        Worker threads (default: available CPUs); no effect on the result.

    Returns
    -------
    BootstrapResult
        ``point``, ``boot_mean``, ``ci_low``, ``ci_high``: floats for ``[n_queries]`` values, else
        arrays ``[n_systems]`` (even for one row); the same numbers either way.

    Examples
    --------
    >>> r = bootstrap_ci([0.0, 1.0, 1.0, 1.0], n_resamples=200, seed=1)
    >>> r.point, bool(r.ci_low <= r.point <= r.ci_high)
    (0.75, True)
    >>> bootstrap_ci([[0.0, 1.0, 1.0, 1.0]], config=BootstrapConfig(n_resamples=200, seed=1)).point
    array([0.75])
    """
    arr = as_values(values)
    plan = resampling("bootstrap_ci", arr.shape[1], config, options, CIOptions)
    used = _ci_interval(plan.interval, measure, arr, plan.l)
    paths, cats = _ci_paths(arr, plan)
    boot, boot_sq = _resampled_means(arr, paths, cats, plan, squares=used == "studentized")
    ends = _intervals(arr, boot, boot_sq, plan, used)
    return _ci_result(arr, boot, paths, ends, plan, one=np.ndim(values) == 1, keep=keep_distribution)
