"""``similarity_thresholds`` and ``thresholds_from_arrays``: the grid, the three rules' verdicts
(paper, margin, exact) on the same resamples, and the chosen threshold.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from adaptlab.analysis._inputs import query_arrays
from adaptlab.analysis._options import BootstrapOptions, Labels, settings_of, split_options
from adaptlab.analysis._resample import draw_indices, resample_means
from adaptlab.analysis.thresholds.exact import _choose, _with_exact_choice, exact_rule
from adaptlab.analysis.thresholds.grid import _taus
from adaptlab.analysis.thresholds.result import ThresholdResult
from adaptlab.analysis.thresholds.rule import ThresholdRule, ThresholdRuleOptions
from adaptlab.errors import ConfigError
from adaptlab.stats import BootstrapConfig, percentile_interval, resample_indices
from adaptlab.stats.settings import resolve_bootstrap

if TYPE_CHECKING:
    from typing_extensions import Unpack


class _ArrayOptions(ThresholdRuleOptions, BootstrapOptions, Labels, total=False):
    """The keywords of :func:`thresholds_from_arrays`: the rule, the bootstrap and the labels."""


class _RecordOptions(ThresholdRuleOptions, BootstrapOptions, total=False):
    """The keywords of :func:`similarity_thresholds`: the rule and the bootstrap."""


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
    (default 0.95), not both. The rule likewise: one :class:`ThresholdRule` (``rule``) or its
    fields ``psi_grid``, ``test``, ``margin`` and ``gamma`` as keywords, not both.
    """
    rule_kw, boot_kw = split_options("similarity_thresholds", options, ThresholdRuleOptions, BootstrapOptions)
    the_rule = settings_of("similarity_thresholds", ThresholdRule, rule, rule_kw, "rule")
    cfg = resolve_bootstrap("similarity_thresholds", bootstrap, **boot_kw)
    qa = query_arrays(records, k)
    if qa.n_queries == 0:
        raise ConfigError(f"system {qa.system!r} on {qa.dataset!r}: no query has a gold document")
    labels = Labels(system=qa.system, dataset=qa.dataset, n_excluded=qa.n_excluded)
    return _thresholds(qa.topk, qa.gold_rank, k, the_rule, cfg, indices, labels)
