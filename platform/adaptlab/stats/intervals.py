"""Confidence intervals other than the plain percentile interval.

``interval`` (``BootstrapConfig.interval``) selects how a CI of a mean is computed; the choice
is stored beside each CI (``interval_method``). At level ``c`` with ``alpha = 1 - c``:

* ``"percentile"`` (default): the ``alpha/2`` and ``1 - alpha/2`` quantiles of the resampled
  means (Efron & Tibshirani 1993, "An Introduction to the Bootstrap", ch. 13).
* ``"bca"``: bias-corrected and accelerated percentile interval (Efron 1987, "Better bootstrap
  confidence intervals", JASA 82; Efron & Tibshirani 1993, ch. 14.3) from the same resampled
  means ``x*_j``: ``z0 = Phi^-1(#{x*_j < x_bar} / m)``, acceleration from the jackknife of the
  mean, ``a = sum (xbar_(.) - xbar_(i))^3 / (6 (sum (xbar_(.) - xbar_(i))^2)^{3/2})`` with
  ``xbar_(i) = (sum x - x_i) / (Q - 1)``, and the endpoints are the quantiles at
  ``Phi(z0 + (z0 + z) / (1 - a (z0 + z)))`` for ``z = Phi^-1(alpha/2), Phi^-1(1 - alpha/2)``.
  Identical to ``scipy.stats.bootstrap(method="BCa")`` given the same resamples. Needs
  resamples of all Q queries (``sample_size`` None).
* ``"wilson"`` (Wilson 1927, JASA 22): for 0/1 values (accuracy@k), ``k`` hits of ``n``:
  ``(p + z^2/(2n) +- z sqrt(p(1-p)/n + z^2/(4n^2))) / (1 + z^2/n)``, ``z = Phi^-1(1 - alpha/2)``;
  equals ``scipy.stats.binomtest(k, n).proportion_ci(method="wilson")``.
* ``"jeffreys"`` (Brown, Cai & DasGupta 2001, Stat. Sci. 16): the ``alpha/2`` and
  ``1 - alpha/2`` quantiles of Beta(k + 1/2, n - k + 1/2), with 0 when ``k = 0`` and 1 when
  ``k = n``.

Wilson and Jeffreys apply to plain accuracies (every value 0 or 1); for other values, and for
paired differences, the percentile interval is used and ``interval_method`` says so.
"""

from __future__ import annotations

import numpy as np

from adaptlab.errors import ConfigError

__all__ = ["INTERVALS", "bca_interval", "jeffreys_interval", "wilson_interval"]

INTERVALS: tuple[str, ...] = ("percentile", "bca", "wilson", "jeffreys")
"""Accepted values of ``interval``."""


def bca_interval(values: np.ndarray, boot: np.ndarray, confidence: float) -> tuple[float, float]:
    """BCa interval of the mean of ``values`` [Q] from its resampled means ``boot`` [m]."""
    from scipy.special import ndtr, ndtri

    x = np.asarray(values, dtype=np.float64).ravel()
    b = np.asarray(boot, dtype=np.float64).ravel()
    q = x.size
    if q < 2:
        raise ConfigError("the BCa interval needs at least 2 queries")
    theta = x.mean()
    z0 = ndtri((b < theta).sum() / b.size)
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
    x = np.asarray(values)
    return bool(np.all((x == 0) | (x == 1)))
