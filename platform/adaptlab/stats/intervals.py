"""Confidence intervals other than the plain percentile interval, and which one each measure gets.

``interval`` (``BootstrapConfig.interval``) selects how a CI of a mean is computed; the choice
is stored beside each CI (``interval_method``). At level ``c`` with ``alpha = 1 - c``:

* ``"auto"`` (default): chosen by the *measure's definition*, never by the values of this or
  any other run (:func:`measure_interval`): ``"wilson"`` for the measures whose per-query value
  is 0 or 1 by definition (:data:`BINARY_MEASURES`: acc@k, also spelled hits@k, success@k,
  hit_rate@k), ``"studentized"`` for every other measure (nDCG@k, MRR, recall@k, MAP, ...) and
  for paired differences; ``"percentile"`` when the resamples do not take exactly Q queries
  (``sample_size`` l != Q: the CI of an l-query mean, which neither Wilson nor the studentized
  interval gives). A run's CI is therefore the same alone or beside any other run. Values
  without a measure (a bare array passed to :func:`adaptlab.stats.bootstrap_ci`) get the
  studentized interval. Measured coverage (tests/stats/test_simulation_intervals.py): the
  percentile interval of an MRR-like mean of 0.12 covers about 0.87 at Q = 30, the studentized
  interval at least 0.94 at Q = 30 and 100.
* ``"percentile"``: the ``alpha/2`` and ``1 - alpha/2`` quantiles of the resampled
  means (Efron & Tibshirani 1993, "An Introduction to the Bootstrap", ch. 13).
* ``"studentized"`` (bootstrap-t; Efron & Tibshirani 1993, ch. 12.5; Hall 1988, "Theoretical
  comparison of bootstrap confidence intervals", Ann. Statist. 16): with ``se = s / sqrt(Q)``
  the standard error of the mean ``x_bar`` and, for each resample ``j``, its mean ``x*_j`` and
  standard error ``se*_j = s*_j / sqrt(l)``, ``t*_j = (x*_j - x_bar) / se*_j``; the interval is
  ``[x_bar - t*_(1-alpha/2) se, x_bar - t*_(alpha/2) se]`` with ``t*_(u)`` the quantiles of the
  ``t*_j`` (linear interpolation). A resample whose values are all equal (``se*_j = 0``) counts
  as ``t*_j = +inf`` or ``-inf`` by the sign of ``x*_j - x_bar`` (0 when equal); the ends are
  clipped to the range of the values (a mean lies within it), and values that are all equal
  give ``[x_bar, x_bar]``. Second-order accurate for the mean of skewed values, where the
  percentile interval undercovers at small Q. Needs resamples of all Q queries.
* ``"bca"``: bias-corrected and accelerated percentile interval (Efron 1987, "Better bootstrap
  confidence intervals", JASA 82; Efron & Tibshirani 1993, ch. 14.3) from the same resampled
  means ``x*_j``: ``z0 = Phi^-1((#{x*_j < x_bar} + #{x*_j <= x_bar}) / (2m))`` (resamples
  equal to the estimate count half, scipy's rule; it matters for 0/1 values, where many
  resampled means tie with the estimate), acceleration from the jackknife of the
  mean, ``a = sum (xbar_(.) - xbar_(i))^3 / (6 (sum (xbar_(.) - xbar_(i))^2)^{3/2})`` with
  ``xbar_(i) = (sum x - x_i) / (Q - 1)``, and the endpoints are the quantiles at
  ``Phi(z0 + (z0 + z) / (1 - a (z0 + z)))`` for ``z = Phi^-1(alpha/2), Phi^-1(1 - alpha/2)``.
  Identical to ``scipy.stats.bootstrap(method="BCa")`` given the same resamples, except where
  scipy returns NaN: when every resample lies strictly on one side of the estimate (z0 is
  infinite) this gives the percentile interval, and with constant values ``a = 0``. Needs
  resamples of all Q queries (``sample_size`` None). It covers less than the studentized
  interval for skewed values at small Q (about 0.90 for the MRR-like mean above at Q = 30),
  which is why it is not the default.
* ``"wilson"`` (Wilson 1927, JASA 22): for 0/1 values (accuracy@k), ``k`` hits of ``n``:
  ``(p + z^2/(2n) +- z sqrt(p(1-p)/n + z^2/(4n^2))) / (1 + z^2/n)``, ``z = Phi^-1(1 - alpha/2)``;
  equals ``scipy.stats.binomtest(k, n).proportion_ci(method="wilson")``.
* ``"jeffreys"`` (Brown, Cai & DasGupta 2001, Stat. Sci. 16): the ``alpha/2`` and
  ``1 - alpha/2`` quantiles of Beta(k + 1/2, n - k + 1/2), with 0 when ``k = 0`` and 1 when
  ``k = n``.

Wilson and Jeffreys apply to the 0/1 measures only; asked for on another measure (or on
paired differences) the measure's ``"auto"`` interval is used and ``interval_method`` says so.
With fewer than :data:`FEW_OUTCOMES` successes or failures no interval of a proportion is
reliable; :func:`few_outcomes` names the case and the evaluation warns
(:class:`FewOutcomesWarning`).
"""

from __future__ import annotations

import numpy as np

from adaptlab.errors import ConfigError

__all__ = [
    "BINARY_MEASURES",
    "FEW_OUTCOMES",
    "INTERVALS",
    "FewOutcomesWarning",
    "bca_interval",
    "few_outcomes",
    "is_binary_measure",
    "jeffreys_interval",
    "measure_interval",
    "resolve_interval",
    "studentized_interval",
    "wilson_interval",
]

INTERVALS: tuple[str, ...] = ("auto", "percentile", "studentized", "bca", "wilson", "jeffreys")
"""Accepted values of ``interval`` (``"auto"``: by the measure, :func:`measure_interval`)."""

BINARY_MEASURES: frozenset[str] = frozenset({"acc"})
"""Canonical names (:class:`adaptlab.metrics.Measure`) of the measures whose per-query value is 0
or 1 by definition: acc@k (hits@k, success@k). Every other measure is graded."""

NEEDS_ALL_QUERIES: frozenset[str] = frozenset({"bca", "studentized"})
"""Intervals defined only for resamples of all Q queries."""

FEW_OUTCOMES: int = 5
"""Fewer successes or failures than this among the per-query 0/1 values: a warning."""


class FewOutcomesWarning(UserWarning):
    """A proportion with fewer than :data:`FEW_OUTCOMES` successes or failures: its CI is
    unreliable whatever the method (Brown, Cai & DasGupta 2001)."""


def bca_interval(values: np.ndarray, boot: np.ndarray, confidence: float) -> tuple[float, float]:
    """BCa interval of the mean of ``values`` [Q] from its resampled means ``boot`` [m]."""
    from scipy.special import ndtr, ndtri

    x = np.asarray(values, dtype=np.float64).ravel()
    b = np.asarray(boot, dtype=np.float64).ravel()
    q = x.size
    if q < 2:
        raise ConfigError("the BCa interval needs at least 2 queries")
    theta = x.mean()
    z0 = ndtri(((b < theta).sum() + (b <= theta).sum()) / (2.0 * b.size))
    loo = (x.sum() - x) / (q - 1)
    dev = loo.mean() - loo
    den = 6.0 * (dev @ dev) ** 1.5
    a = float((dev**3).sum() / den) if den > 0 else 0.0
    alpha = 1.0 - float(confidence)
    ends = []
    for z in (ndtri(alpha / 2), ndtri(1 - alpha / 2)):
        if not np.isfinite(z0):  # every resample on one side: no correction is defined
            level = alpha / 2 if z < 0 else 1 - alpha / 2
        else:
            level = float(ndtr(z0 + (z0 + z) / (1 - a * (z0 + z))))
        ends.append(float(np.percentile(b, 100.0 * level)))
    return ends[0], ends[1]


def _binary_counts(values: np.ndarray) -> tuple[int, int]:
    x = np.asarray(values, dtype=np.float64).ravel()
    if not np.all((x == 0) | (x == 1)):
        raise ConfigError("Wilson and Jeffreys intervals need 0/1 values (e.g. accuracy@k)")
    return int(x.sum()), int(x.size)


def wilson_interval(values: np.ndarray, confidence: float) -> tuple[float, float]:
    """Wilson score interval of the proportion of ones in ``values``."""
    from scipy.special import ndtri

    k, n = _binary_counts(values)
    z = float(ndtri(0.5 + float(confidence) / 2))
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return float(max(0.0, centre - half)), float(min(1.0, centre + half))


def jeffreys_interval(values: np.ndarray, confidence: float) -> tuple[float, float]:
    """Jeffreys interval (equal-tailed Beta(k + 1/2, n - k + 1/2) quantiles)."""
    from scipy.stats import beta

    k, n = _binary_counts(values)
    alpha = 1.0 - float(confidence)
    lo = 0.0 if k == 0 else float(beta.ppf(alpha / 2, k + 0.5, n - k + 0.5))
    hi = 1.0 if k == n else float(beta.ppf(1 - alpha / 2, k + 0.5, n - k + 0.5))
    return lo, hi


def is_binary(values: np.ndarray) -> bool:
    """Every value is 0 or 1 (a per-query success such as accuracy@k)."""
    x = np.asarray(values)
    return bool(np.all((x == 0) | (x == 1)))


def is_binary_measure(measure: object) -> bool:
    """Whether ``measure`` (a :class:`adaptlab.metrics.Measure` or its string, "acc@10",
    "hits@5") is 0/1 by definition (:data:`BINARY_MEASURES`); ``None`` or an unknown name is not."""
    from adaptlab.metrics.measures import Measure

    if measure is None:
        return False
    try:
        return Measure.parse(measure).name in BINARY_MEASURES  # type: ignore[arg-type]
    except ConfigError:
        return False


def measure_interval(
    interval: str, measure: object = None, *, n_queries: int, sample_size: int, difference: bool = False
) -> str:
    """The interval computed for the CI of ``measure`` (or of a paired difference of it, when
    ``difference``): fixed by the measure's definition and the settings, never by values.

    ``"auto"``: ``"percentile"`` when ``sample_size != n_queries`` (or, for a graded measure or a
    difference, with a single query, where the studentized interval has no standard error), else
    ``"wilson"`` for a 0/1 measure's own CI (:func:`is_binary_measure`) and ``"studentized"`` for
    every other CI.
    ``"wilson"``/``"jeffreys"`` apply to a 0/1 measure's own CI; elsewhere they become the
    ``"auto"`` choice. ``"bca"``/``"studentized"`` with ``sample_size < n_queries`` are an
    error raised by the bootstrap functions.

    >>> measure_interval("auto", "acc@10", n_queries=50, sample_size=50)
    'wilson'
    >>> measure_interval("auto", "mrr", n_queries=50, sample_size=50)
    'studentized'
    >>> measure_interval("auto", "acc@10", n_queries=50, sample_size=50, difference=True)
    'studentized'
    >>> measure_interval("auto", "ndcg@10", n_queries=1, sample_size=1)
    'percentile'
    """
    if interval in INTERVALS and interval not in ("auto", "wilson", "jeffreys"):
        return interval
    binary = is_binary_measure(measure) and not difference
    if interval in ("wilson", "jeffreys") and binary:
        return interval
    if int(sample_size) != int(n_queries) or (int(n_queries) < 2 and not binary):
        return "percentile"  # an l-query mean; or one query, where no standard error exists
    return "wilson" if binary else "studentized"


def resolve_interval(interval: str, values: np.ndarray, n_queries: int, sample_size: int) -> str:
    """Deprecated data-driven choice, kept for callers that have no measure: ``"wilson"`` and
    ``"jeffreys"`` on values that are not all 0 or 1 become the studentized (or, with
    ``sample_size < n_queries``, percentile) interval; ``"auto"`` is :func:`measure_interval`
    without a measure (studentized; percentile with ``sample_size < n_queries``)."""
    if interval in ("wilson", "jeffreys") and is_binary(values):
        return interval
    return measure_interval(interval, None, n_queries=n_queries, sample_size=sample_size)


def studentized_interval(
    values: np.ndarray, boot: np.ndarray, boot_sq: np.ndarray, sample_size: int, confidence: float
) -> tuple[float, float]:
    """Studentized (bootstrap-t) interval of the mean of ``values`` [Q] from the resampled means
    ``boot`` [m] and the resampled means of the squared values ``boot_sq`` [m] (each over
    ``sample_size`` = Q queries); formula in the module doc."""
    x = np.asarray(values, dtype=np.float64).ravel()
    b = np.asarray(boot, dtype=np.float64).ravel()
    l = int(sample_size)
    q = x.size
    if q < 2 or l < 2:
        raise ConfigError("the studentized interval needs at least 2 queries")
    theta = float(x.mean())
    se = float(x.std(ddof=1)) / np.sqrt(q)
    lo_x, hi_x = float(x.min()), float(x.max())
    if se <= 1e-12 * max(abs(lo_x), abs(hi_x), 1e-300):
        return theta, theta
    sq = np.asarray(boot_sq, dtype=np.float64).ravel()
    var = np.maximum(sq - b * b, 0.0) * (l / (l - 1.0))
    se_star = np.sqrt(var / l)
    flat = var <= 1e-10 * np.maximum(sq, 1e-300)  # every resampled value equal (up to rounding)
    diff = b - theta
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(
            flat,
            np.sign(np.where(np.abs(diff) <= 1e-12 * max(abs(theta), 1.0), 0.0, diff)) * np.inf,
            diff / np.where(flat, 1.0, se_star),
        )
    t = np.nan_to_num(t, nan=0.0, posinf=np.finfo(np.float64).max / 4, neginf=-np.finfo(np.float64).max / 4)
    alpha = 1.0 - float(confidence)
    t_lo, t_hi = np.percentile(t, [100.0 * alpha / 2, 100.0 * (1 - alpha / 2)])
    with np.errstate(over="ignore", invalid="ignore"):
        low, high = theta - float(t_hi) * se, theta - float(t_lo) * se
    return float(min(max(low, lo_x), hi_x)), float(max(min(high, hi_x), lo_x))


def few_outcomes(values: np.ndarray, limit: int = FEW_OUTCOMES) -> str | None:
    """``None``, or one line saying that the 0/1 ``values`` hold fewer than ``limit`` successes
    or failures (``"2 failures among 100 queries"``); ``None`` for values that are not 0/1."""
    x = np.asarray(values).ravel()
    if x.size == 0 or not is_binary(x):
        return None
    k = int(x.sum())
    if k < limit:
        return f"{k} successes among {x.size} queries"
    if x.size - k < limit:
        return f"{x.size - k} failures among {x.size} queries"
    return None
