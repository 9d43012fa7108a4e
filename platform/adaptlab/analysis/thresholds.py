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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict, cast

import numpy as np

from adaptlab.analysis._inputs import query_arrays
from adaptlab.analysis._options import BootstrapOptions, Labels, settings_of, split_options
from adaptlab.analysis._resample import draw_indices, resample_means
from adaptlab.analysis._rows import metric_row
from adaptlab.errors import ConfigError
from adaptlab.stats import BootstrapConfig, percentile_interval, resample_indices
from adaptlab.stats.settings import resolve_bootstrap

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "GAMMAS",
    "PSI_GRID",
    "TESTS",
    "ThresholdResult",
    "ThresholdRule",
    "ThresholdRuleOptions",
    "exact_rule",
    "similarity_thresholds",
    "thresholds_from_arrays",
]

PSI_GRID: tuple[float, ...] = tuple(float(p) for p in range(5, 101, 5))
"""The percentiles of ``Gamma`` tried by default: 5, 10, ..., 100."""

TESTS: tuple[str, ...] = ("exact", "margin", "paper")
"""Accepted values of ``test``: the exact fixed-sequence rule (default), the bootstrap margin rule
and the paper's rule."""

GAMMAS: tuple[str, ...] = ("pooled", "resample_min")
"""Accepted values of ``gamma``: pooled per-query K-th similarities (default) or one minimum
per resample (the paper's literal text)."""


@dataclass(frozen=True)
class ThresholdRule:
    """How a threshold is chosen (module doc): the candidate percentiles ``psi_grid`` of
    ``Gamma``, the selection ``test`` (one of :data:`TESTS`), the accuracy loss ``margin`` it may
    cost and how ``gamma`` is built (one of :data:`GAMMAS`). Checked by :meth:`checked_grid`."""

    psi_grid: Sequence[float] = PSI_GRID
    test: str = "exact"
    margin: float = 0.01
    gamma: str = "pooled"

    def checked_grid(self) -> np.ndarray:
        """Check the rule; return the grid sorted, float64."""
        return _check_rule(self.psi_grid, self.test, self.gamma, self.margin)


class ThresholdRuleOptions(TypedDict, total=False):
    """The fields of :class:`ThresholdRule` as keywords."""

    psi_grid: Sequence[float]
    test: str
    margin: float
    gamma: str


class _ArrayOptions(ThresholdRuleOptions, BootstrapOptions, Labels, total=False):
    """The keywords of :func:`thresholds_from_arrays`: the rule, the bootstrap and the labels."""


class _RecordOptions(ThresholdRuleOptions, BootstrapOptions, total=False):
    """The keywords of :func:`similarity_thresholds`: the rule and the bootstrap."""


@dataclass(frozen=True)
class ThresholdResult:
    """Thresholds ``tau(psi)`` on a grid of ``psi`` and the one chosen by ``test``.

    Arrays are indexed like ``psi``. ``acc`` is the thresholded accuracy on all queries and
    ``removed`` the fraction of retrieved top-K documents below ``tau``. ``acc_boot_mean`` /
    ``acc_ci_*`` and ``loss_*`` (paired loss ``a_j - a_j(tau)``) are taken on the resamples of
    ``test`` (all ``Q`` queries for ``"margin"``, ``m x l`` for ``"paper"``). ``paper_pass`` and
    ``margin_pass`` say which ``psi`` pass each rule; ``chosen`` is the index chosen by ``test``,
    ``chosen_paper`` / ``chosen_margin`` by each rule (``None``: no threshold passes).
    ``lost`` is the number of lost queries at each ``tau``, ``loss_upper`` its one-sided
    Clopper-Pearson upper bound as a loss fraction, ``exact_pass`` the fixed-sequence result
    and ``chosen_exact`` the exact rule's choice. Accuracies are fractions in [0, 1].
    """

    system: str
    dataset: str
    k: int
    test: str
    gamma: str
    margin: float
    psi: np.ndarray
    tau: np.ndarray
    acc: np.ndarray
    removed: np.ndarray
    acc_boot_mean: np.ndarray
    acc_ci_low: np.ndarray
    acc_ci_high: np.ndarray
    loss_boot_mean: np.ndarray
    loss_ci_low: np.ndarray
    loss_ci_high: np.ndarray
    paper_pass: np.ndarray
    margin_pass: np.ndarray
    base_acc: float
    base_boot_mean: float
    base_ci_low: float
    base_ci_high: float
    chosen: int | None
    chosen_paper: int | None
    chosen_margin: int | None
    confidence: float
    n_queries: int
    n_excluded: int
    n_resamples: int
    sample_size: int
    seed: int
    lost: np.ndarray | None = None
    loss_upper: np.ndarray | None = None
    exact_pass: np.ndarray | None = None
    chosen_exact: int | None = None

    @property
    def chosen_psi(self) -> float:
        return float(self.psi[self.chosen]) if self.chosen is not None else float("nan")

    @property
    def chosen_tau(self) -> float:
        return float(self.tau[self.chosen]) if self.chosen is not None else float("nan")

    def at_chosen(self) -> dict[str, float]:
        """At the chosen threshold: tau, psi, accuracy (value, boot_mean, ci_low, ci_high), the
        loss (loss, loss_ci_low, loss_ci_high) and the fraction of top-K documents removed."""
        keys = (
            "tau",
            "psi",
            "value",
            "boot_mean",
            "ci_low",
            "ci_high",
            "loss",
            "loss_boot_mean",
            "loss_ci_low",
            "loss_ci_high",
            "removed",
            "loss_upper",
        )
        if self.chosen is None:
            return dict.fromkeys(keys, float("nan"))
        i = self.chosen
        upper = self.loss_upper[i] if self.loss_upper is not None else float("nan")
        vals = (
            self.tau[i],
            self.psi[i],
            self.acc[i],
            self.acc_boot_mean[i],
            self.acc_ci_low[i],
            self.acc_ci_high[i],
            self.base_acc - self.acc[i],
            self.loss_boot_mean[i],
            self.loss_ci_low[i],
            self.loss_ci_high[i],
            self.removed[i],
            upper,
        )
        return {k: float(v) for k, v in zip(keys, vals)}

    def _choice(self, i: int | None) -> dict[str, float | None]:
        if i is None:
            return {"psi": None, "tau": None}
        return {"psi": float(self.psi[i]), "tau": float(self.tau[i])}

    def to_metric_rows(self) -> list[dict[str, Any]]:
        """Rows ``threshold`` (value = tau; extra: k, psi, test, margin, both rules' choices, the
        removed fraction and the whole grid), ``acc_at_threshold`` (accuracy at tau with its CI)
        and ``threshold_loss`` (the paired loss with its CI; for ``test="exact"`` the one-sided
        Clopper-Pearson interval ``[0, U]``, ``interval_method`` ``"clopper-pearson-upper"``)."""
        l = self.sample_size if self.test == "paper" else self.n_queries
        common: dict[str, Any] = {
            "n_queries": self.n_queries,
            "n_resamples": self.n_resamples,
            "sample_size": l,
            "seed": self.seed,
            "confidence": self.confidence,
            "interval_method": "percentile",
        }
        at = self.at_chosen()
        loss_ci: dict[str, Any] = {"ci_low": at["loss_ci_low"], "ci_high": at["loss_ci_high"], **common}
        if self.test == "exact":
            loss_ci.update(
                ci_low=0.0 if self.chosen is not None else float("nan"),
                ci_high=at["loss_upper"],
                interval_method="clopper-pearson-upper",
            )
        grid = {
            "psi": [float(x) for x in self.psi],
            "tau": [float(x) for x in self.tau],
            "acc_boot_mean": [float(x) for x in self.acc_boot_mean],
            "removed": [float(x) for x in self.removed],
            "loss_ci_high": [float(x) for x in self.loss_ci_high],
            "paper_pass": [bool(x) for x in self.paper_pass],
            "margin_pass": [bool(x) for x in self.margin_pass],
        }
        if self.loss_upper is not None and self.exact_pass is not None:
            grid.update(loss_upper=[float(x) for x in self.loss_upper], exact_pass=[bool(x) for x in self.exact_pass])
        rule = {"k": self.k, "psi": at["psi"], "test": self.test, "gamma": self.gamma, "margin": self.margin}
        return [
            metric_row(
                self.system,
                self.dataset,
                "threshold",
                at["tau"],
                extra={
                    **rule,
                    "removed": at["removed"],
                    "grid": grid,
                    "n_excluded": self.n_excluded,
                    "paper": self._choice(self.chosen_paper),
                    "margin_rule": self._choice(self.chosen_margin),
                    "exact_rule": self._choice(self.chosen_exact),
                },
                **common,
            ),
            metric_row(
                self.system,
                self.dataset,
                "acc_at_threshold",
                at["value"],
                boot_mean=at["boot_mean"],
                ci_low=at["ci_low"],
                ci_high=at["ci_high"],
                extra={
                    **rule,
                    "tau": at["tau"],
                    "base_acc": self.base_acc,
                    "base_boot_mean": self.base_boot_mean,
                    "removed": at["removed"],
                },
                **common,
            ),
            metric_row(
                self.system,
                self.dataset,
                "threshold_loss",
                at["loss"],
                boot_mean=at["loss_boot_mean"],
                extra={**rule, "tau": at["tau"]},
                **loss_ci,
            ),
        ]


def _weighted_percentile(values: np.ndarray, weights: np.ndarray, psi: np.ndarray) -> np.ndarray:
    """``np.percentile(np.repeat(values, weights), psi)`` (linear) without the repeat."""
    keep = weights > 0
    v, w = values[keep], weights[keep]
    order = np.argsort(v, kind="stable")
    v, cum = v[order], np.cumsum(w[order])
    n = int(cum[-1])
    h = (n - 1) * psi / 100.0
    lo = np.floor(h).astype(np.int64)
    hi = np.minimum(lo + 1, n - 1)
    vlo = v[np.searchsorted(cum, lo, side="right")]
    vhi = v[np.searchsorted(cum, hi, side="right")]
    return vlo + (h - lo) * (vhi - vlo)


def _taus(qmin: np.ndarray, idx: np.ndarray, psi: np.ndarray, gamma: str) -> np.ndarray:
    if gamma == "resample_min":
        return np.percentile(np.where(np.isfinite(qmin), qmin, np.inf)[idx].min(axis=1), psi)
    counts = np.bincount(idx.ravel(), minlength=qmin.shape[0])
    counts[~np.isfinite(qmin)] = 0  # a query that retrieved nothing has no K-th similarity
    if counts.sum() == 0:
        raise ConfigError("no resampled query retrieved any document: no similarity to threshold")
    return _weighted_percentile(qmin, counts, psi)


def _choose(ok: np.ndarray) -> int | None:
    where = np.flatnonzero(ok)
    return int(where.max()) if where.size else None


def lost_bound(n_queries: int, confidence: float, margin: float) -> int | None:
    """``L*``: the largest number of lost queries whose one-sided Clopper-Pearson upper bound
    ``Beta^-1(c; L + 1, Q - L)`` is ``<= margin`` (None when even ``L = 0`` fails)."""
    from scipy.stats import beta

    q = int(n_queries)
    lost = np.arange(q)
    upper = beta.ppf(float(confidence), lost + 1, q - lost)
    ok = np.flatnonzero(upper <= float(margin) + 1e-12)
    return int(ok.max()) if ok.size else None


def exact_rule(
    hits: np.ndarray,
    confidence: float,
    margin: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int | None]:
    """The exact rule on a grid (module doc): ``hits`` [1 + P, Q] (row 0 without the threshold,
    rows in increasing ``tau``) -> ``(lost [P], loss_upper [P], passes [P], last)``: each
    threshold's lost queries, their one-sided Clopper-Pearson upper bound, whether it loses at
    most ``L*`` (:func:`lost_bound`; equivalently its bound is ``<= margin``) and the highest
    grid index that passes (None when none does)."""
    from scipy.stats import beta

    q = hits.shape[1]
    lost = np.rint((hits[0][None, :] - hits[1:]).clip(min=0).sum(axis=1)).astype(np.int64)
    upper = np.ones(lost.shape, dtype=np.float64)
    some = lost < q
    upper[some] = beta.ppf(float(confidence), lost[some] + 1, q - lost[some])
    bound = lost_bound(q, confidence, margin)
    passes = lost <= (-1 if bound is None else bound)
    return lost, upper, passes, _choose(passes)


def order_statistic_threshold(
    topk: np.ndarray,
    rank: np.ndarray,
    confidence: float,
    margin: float,
) -> float | None:
    """The exact rule's threshold (module doc): ``g_(L* + 1)``, the ``(L* + 1)``-th smallest
    gold similarity among the top-K hits, or the highest retrieved similarity when there are at
    most ``L*`` hits; None when no threshold can keep the guarantee at this number of queries."""
    bound = lost_bound(topk.shape[0], confidence, margin)
    if bound is None:
        return None
    hit = rank > 0
    gold = np.sort(topk[np.flatnonzero(hit), rank[hit] - 1])
    if gold.size <= bound:
        return float(np.nanmax(topk))
    return float(gold[bound])


def _pooled_psi(qmin: np.ndarray, idx: np.ndarray, tau: float) -> float:
    """The percentage of the pooled ``Gamma`` values (per-query K-th similarities over the
    resamples) below ``tau``: the ``psi`` of a threshold that is not a grid percentile."""
    counts = np.bincount(idx.ravel(), minlength=qmin.shape[0]).astype(np.float64)
    counts[~np.isfinite(qmin)] = 0.0
    return float(100.0 * counts[np.isfinite(qmin) & (qmin < tau)].sum() / max(counts.sum(), 1.0))


def _with_exact_choice(
    psi: np.ndarray,
    tau: np.ndarray,
    topk: np.ndarray,
    rank: np.ndarray,
    qmin: np.ndarray,
    idx: np.ndarray,
    confidence: float,
    margin: float,
) -> tuple[np.ndarray, np.ndarray, int | None]:
    """``(psi, tau, i)``: the grid with the exact rule's threshold inserted in ``tau`` order at
    its own ``psi`` (:func:`_pooled_psi`), and its index (None, grid unchanged, when none)."""
    chosen = order_statistic_threshold(topk, rank, confidence, margin)
    if chosen is None:
        return psi, tau, None
    i = int(np.searchsorted(tau, chosen, side="right"))
    return np.insert(psi, i, _pooled_psi(qmin, idx, chosen)), np.insert(tau, i, chosen), i


def _check_scores(
    topk_scores: np.ndarray,
    gold_rank: np.ndarray,
    k: int | None,
) -> tuple[np.ndarray, np.ndarray, int]:
    """``(topk [Q, k] float64, rank [Q], k)``: the scores cut to the first ``k`` columns (default:
    all K) and the gold ranks with those outside ``1..k`` set to 0 (no hit)."""
    topk = np.asarray(topk_scores, dtype=np.float64)
    if topk.ndim != 2 or topk.shape[0] == 0:
        raise ConfigError(f"topk_scores must be a non-empty [Q, K] array, got shape {topk.shape}")
    if np.isinf(topk).any():
        raise ConfigError("topk_scores holds infinite similarities; only finite values (NaN = not retrieved)")
    k = topk.shape[1] if k is None else int(k)
    if not 1 <= k <= topk.shape[1]:
        raise ConfigError(f"k must be in [1, {topk.shape[1]}], got {k}")
    topk = topk[:, :k]
    q = topk.shape[0]
    rank = np.asarray(gold_rank, dtype=np.int64)
    if rank.shape != (q,):
        raise ConfigError(f"gold_rank must have shape ({q},), got {rank.shape}")
    rank = np.where((rank >= 1) & (rank <= k), rank, 0)
    return topk, rank, k


def _check_rule(psi_grid: Sequence[float], test: str, gamma: str, margin: float) -> np.ndarray:
    """Check ``psi_grid``, ``test``, ``gamma`` and ``margin``; return the grid sorted, float64."""
    psi = np.asarray(list(psi_grid), dtype=np.float64)
    if psi.size == 0 or np.any((psi < 0) | (psi > 100)):
        raise ConfigError(f"psi_grid must be non-empty percentiles in [0, 100], got {list(psi_grid)}")
    psi = np.sort(psi)
    if test not in TESTS:
        raise ConfigError(f"test={test!r} is not valid; expected one of {', '.join(TESTS)}")
    if gamma not in GAMMAS:
        raise ConfigError(f"gamma={gamma!r} is not valid; expected one of {', '.join(GAMMAS)}")
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not 0.0 <= float(margin) < 1.0:
        raise ConfigError(f"margin must be an accuracy loss in [0, 1) (0.01 = one point), got {margin!r}")
    return psi


def _margin_indices(q: int, idx: np.ndarray, cfg: BootstrapConfig, *, given: bool) -> np.ndarray:
    """The resamples of the margin rule, all ``Q`` queries each: ``idx`` itself when its
    resamples already have ``l = Q`` (given ``indices``, or ``sample_size`` unset or ``Q``), else
    ``m`` fresh resamples of ``Q`` from ``cfg.seed``."""
    if idx.shape[1] == q and (given or cfg.sample_size in (None, q)):
        return idx
    return np.asarray(resample_indices(q, n_resamples=idx.shape[0], seed=cfg.seed), dtype=np.int64)


def _hits(topk: np.ndarray, rank: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """``[1 + P, Q]`` float64 hits: row 0 the plain top-K hit ``1[1 <= rank_q <= K]``, row
    ``1 + i`` the thresholded hit ``1[1 <= rank_q <= K and s_q >= tau_i]``."""
    q = topk.shape[0]
    hit = rank > 0
    gold_score = np.full(q, -np.inf)
    gold_score[hit] = topk[np.flatnonzero(hit), rank[hit] - 1]
    return np.vstack([hit[None, :], hit[None, :] & (gold_score[None, :] >= tau[:, None])]).astype(np.float64)


def _removed(topk: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """Fraction of the retrieved top-K documents with similarity below each ``tau``."""
    retrieved = np.isfinite(topk)
    n_ret = max(int(retrieved.sum()), 1)
    return np.array([float((retrieved & (topk < t)).sum()) / n_ret for t in tau])


def thresholds_from_arrays(
    topk_scores: np.ndarray,
    gold_rank: np.ndarray,
    *,
    k: int | None = None,
    rule: ThresholdRule | None = None,
    indices: np.ndarray | None = None,
    bootstrap: BootstrapConfig | None = None,
    **options: Unpack[_ArrayOptions],
) -> ThresholdResult:
    """:func:`similarity_thresholds` on arrays: ``topk_scores`` [Q, K] (descending rows; NaN
    where fewer were retrieved) and ``gold_rank`` [Q] (1-based rank of the gold document in
    the top-K, 0 if absent). ``indices`` [m, l] overrides the drawn resamples of the grid and
    of ``test="paper"``; the margin rule always resamples all Q queries (the given ``indices``
    when they have l = Q, else ``m`` fresh resamples of Q from ``seed``). The rule and the
    bootstrap settings as in :func:`similarity_thresholds`; ``system``, ``dataset`` and
    ``n_excluded`` (keywords) label the result."""
    rule_kw, boot_kw, labels = split_options(
        "thresholds_from_arrays", options, ThresholdRuleOptions, BootstrapOptions, Labels
    )
    the_rule = settings_of("thresholds_from_arrays", ThresholdRule, rule, rule_kw, "rule")
    cfg = resolve_bootstrap("thresholds_from_arrays", bootstrap, **boot_kw)
    return _thresholds(topk_scores, gold_rank, k, the_rule, cfg, indices, cast(Labels, labels))


def _thresholds(
    topk_scores: np.ndarray,
    gold_rank: np.ndarray,
    k: int | None,
    rule: ThresholdRule,
    cfg: BootstrapConfig,
    indices: np.ndarray | None,
    labels: Labels,
) -> ThresholdResult:
    """The thresholds of the arrays under ``rule`` (see :func:`thresholds_from_arrays`)."""
    topk, rank, k = _check_scores(topk_scores, gold_rank, k)
    psi = rule.checked_grid()
    test, gamma, margin = rule.test, rule.gamma, float(rule.margin)
    q = topk.shape[0]
    idx = draw_indices(q, cfg, indices=indices)
    full = _margin_indices(q, idx, cfg, given=indices is not None)

    qmin = np.where(np.isnan(topk), np.inf, topk).min(axis=1)  # K-th (lowest retrieved) similarity
    qmin[np.isinf(qmin)] = np.nan  # nothing retrieved
    tau = _taus(qmin, idx, psi, gamma)
    conf = float(cfg.confidence)
    psi, tau, at_exact = (
        _with_exact_choice(psi, tau, topk, rank, qmin, idx, conf, margin) if test == "exact" else (psi, tau, None)
    )
    hits = _hits(topk, rank, tau)
    point = hits.mean(axis=1)
    rules = _rule_passes(hits, idx, full, conf, margin)
    chosen_exact = at_exact if test == "exact" else rules.chosen_exact
    chosen = {"exact": chosen_exact, "margin": rules.chosen_margin, "paper": rules.chosen_paper}[test]
    means = rules.means_p if test == "paper" else rules.means_f
    return ThresholdResult(
        system=labels.get("system", ""),
        dataset=labels.get("dataset", ""),
        k=k,
        test=test,
        gamma=gamma,
        margin=margin,
        psi=psi,
        tau=tau,
        removed=_removed(topk, tau),
        chosen=chosen,
        confidence=conf,
        n_queries=int(q),
        n_excluded=int(labels.get("n_excluded", 0)),
        n_resamples=int(idx.shape[0]),
        sample_size=int(idx.shape[1]),
        seed=cfg.seed,
        chosen_exact=chosen_exact,
        **_interval_fields(point, means, conf),
        **rules.fields(),
    )


def _interval_fields(point: np.ndarray, means: np.ndarray, conf: float) -> dict[str, Any]:
    """The accuracies [1 + P] (``point``, column 0 without a threshold) with their resampled means
    ``means`` [B, 1 + P]: bootstrap means and percentile CIs of each accuracy and of each loss
    ``acc_0 - acc_i``, under :class:`ThresholdResult`'s field names."""
    lo, hi = percentile_interval(means, conf, axis=0)
    loss = means[:, :1] - means[:, 1:]
    loss_lo, loss_hi = percentile_interval(loss, conf, axis=0)
    return {
        "acc": point[1:],
        "acc_boot_mean": means[:, 1:].mean(axis=0),
        "acc_ci_low": lo[1:],
        "acc_ci_high": hi[1:],
        "loss_boot_mean": loss.mean(axis=0),
        "loss_ci_low": loss_lo,
        "loss_ci_high": loss_hi,
        "base_acc": float(point[0]),
        "base_boot_mean": float(means[:, 0].mean()),
        "base_ci_low": float(lo[0]),
        "base_ci_high": float(hi[0]),
    }


@dataclass(frozen=True)
class _RulePasses:
    """What each selection rule says about every candidate threshold (see :func:`_rule_passes`)."""

    means_p: np.ndarray
    means_f: np.ndarray
    paper_pass: np.ndarray
    margin_pass: np.ndarray
    chosen_paper: int | None
    chosen_margin: int | None
    lost: np.ndarray
    upper: np.ndarray
    exact_pass: np.ndarray
    chosen_exact: int | None

    def fields(self) -> dict[str, Any]:
        """The rules' verdicts under :class:`ThresholdResult`'s field names."""
        return {
            "paper_pass": self.paper_pass,
            "margin_pass": self.margin_pass,
            "chosen_paper": self.chosen_paper,
            "chosen_margin": self.chosen_margin,
            "lost": self.lost,
            "loss_upper": self.upper,
            "exact_pass": self.exact_pass,
        }


def _rule_passes(hits: np.ndarray, idx: np.ndarray, full: np.ndarray, conf: float, margin: float) -> _RulePasses:
    """The three rules over hits [1 + P, Q] (row 0 without a threshold). Paper: the
    unthresholded mean lies inside the percentile CI of each threshold's mean over ``idx``.
    Margin: the upper percentile bound of the accuracy loss over ``full`` (resamples of all Q)
    is at most ``margin``. Exact: :func:`exact_rule`'s one-sided binomial bound on the loss."""
    means_p = resample_means(hits, idx)  # [B, 1 + P]
    lo_p, hi_p = percentile_interval(means_p[:, 1:], conf, axis=0)
    a = float(means_p[:, 0].mean())
    paper_pass = (lo_p <= a + 1e-12) & (a - 1e-12 <= hi_p)
    means_f = means_p if full is idx else resample_means(hits, full)
    _, loss_hi_f = percentile_interval(means_f[:, :1] - means_f[:, 1:], conf, axis=0)
    margin_pass = loss_hi_f <= margin + 1e-12
    lost, upper, exact_pass, chosen_exact = exact_rule(hits, conf, margin)
    return _RulePasses(
        means_p,
        means_f,
        paper_pass,
        margin_pass,
        _choose(paper_pass),
        _choose(margin_pass),
        lost,
        upper,
        exact_pass,
        chosen_exact,
    )


def similarity_thresholds(
    records: object,
    *,
    k: int = 5,
    rule: ThresholdRule | None = None,
    indices: np.ndarray | None = None,
    bootstrap: BootstrapConfig | None = None,
    **options: Unpack[_RecordOptions],
) -> ThresholdResult:
    """Choose a similarity threshold for one system's :class:`PerQueryRecords` (000, Sec. 2.2).

    ``k`` is the K of top-K accuracy (the paper uses 5); ``test`` ``"exact"`` (default: the
    thresholds in increasing order while the one-sided Clopper-Pearson upper bound of their
    accuracy loss stays ``<= margin``; with probability ``confidence`` the chosen one loses at
    most ``margin``), ``"margin"`` (the highest threshold whose paired accuracy loss has a
    bootstrap CI upper end ``<= margin``, resampling all queries; no such guarantee) or ``"paper"`` (the highest threshold whose resampled accuracies' percentile CI
    contains the bootstrap mean accuracy); ``gamma`` how ``Gamma`` is built (module doc). The
    resamples come from :func:`adaptlab.stats.resample_indices` with ``n_resamples``,
    ``sample_size`` (default: all judged queries; the paper's setting is 500 and 100) and
    ``seed``, so every system is resampled alike. Queries without a gold document are excluded.
    Bootstrap settings: one :class:`~adaptlab.stats.BootstrapConfig` (``bootstrap``) or the loose
    ``n_resamples`` (default 1000), ``sample_size``, ``seed`` (default 0) and ``confidence``
    (default 0.95), not both.
    """
    rule_kw, boot_kw = split_options("similarity_thresholds", options, ThresholdRuleOptions, BootstrapOptions)
    the_rule = settings_of("similarity_thresholds", ThresholdRule, rule, rule_kw, "rule")
    cfg = resolve_bootstrap("similarity_thresholds", bootstrap, **boot_kw)
    qa = query_arrays(records, k)
    if qa.n_queries == 0:
        raise ConfigError(f"system {qa.system!r} on {qa.dataset!r}: no query has a gold document")
    labels = Labels(system=qa.system, dataset=qa.dataset, n_excluded=qa.n_excluded)
    return _thresholds(qa.topk, qa.gold_rank, k, the_rule, cfg, indices, labels)
