"""Power planning: how many queries detect a gain of a given size with a given power.

:func:`plan_sample_size` answers "how many questions do I need to detect a mean gain of
``effect`` with probability ``power`` at level ``alpha``?" from *pilot* per-query values of
two systems on the same queries (or their per-query differences), by paired resampling:

1. ``d_q = a_q - b_q`` are the pilot differences; ``d'_q = d_q - mean(d) + effect`` shifts them
   so that their mean is exactly the target effect while keeping their spread and shape (the
   alternative hypothesis "the true gain is ``effect``").
2. For a candidate number of queries ``Q``, ``n_experiments`` simulated evaluations each draw
   ``Q`` values of ``d'`` with replacement and run the paired test adaptlab reports for ``Q``
   queries (:func:`adaptlab.stats.paired_bootstrap`: the two-sided sign-flip randomization
   test below :data:`adaptlab.stats.PERMUTATION_Q` queries, the bootstrap p-value from there on),
   with ``n_resamples`` sign vectors or resamples.
3. The power at ``Q`` is the fraction of experiments with ``p < alpha`` (its Monte Carlo
   standard error ``sqrt(power (1 - power) / n_experiments)`` is in the curve). Sizes start
   around the normal-approximation size ``Q0 = ((z_{1-alpha/2} + z_{power}) sd(d) / effect)^2``
   (doubling upward while none reaches ``power``); the curve ``power(Q) = Phi(a + b sqrt(Q))``
   (the shape of the normal-theory power curve) is fitted by maximum likelihood to the
   rejection counts of all evaluated sizes, and the planned size is the smallest integer ``Q``
   where the fitted curve reaches ``power`` (that size is then simulated too and the fit
   repeated, at most three times). When the fitted curve stays below ``power`` up to
   ``max_queries`` but a simulated size reaches it, the answer is the smallest such size; it is
   "more than ``max_queries``" only when no row of the curve reaches ``power``, so the answer
   and the printed curve always agree (issue 29: "more than 10000" beside a simulated 0.805 at
   10,000). A simulation running longer than a few seconds prints progress lines
   (:class:`adaptlab.runtime.progress.Heartbeat`; ``--quiet`` hides them). Using every experiment of every size makes the answer far
   less noisy than reading the first simulated size above the target.

**The pilot's own uncertainty.** The planned size rests on the pilot's spread ``sd(d)``, itself an
estimate: from a 100-query pilot the true power at the planned size ranges widely (about 0.7 to
0.9). Two numbers say how much that matters:

- ``n_queries_interval``: the planned size under the ends of a two-sided 95% interval for the
  true sd of the differences, and
- ``n_queries_assured``: the size that reaches ``power`` with probability ``assurance`` (default
  0.8) over the pilot's sampling variation: the size planned at the one-sided upper
  ``assurance`` confidence bound of the sd (Browne 1995, "On the use of a pilot sample for sample
  size determination", Statistics in Medicine 14(17), 1933-1940).

Both rescale the planned size by ``(sd_bound / sd)^2``: at a fixed effect the number of queries
grows with the variance of the differences (normal theory, ``Q0`` above), and the fitted curve
``Phi(a + b sqrt(Q))`` with the differences' spread scaled by ``k`` is ``Phi(a + (b / k) sqrt(Q))``,
reached at ``k^2`` times the size. The sd bounds are Bonett's (2006, "Approximate confidence
interval for standard deviation of nonnormal distributions", Computational Statistics & Data
Analysis 50(3), 775-782): ``ln(c s^2) +- z se`` with ``c = n / (n - z)``,
``se = c sqrt((kurt - (n - 3) / n) / (n - 1))`` and the kurtosis ``kurt`` taken about a trimmed
mean, which stays close to its level for skewed and heavy-tailed differences where the
chi-square interval of normal theory does not. Measured (2,000 pilots each): at assurance 0.8 the
bound holds in 0.81 (normal differences), 0.77 (nDCG-like: 70% ties, the rest +-Beta(1, 3)) and
0.72 (90% ties, the rest normal) of 100-query pilots, and 0.80, 0.80 and 0.76 of 300-query ones;
the assurance is approximate for very sparse differences and small pilots.

This is the simulation form of topic set size design: Sakai (2016), "Topic set size design",
Information Retrieval Journal 19(3), 256-283, sizes a test collection from a pilot's variance for
a minimum detectable difference (there with a paired t-test's non-central t power); Webber,
Moffat & Zobel (2008), "Statistical power in retrieval experimentation", CIKM, estimate power
from pilot topics in the same way. Resampling the pilot keeps its distribution (skew, ties,
the many zeros of nDCG differences) instead of assuming normality, and the test is the one
adaptlab's tables report, so the planned ``Q`` refers to the p-values users will see. The
normal approximation is kept in the curve (``power_normal``) for comparison.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from statistics import NormalDist
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np

from adaptlab.analysis._options import settings_of, split_options
from adaptlab.analysis.compare import store_groups
from adaptlab.errors import ConfigError, DataError
from adaptlab.runtime.progress import Heartbeat
from adaptlab.stats import paired_bootstrap
from adaptlab.stats.resample import check_seed

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from typing_extensions import Unpack

__all__ = [
    "CURVE_COLUMNS",
    "Plan",
    "PlanOptions",
    "PlanSettings",
    "pilot_from_store",
    "pilot_uncertainty",
    "plan_sample_size",
    "sd_bounds",
]

CURVE_COLUMNS: tuple[str, ...] = ("n_queries", "power", "se", "power_fit", "power_normal")
"""Columns of :attr:`Plan.curve`: queries, simulated power, its Monte Carlo standard error, the
fitted smooth curve the answer is read from, and the normal approximation."""

_MIN_Q = 2
_REFITS = 3
_GRID_FACTORS = (0.5, 0.7, 0.85, 1.0, 1.15, 1.3, 1.6, 2.0)


@dataclass(frozen=True)
class PlanSettings:
    """The question :func:`plan_sample_size` answers and how hard it simulates (parameters in
    its docstring): the mean difference ``effect`` to detect with probability ``power`` at level
    ``alpha``; ``n_experiments`` simulated evaluations per size with ``n_resamples`` each; the
    sizes ``grid`` (None: around the normal-approximation size) up to ``max_queries``; ``seed``;
    ``assurance`` (None: the pilot's uncertainty is not computed)."""

    effect: float
    power: float = 0.8
    alpha: float = 0.05
    n_experiments: int = 400
    n_resamples: int = 1000
    grid: Sequence[int] | None = None
    max_queries: int = 10000
    seed: int = 0
    assurance: float | None = 0.8


class PlanOptions(TypedDict, total=False):
    """The fields of :class:`PlanSettings` as keywords of :func:`plan_sample_size`."""

    effect: float
    power: float
    alpha: float
    n_experiments: int
    n_resamples: int
    grid: Sequence[int] | None
    max_queries: int
    seed: int
    assurance: float | None


@dataclass(frozen=True)
class Plan:
    """The planned number of queries and the power curve it was read from.

    ``n_queries`` is None when no evaluated size up to ``max_queries`` reached ``power``.
    ``curve``: a pandas DataFrame with :data:`CURVE_COLUMNS`, one row per evaluated size.
    """

    n_queries: int | None
    effect: float
    power: float
    alpha: float
    pilot_queries: int
    pilot_mean: float
    pilot_sd: float
    n_experiments: int
    n_resamples: int
    max_queries: int
    seed: int
    curve: Any
    assurance: float | None = None
    pilot_sd_upper: float | None = None
    n_queries_assured: int | None = None
    pilot_sd_interval: tuple[float, float] | None = None
    n_queries_interval: tuple[int, int] | None = None

    @property
    def reached(self) -> bool:
        """Whether some size up to ``max_queries`` reached the target power."""
        return self.n_queries is not None

    def __str__(self) -> str:
        head = (
            f"to detect a mean difference of {self.effect:g} with power {self.power:g} at alpha {self.alpha:g} "
            f"(two-sided paired test as adaptlab reports it; pilot: {self.pilot_queries} queries, "
            f"mean difference {self.pilot_mean:.4g}, sd {self.pilot_sd:.4g}):"
        )
        if self.n_queries is None:
            return f"{head}\n  more than {self.max_queries} queries (raise --max-queries, or plan a larger effect)"
        row = self.curve[self.curve["n_queries"] == self.n_queries].iloc[0]
        how = (
            "fitted power"
            if row["power_fit"] >= self.power
            else "the fitted curve stays below the target up to "
            f"{self.max_queries} queries, but simulated power reaches it here; fitted"
        )
        return (
            f"{head}\n  {self.n_queries} queries ({how} {row['power_fit']:.3f}; simulated there "
            f"{row['power']:.3f} +- {row['se']:.3f} from {self.n_experiments} experiments; normal approximation "
            f"{row['power_normal']:.3f})" + self._uncertainty()
        )

    def _uncertainty(self) -> str:
        """The lines on the pilot's own uncertainty (empty when not computed)."""
        out = ""
        if self.n_queries_interval is not None and self.pilot_sd_interval is not None:
            lo, hi = self.pilot_sd_interval
            out += (
                f"\n  {self.n_queries_interval[0]} to {self.n_queries_interval[1]} queries over the pilot's "
                f"uncertainty (95% interval of the sd of the differences: {lo:.4g} to {hi:.4g})"
            )
        if self.n_queries_assured is not None and self.assurance is not None:
            out += (
                f"\n  {self.n_queries_assured} queries reach power {self.power:g} with assurance "
                f"{self.assurance:g} (planned at the one-sided {self.assurance:g} upper bound of the sd, "
                f"{self.pilot_sd_upper:.4g})"
            )
        return out

    def figure(self, path: str | Path | None = None, *, dpi: int | None = None) -> Figure:
        """The power curve as a matplotlib Figure (saved to ``path`` when given; PNG, PDF or SVG)."""
        from adaptlab.analysis.plots.figure import DEFAULT_DPI, _figure, _finish

        fig = _figure(6.4, 4.2)
        ax = fig.subplots()
        c = self.curve
        ax.errorbar(
            c["n_queries"],
            c["power"],
            yerr=1.96 * c["se"],
            fmt="o",
            color="C0",
            capsize=3,
            label=f"simulated ({self.n_experiments} experiments, 95% band)",
        )
        ax.plot(c["n_queries"], c["power_fit"], "-", color="C1", label="fitted curve")
        ax.plot(c["n_queries"], c["power_normal"], "--", color="C7", label="normal approximation")
        ax.axhline(self.power, color="C3", lw=1, label=f"target power {self.power:g}")
        if self.n_queries is not None:
            ax.axvline(self.n_queries, color="C2", lw=1, label=f"planned: {self.n_queries} queries")
        ax.set_xscale("log")
        ax.set_ylim(0.0, 1.02)
        ax.set_xlabel("number of queries (log scale)")
        ax.set_ylabel(f"power (p < {self.alpha:g})")
        ax.set_title(f"power to detect a mean difference of {self.effect:g}")
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right")
        return _finish(fig, path, DEFAULT_DPI if dpi is None else dpi)


def _differences(pilot_a: Any, pilot_b: Any) -> np.ndarray:
    """The pilot's per-query differences ``a - b`` (or ``a`` itself), validated."""
    try:
        a = np.asarray(pilot_a, dtype=np.float64)
        d = a if pilot_b is None else a - np.asarray(pilot_b, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise DataError(f"plan_sample_size: pilot values must be numbers on the same queries: {e}") from e
    if d.ndim != 1 or d.size < 2 or not np.all(np.isfinite(d)):
        raise DataError(
            f"plan_sample_size: pilot values must be 1-D, finite and cover at least 2 queries, got shape {d.shape}"
        )
    return d


def _check_unit(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < float(value) < 1.0:
        raise ConfigError(f"plan_sample_size: {name} must be a number strictly between 0 and 1, got {value!r}")
    return float(value)


def _check_count(name: str, value: object, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) < low:
        raise ConfigError(f"plan_sample_size: {name} must be an integer >= {low}, got {value!r}")
    return int(value)


def _log_var_se(d: np.ndarray, z: float) -> tuple[float, float]:
    """``(ln(c s^2), se)`` of Bonett's (2006) interval for the variance of ``d`` at quantile ``z``."""
    n = d.size
    trim = int(np.floor(n / (2.0 * np.sqrt(n - 4)))) if n > 4 else 0
    m = float(np.sort(d)[trim : n - trim].mean())
    ss = float(np.sum((d - d.mean()) ** 2))
    kurt = n * float(np.sum((d - m) ** 4)) / ss**2 if ss > 0 else 0.0
    c = n / (n - z)
    se = c * np.sqrt(max(kurt - (n - 3) / n, 0.0) / (n - 1))
    return float(np.log(c * ss / (n - 1))) if ss > 0 else float("-inf"), float(se)


def sd_bounds(d: Any, confidence: float = 0.95) -> tuple[float, float]:
    """Bonett's (2006) two-sided ``confidence`` interval for the standard deviation of the values
    ``d`` (module doc), for skewed and heavy-tailed values as well as normal ones. A one-sided
    upper bound at level ``a`` is the upper end at ``confidence = 2 a - 1``.

    >>> lo, hi = sd_bounds([0.1, -0.2, 0.0, 0.3, 0.05, -0.1, 0.2, 0.0, 0.15, -0.05])
    >>> round(lo, 3), round(hi, 3)
    (0.098, 0.278)
    """
    d = _differences(d, None)
    if d.size < 6:
        raise DataError(f"sd_bounds: at least 6 values are needed, got {d.size}")
    z = NormalDist().inv_cdf((1.0 + _check_unit("confidence", confidence)) / 2.0)
    centre, se = _log_var_se(d, z)
    return float(np.sqrt(np.exp(centre - z * se))), float(np.sqrt(np.exp(centre + z * se)))


def _check_assurance(assurance: float | None, d: np.ndarray) -> float | None:
    """``assurance`` checked (a probability, or None) against the pilot ``d`` (at least 6 values)."""
    if assurance is None:
        return None
    assurance = _check_unit("assurance", assurance)
    if d.size < 6:
        raise DataError(
            f"plan_sample_size: the pilot's uncertainty (assurance) needs at least 6 queries, got "
            f"{d.size}; pass assurance=None to plan from the pilot's sd alone"
        )
    return assurance


def pilot_uncertainty(d: np.ndarray, q: int | None, assurance: float) -> dict[str, Any]:
    """The pilot's uncertainty around the size ``q`` planned from the pilot differences ``d``
    (module doc, "The pilot's own uncertainty"): Bonett's (2006) 95% interval of the sd of ``d``
    and the size rescaled by ``(sd_bound / sd)^2`` to each end (``n_queries_interval``), and the
    size planned at the one-sided upper ``assurance`` bound of the sd (``n_queries_assured``;
    Browne 1995). Returns the :class:`Plan` fields ``assurance``, ``pilot_sd_upper``,
    ``n_queries_assured``, ``pilot_sd_interval`` and ``n_queries_interval`` (None without a
    planned size).

    >>> d = np.array([0.1, -0.2, 0.0, 0.3, 0.05, -0.1, 0.2, 0.0, 0.15, -0.05])
    >>> u = pilot_uncertainty(d, 100, 0.8)
    >>> u["n_queries_interval"], u["n_queries_assured"]
    ((44, 353), 162)
    """
    sd = float(d.std(ddof=1))
    sd_lo, sd_hi = sd_bounds(d, 0.95)
    upper = sd_bounds(d, 2.0 * assurance - 1.0)[1]
    interval = None if q is None else (_scaled(q, sd, sd_lo), _scaled(q, sd, sd_hi))
    return {
        "assurance": assurance,
        "pilot_sd_upper": upper,
        "n_queries_assured": _scaled(q, sd, upper),
        "pilot_sd_interval": (sd_lo, sd_hi),
        "n_queries_interval": interval,
    }


def _scaled(q: int | None, sd: float, bound: float) -> int | None:
    """The size ``q`` planned at spread ``sd`` moved to spread ``bound``: ``ceil(q (bound / sd)^2)``."""
    if q is None or sd <= 0:
        return q
    return max(_MIN_Q, int(np.ceil(q * (bound / sd) ** 2 - 1e-9)))


def _normal_power(q: int, effect: float, sd: float, alpha: float) -> float:
    """Power of a two-sided level-``alpha`` z-test of a mean ``effect`` with ``q`` values of spread ``sd``."""
    if sd <= 0.0:
        return 1.0
    z = NormalDist().inv_cdf(1.0 - alpha / 2.0)
    shift = abs(effect) * np.sqrt(q) / sd
    return float(NormalDist().cdf(shift - z) + NormalDist().cdf(-shift - z))


def _normal_size(effect: float, sd: float, alpha: float, power: float) -> int:
    """``((z_{1-alpha/2} + z_power) sd / effect)^2``, at least 2."""
    z = NormalDist().inv_cdf(1.0 - alpha / 2.0) + NormalDist().inv_cdf(power)
    return max(_MIN_Q, int(np.ceil((z * sd / abs(effect)) ** 2)))


@dataclass(frozen=True)
class _Sim:
    """What one power estimate needs: the shifted pilot differences and the test settings."""

    shifted: np.ndarray
    alpha: float
    n_experiments: int
    n_resamples: int
    seed: int

    def power(self, q: int) -> float:
        """Fraction of ``n_experiments`` resampled evaluations of ``q`` queries with ``p < alpha``."""
        rng = np.random.default_rng([self.seed, q])
        d = self.shifted[rng.integers(0, self.shifted.size, size=(self.n_experiments, q))]
        values = np.vstack([d, np.zeros((1, q))])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            out = paired_bootstrap(
                values, baseline=self.n_experiments, n_resamples=self.n_resamples, seed=self.seed, family_size=1
            )
        return float(np.mean([r.p_value < self.alpha for r in out]))


def _default_grid(q0: int, max_queries: int) -> list[int]:
    return sorted({min(max_queries, max(_MIN_Q, int(round(q0 * f)))) for f in _GRID_FACTORS})


@dataclass(frozen=True)
class _Probit:
    """``power(Q) = Phi(a + b sqrt(Q))``, the shape of the normal-theory power curve, fitted by
    maximum likelihood to the rejection counts of every evaluated size."""

    a: float
    b: float

    def power(self, q: int) -> float:
        return float(NormalDist().cdf(self.a + self.b * np.sqrt(q)))

    def size(self, target: float) -> float:
        """The (real) number of queries where the fitted power equals ``target``."""
        return float(((NormalDist().inv_cdf(target) - self.a) / self.b) ** 2) if self.b > 0 else float("inf")


def _fit(powers: dict[int, float], n: int) -> _Probit | None:
    """The probit fit of the simulated powers (None when it is not increasing)."""
    from scipy.optimize import minimize
    from scipy.special import log_ndtr

    root = np.sqrt(np.array(sorted(powers), dtype=np.float64))
    hits = np.array([powers[q] for q in sorted(powers)]) * n

    def nll(theta: np.ndarray) -> float:
        eta = theta[0] + theta[1] * root
        return float(-(hits * log_ndtr(eta) + (n - hits) * log_ndtr(-eta)).sum())

    res = minimize(
        nll,
        np.array([-2.0, 2.0 / max(root.max(), 1.0)]),
        method="Nelder-Mead",
        options={"xatol": 1e-6, "fatol": 1e-9, "maxiter": 4000},
    )
    fit = _Probit(float(res.x[0]), float(res.x[1]))
    return fit if np.all(np.isfinite(res.x)) and fit.b > 0 else None


def _planned(powers: dict[int, float], fit: _Probit | None, target: float, max_queries: int) -> int | None:
    """The answer, consistent with the curve printed beside it: the fitted size (rounded up)
    when the fitted curve reaches ``target`` within ``max_queries`` (every smaller size then has
    fitted power below it); else the smallest evaluated size whose simulated power reaches
    ``target`` (its row shows it); None only when no row reaches it, simulated or fitted."""
    if fit is not None and fit.size(target) <= max_queries:
        return max(_MIN_Q, int(np.ceil(fit.size(target) - 1e-9)))
    reached = [q for q in sorted(powers) if powers[q] >= target]
    return reached[0] if reached else None


def _search(
    sim: _Sim, grid: list[int], target: float, max_queries: int, note: Callable[[int, float, int], None]
) -> tuple[dict[int, float], _Probit | None]:
    """Power at every grid size, extended upward (doubling) until reached, then at the fitted
    size; ``note(q, power, n_sizes)`` after each simulated size (the progress line's detail)."""
    powers: dict[int, float] = {}

    def simulate(q: int) -> None:
        powers[q] = sim.power(q)
        note(q, powers[q], len(powers))

    for q in grid:
        simulate(q)
    while max(powers.values()) < target and max(powers) < max_queries:
        simulate(min(max_queries, 2 * max(powers)))
    fit = _fit(powers, sim.n_experiments)
    for _ in range(_REFITS):
        planned = _planned(powers, fit, target, max_queries)
        if planned is None or planned in powers:
            break
        simulate(planned)
        fit = _fit(powers, sim.n_experiments)
    planned = _planned(powers, fit, target, max_queries)
    if planned is not None and planned not in powers:  # the curve always shows the planned size (not refitted)
        simulate(planned)
    return powers, fit


def plan_sample_size(
    pilot_a: Any,
    pilot_b: Any = None,
    *,
    config: PlanSettings | None = None,
    **options: Unpack[PlanOptions],
) -> Plan:
    """The number of queries that detects a mean difference ``effect`` with probability ``power``.

    Method and references in the module doc.

    Parameters
    ----------
    pilot_a, pilot_b : array-like
        Per-query values of two systems on the same pilot queries (or ``pilot_a`` alone: the
        per-query differences).
    config : PlanSettings, optional
        All the settings below in one object (then none of them as keywords).
    effect : float
        The true mean difference to detect, in the measure's units (e.g. 0.02 nDCG@10).
    power : float
        The probability of detecting it.
    alpha : float
        The level of the two-sided paired test.
    n_experiments : int
        Simulated evaluations per size.
    n_resamples : int
        Sign vectors of each simulated test (bootstrap resamples from
        :data:`~adaptlab.stats.PERMUTATION_Q` queries on).
    grid : list of int, optional
        The sizes to evaluate (default: around the normal-approximation size, refined by
        bisection).
    max_queries : int
        The largest size tried.
    seed : int
        Seeds the simulation.
    assurance : float or None
        The probability, over the pilot's sampling variation, that ``n_queries_assured`` reaches
        ``power`` (None: not computed, nor ``n_queries_interval``). Needs a pilot of at least 6
        queries.

    Returns
    -------
    Plan
        ``n_queries`` (None when no size up to ``max_queries`` reached ``power``),
        ``n_queries_interval`` and ``n_queries_assured`` (the pilot's uncertainty, module doc),
        ``curve`` (a DataFrame, one row per size) and ``figure()`` (a matplotlib Figure).

    Examples
    --------
    >>> ft = [1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 1, 0]
    >>> base = [1, 0, 1, 0, 1, 1, 0, 0, 1, 1, 0, 1, 0, 1, 0, 1, 1, 0, 1, 0]
    >>> plan = plan_sample_size(ft, base, effect=0.2, n_experiments=50, n_resamples=99, grid=[20, 40, 80])
    >>> plan.n_queries, plan.curve["n_queries"].tolist()
    (38, [20, 38, 39, 40, 80])
    >>> plan.n_queries_interval, plan.n_queries_assured
    ((17, 111), 59)
    """
    (given,) = split_options("plan_sample_size", options, PlanOptions)
    settings = settings_of("plan_sample_size", PlanSettings, config, given, "config")
    d = _differences(pilot_a, pilot_b)
    s = _checked(settings, d)
    sim = _Sim(d - d.mean() + s.effect, s.alpha, s.n_experiments, s.n_resamples, s.seed)
    sd = float(d.std(ddof=1))
    if s.grid is None:
        grid = _default_grid(_normal_size(s.effect, sd, s.alpha, s.power), s.max_queries)
    else:
        grid = sorted({_check_count("grid values", q, _MIN_Q) for q in s.grid})
    s = replace(s, max_queries=max(s.max_queries, max(grid)))
    powers, fit = _simulate(sim, grid, s.power, s.max_queries)
    return _plan(powers, fit, d, sd, s, sim)


def _checked(s: PlanSettings, d: np.ndarray) -> PlanSettings:
    """``s`` checked (each bad value a :class:`~adaptlab.errors.ConfigError` naming it), with
    ``effect`` a float."""
    effect = s.effect
    if isinstance(effect, bool) or not isinstance(effect, (int, float)) or not np.isfinite(effect) or effect == 0:
        raise ConfigError(f"plan_sample_size: effect must be a non-zero finite number, got {effect!r}")
    power, alpha = _check_unit("power", s.power), _check_unit("alpha", s.alpha)
    assurance = _check_assurance(s.assurance, d)
    max_queries = _check_count("max_queries", s.max_queries, _MIN_Q)
    return replace(
        s,
        effect=float(effect),
        power=power,
        alpha=alpha,
        assurance=assurance,
        max_queries=max_queries,
        n_experiments=_check_count("n_experiments", s.n_experiments, 10),
        n_resamples=_check_count("n_resamples", s.n_resamples, 19),
        seed=check_seed(s.seed),
    )


def _simulate(sim: _Sim, grid: list[int], power: float, max_queries: int) -> tuple[dict[int, float], _Probit | None]:
    """:func:`_search` with a progress line while it runs longer than a few seconds."""
    with Heartbeat("plan: simulating the power curve") as beat:

        def note(q: int, p: float, n: int) -> None:
            beat.detail = f": {n} sizes done, the last {q} queries with power {p:.3f} ({sim.n_experiments} experiments)"

        return _search(sim, grid, power, max_queries, note)


def _plan(powers: dict[int, float], fit: _Probit | None, d: np.ndarray, sd: float, s: PlanSettings, sim: _Sim) -> Plan:
    """The :class:`Plan` of the simulated ``powers`` and their fitted curve under the checked
    settings ``s``."""
    import pandas as pd

    qs = sorted(powers)
    curve = pd.DataFrame(
        {
            "n_queries": qs,
            "power": [powers[q] for q in qs],
            "se": [float(np.sqrt(powers[q] * (1 - powers[q]) / sim.n_experiments)) for q in qs],
            "power_fit": [fit.power(q) if fit is not None else float("nan") for q in qs],
            "power_normal": [_normal_power(q, s.effect, sd, sim.alpha) for q in qs],
        },
        columns=list(CURVE_COLUMNS),
    )
    q = _planned(powers, fit, s.power, s.max_queries)
    extra = {} if s.assurance is None else pilot_uncertainty(d, q, s.assurance)
    return Plan(
        n_queries=q,
        effect=s.effect,
        power=s.power,
        alpha=sim.alpha,
        pilot_queries=int(d.size),
        pilot_mean=float(d.mean()),
        pilot_sd=sd,
        n_experiments=sim.n_experiments,
        n_resamples=sim.n_resamples,
        max_queries=s.max_queries,
        seed=sim.seed,
        curve=curve,
        **extra,
    )


def pilot_from_store(
    store: Any, *, system: str, against: str, measure: str = "ndcg@10", dataset: str | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Per-query values of ``system`` and ``against`` on ``measure`` from a results store's latest
    per-query records (re-scored as :func:`adaptlab.compare` does), on their common queries."""
    groups = store_groups(store, dataset, [measure])
    found = [
        (ds, names, values) for (ds, _m), (names, values) in groups.items() if system in names and against in names
    ]
    if len(found) == 1:
        _ds, names, values = found[0]
        return values[names.index(system)], values[names.index(against)]
    if found:
        raise ConfigError(
            f"systems {system!r} and {against!r} are both on datasets {', '.join(f[0] for f in found)}; "
            "choose one with --dataset"
        )
    have = sorted(f"{ds}: {', '.join(names)}" for (ds, _m), (names, _v) in groups.items())
    raise ConfigError(
        f"the store has no dataset with both systems {system!r} and {against!r}"
        + (f" (dataset {dataset!r})" if dataset else "")
        + f"; systems per dataset: {'; '.join(have)}"
    )
