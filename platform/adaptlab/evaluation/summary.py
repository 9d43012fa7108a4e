"""Evaluate several systems on one query set: per-query metrics, bootstrap CIs, paired tests.

This is the step between per-query metric values and what users read: for every system and
measure the point value (mean over queries), the bootstrap mean and percentile CI; for every
pair of systems the paired difference with its CI and two-sided bootstrap p-value. All systems
are resampled with the same query indices (paired bootstrap, DESIGN.md). Each (dataset x measure)
group is one bootstrap task, run in-process or on Ray (:mod:`adaptlab.evaluation.workers`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from adaptlab.errors import ConfigError
from adaptlab.evaluation.workers import BootstrapGroup, GroupResult, check_workers, run_groups
from adaptlab.metrics import Measure, PerQueryMetrics, evaluate, parse_measures
from adaptlab.stats import BootstrapConfig

__all__ = ["EvaluationSummary", "MeasureSummary", "PairSummary", "summarise", "summarise_datasets", "summarise_runs"]


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

    @property
    def boot(self) -> BootstrapConfig:
        """The bootstrap settings as one value (``sample_size`` as given: ``None`` = all queries)."""
        return BootstrapConfig(self.n_resamples, self.sample_size, self.seed, self.confidence)

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


def _boot_config(boot: BootstrapConfig | None, loose: Mapping[str, object]) -> BootstrapConfig:
    given = {k: v for k, v in loose.items() if v is not None}
    if boot is None:
        return BootstrapConfig(**given)  # type: ignore[arg-type]
    if not isinstance(boot, BootstrapConfig):
        raise ConfigError(f"boot must be an adaptlab.stats.BootstrapConfig, got {type(boot).__name__}")
    if given:
        raise ConfigError(f"give the bootstrap settings either as boot= or as keywords, not both "
                          f"(got boot= and {', '.join(sorted(given))})")
    return boot


def _check_systems(per_query: Mapping[str, PerQueryMetrics], baseline: str | None) -> list[str]:
    """The system names, after checking that they share their queries and the baseline exists."""
    names = list(per_query)
    if not names:
        raise ConfigError("no systems to evaluate")
    first = per_query[names[0]]
    for n in names[1:]:
        if per_query[n].query_ids != first.query_ids:
            raise ConfigError(f"system {n!r} was evaluated on other queries than {names[0]!r}")
    if baseline is not None and baseline not in per_query:
        raise ConfigError(f"baseline {baseline!r} is not among the systems: {', '.join(names)}")
    if first.n_queries == 0:
        raise ConfigError("no query has a relevant document: nothing to evaluate")
    return names


def _groups(dataset: str, per_query: Mapping[str, PerQueryMetrics], baseline: str | None) -> list[BootstrapGroup]:
    names = _check_systems(per_query, baseline)
    first = per_query[names[0]]
    return [BootstrapGroup((dataset, m), np.stack([per_query[n].values[m] for n in names]), tuple(names), baseline)
            for m in first.values]


def _summary(per_query: Mapping[str, PerQueryMetrics], groups: Sequence[BootstrapGroup],
             results: Sequence[GroupResult], boot: BootstrapConfig) -> EvaluationSummary:
    names = list(per_query)
    first = per_query[names[0]]
    systems: dict[str, dict[str, MeasureSummary]] = {n: {} for n in names}
    pairs: list[PairSummary] = []
    for g, r in zip(groups, results):
        m = g.key[1]
        for i, n in enumerate(names):
            systems[n][m] = MeasureSummary(float(r.point[i]), float(r.boot_mean[i]), float(r.ci_low[i]),
                                           float(r.ci_high[i]))
        pairs += [PairSummary(str(d.a), str(d.b), m, float(d.diff), float(d.boot_mean), float(d.ci_low),
                              float(d.ci_high), float(d.p_value)) for d in r.pairs]
    l = first.n_queries if boot.sample_size is None else int(boot.sample_size)
    return EvaluationSummary([g.key[1] for g in groups], systems, pairs, list(first.query_ids), list(first.excluded),
                             boot.n_resamples, l, boot.seed, boot.confidence, dict(per_query))


def summarise(
    per_query: Mapping[str, PerQueryMetrics],
    *,
    boot: BootstrapConfig | None = None,
    n_resamples: int | None = None,
    sample_size: int | None = None,
    seed: int | None = None,
    confidence: float | None = None,
    baseline: str | None = None,
    workers: str = "auto",
) -> EvaluationSummary:
    """Bootstrap CIs and paired differences from per-query metrics of several systems.

    Every system must have been evaluated on the same queries in the same order. The bootstrap
    settings come as one :class:`~adaptlab.stats.BootstrapConfig` (``boot=``) or as the loose
    keywords ``n_resamples`` (default 1000), ``sample_size`` (default: all queries), ``seed``
    (default 0) and ``confidence`` (default 0.95), not both. ``workers``: ``"auto"``,
    ``"local"`` or ``"ray"``; one bootstrap task per measure, see :mod:`adaptlab.evaluation.workers`
    (the numbers do not depend on it).
    """
    return summarise_datasets({"": per_query}, boot=_boot_config(boot, {
        "n_resamples": n_resamples, "sample_size": sample_size, "seed": seed, "confidence": confidence,
    }), baseline=baseline, workers=workers)[""]


def summarise_datasets(
    per_dataset: Mapping[str, Mapping[str, PerQueryMetrics]],
    *,
    boot: BootstrapConfig | None = None,
    baseline: str | None = None,
    workers: str = "auto",
) -> dict[str, EvaluationSummary]:
    """:func:`summarise` for several datasets at once: every (dataset x measure) group is one
    bootstrap task, so a study with many groups keeps all Ray workers busy. Same numbers as one
    :func:`summarise` call per dataset."""
    boot = boot if boot is not None else BootstrapConfig()
    check_workers(workers)
    groups = {ds: _groups(ds, pq, baseline) for ds, pq in per_dataset.items()}
    flat = [g for gs in groups.values() for g in gs]
    results = iter(run_groups(flat, boot, workers=workers))
    return {ds: _summary(per_dataset[ds], gs, [next(results) for _ in gs], boot) for ds, gs in groups.items()}


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
