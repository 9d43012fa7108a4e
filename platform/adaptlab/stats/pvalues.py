"""p-values a reviewer can defend: multiplicity adjustment, exact paired tests for small
samples, and how p-values are printed.

**Multiplicity** (:func:`adjust_pvalues`), within one family of ``n`` tests (adaptlab's family:
every paired comparison on one dataset and one measure). With the raw p-values sorted
ascending, ``p_(1) <= ... <= p_(n)``:

* Holm (1979), "A simple sequentially rejective multiple test procedure", Scand. J. Statist. 6:
  ``p~_(i) = max_{j <= i} min(1, (n - j + 1) p_(j))``; controls the family-wise error rate.
  The default.
* Benjamini & Hochberg (1995), "Controlling the false discovery rate", JRSS B 57:
  ``p~_(i) = min_{j >= i} min(1, n p_(j) / j)``; controls the false discovery rate
  (equal to ``scipy.stats.false_discovery_control(p, method="bh")``).
* ``"none"``: the raw p-values.

**The paired test** (:mod:`adaptlab.stats.signflip`): the paired randomization (sign-flip)
test of Fisher (1935, "The Design of Experiments", section 21) and Pitman (1937), recommended for
IR evaluation by Smucker, Allan & Carterette (2007, "A comparison of statistical significance
tests for information retrieval evaluation", CIKM): exact over all sign patterns when the
non-zero differences allow, else with enough random sign vectors for the family's adjusted
p-values to reach far below 0.05. Each is a valid p-value (P(p <= alpha) <= alpha), so Holm over
them keeps the family-wise error at most alpha. The percentile-bootstrap p-value is liberal at
small Q (simulated under the null at Q = 30: a single test rejected 6.7% of the time at 5%, Holm
over 10 pairs 7-9%; issue 23), so it is used only from :data:`PERMUTATION_Q` queries on and when
its floor ``2/(m+1)`` leaves the family room (``2 K / (m+1) <= alpha / 20`` for ``K`` tests: in
practice a single comparison). The simulations in tests/stats/test_simulation_pvalues.py check
both levels at Q = 30, 100 and 500.

**Small samples** (:func:`exact_paired_tests`): below :data:`SMALL_SAMPLE_Q` queries the
percentile bootstrap is unreliable (with Q = 3 and one system better on every query it gives
p = 0.002 and CI [1, 1]); every paired comparison then also gets the exact two-sided sign test
(``scipy.stats.binomtest`` on the number of positive differences among the non-zero ones,
p = 0.25 in that example) and the exact Wilcoxon signed-rank test (``scipy.stats.wilcoxon``,
zero differences dropped). Without ties among the absolute differences its exact null
distribution is used (``method="exact"``); with ties and up to :data:`SIGN_FLIP_MAX_N` non-zero
differences, the exact sign-flip distribution of the rank sum ``R+ = sum_i r_i [d_i > 0]`` over
all ``2**n`` sign patterns (Wilcoxon 1945), two-sided ``p = min(1, 2 min(P(R+* <= R+),
P(R+* >= R+)))``: the p-value of ``scipy.stats.wilcoxon(method="auto")``, which enumerates the
patterns in Python (about a second a call), enumerated here with NumPy in milliseconds
(:func:`wilcoxon_sign_flip_p`); with more ties, its normal approximation with the tie
correction. The sign test is the one reported as ``p_exact`` (it assumes nothing about the
differences' shape).

**Printing** (:func:`format_p_value`): a two-sided bootstrap p-value is never below ``2/(m+1)``
(``1/(m+1)`` one-sided; the observed sample counts once), a sign-flip p-value never below
``1/(m+1)``; a p at or below ``2/(m+1)`` prints as the bound ``<= 2/(m+1)``, e.g. ``<= 5.0e-05``
with m = 39999, never as 0.0000. Other p-values print with 4 significant digits, in scientific notation below 1e-3.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from adaptlab.errors import ConfigError
from adaptlab.stats.signflip import FAMILY_ALPHA, RESOLUTION, sign_flip_p_values

__all__ = [
    "ADJUSTMENTS",
    "PAIRED_TESTS",
    "PERMUTATION_Q",
    "SIGN_FLIP_NULL",
    "SIGN_FLIP_MAX_N",
    "SMALL_SAMPLE_Q",
    "ExactTests",
    "adjust_pvalues",
    "adjust_pvalues_bounded",
    "exact_paired_tests",
    "p_at_floor",
    "format_p_value",
    "p_value_note",
    "sign_flip_p_values",
    "wilcoxon_sign_flip_p",
]

ADJUSTMENTS: tuple[str, ...] = ("holm", "bh", "none")
"""Accepted multiplicity adjustments: Holm (default), Benjamini-Hochberg, none."""

SMALL_SAMPLE_Q: int = 30
"""Below this many queries, paired comparisons also carry exact tests and a warning."""

SIGN_FLIP_MAX_N: int = 13
"""Up to this many tied non-zero differences the Wilcoxon p-value enumerates all ``2**n`` sign
patterns (SciPy's limit for its exact permutation test: ``2**13`` < its 9,999 resamples)."""

PERMUTATION_Q: int = 1000
"""Earlier versions switched from the sign-flip test to the bootstrap p-value at this many
queries; the paired test is now the sign-flip test at every Q (:data:`PAIRED_TESTS`), the
bootstrap p-value only when asked for (``test="bootstrap"``). Kept for old stored rows' notes."""

PAIRED_TESTS: tuple[str, ...] = ("sign-flip", "bootstrap")
"""Accepted values of ``test``: the paired sign-flip randomization test (default, at every Q)
or the two-sided percentile-bootstrap p-value (liberal at small Q)."""

SIGN_FLIP_NULL: str = (
    "null: the per-query differences are symmetric about 0 (the two systems exchangeable on each query)"
)
"""The null hypothesis of the sign-flip test, as the footers name it. Equal means with skewed
differences are not this null: the test can reject then (simulated: 0.18 at Q = 30)."""


def p_at_floor(p: float, test: str, draws: int) -> bool:
    """Whether ``p`` is at the smallest value its Monte Carlo test can give, so it is a bound
    (the true p may be smaller): ``1/(N+1)`` for ``N`` random sign vectors (``test`` "sign-flip"),
    ``2/(m+1)`` for ``m`` bootstrap resamples ("bootstrap"); never for an exact p
    (``draws`` 0, "sign-flip-exact").

    >>> p_at_floor(1 / 4001, "sign-flip", 4000), p_at_floor(0.01, "sign-flip", 4000)
    (True, False)
    """
    if not draws or test == "sign-flip-exact" or p is None or not math.isfinite(float(p)):
        return False
    floor = (2.0 if test == "bootstrap" else 1.0) / (int(draws) + 1.0)
    return float(p) <= floor * (1 + 1e-9)


def adjust_pvalues_bounded(
    p: Sequence[float] | np.ndarray, bounded: Sequence[bool] | np.ndarray, adjustment: str = "holm"
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`adjust_pvalues` and, for each adjusted p, whether it is a bound: whether the raw
    p-value that decides it (Holm: the ``(n - j + 1) p_(j)`` attaining the running maximum; BH:
    the ``n p_(j) / j`` attaining the running minimum; none: itself) is at its Monte Carlo floor
    (``bounded``). A Holm p of 0.0025 from 10 floored p-values of 1/4001 prints ``<= 0.0025``.

    >>> adj, bound = adjust_pvalues_bounded([1 / 4001, 0.03], [True, False], "holm")
    >>> bound.tolist()
    [True, False]
    """
    adjustment = check_adjustment(adjustment)
    adj = adjust_pvalues(p, adjustment)
    arr = np.asarray(p, dtype=np.float64).ravel()
    flags = np.asarray(bounded, dtype=bool).ravel()
    n = arr.size
    if n == 0 or adjustment == "none":
        return adj, flags.copy()
    order = np.argsort(arr, kind="stable")
    ps, fs = arr[order], flags[order]
    terms = (
        np.minimum(1.0, (n - np.arange(n)) * ps)
        if adjustment == "holm"
        else np.minimum(1.0, n * ps / np.arange(1, n + 1))
    )
    out = np.zeros(n, dtype=bool)
    for i in range(n):
        window = range(i + 1) if adjustment == "holm" else range(i, n)
        decide = [j for j in window if abs(terms[j] - adj[order[i]]) <= 1e-12 * max(adj[order[i]], 1e-300)]
        out[order[i]] = adj[order[i]] < 1.0 and any(fs[j] for j in decide)
    return adj, out


def p_value_note(n_queries: int, n_resamples: int, *, tests: Sequence[str] = (), n_vectors: int = 0) -> str:
    """What the ``p`` column of a paired table is, for its footer: the test(s) that gave it
    (``tests``: the ``PairedDifference.test`` values shown, ``n_vectors``: the most Monte Carlo
    sign vectors used by one family) and its floor. Without ``tests`` (rows stored before they
    were recorded), the test of ``n_queries`` queries with ``n_resamples`` vectors or resamples."""
    shown = set(tests) or {"sign-flip" if int(n_queries) < PERMUTATION_Q else "bootstrap"}
    n_vectors = int(n_vectors) or int(n_resamples)
    parts = []
    if "sign-flip-exact" in shown:
        parts.append("exact over all 2**n sign patterns of the n non-zero differences")
    if "sign-flip" in shown:
        parts.append(
            f"{n_vectors} random sign vectors (floor 1/(N+1), N sized to the family: at least "
            f"{RESOLUTION} x family size / {FAMILY_ALPHA:g})"
        )
    bound = 'a p at its Monte Carlo floor (or an adjusted p set by one) is printed as a bound, "<= p"'
    if parts:
        text = (
            "p: two-sided paired sign-flip randomization test at every query count, "
            + "; or ".join(parts)
            + f"; {SIGN_FLIP_NULL}"
        )
        return text + ("; or paired bootstrap" if "bootstrap" in shown else "") + f"; {bound}"
    return f"p: two-sided paired bootstrap ({n_resamples} resamples, floor 2/(m+1), asked for); {bound}"


def check_adjustment(adjustment: object) -> str:
    if adjustment not in ADJUSTMENTS:
        raise ConfigError(f"adjustment={adjustment!r} is not valid; expected one of {', '.join(ADJUSTMENTS)}")
    return str(adjustment)


def adjust_pvalues(p: Sequence[float] | np.ndarray, adjustment: str = "holm") -> np.ndarray:
    """Adjusted p-values of one family, in the input order (formulas in the module doc).

    >>> adjust_pvalues([0.01, 0.04, 0.03], "holm").round(4).tolist()
    [0.03, 0.06, 0.06]
    """
    adjustment = check_adjustment(adjustment)
    arr = np.asarray(p, dtype=np.float64).ravel()
    if arr.size == 0:
        return arr.copy()
    if np.any(~np.isfinite(arr)) or np.any((arr < 0) | (arr > 1)):
        raise ConfigError(f"p-values must be finite numbers in [0, 1], got {arr.tolist()}")
    n = arr.size
    if adjustment == "none":
        return arr.copy()
    order = np.argsort(arr, kind="stable")
    ps = arr[order]
    if adjustment == "holm":
        adj = np.maximum.accumulate(np.minimum(1.0, (n - np.arange(n)) * ps))
    else:
        adj = np.minimum.accumulate(np.minimum(1.0, n * ps / np.arange(1, n + 1))[::-1])[::-1]
    out = np.empty(n)
    out[order] = adj
    return out


@dataclass(frozen=True)
class ExactTests:
    """Exact paired tests of per-query differences ``d = a - b``."""

    n: int
    n_nonzero: int
    n_positive: int
    sign_p: float
    wilcoxon_p: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "n_nonzero": self.n_nonzero,
            "n_positive": self.n_positive,
            "sign_p": self.sign_p,
            "wilcoxon_p": self.wilcoxon_p,
        }


def exact_paired_tests(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray | None = None,
) -> ExactTests:
    """Two-sided exact sign test and Wilcoxon signed-rank test of the paired differences
    ``a - b`` (or of ``a`` itself when ``b`` is None); p = 1 when every difference is 0."""
    from scipy.stats import binomtest, wilcoxon

    d = np.asarray(a, dtype=np.float64) - (0.0 if b is None else np.asarray(b, dtype=np.float64))
    d = d.ravel()
    if d.size == 0 or not np.all(np.isfinite(d)):
        raise ConfigError("exact_paired_tests needs finite paired differences")
    scale = float(np.max(np.abs(d))) if d.size else 0.0
    nz = d[np.abs(d) > 1e-12 * max(scale, 1.0)]
    pos = int((nz > 0).sum())
    if nz.size == 0:
        return ExactTests(int(d.size), 0, 0, 1.0, 1.0)
    sign_p = float(binomtest(pos, int(nz.size), 0.5, alternative="two-sided").pvalue)
    ties = np.unique(np.abs(nz)).size < nz.size
    if ties and nz.size <= SIGN_FLIP_MAX_N:
        wilcoxon_p = wilcoxon_sign_flip_p(nz)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            wilcoxon_p = float(wilcoxon(nz, method="auto" if ties else "exact").pvalue)
    return ExactTests(int(d.size), int(nz.size), pos, sign_p, wilcoxon_p)


def wilcoxon_sign_flip_p(d: np.ndarray) -> float:
    """Two-sided exact p-value of the Wilcoxon signed-rank statistic of non-zero differences
    ``d`` by enumerating all ``2**n`` sign patterns (n <= :data:`SIGN_FLIP_MAX_N`).

    With average ranks ``r_i`` of ``|d_i|`` (ties share their mean rank), the statistic is
    ``R+ = sum_i r_i [d_i > 0]``; under the null each sign is + or - with probability 1/2
    independently (Wilcoxon 1945), so the null distribution is the ``2**n`` subset sums of
    the ranks, and ``p = min(1, 2 min(#{R+* <= R+}, #{R+* >= R+}) / 2**n)``, with the relative
    tolerance ``100 eps |R+|`` of ``scipy.stats.permutation_test``, which
    ``scipy.stats.wilcoxon(method="auto")`` runs on tied samples of up to 13 (the same numbers,
    tests/stats/test_pvalues_intervals.py)."""
    from scipy.stats import rankdata

    n = int(d.size)
    if not 0 < n <= SIGN_FLIP_MAX_N:
        raise ConfigError(f"wilcoxon_sign_flip_p needs 1 to {SIGN_FLIP_MAX_N} differences, got {n}")
    ranks = rankdata(np.abs(d))
    observed = float(ranks[d > 0].sum())
    patterns = (np.arange(2**n)[:, None] >> np.arange(n)) & 1
    null = patterns @ ranks
    gamma = abs(np.finfo(np.float64).eps * 100 * observed)
    below = np.count_nonzero(null <= observed + gamma) / null.size
    above = np.count_nonzero(null >= observed - gamma) / null.size
    return float(min(min(below, above) * 2, 1.0))


def format_p_value(p: float | None, n_resamples: int | None = None, *, sides: int = 2, bound: bool = False) -> str:
    """``p`` for a table, JSON or CSV: the one p formatter. ``bound`` (a p at its Monte Carlo floor,
    :func:`p_at_floor`, or an adjusted p set by one, :func:`adjust_pvalues_bounded`) prints as
    ``<= p`` (``<= 0.0025``). Without ``bound``, with ``n_resamples`` (a bootstrap p-value from
    ``m`` resamples), a p at the resolution floor ``sides/(m+1)`` prints as ``<= floor``;
    otherwise 4 significant digits, scientific below 1e-3 (never ``0.0000``).

    >>> format_p_value(0.0025, bound=True), format_p_value(0.0112)
    ('<= 0.0025', '0.0112')
    """
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "n/a"
    p = float(p)
    if bound:
        return "<= " + format_p_value(p)
    if n_resamples:
        floor = float(sides) / (int(n_resamples) + 1)
        if p <= floor * (1 + 1e-9):
            return f"<= {floor:.2g}" if floor >= 1e-3 else f"<= {floor:.1e}"
    if p == 0.0:
        return "< 1e-300"
    if p < 1e-3:
        return f"{p:.2e}"
    return f"{p:.4g}"


def ci_label(confidence: float | None, method: str | None = None) -> str:
    """``"95% CI"`` from the confidence level (and ``"95% CI (bca)"`` for a non-percentile method)."""
    if confidence is None or (isinstance(confidence, float) and math.isnan(confidence)):
        return "CI"
    pct = float(confidence) * 100
    txt = f"{pct:.0f}% CI" if abs(pct - round(pct)) < 1e-9 else f"{pct:g}% CI"
    return txt if not method or method == "percentile" else f"{txt} ({method})"
