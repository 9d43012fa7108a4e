"""What an evaluation reports: each system's value and CI per measure (:class:`MeasureSummary`),
each paired comparison (:class:`PairSummary`) and the whole evaluation (:class:`EvaluationSummary`)
with its JSON shape (``adaptlab evaluate --format json``) and its rows for the store's ``metrics``
table. :mod:`adaptlab.evaluation.summary` computes them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from adaptlab.metrics import PerQueryMetrics
from adaptlab.stats import BootstrapConfig
from adaptlab.stats.pvalues import SMALL_SAMPLE_Q, format_p_value, p_at_floor

__all__ = ["EvaluationSummary", "MeasureSummary", "PairSummary"]


@dataclass(frozen=True)
class MeasureSummary:
    """One system's result on one measure."""

    value: float
    boot_mean: float
    ci_low: float
    ci_high: float
    interval: str = "percentile"
    rank: int | None = None  # 1 = best on this measure (ties share the better rank)
    rank_low: int | None = None  # rank interval from the shared resamples (adaptlab.stats.ranks)
    rank_high: int | None = None

    @property
    def tied_with_best(self) -> bool:
        """The rank interval contains 1: not separable from the best system."""
        return self.rank_low == 1

    @property
    def ci_width(self) -> float:
        return self.ci_high - self.ci_low


@dataclass(frozen=True)
class PairSummary:
    """The paired difference ``a - b`` on one measure."""

    a: str
    b: str
    measure: str
    diff: float
    boot_mean: float
    ci_low: float
    ci_high: float
    p_value: float
    p_adjusted: float | None = None
    adjustment: str = "none"
    family_size: int = 1
    p_exact: float | None = None  # exact sign test (small samples only)
    p_wilcoxon: float | None = None  # Wilcoxon signed-rank test (small samples only)
    interval: str = "percentile"
    test: str = "bootstrap"  # the test of p_value: "sign-flip", "sign-flip-exact" or "bootstrap"
    p_draws: int = 0  # Monte Carlo draws behind p_value (sign vectors or resamples; 0 = exact)
    p_adjusted_bound: bool = False  # the adjusted p is set by a p at its Monte Carlo floor: a bound

    @property
    def p_bound(self) -> bool:
        """``p_value`` is at its Monte Carlo floor (:func:`adaptlab.stats.pvalues.p_at_floor`): a bound."""
        return p_at_floor(self.p_value, self.test, self.p_draws)

    @property
    def p_text(self) -> str:
        """``p_value`` as every output prints it (``"<= 0.00025"`` at the floor)."""
        return format_p_value(self.p_value, bound=self.p_bound)

    @property
    def p_adjusted_text(self) -> str:
        """``p_adjusted`` as every output prints it (``"<= 0.0025"`` when set by a floored p)."""
        return format_p_value(self.p_adjusted, bound=self.p_adjusted_bound)

    def as_dict(self) -> dict[str, object]:
        return {
            "a": self.a,
            "b": self.b,
            "measure": self.measure,
            "diff": self.diff,
            "boot_mean": self.boot_mean,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "p_value": self.p_value,
            "p_adjusted": self.p_adjusted,
            "adjustment": self.adjustment,
            "family_size": self.family_size,
            "p_exact": self.p_exact,
            "p_wilcoxon": self.p_wilcoxon,
            "interval": self.interval,
            "test": self.test,
            "p_draws": self.p_draws,
            "p_bound": self.p_bound,
            "p_adjusted_bound": self.p_adjusted_bound,
            "p_text": self.p_text,
            "p_adjusted_text": self.p_adjusted_text,
        }


@dataclass
class EvaluationSummary:
    """Everything ``adaptlab evaluate`` and ``adaptlab run`` report."""

    measures: list[str]
    systems: dict[str, dict[str, MeasureSummary]]
    pairs: list[PairSummary]
    query_ids: list[str]
    excluded_queries: list[str]
    n_resamples: int
    sample_size: int
    seed: int
    confidence: float
    per_query: dict[str, PerQueryMetrics] = field(default_factory=dict)
    adjustment: str = "holm"
    interval: str = "percentile"
    missing_from_run: dict[str, int] = field(default_factory=dict)

    @property
    def small_sample(self) -> bool:
        """Fewer queries than the documented small-sample limit (exact tests attached)."""
        return self.n_queries < SMALL_SAMPLE_Q

    @property
    def n_queries(self) -> int:
        return len(self.query_ids)

    def to_json(self) -> dict[str, object]:
        """The JSON shape of ``adaptlab evaluate --format json``."""
        return {
            "n_queries": self.n_queries,
            "excluded_queries": len(self.excluded_queries),
            "n_resamples": self.n_resamples,
            "sample_size": self.sample_size,
            "seed": self.seed,
            "confidence": self.confidence,
            "interval": self.interval,
            "adjustment": self.adjustment,
            "small_sample": self.small_sample,
            "missing_from_run": dict(self.missing_from_run),
            "systems": {
                s: {
                    m: {
                        "value": r.value,
                        "boot_mean": r.boot_mean,
                        "ci_low": r.ci_low,
                        "ci_high": r.ci_high,
                        "interval": r.interval,
                        "rank": r.rank,
                        "rank_low": r.rank_low,
                        "rank_high": r.rank_high,
                    }
                    for m, r in per.items()
                }
                for s, per in self.systems.items()
            },
            "pairs": [p.as_dict() for p in self.pairs],
        }

    @property
    def boot(self) -> BootstrapConfig:
        """The bootstrap settings as one value (``sample_size`` as given: ``None`` = all queries)."""
        return BootstrapConfig(
            self.n_resamples,
            self.sample_size,
            self.seed,
            self.confidence,
            allow_oversampling=self.sample_size > self.n_queries,
            interval=self.interval,
            adjustment=self.adjustment,
        )

    def metric_rows(self, run_ids: Mapping[str, str], dataset: str) -> list[dict[str, object]]:
        """Long-format rows for the store's ``metrics`` table (pairs carry ``compared_to``)."""
        common = {
            "dataset": dataset,
            "n_queries": self.n_queries,
            "n_resamples": self.n_resamples,
            "sample_size": self.sample_size,
            "seed": self.seed,
            "confidence": self.confidence,
        }
        return self._system_rows(run_ids, common) + [_pair_row(p, run_ids, common) for p in self.pairs]

    def _system_rows(self, run_ids: Mapping[str, str], common: Mapping[str, object]) -> list[dict[str, object]]:
        """One ``metrics`` row per (system, measure), with the ``common`` settings."""
        return [
            {
                "run_id": run_ids[s],
                "system": s,
                "measure": m,
                "value": r.value,
                "boot_mean": r.boot_mean,
                "ci_low": r.ci_low,
                "ci_high": r.ci_high,
                "compared_to": None,
                "p_value": None,
                "interval_method": r.interval,
                "missing_from_run": int(self.missing_from_run.get(s, 0)),
                "rank_low": r.rank_low,
                "rank_high": r.rank_high,
                **common,
            }
            for s, per in self.systems.items()
            for m, r in per.items()
        ]


def _pair_row(p: PairSummary, run_ids: Mapping[str, str], common: Mapping[str, object]) -> dict[str, object]:
    """The ``metrics`` row of the paired comparison ``p`` (under ``p.a``'s run, ``compared_to``
    ``p.b``), with the ``common`` settings; the test's details in ``extra`` as JSON."""
    row = {
        "run_id": run_ids[p.a],
        "system": p.a,
        "measure": p.measure,
        "value": p.diff,
        "boot_mean": p.boot_mean,
        "ci_low": p.ci_low,
        "ci_high": p.ci_high,
        "compared_to": p.b,
        "p_value": p.p_value,
        "p_adjusted": p.p_adjusted,
        "adjustment": p.adjustment,
        "family_size": p.family_size,
        "interval_method": p.interval,
        "extra": json.dumps(
            {"p_test": p.test, "p_draws": p.p_draws, "p_bound": p.p_bound, "p_adjusted_bound": p.p_adjusted_bound}
        ),
        **common,
    }
    if p.p_exact is not None:
        row["p_exact"], row["exact_test"] = p.p_exact, "sign"
    return row
