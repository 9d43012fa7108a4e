"""Similarity thresholds chosen by a paired bootstrap (reference 000, Section 2.2).

**The threshold grid.** Let ``s_{q,K}`` be the K-th (smallest) top-K similarity of query ``q``
(its lowest retrieved similarity when fewer than K were retrieved). For the bootstrap resamples
``Q_1..Q_m`` (``l`` queries each, with replacement) the pool ``Gamma`` is, by default
(``gamma="pooled"``), every ``s_{q,K}`` of every resample, ``Gamma = {s_{q,K} : q in Q_j,
j = 1..m}``, and ``tau(psi) = percentile(Gamma, psi)`` (NumPy's linear interpolation on the pooled
values; computed from the per-query draw counts without materialising the pool). Thresholding
keeps a retrieved document only when its similarity is ``>= tau``, so with one gold document the
thresholded top-K hit of a query is ``hit_q(tau) = 1[1 <= rank_q <= K and s_q >= tau]`` (``s_q``
the gold similarity), and ``psi`` percent of the pooled K-th similarities lie below ``tau(psi)``.

Why pooled: the paper's literal text takes one ``gamma_j = min(T_j)`` per resample
(``gamma="resample_min"``, kept for comparison). The minimum of ``l`` values sits in the far
lower tail, so ``tau(psi)`` stays below almost every similarity for ``psi < 100``, thresholding
removes nothing, and any test passes up to ``psi = 95-100`` whatever the data. The paper's
Table 2 reports ``psi`` from 5 to 85 with ``tau`` 0.43-0.88 and accuracy at ``tau`` a point or
two below the bootstrap mean: the behaviour of percentiles of the pooled per-question K-th
similarities, which this module therefore uses by default.

**The tests** (every ``psi`` of the grid, paired: the same resamples with and without the
threshold). With ``a_j`` and ``a_j(tau)`` the top-K accuracy of resample ``j`` without and with
the threshold, ``a = mean_j a_j`` the bootstrap mean accuracy and ``[L, U]`` a percentile
interval at level ``confidence``:

* ``test="paper"`` (the paper's rule, its words "not statistically different from the mean
  bootstrap accuracy a"): ``psi`` passes when ``L(a_j(tau)) <= a <= U(a_j(tau))`` on the
  configured resamples (``m``, ``l``; the paper uses 500 and 100).
* ``test="exact"`` (default): a distribution-free order-statistic choice with an exact
  guarantee. A query is *lost* at ``tau`` when it is a top-K hit without the threshold and not
  with it (its gold similarity is below ``tau``); the accuracy loss is ``L(tau) / Q`` with ``L``
  the number of lost queries, and its population value ``pi(tau)`` is the probability that a
  query is lost. ``L ~ Binomial(Q, pi)``; the one-sided Clopper-Pearson (1934, Biometrika 26)
  upper bound ``U(L) = Beta^-1(c; L + 1, Q - L)`` (``U = 1`` when ``L = Q``) satisfies
  ``P(pi <= U) >= c``. Let ``L*`` be the largest count with ``U(L*) <= margin`` and ``g_(1) <=
  g_(2) <= ...`` the gold similarities of the hits in increasing order. The chosen threshold is
  the largest one that loses at most ``L*`` queries, ``tau = g_(L* + 1)`` (any higher threshold
  loses ``L* + 1``; when there are at most ``L*`` hits, the highest retrieved similarity). It is
  an order statistic, so its guarantee needs no model of the similarities (Wilks 1941,
  "Determination of sample sizes for setting tolerance limits", Ann. Math. Statist. 12): with
  ``t_m`` the highest threshold whose true loss is at most ``margin``, ``pi(tau) > margin``
  only if at most ``L*`` hits have a gold similarity below ``t_m`` (a count that is
  ``Binomial(Q, p)`` with ``p >= margin``), which has probability at most ``P(Binomial(Q,
  margin) <= L*) <= 1 - c`` by the choice of ``L*``. So with probability at least ``c`` the
  chosen threshold loses at most ``margin`` of accuracy. No threshold exists only when even
  ``L* = 0`` fails, ``U(0) = 1 - (1 - c)^(1/Q) > margin`` (about ``Q < 299`` for ``margin = 0.01``
  and ``c = 0.95``). The choice is added to the ``psi`` grid at its own ``psi`` (the percentage
  of the pooled ``Gamma`` values below it), where it gets the accuracy, the CIs and the removed
  share of every grid point. (Until issue 29 the rule walked the grid ``psi = 5, 10, ...`` up
  while ``U(L(tau(psi))) <= margin``, fixed-sequence testing of Maurer, Hothorn & Lehmacher
  1995: the guarantee held, but at Q = 300 no grid point passed in 55 of 200 simulated data
  sets although a threshold existed.) With ``margin = 0.01`` and ``c = 0.95`` the rule may lose
  no query at Q = 300 (``U(0) = 0.0099``) and at most 4 at Q = 1000. The grid's
  ``exact_pass`` still says which grid points lose at most ``L*`` queries. The simulation in
  tests/stats/test_simulation_thresholds.py checks the guarantee and how often a threshold is
  chosen on data whose true loss is known.
* ``test="margin"`` (kept for comparison; non-inferiority with a margin, Wellek 2010, "Testing
  Statistical Hypotheses of Equivalence and Noninferiority", ch. 2): ``psi`` passes when the
  upper end of the two-sided percentile CI of the paired loss ``d_j = a_j - a_j(tau)`` is
  ``<= margin``. The loss is resampled over all ``Q`` queries (``m`` resamples of ``l = Q``),
  whatever ``sample_size``. Its reading "at most one point of accuracy lost, with 95%
  confidence" does not hold: in simulation the chosen threshold kept its loss within the margin
  in 84% of the data sets at Q = 300 and 93% at Q = 1000 (issue 23), because the percentile
  interval of a small proportion undercovers and the highest passing threshold is chosen after
  looking at every one.

The chosen threshold is, for ``"paper"`` and ``"margin"``, the highest ``tau(psi)`` that passes
(``None`` when none does); for ``"exact"`` the order statistic above. For it
the result reports ``tau``, ``psi``, the accuracy at ``tau`` with its CI, the loss with its CI,
and the fraction of retrieved top-K documents the threshold removes.

The package, one concept per module: :mod:`~adaptlab.analysis.thresholds.rule` (the rule's
settings, :class:`ThresholdRule`), :mod:`~adaptlab.analysis.thresholds.grid` (``tau(psi)`` from
``Gamma``), :mod:`~adaptlab.analysis.thresholds.exact` (the exact rule),
:mod:`~adaptlab.analysis.thresholds.select` (the entry points and the paper and margin rules) and
:mod:`~adaptlab.analysis.thresholds.result` (:class:`ThresholdResult` and its store rows).
"""

from __future__ import annotations

from adaptlab.analysis.thresholds.exact import exact_rule, lost_bound, order_statistic_threshold
from adaptlab.analysis.thresholds.result import ThresholdResult
from adaptlab.analysis.thresholds.rule import GAMMAS, PSI_GRID, TESTS, ThresholdRule, ThresholdRuleOptions
from adaptlab.analysis.thresholds.select import similarity_thresholds, thresholds_from_arrays

__all__ = [
    "GAMMAS",
    "PSI_GRID",
    "TESTS",
    "ThresholdResult",
    "ThresholdRule",
    "ThresholdRuleOptions",
    "exact_rule",
    "lost_bound",
    "order_statistic_threshold",
    "similarity_thresholds",
    "thresholds_from_arrays",
]
