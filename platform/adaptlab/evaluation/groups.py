"""Per-group results: every measure on the queries of each value of a grouping column.

A dataset may label its queries with one or more grouping columns (``question_type``:
``factoid``, ``list``, ...). For a column, each group's queries are evaluated on their own,
exactly as :func:`~adaptlab.evaluation.summarise` evaluates a dataset: each system's mean with
its bootstrap CI, and the paired differences with their CI and sign-flip p-value, all computed
from that group's per-query values alone (so a group's numbers equal those of a dataset holding
only its queries). Every bootstrap resample draws ``n_g`` of the group's ``n_g`` queries:
``sample_size`` does not apply to groups.

Multiplicity: a per-group breakdown multiplies the tests of a measure by the number of groups,
so the family of the adjustment is every paired comparison of one measure across all groups of
one column (Holm by default: ``p_(j)`` adjusted to ``max_{i <= j} min(1, (m - i + 1) p_(i))``
over the ``m`` tests of the family; Holm 1979, "A simple sequentially rejective multiple test
procedure", Scand. J. Statist. 6, section 2). ``family_size`` says how many tests that is.

Queries without a value in the column (an empty cell) belong to no group; they still count in
the whole-dataset results, which do not change when groups are added.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from adaptlab.errors import ConfigError, DataError
from adaptlab.evaluation.summary import EvaluationSummary, Pairs, PairSummary, summarise_datasets
from adaptlab.metrics import PerQueryMetrics
from adaptlab.stats import BootstrapConfig
from adaptlab.stats.pvalues import adjust_pvalues_bounded

__all__ = ["GroupedSummary", "check_group_column", "group_label", "split_by_group", "summarise_groups"]


def group_label(column: str, value: str) -> str:
    """The store's ``group`` cell of one group: ``column=value`` (``question_type=factoid``)."""
    return f"{column}={value}"


def check_group_column(column: str, where: str) -> str:
    """A grouping column name: non-empty, no ``=``, no control character (one line naming ``where``)."""
    name = str(column).strip()
    if not name or "=" in name or any(ord(c) < 32 for c in name):
        raise ConfigError(
            f"{where}: grouping column {column!r}: expected a non-empty name without '=' or "
            "control characters (for example question_type)"
        )
    return name


@dataclass
class GroupedSummary:
    """The per-group results of one grouping ``column``: ``groups[value]`` is the
    :class:`~adaptlab.evaluation.EvaluationSummary` of that group's queries (values in sorted
    order), its paired p-values adjusted across the groups (module doc); ``unassigned`` are the
    evaluated queries without a value."""

    column: str
    groups: dict[str, EvaluationSummary]
    unassigned: list[str] = field(default_factory=list)

    def metric_rows(self, run_ids: Mapping[str, str], dataset: str) -> list[dict[str, object]]:
        """The store's rows of every group: each group's :meth:`EvaluationSummary.metric_rows`
        with ``group`` = ``column=value``."""
        return [
            {**row, "group": group_label(self.column, value)}
            for value, s in self.groups.items()
            for row in s.metric_rows(run_ids, dataset)
        ]

    def to_json(self) -> dict[str, object]:
        """``{column, unassigned, groups: {value: EvaluationSummary.to_json()}}``."""
        return {
            "column": self.column,
            "unassigned": len(self.unassigned),
            "groups": {v: s.to_json() for v, s in self.groups.items()},
        }


def split_by_group(
    per_query: Mapping[str, PerQueryMetrics],
    labels: Mapping[str, str],
) -> tuple[dict[str, dict[str, PerQueryMetrics]], list[str]]:
    """``({value: {system: that group's PerQueryMetrics}}, unassigned query ids)``: each group keeps
    its queries in the evaluation's order; an empty or missing label puts a query in no group."""
    first = next(iter(per_query.values()))
    index: dict[str, list[int]] = {}
    unassigned = []
    for i, q in enumerate(first.query_ids):
        value = str(labels.get(q, "") or "").strip()
        if value:
            index.setdefault(value, []).append(i)
        else:
            unassigned.append(q)
    out = {}
    for value in sorted(index):
        rows = np.asarray(index[value], dtype=np.intp)
        ids = [first.query_ids[i] for i in rows]
        members = set(ids)
        out[value] = {
            s: PerQueryMetrics(
                ids, {m: v[rows] for m, v in pq.values.items()}, [], [q for q in pq.missing_from_run if q in members]
            )
            for s, pq in per_query.items()
        }
    return out, unassigned


def summarise_groups(
    per_query: Mapping[str, PerQueryMetrics],
    labels: Mapping[str, str],
    *,
    column: str,
    boot: BootstrapConfig | None = None,
    baseline: str | None = None,
    pairs: Pairs | None = None,
    workers: str = "auto",
) -> GroupedSummary:
    """Per-group results of ``per_query`` (systems as for :func:`~adaptlab.evaluation.summarise`)
    for the query labels ``labels`` (``{query_id: group value}``) of grouping ``column``: one
    :class:`~adaptlab.evaluation.EvaluationSummary` per group, paired p-values adjusted within each
    measure across the groups (module doc). A DataError when no evaluated query has a label."""
    boot = boot if boot is not None else BootstrapConfig()
    column = check_group_column(column, "groups")
    if not per_query:
        raise ConfigError("no systems to evaluate")
    split, unassigned = split_by_group(per_query, labels)
    if not split:
        raise DataError(
            f"grouping column {column!r}: no evaluated query has a value; check the query ids of "
            "the group labels against the evaluated queries"
        )
    own = replace(boot, sample_size=None, allow_oversampling=False)  # each group resamples all its queries
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # one note per column below instead of one per group
        summaries = summarise_datasets(split, boot=own, baseline=baseline, pairs=pairs, workers=workers)
    _warn_small_groups(column, summaries)
    return GroupedSummary(column, _adjust_across_groups(summaries, boot.adjustment), unassigned)


def _warn_small_groups(column: str, summaries: Mapping[str, EvaluationSummary]) -> None:
    """One SmallSampleWarning naming the groups with fewer than 30 queries."""
    from adaptlab.evaluation.summary import SmallSampleWarning

    small = [f"{v} ({s.n_queries})" for v, s in summaries.items() if s.small_sample]
    if small:
        warnings.warn(
            f"grouping column {column!r}: groups with few queries, whose bootstrap CIs are unreliable "
            f"(read the exact paired tests): {', '.join(small[:8])}"
            + (f" and {len(small) - 8} more" if len(small) > 8 else ""),
            SmallSampleWarning,
            stacklevel=3,
        )


def _adjust_across_groups(
    summaries: Mapping[str, EvaluationSummary],
    adjustment: str,
) -> dict[str, EvaluationSummary]:
    """The summaries with every paired p adjusted within its measure across all groups."""
    keys = [(v, i) for v, s in summaries.items() for i in range(len(s.pairs))]
    by_measure: dict[str, list[tuple[str, int]]] = {}
    for v, i in keys:
        by_measure.setdefault(summaries[v].pairs[i].measure, []).append((v, i))
    new: dict[str, list[PairSummary]] = {v: list(s.pairs) for v, s in summaries.items()}
    for family in by_measure.values():
        ps = [summaries[v].pairs[i] for v, i in family]
        adj, bound = adjust_pvalues_bounded([p.p_value for p in ps], [p.p_bound for p in ps], adjustment)
        for (v, i), p, pa, pb in zip(family, ps, adj, bound):
            new[v][i] = replace(
                p, p_adjusted=float(pa), adjustment=adjustment, family_size=len(family), p_adjusted_bound=bool(pb)
            )
    return {v: replace(s, pairs=new[v]) for v, s in summaries.items()}


def labels_for(
    groups: Mapping[str, Mapping[str, str]] | None, columns: Sequence[str] | None, where: str
) -> dict[str, Mapping[str, str]]:
    """``{column: {query_id: value}}`` of ``columns`` (default: every column of ``groups``); a
    column ``groups`` lacks is one line naming ``where`` and the columns it has."""
    groups = groups or {}
    wanted = list(groups) if columns is None else [check_group_column(c, where) for c in columns]
    missing = [c for c in wanted if c not in groups]
    if missing:
        have = ", ".join(groups) or "none"
        raise ConfigError(f"{where}: no grouping column {missing[0]!r} (the grouping columns are: {have})")
    return {c: groups[c] for c in wanted}
