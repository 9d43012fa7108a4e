"""Bootstrap confidence intervals of mean per-query metrics, and paired system comparisons.

Definitions (docs/sections/bootstrap.md has the full text): given per-query values
``x_1..x_Q`` of a system, one resample draws ``l`` queries uniformly with replacement
(``l = sample_size``, default ``Q``) and computes their mean ``x*``; ``m = n_resamples``
resamples give ``x*_1..x*_m``. The point estimate is the mean over all queries, ``boot_mean``
is the mean of the ``x*_j``, and the ``confidence`` interval is the percentile interval: the
``(1-c)/2`` and ``(1+c)/2`` quantiles of the ``x*_j`` (linear interpolation, as
``scipy.stats.bootstrap(method="percentile")``). The paper setting ``m=500, l=100`` is
``n_resamples=500, sample_size=100``.

Two computation paths give the same bootstrap distribution:

* ``"index"``: draw the query indices (:func:`adaptlab.stats.resample_indices`, shared by
  every system), gather and average. Cost grows with ``m * l``.
* ``"multinomial"``: exact for any data, fast when the values take few distinct values
  (accuracy@k, nDCG@k or MRR@k with one gold document): the resample mean is
  ``sum_k N_k v_k / l`` with counts ``N ~ Multinomial(l, n_k / Q)`` over the ``K`` distinct
  values, drawn exactly by :mod:`adaptlab.stats._multinomial`; cost grows with ``m * K``,
  not with ``Q`` or ``l``. Paired differences use the distinct per-query differences of the
  two systems (exact pairing), drawn in the pair's canonical orientation from a stream keyed by
  the two rows' contents.

``method="auto"`` picks the path with the smaller estimated cost, per system for CIs and per pair
for differences, from that system's or pair's own values: a CI depends only on its system's
values, a paired difference only on its two systems' values (never on the other systems or on
their order), and the pair ``(b, a)`` gets exactly the negated differences and interval of
``(a, b)``. Randomness comes only from
``seed`` (numpy Generators with SFC64 bit generators seeded by
``SeedSequence(seed, spawn_key=...)``); results do not depend on ``n_jobs`` or on the backend.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from adaptlab.errors import ConfigError, DataError
from adaptlab.stats import _kernels as K
from adaptlab.stats._multinomial import multinomial_sums
from adaptlab.stats.backend import get_xp, to_numpy
from adaptlab.stats.intervals import (
    INTERVALS,
    NEEDS_ALL_QUERIES,
    bca_interval,
    is_binary,
    jeffreys_interval,
    measure_interval,
    studentized_interval,
    wilson_interval,
)
from adaptlab.stats.pvalues import PAIRED_TESTS, p_at_floor
from adaptlab.stats.resample import check_seed, check_sizes
from adaptlab.stats.signflip import family_sign_flip

__all__ = ["BootstrapResult", "METHODS", "PairedDifference", "bootstrap_ci", "paired_bootstrap"]

METHODS: tuple[str, ...] = ("auto", "index", "multinomial")
"""Accepted values of the ``method`` argument."""

_KEY_SYSTEM = 1  # SeedSequence spawn-key namespaces of the multinomial draws
_KEY_PAIR = 2
_KEY_FLIP = 4  # the sign vectors of the randomization test
_ZERO_TOL = 1e-10  # |D*| <= _ZERO_TOL * max|d| counts as an exact tie in the p-value


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


@dataclass(frozen=True)
class PairedDifference:
    """Paired bootstrap comparison of system ``a`` against system ``b`` (difference ``a - b``).

    ``p_value`` is the two-sided paired randomization (sign-flip) test at every number of
    queries (:mod:`adaptlab.stats.signflip`; null: the per-query differences are symmetric about
    0), exact over all sign patterns (``test == "sign-flip-exact"``) or from ``p_draws`` random
    sign vectors (``test == "sign-flip"``); only when asked for (``test="bootstrap"`` in
    :func:`paired_bootstrap`) the two-sided bootstrap p-value
    ``min(1, 2 * min(1 + #{D* <= 0}, 1 + #{D* >= 0}) / (m + 1))`` over the ``m`` resampled mean
    differences ``D*`` (``test == "bootstrap"``). ``p_draws``: the Monte Carlo draws behind
    ``p_value`` (sign vectors or resamples; 0 for an exact p-value); ``p_bound``: ``p_value`` is
    at its Monte Carlo floor, a bound (:func:`adaptlab.stats.pvalues.p_at_floor`).
    """

    a: str | int
    b: str | int
    diff: float
    boot_mean: float
    ci_low: float
    ci_high: float
    p_value: float
    method: str = ""
    n_resamples: int = 0
    sample_size: int = 0
    confidence: float = 0.95
    seed: int = 0
    interval: str = "percentile"
    test: str = "bootstrap"
    p_draws: int = 0

    @property
    def p_bound(self) -> bool:
        """``p_value`` is at the floor of its Monte Carlo test: the true p may be smaller."""
        return p_at_floor(self.p_value, self.test, self.p_draws)

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "p_bound": self.p_bound}


# ----------------------------------------------------------------------------- validation
def _as_values(values: Any) -> np.ndarray:
    try:
        arr = np.asarray(to_numpy(values), dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise DataError(f"values must be numbers, [n_queries] or [n_systems, n_queries]: {e}") from e
    if arr.ndim == 1:
        arr = arr[None, :]
        where = lambda s, q: f"values[{q}]"  # noqa: E731
    elif arr.ndim == 2:
        where = lambda s, q: f"values[{s}, {q}]"  # noqa: E731
    else:
        raise DataError(f"values must have shape [n_queries] or [n_systems, n_queries]; got shape {arr.shape}")
    if arr.shape[0] < 1 or arr.shape[1] < 1:
        raise DataError(f"values has no queries or no systems (shape {arr.shape})")
    bad = ~np.isfinite(arr)
    if bad.any():
        s, q = (int(x) for x in np.argwhere(bad)[0])
        raise DataError(
            f"{where(s, q)} is {arr[s, q]}: per-query metric values must be finite numbers "
            f"(NaN is not allowed; {int(bad.sum())} such value(s)); drop the queries without "
            "judgments or fill them before bootstrapping"
        )
    return np.ascontiguousarray(arr)


def _check_options(confidence: object, method: object, backend: object, n_jobs: object) -> tuple[float, int]:
    """``(confidence, n_jobs)`` checked, with ``method`` and ``backend`` checked in between."""
    if isinstance(confidence, bool) or not isinstance(confidence, numbers.Real) or not 0.0 < float(confidence) < 1.0:
        raise ConfigError(f"confidence={confidence!r} must be a number strictly between 0 and 1")
    conf = float(confidence)
    if method not in METHODS:
        raise ConfigError(f"method={method!r} is not valid; expected one of {', '.join(METHODS)}")
    get_xp(backend)  # type: ignore[arg-type]  # validates the name / availability
    if n_jobs is None:
        return conf, K.default_jobs()
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, numbers.Integral) or int(n_jobs) < 1:
        raise ConfigError(f"n_jobs={n_jobs!r} must be a positive integer or None")
    return conf, int(n_jobs)


def _check_interval(interval: object, n_q: int, l: int) -> str:
    if interval not in INTERVALS:
        raise ConfigError(f"interval={interval!r} is not valid; expected one of {', '.join(INTERVALS)}")
    if interval in NEEDS_ALL_QUERIES and l != n_q:
        raise ConfigError(
            f"interval={interval!r} needs resamples of all {n_q} queries; got sample_size={l} "
            "(use sample_size=None or interval='percentile')"
        )
    return str(interval)


def _check_settings(
    n_q: int,
    n_resamples: object,
    sample_size: object,
    allow_oversampling: bool,
    confidence: object,
    method: object,
    backend: object,
    n_jobs: object,
    interval: object,
) -> tuple[int, int, int, float, str]:
    """The resampling settings of ``n_q`` queries, checked in this order: ``(m, l)`` by
    :func:`~adaptlab.stats.resample.check_sizes`, then ``confidence``, ``method``, ``backend``,
    ``n_jobs``, then ``interval``; returns ``(m, l, jobs, confidence, interval)``."""
    m, l = check_sizes(n_q, n_resamples, sample_size, allow_oversampling)
    conf, jobs = _check_options(confidence, method, backend, n_jobs)
    return m, l, jobs, conf, _check_interval(interval, n_q, l)


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
    values: np.ndarray,
    boot: np.ndarray,
    boot_sq: np.ndarray | None,
    conf: float,
    used: str,
    l: int,
) -> tuple[np.ndarray, np.ndarray, str]:
    """CIs of each row of ``values`` [S, Q] by the interval ``used`` from its resampled means
    ``boot`` [S, m] (and resampled means of squares ``boot_sq`` for ``"studentized"``)."""
    if used in ("wilson", "jeffreys"):
        f = wilson_interval if used == "wilson" else jeffreys_interval
        ends = np.array([f(v, conf) for v in values]).reshape(-1, 2)
        return ends[:, 0], ends[:, 1], used
    if used == "bca":
        ends = np.array([bca_interval(v, b, conf) for v, b in zip(values, boot)]).reshape(-1, 2)
        return ends[:, 0], ends[:, 1], used
    if used == "studentized":
        triples = zip(values, boot, boot_sq)  # type: ignore[arg-type]
        ends = np.array([studentized_interval(v, b, b2, l, conf) for v, b, b2 in triples]).reshape(-1, 2)
        return ends[:, 0], ends[:, 1], used
    lo, hi = K.percentile_interval(boot, conf)
    return np.atleast_1d(lo), np.atleast_1d(hi), "percentile"


def _one_system(values: Any) -> bool:
    """True when already-validated ``values`` are 1-D: one system's per-query values."""
    return np.ndim(values) == 1


def _squeeze(x: np.ndarray, one: bool) -> np.ndarray | float:
    """``x`` [n_systems], or its only entry as a float for 1-D input."""
    return float(x[0]) if one else x


def _rng(seed: int, *key: int) -> np.random.Generator:
    return np.random.Generator(np.random.SFC64(np.random.SeedSequence(seed, spawn_key=key)))


# ----------------------------------------------------------------------------- bootstrap_ci steps
def _ci_paths(arr: np.ndarray, method: str, m: int, l: int) -> tuple[list[str], list[K.Categories] | None]:
    """The path of each row in :func:`bootstrap_ci`: ``method`` itself, or for ``"auto"`` the
    cheaper one for that row alone (``K.index_cost`` of one system against the row's
    ``K.multinomial_cost``), so a row's path never depends on the other rows; with the per-row
    categories built on the way (``None`` when none were built)."""
    if method != "auto":
        return [method] * arr.shape[0], None
    idx_cost = K.index_cost(m, l, 1)
    cats = [K.categories(r) for r in arr]
    return ["multinomial" if K.multinomial_cost(c.counts, l, m) < idx_cost else "index" for c in cats], cats


def _resampled_means(
    arr: np.ndarray,
    paths: list[str],
    cats: list[K.Categories] | None,
    *,
    m: int,
    l: int,
    seed: int,
    backend: str,
    jobs: int,
    squares: bool = False,
) -> tuple[np.ndarray, np.ndarray | None]:
    """``[n_systems, m]`` resampled means ``x*_j`` of each row of ``arr`` along its path: an
    ``"index"`` row averages the shared resamples ``resample_indices(Q, m, l, seed)`` (summed
    row by row); a ``"multinomial"`` row's counts are drawn exactly from the stream
    ``(seed, _KEY_SYSTEM)``, the same for every row. Either way a row's numbers depend only on
    its own values, Q, m, l and the seed, never on the other rows. With ``squares``, also the
    resampled means of the squared values (same resamples; the studentized interval's
    ``boot_sq``), else ``None``."""
    boot = np.empty((arr.shape[0], m), np.float64)
    boot_sq = np.empty((arr.shape[0], m), np.float64) if squares else None
    index_rows = [s for s, p in enumerate(paths) if p == "index"]
    if index_rows:
        xp = get_xp(backend)
        rows = arr[index_rows] if not squares else np.vstack([arr[index_rows], arr[index_rows] ** 2])
        sums = K.index_sums(rows, sample_size=l, n_resamples=m, seed=seed, xp=xp, n_jobs=jobs, rowwise=True)
        boot[index_rows] = sums[:, : len(index_rows)].T / l
        if boot_sq is not None:
            boot_sq[index_rows] = sums[:, len(index_rows) :].T / l
    if cats is None:
        cats = [K.categories(r) for r in arr]

    def one(s: int) -> None:
        c = cats[s]
        weights = c.values[:, None] if not squares else np.c_[c.values, c.values**2]
        sums = multinomial_sums(c.counts, weights, l, m, _rng(seed, _KEY_SYSTEM))
        boot[s] = sums[:, 0] / l
        if boot_sq is not None:
            boot_sq[s] = sums[:, 1] / l

    K.run_parallel(one, [s for s, p in enumerate(paths) if p == "multinomial"], jobs)
    return boot, boot_sq


def _ci_result(
    arr: np.ndarray,
    boot: np.ndarray,
    paths: list[str],
    ends: tuple[np.ndarray, np.ndarray, str],
    *,
    one: bool,
    keep: bool,
    m: int,
    l: int,
    seed: int,
    conf: float,
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
        n_resamples=m,
        sample_size=l,
        seed=seed,
        confidence=conf,
        method=paths[0] if len(set(paths)) == 1 else "index+multinomial",
        distribution=(boot[0] if one else boot) if keep else None,
        interval=used,
    )


# ----------------------------------------------------------------------------- public API
def bootstrap_ci(
    values: Any,
    *,
    n_resamples: int = 1000,
    sample_size: int | None = None,
    seed: int = 0,
    confidence: float = 0.95,
    method: str = "auto",
    backend: str = "auto",
    n_jobs: int | None = None,
    keep_distribution: bool = False,
    allow_oversampling: bool = False,
    interval: str = "auto",
    measure: object = None,
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
    n_resamples : int
        ``m``, the number of resamples.
    sample_size : int or None
        ``l``, queries per resample (None: all ``Q``); more than ``Q`` only with ``allow_oversampling``.
    seed : int
        Seeds the resamples (a seeded NumPy Generator).
    confidence : float
        ``c``, coverage of the interval (0.95: the 2.5th and 97.5th percentiles).
    method : str
        ``"auto"``, ``"index"`` or ``"multinomial"`` (exact counts over the distinct values; module doc).
    backend : str
        ``"auto"``, ``"numpy"`` or ``"cupy"`` (the index path's arithmetic).
    n_jobs : int or None
        Worker threads (default: available CPUs); no effect on the result.
    keep_distribution : bool
        Keep the resampled means ``[n_systems, n_resamples]``.
    allow_oversampling : bool
        Allow ``sample_size > Q``.
    interval : str
        One of :data:`adaptlab.stats.intervals.INTERVALS`; ``"auto"``: by the measure's definition
        (:func:`adaptlab.stats.intervals.measure_interval`: Wilson for 0/1 measures such as
        acc@k, studentized for the others and for bare values; percentile when ``sample_size`` <
        Q). The one used is ``BootstrapResult.interval``; it never depends on the values.
    measure : str or Measure, optional
        The measure the values are of ("acc@10", "ndcg@10", "mrr"): decides the ``"auto"`` interval.

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
    >>> bootstrap_ci([[0.0, 1.0, 1.0, 1.0]], n_resamples=200, seed=1).point
    array([0.75])
    """
    arr = _as_values(values)
    seed = check_seed(seed)
    m, l, jobs, conf, interval = _check_settings(
        arr.shape[1], n_resamples, sample_size, allow_oversampling, confidence, method, backend, n_jobs, interval
    )
    used = _ci_interval(interval, measure, arr, l)
    paths, cats = _ci_paths(arr, method, m, l)
    boot, boot_sq = _resampled_means(
        arr, paths, cats, m=m, l=l, seed=seed, backend=backend, jobs=jobs, squares=used == "studentized"
    )
    return _ci_result(
        arr,
        boot,
        paths,
        _intervals(arr, boot, boot_sq, conf, used, l),
        one=_one_system(values),
        keep=keep_distribution,
        m=m,
        l=l,
        seed=seed,
        conf=conf,
    )


def _system_index(n_sys: int, names: Sequence[str] | None, system: int | str, what: str) -> int:
    """The row index of ``system`` (a name among ``names`` or an index in ``0..n_sys-1``)."""
    if isinstance(system, str):
        if names is None or system not in names:
            raise ConfigError(
                f"{what}={system!r} is not one of the system names "
                f"{list(names) if names is not None else '(no names given)'}"
            )
        return list(names).index(system)
    if isinstance(system, numbers.Integral) and not isinstance(system, bool):
        if not 0 <= int(system) < n_sys:
            raise ConfigError(f"{what}={system!r} is not a system index in 0..{n_sys - 1}")
        return int(system)
    raise ConfigError(f"{what}={system!r} must be a system index, a name, or None")


def _pairs(
    n_sys: int,
    names: Sequence[str] | None,
    baseline: int | str | None,
    explicit: Sequence[tuple[int | str, int | str]] | None = None,
) -> list[tuple[int, int]]:
    """Row-index pairs ``(a, b)`` (difference ``a - b``): ``explicit`` when given (checked: two
    different systems, no pair twice), else every system against ``baseline``, else all pairs."""
    if explicit is not None:
        if baseline is not None:
            raise ConfigError("give either baseline= or pairs=, not both")
        out: list[tuple[int, int]] = []
        for pair in explicit:
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise ConfigError(f"pairs: each entry must be (system, compared_to); got {pair!r}")
            a, b = (_system_index(n_sys, names, x, "pairs entry") for x in pair)
            if a == b or (a, b) in out:
                raise ConfigError(f"pairs: {tuple(pair)!r} compares a system with itself or repeats a pair")
            out.append((a, b))
        if not out:
            raise ConfigError("pairs: empty; give at least one (system, compared_to) pair or pairs=None")
        return out
    if baseline is None:
        return [(i, j) for i in range(n_sys) for j in range(i + 1, n_sys)]
    base = _system_index(n_sys, names, baseline, "baseline")
    return [(i, base) for i in range(n_sys) if i != base]


# ----------------------------------------------------------------------------- paired_bootstrap steps
def _check_names(names: Sequence[str] | None, n_sys: int) -> list[str] | None:
    """``names`` as strings, checked to be ``n_sys`` distinct ones (``None`` stays ``None``)."""
    if names is None:
        return None
    names = [str(x) for x in names]
    if len(names) != n_sys or len(set(names)) != n_sys:
        raise ConfigError(f"names must be {n_sys} distinct strings (one per row); got {names}")
    return names


def _check_systems(
    arr: np.ndarray,
    names: Sequence[str] | None,
    baseline: int | str | None,
    pairs: Sequence[tuple[int | str, int | str]] | None,
) -> tuple[list[str] | None, list[tuple[int, int]]]:
    """At least two systems (rows of ``arr``), their checked ``names`` and the row pairs to
    compare (:func:`_pairs`), checked in that order."""
    n_sys = arr.shape[0]
    if n_sys < 2:
        raise DataError(f"paired_bootstrap needs at least 2 systems; values has shape {arr.shape}")
    names = _check_names(names, n_sys)
    return names, _pairs(n_sys, names, baseline, pairs)


_PairCats = dict[tuple[int, int], tuple[np.ndarray, np.ndarray]]


def _pair_paths(
    arr: np.ndarray,
    pairs: list[tuple[int, int]],
    method: str,
    m: int,
    l: int,
) -> tuple[dict[tuple[int, int], str], _PairCats]:
    """The path of each pair, chosen from that pair's own values (so a pair's resampled
    differences never depend on the other systems): ``"index"`` or ``"multinomial"`` as given,
    or for ``"auto"`` the cheaper of the index path of two systems and the exact multinomial
    draw over the pair's distinct differences (a cheap upper bound on their number skips
    building them when the multinomial path is far costlier); with the difference categories
    of the multinomial pairs."""
    n_q = arr.shape[1]
    cats = {s: K.categories(arr[s]) for s in sorted({x for p in pairs for x in p})} if method != "index" else {}
    paths: dict[tuple[int, int], str] = {}
    pair_cats: _PairCats = {}
    idx_cost = K.index_cost(m, l, 2)
    for a, b in pairs:
        if method == "index":
            paths[(a, b)] = "index"
            continue
        bound = min(cats[a].size * cats[b].size, n_q)
        if method == "auto" and K.multinomial_cost_bound(bound, m) >= 20 * idx_cost:
            paths[(a, b)] = "index"
            continue
        dv, dc = K.difference_categories(cats[a], cats[b])
        if method == "multinomial" or K.multinomial_cost(dc, l, m) < idx_cost:
            paths[(a, b)], pair_cats[(a, b)] = "multinomial", (dv, dc)
        else:
            paths[(a, b)] = "index"
    return paths, pair_cats


def _pair_key(x: np.ndarray, y: np.ndarray) -> tuple[bool, tuple[int, ...]]:
    """``(flip, key)`` of the pair of rows ``x - y``: its canonical orientation (``flip`` when
    ``y - x`` is canonical: the row with the smaller SHA-256 digest first) and a stream key from
    both rows' digests in that orientation. The pair's multinomial draw depends only on the two
    rows' values and the seed, and a reversed pair gets exactly the negated draw."""
    import hashlib

    hx = hashlib.sha256(np.ascontiguousarray(x, dtype=np.float64).tobytes()).digest()
    hy = hashlib.sha256(np.ascontiguousarray(y, dtype=np.float64).tobytes()).digest()
    flip = hy < hx
    both = hashlib.sha256((hy + hx) if flip else (hx + hy)).digest()
    return flip, tuple(int.from_bytes(both[i : i + 4], "little") for i in range(0, 16, 4))


def _multinomial_pair(
    arr: np.ndarray,
    p: tuple[int, int],
    cats: tuple[np.ndarray, np.ndarray],
    *,
    m: int,
    l: int,
    seed: int,
    squares: bool,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Resampled mean differences (and mean squared differences) of pair ``p`` drawn exactly over
    its distinct differences, in the pair's canonical orientation (:func:`_pair_key`)."""
    a, b = p
    flip, key = _pair_key(arr[a], arr[b])
    dv, dc = cats
    if flip:  # the canonical pair is b - a: its distinct differences, ascending
        dv, dc = -dv[::-1], dc[::-1]
    weights = dv[:, None] if not squares else np.c_[dv, dv**2]
    sums = multinomial_sums(dc, weights, l, m, _rng(seed, _KEY_PAIR, *key)) / l
    d = -sums[:, 0] if flip else sums[:, 0]
    return d + 0.0, (sums[:, 1] if squares else None)


def _paired_differences(
    arr: np.ndarray,
    pairs: list[tuple[int, int]],
    paths: dict[tuple[int, int], str],
    pair_cats: _PairCats,
    *,
    m: int,
    l: int,
    seed: int,
    backend: str,
    jobs: int,
    squares: bool = False,
) -> tuple[dict[tuple[int, int], np.ndarray], dict[tuple[int, int], np.ndarray]]:
    """The ``m`` resampled mean differences ``D*`` of each pair ``(a, b)`` along its path.

    ``"index"``: each system's sums over the shared ``resample_indices(Q, m, l, seed)``, row by
    row (bit-identical whatever other systems are passed), ``D* = S_a / l - S_b / l`` (exactly
    the negation for ``(b, a)``); ``"multinomial"``: :func:`_multinomial_pair`. With
    ``squares``, also the resampled means of the squared per-query differences on the same
    resamples (the studentized interval), else an empty dict.
    """
    d_star: dict[tuple[int, int], np.ndarray] = {}
    d_sq: dict[tuple[int, int], np.ndarray] = {}
    index_pairs = [p for p in pairs if paths[p] == "index"]
    if index_pairs:
        used = sorted({s for p in index_pairs for s in p})
        col = {s: i for i, s in enumerate(used)}
        rows = arr[used]
        if squares:
            rows = np.vstack([rows] + [(arr[a] - arr[b])[None, :] ** 2 for a, b in index_pairs])
        means = (
            K.index_sums(rows, sample_size=l, n_resamples=m, seed=seed, xp=get_xp(backend), n_jobs=jobs, rowwise=True)
            / l
        )
        for i, (a, b) in enumerate(index_pairs):
            d_star[(a, b)] = means[:, col[a]] - means[:, col[b]]
            if squares:
                d_sq[(a, b)] = means[:, len(used) + i]

    def one(p: tuple[int, int]) -> None:
        d_star[p], sq = _multinomial_pair(arr, p, pair_cats[p], m=m, l=l, seed=seed, squares=squares)
        if sq is not None:
            d_sq[p] = sq

    K.run_parallel(one, [p for p in pairs if paths[p] == "multinomial"], jobs)
    return d_star, d_sq


def _draw_differences(
    arr: np.ndarray,
    pairs: list[tuple[int, int]],
    method: str,
    *,
    m: int,
    l: int,
    seed: int,
    backend: str,
    jobs: int,
    squares: bool = False,
) -> tuple[dict[tuple[int, int], str], dict[tuple[int, int], np.ndarray], dict[tuple[int, int], np.ndarray]]:
    """The path of each pair (:func:`_pair_paths`) and its ``m`` resampled mean differences ``D*``
    (with the means of their squares when ``squares``; :func:`_paired_differences`)."""
    paths, pair_cats = _pair_paths(arr, pairs, method, m, l)
    d_star, d_sq = _paired_differences(
        arr, pairs, paths, pair_cats, m=m, l=l, seed=seed, backend=backend, jobs=jobs, squares=squares
    )
    return paths, d_star, d_sq


def _difference_interval(
    d: np.ndarray, ds: np.ndarray, ds_sq: np.ndarray | None, conf: float, interval: str, l: int
) -> tuple[float, float, str]:
    """CI of the mean of the per-query differences ``d`` from their resampled means ``ds`` (and
    of their squares ``ds_sq``) by ``interval`` (already resolved for differences: studentized,
    BCa or percentile); returns ``(low, high, interval used)``."""
    if interval == "bca":
        lo, hi = bca_interval(d, ds, conf)
        return lo, hi, "bca"
    if interval == "studentized":
        if ds_sq is None:  # the callers draw the squares whenever the interval is studentized
            raise ValueError("a studentized interval needs the resampled means of the squared differences")
        lo, hi = studentized_interval(d, ds, ds_sq, l, conf)
        return lo, hi, "studentized"
    p_lo, p_hi = K.percentile_interval(ds, conf)
    return float(p_lo), float(p_hi), "percentile"


def _check_family(family_size: object) -> int:
    if isinstance(family_size, bool) or not isinstance(family_size, numbers.Integral) or int(family_size) < 1:
        raise ConfigError(f"family_size={family_size!r} must be a positive integer or None (the pairs compared)")
    return int(family_size)


def _check_test(test: object) -> str:
    if test not in PAIRED_TESTS:
        raise ConfigError(f"test={test!r} is not valid; expected one of {', '.join(PAIRED_TESTS)}")
    return str(test)


def _pair_p_values(
    arr: np.ndarray,
    pairs: list[tuple[int, int]],
    d_star: dict[tuple[int, int], np.ndarray],
    *,
    m: int,
    seed: int,
    family: int,
    test: str = "sign-flip",
) -> tuple[list[float], list[str], list[int]]:
    """Two-sided p-values of the pairs, the test of each and its Monte Carlo draws (0: exact):
    the sign-flip randomization test over all Q queries at every Q
    (:func:`~adaptlab.stats.signflip.family_sign_flip`: exact where it can count, else sign
    vectors from stream ``(seed, _KEY_FLIP)``, shared by the pairs, as many as a family of
    ``family`` tests needs), or with ``test="bootstrap"`` the bootstrap p-value of each ``D*``."""
    if test == "sign-flip":
        res = family_sign_flip(arr, pairs, m, _rng(seed, _KEY_FLIP), _ZERO_TOL, family_size=family)
        return (
            [float(p) for p in res.p],
            ["sign-flip-exact" if e else "sign-flip" for e in res.exact],
            [0 if e else res.n_vectors for e in res.exact],
        )
    out = []
    for a, b in pairs:
        scale = float(np.max(np.abs(arr[a] - arr[b])))
        out.append(float(K.two_sided_p_value(d_star[(a, b)], _ZERO_TOL * scale)))
    return out, ["bootstrap"] * len(pairs), [m] * len(pairs)


def _paired_results(
    arr: np.ndarray,
    pairs: list[tuple[int, int]],
    names: list[str] | None,
    d_star: dict[tuple[int, int], np.ndarray],
    tested: tuple[list[float], list[str], list[int]],
    *,
    paths: dict[tuple[int, int], str],
    m: int,
    l: int,
    conf: float,
    seed: int,
    interval: str,
    d_sq: dict[tuple[int, int], np.ndarray] | None = None,
) -> list[PairedDifference]:
    """One :class:`PairedDifference` per pair ``(a, b)``, named by ``names`` when given: the
    observed mean difference, the CI of the resampled differences ``d_star[(a, b)]``
    (:func:`_difference_interval`), its p-value, test and draws from ``tested``
    (:func:`_pair_p_values`) and the settings."""
    point = arr.mean(axis=1)
    out = []
    for (a, b), p, test, n_draws in zip(pairs, *tested):
        ds = d_star[(a, b)]
        lo, hi, how = _difference_interval(arr[a] - arr[b], ds, (d_sq or {}).get((a, b)), conf, interval, l)
        out.append(
            PairedDifference(
                a=names[a] if names is not None else a,
                b=names[b] if names is not None else b,
                diff=float(point[a] - point[b]),
                boot_mean=float(ds.mean()),
                ci_low=float(lo),
                ci_high=float(hi),
                p_value=float(p),
                method=paths[(a, b)],
                n_resamples=m,
                sample_size=l,
                confidence=conf,
                seed=seed,
                interval=how,
                test=test,
                p_draws=n_draws,
            )
        )
    return out


def paired_bootstrap(
    values: Any,
    *,
    names: Sequence[str] | None = None,
    baseline: int | str | None = None,
    pairs: Sequence[tuple[int | str, int | str]] | None = None,
    n_resamples: int = 1000,
    sample_size: int | None = None,
    seed: int = 0,
    confidence: float = 0.95,
    method: str = "auto",
    backend: str = "auto",
    n_jobs: int | None = None,
    allow_oversampling: bool = False,
    interval: str = "auto",
    family_size: int | None = None,
    measure: object = None,
    test: str = "sign-flip",
) -> list[PairedDifference]:
    """Paired bootstrap of mean differences between systems evaluated on the same queries.

    Each resample draws one set of queries for both systems of a pair, so the difference is
    paired. ``diff`` is the observed mean difference, ``ci_low``/``ci_high`` the interval of the
    resampled differences ``D*`` (``"auto"``: studentized). The two-sided p-value of "no
    difference" is, at every number of queries, the paired sign-flip randomization test over all
    queries (Fisher 1935; Smucker, Allan and Carterette 2007; its null: the per-query differences
    are symmetric about 0): exact where the differences allow, else with sign vectors sized to the
    family (:class:`PairedDifference`, :mod:`adaptlab.stats.signflip`). With ``test="bootstrap"``
    it is the Monte Carlo bootstrap p-value (Davison and Hinkley 1997, chapter 4)

        p_value = min(1, 2 * min(1 + #{D* <= 0}, 1 + #{D* >= 0}) / (n_resamples + 1))

    which over-rejects at small Q. Resampled differences within 1e-10 * max|d| of 0 count as ties
    on both sides.

    Parameters
    ----------
    values : array-like
        ``[n_systems, n_queries]`` finite per-query values, the same query order in every row.
    names : sequence of str, optional
        System names, one per row (pairs then name systems by name).
    baseline : int or str, optional
        Compare every other system against it (``system - baseline``).
    pairs : sequence of (a, b), optional
        Exactly these pairs (names or indices; ``a - b``), e.g. a ColBERT against its own base.
        Without ``baseline`` or ``pairs``: every pair ``(i, j)``, ``i < j`` (``i - j``).
    n_resamples, sample_size, seed, confidence, method, backend, n_jobs, allow_oversampling
        As in :func:`bootstrap_ci`; ``method="multinomial"`` draws each pair's distinct per-query
        differences exactly (``PairedDifference.method`` is each pair's path).
    interval : str
        ``"auto"`` (studentized; percentile when ``sample_size`` < Q), ``"studentized"``,
        ``"percentile"`` or ``"bca"`` (p-values unchanged); ``"wilson"`` and ``"jeffreys"`` do
        not apply to differences, which get the ``"auto"`` interval
        (:func:`adaptlab.stats.intervals.measure_interval` with ``difference=True``).
    measure : str or Measure, optional
        The measure compared (recorded nowhere; differences get the same interval whatever it is).
    family_size : int, optional
        The number of tests the p-values' Monte Carlo resolution is sized for (default: this
        call's pairs); :func:`adaptlab.plan_sample_size` passes 1 (one test per simulated experiment).
    test : str
        ``"sign-flip"`` (default: the same test at every Q) or ``"bootstrap"`` (the bootstrap
        p-value, liberal at small Q; only when asked for).

    Returns
    -------
    list of PairedDifference
        One per pair: ``a``, ``b``, ``diff``, ``ci_low``, ``ci_high``, ``p_value`` and the settings.

    Examples
    --------
    >>> d = paired_bootstrap(
    ...     [[1, 1, 1, 0], [0, 1, 0, 0]], names=["ft", "base"], baseline="base", n_resamples=500, seed=0
    ... )
    >>> d[0].a, d[0].b, d[0].diff, bool(d[0].ci_low <= 0.5 <= d[0].ci_high), 0 < d[0].p_value <= 1
    ('ft', 'base', 0.5, True, True)
    """
    arr = _as_values(values)
    seed = check_seed(seed)
    names, pairs = _check_systems(arr, names, baseline, pairs)
    m, l, jobs, conf, interval = _check_settings(
        arr.shape[1], n_resamples, sample_size, allow_oversampling, confidence, method, backend, n_jobs, interval
    )
    used = measure_interval(interval, measure, n_queries=arr.shape[1], sample_size=l, difference=True)
    paths, d_star, d_sq = _draw_differences(
        arr, pairs, method, m=m, l=l, seed=seed, backend=backend, jobs=jobs, squares=used == "studentized"
    )
    family = len(pairs) if family_size is None else _check_family(family_size)
    tested = _pair_p_values(arr, pairs, d_star, m=m, seed=seed, family=family, test=_check_test(test))
    return _paired_results(
        arr, pairs, names, d_star, tested, paths=paths, m=m, l=l, conf=conf, seed=seed, interval=used, d_sq=d_sq
    )
