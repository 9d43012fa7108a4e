"""Domain shift between embedding sets (reference 000, Section 2.6).

For a domain-specific set ``D`` and a domain-agnostic set ``D'`` embedded by the same model
``M``::

    Delta_M(D, D') = { min_{d' in D'} ||E_M(d) - E_M(d')||_2 : d in D }      (|Delta| = |D|)

``Delta_M`` (base model) and ``Delta_M'`` (adapted model) hold the distances of the *same*
documents, so they are compared as paired data (``paired=True``, the default when both have one
value per document): with per-document differences ``d_i = Delta_M'(i) - Delta_M(i)``, the
result gives ``mean(d)`` with its percentile bootstrap CI (:func:`adaptlab.stats.bootstrap_ci`,
documents resampled with replacement, seeded) and the two-sided Wilcoxon signed-rank test of
``d`` (``scipy.stats.wilcoxon``; Wilcoxon 1945). The two-sample Kolmogorov-Smirnov test
(``scipy.stats.ks_2samp``) assumes independent samples: it is only run when the two sets hold
different documents (``paired=False``), as a comparison of distributions. Quantiles and means of
both distributions are reported either way. Larger distances after adaptation mean that the
adapted model moves the domain's embeddings away from the general-domain ones.

Distances use ``||a - b||^2 = ||a||^2 + ||b||^2 - 2 a.b`` in float64 over blocks of both sets
(memory ``O(block_size^2)``); negative round-off is clipped to 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np

from adaptlab.analysis._options import split_options
from adaptlab.analysis._rows import metric_row
from adaptlab.errors import ConfigError
from adaptlab.stats import BootstrapConfig
from adaptlab.stats.settings import resolve_bootstrap

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["DEFAULT_QUANTILES", "ShiftComparison", "compare_shift", "domain_shift"]

DEFAULT_QUANTILES: tuple[float, ...] = (0.05, 0.25, 0.5, 0.75, 0.95)


def _as_matrix(x: object, what: str) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] == 0:
        raise ConfigError(f"{what} must be a non-empty 2-D [n, dim] array, got shape {a.shape}")
    return a


def domain_shift(domain: object, reference: object, *, block_size: int = 2048) -> np.ndarray:
    """``Delta(D, D')``: for each row of ``domain`` [N, d] the L2 distance to its nearest row of
    ``reference`` [M, d] -> float64 [N]."""
    a = _as_matrix(domain, "domain embeddings")
    b = _as_matrix(reference, "reference embeddings")
    if a.shape[1] != b.shape[1]:
        raise ConfigError(f"embedding dimensions differ: domain {a.shape[1]}, reference {b.shape[1]}")
    if int(block_size) < 1:
        raise ConfigError(f"block_size must be >= 1, got {block_size!r}")
    bs = int(block_size)
    an = (a * a).sum(axis=1)
    bn = (b * b).sum(axis=1)
    best = np.full(a.shape[0], np.inf)
    for i in range(0, a.shape[0], bs):
        ai, ani = a[i : i + bs], an[i : i + bs]
        for j in range(0, b.shape[0], bs):
            d2 = ani[:, None] + bn[None, j : j + bs] - 2.0 * (ai @ b[j : j + bs].T)
            np.minimum(best[i : i + bs], d2.min(axis=1), out=best[i : i + bs])
    return np.sqrt(np.clip(best, 0.0, None))


@dataclass(frozen=True)
class ShiftComparison:
    """Summary of ``Delta`` under a base and an adapted model, with a paired test (same
    documents) or the KS test (different documents). ``diff_*``: the mean of the per-document
    differences adapted - base with its bootstrap CI (NaN when unpaired)."""

    base_label: str
    adapted_label: str
    quantile_levels: tuple[float, ...]
    base_quantiles: np.ndarray
    adapted_quantiles: np.ndarray
    base_mean: float
    adapted_mean: float
    base_median: float
    adapted_median: float
    test: str  # "wilcoxon" (paired) or "ks" (independent samples)
    statistic: float
    pvalue: float
    n_base: int
    n_adapted: int
    diff_mean: float = float("nan")
    diff_ci_low: float = float("nan")
    diff_ci_high: float = float("nan")
    confidence: float = 0.95
    n_resamples: int = 0
    seed: int = 0

    @property
    def paired(self) -> bool:
        return self.test == "wilcoxon"

    @property
    def ks_statistic(self) -> float:
        """The KS statistic (NaN for the paired comparison, which does not run it)."""
        return self.statistic if self.test == "ks" else float("nan")

    @property
    def ks_pvalue(self) -> float:
        return self.pvalue if self.test == "ks" else float("nan")

    def to_metric_rows(self, dataset: str = "") -> list[dict[str, Any]]:
        """``shift_mean`` and ``shift_median`` for both systems; for the adapted one, paired:
        ``shift_diff`` (value = mean per-document difference, CI, p_value = Wilcoxon), or
        unpaired: ``shift_ks`` (value = KS statistic, p_value); ``compared_to`` = base."""
        rows = []
        for label, mean, median, qs, n in (
            (self.base_label, self.base_mean, self.base_median, self.base_quantiles, self.n_base),
            (self.adapted_label, self.adapted_mean, self.adapted_median, self.adapted_quantiles, self.n_adapted),
        ):
            extra = {"quantiles": {str(q): float(v) for q, v in zip(self.quantile_levels, qs)}, "n": n}
            rows.append(metric_row(label, dataset, "shift_mean", mean, extra=extra))
            rows.append(metric_row(label, dataset, "shift_median", median, extra=extra))
        if self.paired:
            rows.append(
                metric_row(
                    self.adapted_label,
                    dataset,
                    "shift_diff",
                    self.diff_mean,
                    ci_low=self.diff_ci_low,
                    ci_high=self.diff_ci_high,
                    p_value=self.pvalue,
                    compared_to=self.base_label,
                    n_queries=self.n_base,
                    n_resamples=self.n_resamples,
                    sample_size=self.n_base,
                    seed=self.seed,
                    confidence=self.confidence,
                    interval_method="percentile",
                    extra={"test": "wilcoxon", "statistic": self.statistic, "paired": True},
                )
            )
        else:
            rows.append(
                metric_row(
                    self.adapted_label,
                    dataset,
                    "shift_ks",
                    self.statistic,
                    p_value=self.pvalue,
                    compared_to=self.base_label,
                    extra={"n_base": self.n_base, "n_adapted": self.n_adapted, "test": "ks", "paired": False},
                )
            )
        return rows


class ShiftBootstrapOptions(TypedDict, total=False):
    """The bootstrap keywords of :func:`compare_shift` (the CI of the mean paired difference;
    defaults of :class:`~adaptlab.stats.BootstrapConfig`)."""

    n_resamples: int
    seed: int
    confidence: float


def compare_shift(
    base: object,
    adapted: object,
    *,
    quantiles: Sequence[float] = DEFAULT_QUANTILES,
    base_label: str = "base",
    adapted_label: str = "adapted",
    paired: bool | None = None,
    bootstrap: BootstrapConfig | None = None,
    **options: Unpack[ShiftBootstrapOptions],
) -> ShiftComparison:
    """Compare two ``Delta`` distributions (e.g. :func:`domain_shift` under base and adapted model).

    ``paired`` (default: True when both arrays have the same length, i.e. the same documents
    in the same order) runs the paired comparison of the module doc; ``paired=False`` the KS
    test of two independent samples. The CI of the mean paired difference: ``bootstrap`` (its
    ``n_resamples``, ``seed`` and ``confidence``) or those three as keywords, not both.
    """
    from scipy.stats import ks_2samp, wilcoxon

    from adaptlab.stats import bootstrap_ci

    cfg = resolve_bootstrap(
        "compare_shift", bootstrap, **split_options("compare_shift", options, ShiftBootstrapOptions)[0]
    )
    n_resamples, seed, confidence = cfg.n_resamples, cfg.seed, cfg.confidence
    x = np.asarray(base, dtype=np.float64).ravel()
    y = np.asarray(adapted, dtype=np.float64).ravel()
    if x.size == 0 or y.size == 0:
        raise ConfigError("compare_shift needs two non-empty distance arrays")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ConfigError("distance arrays contain NaN or infinite values")
    qs = tuple(float(q) for q in quantiles)
    if any(not 0.0 <= q <= 1.0 for q in qs):
        raise ConfigError(f"quantiles must lie in [0, 1], got {list(quantiles)}")
    if paired is None:
        paired = x.size == y.size
    common = (
        base_label,
        adapted_label,
        qs,
        np.quantile(x, qs),
        np.quantile(y, qs),
        float(x.mean()),
        float(y.mean()),
        float(np.median(x)),
        float(np.median(y)),
    )
    if not paired:
        ks = ks_2samp(x, y)
        return ShiftComparison(*common, "ks", float(ks.statistic), float(ks.pvalue), int(x.size), int(y.size))
    if x.size != y.size:
        raise ConfigError(
            f"paired=True needs one distance per document in both arrays; got {x.size} and {y.size} "
            "(use paired=False for different document sets)"
        )
    d = y - x
    if np.all(d == 0):
        stat, p = 0.0, 1.0
    else:
        w = wilcoxon(d)
        stat, p = float(w.statistic), float(w.pvalue)
    ci = bootstrap_ci(d, n_resamples=n_resamples, seed=seed, confidence=confidence)
    return ShiftComparison(
        *common,
        "wilcoxon",
        stat,
        p,
        int(x.size),
        int(y.size),
        float(d.mean()),
        float(ci.ci_low),
        float(ci.ci_high),
        float(confidence),
        int(n_resamples),
        int(seed),
    )
