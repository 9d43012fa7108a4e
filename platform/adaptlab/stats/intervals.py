"""Confidence intervals other than the plain percentile interval.

``interval`` (``BootstrapConfig.interval``) selects how a CI of a mean is computed; the choice
is stored beside each CI (``interval_method``). At level ``c`` with ``alpha = 1 - c``:

* ``"auto"`` (default): ``"wilson"`` when every per-query value is 0 or 1 (accuracy@k, hits@k,
  success) and the resamples take all Q queries, else ``"percentile"``. The percentile interval
  of a proportion undercovers near 0 and 1 (at accuracy 0.98 with Q = 30 it covers the truth
  about 45% of the time); Wilson covers at least 0.93 on the grid p in {0.9, 0.95, 0.98} x
  Q in {30, 100, 1000} (tests/stats/test_simulation_coverage.py). nDCG@k and MRR keep the
  percentile interval, with the same numbers as before.
* ``"percentile"``: the ``alpha/2`` and ``1 - alpha/2`` quantiles of the resampled
  means (Efron & Tibshirani 1993, "An Introduction to the Bootstrap", ch. 13).
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
  resamples of all Q queries (``sample_size`` None).
* ``"wilson"`` (Wilson 1927, JASA 22): for 0/1 values (accuracy@k), ``k`` hits of ``n``:
  ``(p + z^2/(2n) +- z sqrt(p(1-p)/n + z^2/(4n^2))) / (1 + z^2/n)``, ``z = Phi^-1(1 - alpha/2)``;
  equals ``scipy.stats.binomtest(k, n).proportion_ci(method="wilson")``.
* ``"jeffreys"`` (Brown, Cai & DasGupta 2001, Stat. Sci. 16): the ``alpha/2`` and
  ``1 - alpha/2`` quantiles of Beta(k + 1/2, n - k + 1/2), with 0 when ``k = 0`` and 1 when
  ``k = n``.

Wilson and Jeffreys apply to plain accuracies (every value 0 or 1); for other values, and for
paired differences, the percentile interval is used and ``interval_method`` says so
(:func:`resolve_interval`). With fewer than :data:`FEW_OUTCOMES` successes or failures no
interval of a proportion is reliable; :func:`few_outcomes` names the case and the evaluation
warns (:class:`FewOutcomesWarning`).
"""

from __future__ import annotations

import numpy as np

from adaptlab.errors import ConfigError

__all__ = ["FEW_OUTCOMES", "INTERVALS", "FewOutcomesWarning", "bca_interval", "few_outcomes", "jeffreys_interval",
           "resolve_interval", "wilson_interval"]

INTERVALS: tuple[str, ...] = ("auto", "percentile", "bca", "wilson", "jeffreys")
"""Accepted values of ``interval`` (``"auto"``: Wilson for 0/1 values, else percentile)."""

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
    a = float((dev ** 3).sum() / den) if den > 0 else 0.0
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


def resolve_interval(interval: str, values: np.ndarray, n_queries: int, sample_size: int) -> str:
    """The interval actually computed for ``values`` (one row or ``[S, Q]``): ``"auto"`` is
    ``"wilson"`` for 0/1 values resampled over all ``n_queries`` (``sample_size == n_queries``),
    else ``"percentile"``; ``"wilson"``/``"jeffreys"`` fall back to ``"percentile"`` on values
    that are not all 0 or 1; other methods stay as given."""
    if interval == "auto":
        return "wilson" if sample_size == n_queries and is_binary(values) else "percentile"
    if interval in ("wilson", "jeffreys") and not is_binary(values):
        return "percentile"
    return interval


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
