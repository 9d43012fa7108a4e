"""Evaluate several systems on one query set: per-query metrics, bootstrap CIs, paired tests.

This is the step between per-query metric values and what users read: for every system and
measure the point value (mean over queries), the bootstrap mean and percentile CI; for every
pair of systems the paired difference with its CI and two-sided bootstrap p-value. All systems
are resampled with the same query indices (paired bootstrap, DESIGN.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from adaptlab.errors import ConfigError
from adaptlab.metrics import Measure, PerQueryMetrics, evaluate, parse_measures

__all__ = ["EvaluationSummary", "MeasureSummary", "PairSummary", "summarise", "summarise_runs"]


@dataclass(frozen=True)
class MeasureSummary:
    """One system's result on one measure."""

    value: float
    boot_mean: float
    ci_low: float
    ci_high: float

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
            "systems": {
                s: {m: {"value": r.value, "boot_mean": r.boot_mean, "ci_low": r.ci_low, "ci_high": r.ci_high}
                    for m, r in per.items()}
                for s, per in self.systems.items()
            },
            "pairs": [
                {"a": p.a, "b": p.b, "measure": p.measure, "diff": p.diff, "boot_mean": p.boot_mean,
                 "ci_low": p.ci_low, "ci_high": p.ci_high, "p_value": p.p_value}
                for p in self.pairs
            ],
        }

    def metric_rows(self, run_ids: Mapping[str, str], dataset: str) -> list[dict[str, object]]:
        """Long-format rows for the store's ``metrics`` table (pairs carry ``compared_to``)."""
        rows: list[dict[str, object]] = []
        common = {"dataset": dataset, "n_queries": self.n_queries, "n_resamples": self.n_resamples,
                  "sample_size": self.sample_size, "seed": self.seed}
        for s, per in self.systems.items():
            for m, r in per.items():
                rows.append({"run_id": run_ids[s], "system": s, "measure": m, "value": r.value,
                             "boot_mean": r.boot_mean, "ci_low": r.ci_low, "ci_high": r.ci_high,
                             "compared_to": None, "p_value": None, **common})
        for p in self.pairs:
            rows.append({"run_id": run_ids[p.a], "system": p.a, "measure": p.measure, "value": p.diff,
                         "boot_mean": p.boot_mean, "ci_low": p.ci_low, "ci_high": p.ci_high,
                         "compared_to": p.b, "p_value": p.p_value, **common})
        return rows


def summarise(
    per_query: Mapping[str, PerQueryMetrics],
    *,
    n_resamples: int = 1000,
    sample_size: int | None = None,
    seed: int = 0,
    confidence: float = 0.95,
    baseline: str | None = None,
) -> EvaluationSummary:
    """Bootstrap CIs and paired differences from per-query metrics of several systems.

    Every system must have been evaluated on the same queries in the same order.
    """
    from adaptlab.stats import bootstrap_ci, paired_bootstrap

    names = list(per_query)
    if not names:
        raise ConfigError("no systems to evaluate")
    first = per_query[names[0]]
    for n in names[1:]:
        if per_query[n].query_ids != first.query_ids:
            raise ConfigError(f"system {n!r} was evaluated on other queries than {names[0]!r}")
    if baseline is not None and baseline not in per_query:
        raise ConfigError(f"baseline {baseline!r} is not among the systems: {', '.join(names)}")
    measures = list(first.values)
    if first.n_queries == 0:
        raise ConfigError("no query has a relevant document: nothing to evaluate")
    l = first.n_queries if sample_size is None else int(sample_size)
    systems: dict[str, dict[str, MeasureSummary]] = {n: {} for n in names}
    pairs: list[PairSummary] = []
    for m in measures:
        values = np.stack([per_query[n].values[m] for n in names])
        ci = bootstrap_ci(values, n_resamples=n_resamples, sample_size=sample_size, seed=seed,
                          confidence=confidence)
        for i, n in enumerate(names):
            systems[n][m] = MeasureSummary(float(ci.point[i]), float(ci.boot_mean[i]),
                                           float(ci.ci_low[i]), float(ci.ci_high[i]))
        if len(names) > 1:
            diffs = paired_bootstrap(values, names=names, baseline=baseline, n_resamples=n_resamples,
                                     sample_size=sample_size, seed=seed, confidence=confidence)
            pairs += [PairSummary(str(d.a), str(d.b), m, float(d.diff), float(d.boot_mean),
                                  float(d.ci_low), float(d.ci_high), float(d.p_value)) for d in diffs]
    return EvaluationSummary(measures, systems, pairs, list(first.query_ids), list(first.excluded),
                             n_resamples, l, seed, confidence, dict(per_query))


def summarise_runs(
    qrels: Mapping[str, Mapping[str, int]],
    runs: Mapping[str, Mapping[str, Mapping[str, float]]],
    measures: str | Iterable[str | Measure],
    *,
    query_ids: Sequence[str] | None = None,
    **bootstrap: object,
) -> EvaluationSummary:
    """:func:`evaluate` every run on the same queries, then :func:`summarise`."""
    ms = parse_measures(measures)
    per_query = {name: evaluate(qrels, run, ms, query_ids=query_ids) for name, run in runs.items()}
    return summarise(per_query, **bootstrap)  # type: ignore[arg-type]
