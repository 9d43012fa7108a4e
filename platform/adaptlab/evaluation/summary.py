"""Evaluate several systems on one query set: per-query metrics, bootstrap CIs, paired tests.

This is the step between per-query metric values and what users read: for every system and
measure the point value (mean over queries), the bootstrap mean and CI (``BootstrapConfig.interval``,
default ``"auto"``: fixed by the measure's definition, Wilson for the 0/1 measure acc@k and the
studentized bootstrap for nDCG@k, MRR and the others, so a system's CI is the same alone or beside
any other; the method is stored with every row); for every pair of systems the paired difference with its CI and
two-sided bootstrap p-value. Each (dataset x measure) group is one bootstrap task, run in-process
or on Ray (:mod:`adaptlab.evaluation.workers`). The reported types (:class:`EvaluationSummary`,
:class:`MeasureSummary`, :class:`PairSummary`) are defined in :mod:`adaptlab.evaluation.summary_types`
and importable from here.

What is paired: every paired difference resamples the same queries for both systems (paired
bootstrap, DESIGN.md). The CIs of single systems are marginal: on the index path all systems
share the resample indices, on the exact multinomial path each system's counts are drawn from
its own stream (:func:`adaptlab.stats.bootstrap_ci`), so compare systems with the paired rows,
not by overlapping CIs.

Multiplicity: the paired tests of one dataset and one measure form a family of ``n`` tests;
their p-values are adjusted within it (Holm by default, Benjamini-Hochberg with
``adjustment="bh"``; :func:`adaptlab.stats.pvalues.adjust_pvalues`) and both raw and adjusted
p-values are kept, with the family size. The paired p-value is the sign-flip randomization
test's at every number of queries (null: the per-query differences are symmetric about 0), exact
where the differences allow and otherwise with enough sign vectors for the family
(:mod:`adaptlab.stats.signflip`); the bootstrap's only when asked for
(``BootstrapConfig.test="bootstrap"``). ``PairSummary.test`` and ``p_draws`` are stored as
``p_test`` and ``p_draws`` in the row's ``extra``, with ``p_bound`` / ``p_adjusted_bound``: a p
at its Monte Carlo floor (or an adjusted p set by one) is a bound and prints as ``<= p``.

Rank intervals: for every dataset and measure with several systems, each system's simultaneous
rank interval from the paired sign-flip tests of all pairs (Holm-adjusted, level ``1 -
confidence``) and whether it is tied with the best (no system significantly better), with
probability at least ``1 - alpha`` for all systems at once (:mod:`adaptlab.stats.ranks`; stored
as ``rank_low`` / ``rank_high``).

Small samples: with fewer than :data:`adaptlab.stats.pvalues.SMALL_SAMPLE_Q` (30) queries every
paired comparison also carries the exact two-sided sign test (``p_exact``) and the Wilcoxon
signed-rank p-value, and a :class:`SmallSampleWarning` says that the bootstrap intervals are
unreliable. A 0/1 measure with fewer than :data:`adaptlab.stats.intervals.FEW_OUTCOMES` successes
or failures for some system gets a :class:`~adaptlab.stats.intervals.FewOutcomesWarning`.

Sample size: with ``sample_size`` ``l`` below the number of queries ``Q`` every CI is the CI of an
``l``-query mean (wider than that of the ``Q``-query mean) and the paired tests lose power; a
:class:`SampleSizeWarning` says so (:func:`adaptlab.stats.settings.sample_size_note`).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from adaptlab.errors import ConfigError
from adaptlab.evaluation.summary_types import EvaluationSummary, MeasureSummary, PairSummary
from adaptlab.evaluation.workers import BootstrapGroup, GroupResult, check_workers, run_groups
from adaptlab.metrics import Measure, PerQueryMetrics, evaluate, parse_measures
from adaptlab.stats import BootstrapConfig
from adaptlab.stats.intervals import FewOutcomesWarning, few_outcomes, is_binary_measure
from adaptlab.stats.options import Unpack
from adaptlab.stats.pvalues import (
    SMALL_SAMPLE_Q,
    adjust_pvalues_bounded,
    exact_paired_tests,
)
from adaptlab.stats.ranks import RankIntervals, simultaneous_ranks
from adaptlab.stats.resample import check_sizes
from adaptlab.stats.settings import BootstrapOptions, check_option_keys, resolve_bootstrap, sample_size_note
from adaptlab.storage.names import warn_lookalike_names

__all__ = [
    "EvaluationSummary",
    "GroupSummary",
    "MeasureSummary",
    "PairSummary",
    "SampleSizeWarning",
    "SmallSampleWarning",
    "summarise",
    "summarise_datasets",
    "summarise_arrays",
    "summarise_runs",
]


class SmallSampleWarning(UserWarning):
    """Fewer queries than :data:`~adaptlab.stats.pvalues.SMALL_SAMPLE_Q`: bootstrap CIs are
    unreliable; read the exact tests."""


class SampleSizeWarning(UserWarning):
    """``sample_size`` below the number of queries: CIs of an l-query mean, paired tests with
    less power."""


def _ranks(values: np.ndarray, boot: BootstrapConfig) -> RankIntervals:
    """Simultaneous rank intervals and the tied-with-best set of one (dataset, measure) group,
    from the sign-flip tests of all pairs adjusted by ``boot.adjustment`` at level
    ``1 - boot.confidence`` (:func:`adaptlab.stats.ranks.simultaneous_ranks`)."""
    return simultaneous_ranks(
        values, alpha=1.0 - boot.confidence, adjustment=boot.adjustment, n_resamples=boot.n_resamples, seed=boot.seed
    )


def _warn_few_outcomes(groups: Sequence[BootstrapGroup]) -> None:
    """One :class:`FewOutcomesWarning` naming every (system, measure) of a 0/1 measure (acc@k, by
    definition) with fewer than 5 successes or failures."""
    cases = [
        f"{n} on {g.key[1]}: {msg}"
        for g in groups
        if is_binary_measure(g.key[1])
        for n, v in zip(g.names, g.values)
        if (msg := few_outcomes(v)) is not None
    ]
    if cases:
        warnings.warn(
            "few successes or failures, so the CI of this proportion is unreliable whatever the "
            "method (" + "; ".join(cases[:5]) + (f"; and {len(cases) - 5} more" if len(cases) > 5 else "") + ")",
            FewOutcomesWarning,
            stacklevel=4,
        )


def _family(pairs: list[PairSummary], adjustment: str, values: Mapping[str, np.ndarray] | None) -> list[PairSummary]:
    """Adjust one (dataset, measure) family's p-values; attach exact tests to small samples."""
    if not pairs:
        return pairs
    adj, bound = adjust_pvalues_bounded([p.p_value for p in pairs], [p.p_bound for p in pairs], adjustment)
    out = []
    for p, pa, pb in zip(pairs, adj, bound):
        extra: dict[str, Any] = {}  # keywords of replace(): PairSummary fields
        if values is not None:
            t = exact_paired_tests(values[p.a], values[p.b])
            extra = {"p_exact": t.sign_p, "p_wilcoxon": t.wilcoxon_p}
        out.append(
            replace(
                p,
                p_adjusted=float(pa),
                adjustment=adjustment,
                family_size=len(pairs),
                p_adjusted_bound=bool(pb),
                **extra,
            )
        )
    return out


Pairs = Sequence[tuple[str, str]]
"""Explicit paired comparisons ``(system, compared_to)``: the difference is ``system - compared_to``."""


def _check_pairs(names: list[str], baseline: str | None, pairs: Pairs | None) -> tuple[tuple[str, str], ...] | None:
    """``pairs`` as a tuple, after checking that every name is a system (None stays None)."""
    if pairs is None:
        return None
    if baseline is not None:
        raise ConfigError("give either baseline= or pairs=, not both")
    out = tuple((str(a), str(b)) for a, b in pairs)
    for a, b in out:
        for n in (a, b):
            if n not in names:
                raise ConfigError(f"pairs: ({a!r}, {b!r}): {n!r} is not among the systems: {', '.join(names)}")
    if not out:
        raise ConfigError("pairs: empty; give at least one (system, compared_to) pair or pairs=None")
    return out


def _check_systems(per_query: Mapping[str, PerQueryMetrics], baseline: str | None) -> list[str]:
    """The system names, after checking that they share their queries and the baseline exists."""
    names = list(per_query)
    if not names:
        raise ConfigError("no systems to evaluate")
    first = per_query[names[0]]
    for n in names[1:]:
        if per_query[n].query_ids != first.query_ids:
            raise ConfigError(f"system {n!r} was evaluated on other queries than {names[0]!r}")
    warn_lookalike_names(names)
    if baseline is not None and baseline not in per_query:
        raise ConfigError(f"baseline {baseline!r} is not among the systems: {', '.join(names)}")
    if first.n_queries == 0:
        raise ConfigError("no query has a relevant document: nothing to evaluate")
    return names


def _groups(
    dataset: str, per_query: Mapping[str, PerQueryMetrics], baseline: str | None, pairs: Pairs | None = None
) -> list[BootstrapGroup]:
    names = _check_systems(per_query, baseline)
    checked = _check_pairs(names, baseline, pairs)
    first = per_query[names[0]]
    return [
        BootstrapGroup((dataset, m), np.stack([per_query[n].values[m] for n in names]), tuple(names), baseline, checked)
        for m in first.values
    ]


@dataclass(frozen=True)
class GroupSummary:
    """One (dataset, measure) group: each system's :class:`MeasureSummary` (in ``names`` order,
    without rank intervals) and the group's paired comparisons, their p-values adjusted within
    the group (one family)."""

    key: tuple[str, str]  # (dataset, measure)
    names: tuple[str, ...]
    systems: tuple[MeasureSummary, ...]
    pairs: list[PairSummary]


def _group_summary(
    g: BootstrapGroup, r: GroupResult, boot: BootstrapConfig, values: Mapping[str, np.ndarray] | None = None
) -> GroupSummary:
    """One group's bootstrap result as summaries, p adjusted within the group (with ``values``,
    the per-system values of a small sample, the exact tests too: :func:`_family`)."""
    m = g.key[1]
    systems = tuple(
        MeasureSummary(float(r.point[i]), float(r.boot_mean[i]), float(r.ci_low[i]), float(r.ci_high[i]), r.interval)
        for i in range(len(g.names))
    )
    fam = [
        PairSummary(
            str(d.a),
            str(d.b),
            m,
            float(d.diff),
            float(d.boot_mean),
            float(d.ci_low),
            float(d.ci_high),
            float(d.p_value),
            interval=d.interval,
            test=d.test,
            p_draws=d.p_draws,
        )
        for d in r.pairs
    ]
    return GroupSummary(g.key, g.names, systems, _family(fam, boot.adjustment, values))


def summarise_arrays(
    groups: Sequence[BootstrapGroup], boot: BootstrapConfig, *, workers: str = "auto"
) -> list[GroupSummary]:
    """Each group's CIs and paired comparisons with p adjusted within the group: the numbers
    :func:`summarise` reports for the same values, names, pairs and settings (the same tasks,
    :func:`adaptlab.evaluation.workers.run_groups`), without its rank intervals, exact tests and
    warnings. For callers that hold ``[S, Q]`` arrays rather than evaluated runs
    (:func:`adaptlab.analysis.compare`)."""
    check_workers(workers)
    return [_group_summary(g, r, boot) for g, r in zip(groups, run_groups(groups, boot, workers=workers))]


def _system_ranks(group: GroupSummary, values: np.ndarray, boot: BootstrapConfig) -> tuple[MeasureSummary, ...]:
    """The group's summaries with their rank intervals (:func:`_ranks`; none for one system)."""
    if len(group.names) < 2:
        return group.systems
    ranks = _ranks(values, boot)
    return tuple(
        replace(s, rank=int(ranks.rank[i]), rank_low=int(ranks.rank_low[i]), rank_high=int(ranks.rank_high[i]))
        for i, s in enumerate(group.systems)
    )


def _summary(
    per_query: Mapping[str, PerQueryMetrics],
    groups: Sequence[BootstrapGroup],
    results: Sequence[GroupResult],
    boot: BootstrapConfig,
) -> EvaluationSummary:
    names = list(per_query)
    first = per_query[names[0]]
    systems: dict[str, dict[str, MeasureSummary]] = {n: {} for n in names}
    pairs: list[PairSummary] = []
    small = first.n_queries < SMALL_SAMPLE_Q
    for g, r in zip(groups, results):
        m = g.key[1]
        vals = {n: per_query[n].values[m] for n in names} if small else None
        summary = _group_summary(g, r, boot, vals)
        for n, s in zip(names, _system_ranks(summary, g.values, boot)):
            systems[n][m] = s
        pairs += summary.pairs
    if small and pairs:
        warnings.warn(
            f"only {first.n_queries} queries (< {SMALL_SAMPLE_Q}): bootstrap CIs are unreliable at this size (p is "
            "the sign-flip randomization test's); every paired comparison also carries the exact sign test "
            "(p_exact) and the Wilcoxon signed-rank p-value",
            SmallSampleWarning,
            stacklevel=3,
        )
    l = first.n_queries if boot.sample_size is None else int(boot.sample_size)
    _warn_few_outcomes(groups)
    if l < first.n_queries:
        warnings.warn(sample_size_note(l, first.n_queries, pairs=bool(pairs)), SampleSizeWarning, stacklevel=3)
    missing = {n: len(per_query[n].missing_from_run) for n in names}
    return EvaluationSummary(
        [g.key[1] for g in groups],
        systems,
        pairs,
        list(first.query_ids),
        list(first.excluded),
        boot.n_resamples,
        l,
        boot.seed,
        boot.confidence,
        dict(per_query),
        adjustment=boot.adjustment,
        interval=boot.interval,
        missing_from_run=missing,
    )


def summarise(
    per_query: Mapping[str, PerQueryMetrics],
    *,
    boot: BootstrapConfig | None = None,
    baseline: str | None = None,
    pairs: Pairs | None = None,
    workers: str = "auto",
    **options: Unpack[BootstrapOptions],
) -> EvaluationSummary:
    """Bootstrap CIs and paired differences from per-query metrics of several systems.

    Every system must have been evaluated on the same queries in the same order. The bootstrap
    settings come as one :class:`~adaptlab.stats.BootstrapConfig` (``boot=``) or as its fields,
    the keyword options (:class:`~adaptlab.stats.settings.BootstrapOptions`) ``n_resamples``
    (default 1000), ``sample_size`` (default: all queries), ``seed`` (default 0), ``confidence``
    (default 0.95), ``allow_oversampling`` (default False: a ``sample_size`` above the number of
    queries is an error), ``interval`` (default ``"auto"``: Wilson for 0/1 measures, studentized
    bootstrap for the others), ``adjustment`` (default ``"holm"``) and ``test`` (default
    ``"sign-flip"``), not both; a keyword option ``None`` is the config's default. ``workers``:
    ``"auto"``, ``"local"`` or ``"ray"``; one bootstrap task per measure, see
    :mod:`adaptlab.evaluation.workers` (the numbers do not depend on it). Paired comparisons: every
    system against ``baseline``, or exactly the ``(system, compared_to)`` ``pairs`` (per-family
    baselines), else every pair; the p-value adjustment runs over the comparisons made within each
    (dataset, measure).
    """
    check_option_keys("summarise", options, BootstrapOptions)
    boot = resolve_bootstrap("summarise", boot, config_key="boot", **options)
    return summarise_datasets({"": per_query}, boot=boot, baseline=baseline, pairs=pairs, workers=workers)[""]


def summarise_datasets(
    per_dataset: Mapping[str, Mapping[str, PerQueryMetrics]],
    *,
    boot: BootstrapConfig | None = None,
    baseline: str | None = None,
    pairs: Pairs | None = None,
    workers: str = "auto",
) -> dict[str, EvaluationSummary]:
    """:func:`summarise` for several datasets at once: every (dataset x measure) group is one
    bootstrap task, so a study with many groups keeps all Ray workers busy. Same numbers as one
    :func:`summarise` call per dataset."""
    boot = boot if boot is not None else BootstrapConfig()
    check_workers(workers)
    groups = {ds: _groups(ds, pq, baseline, pairs) for ds, pq in per_dataset.items()}
    for ds, pq in per_dataset.items():  # fail before any work is dispatched
        n_q = next(iter(pq.values())).n_queries
        try:
            check_sizes(n_q, boot.n_resamples, boot.sample_size, boot.allow_oversampling)
        except ConfigError as e:
            raise ConfigError(f"dataset {ds!r}: {e}" if ds else str(e)) from e
    flat = [g for gs in groups.values() for g in gs]
    results = iter(run_groups(flat, boot, workers=workers))
    return {ds: _summary(per_dataset[ds], gs, [next(results) for _ in gs], boot) for ds, gs in groups.items()}


def summarise_runs(
    qrels: Mapping[str, Mapping[str, int]],
    runs: Mapping[str, Mapping[str, Mapping[str, float]]],
    measures: str | Iterable[str | Measure],
    *,
    query_ids: Sequence[str] | None = None,
    boot: BootstrapConfig | None = None,
    **keywords: Any,
) -> EvaluationSummary:
    """:func:`evaluate` every run on the same queries, then :func:`summarise`; ``boot`` or the
    loose bootstrap keywords (not both) and the other keywords of :func:`summarise`."""
    loose = {k: keywords.pop(k) for k in [f.name for f in fields(BootstrapConfig)] if k in keywords}
    boot = resolve_bootstrap("summarise_runs", boot, config_key="boot", **loose)
    ms = parse_measures(measures)
    per_query = {name: evaluate(qrels, run, ms, query_ids=query_ids) for name, run in runs.items()}
    return summarise(per_query, boot=boot, **keywords)
