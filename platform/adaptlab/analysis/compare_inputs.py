"""The per-query values a comparison reads: from ``{system: values}``, a long DataFrame
(:data:`FRAME_COLUMNS`) or a results store's latest per-query records (re-scored), grouped by
(dataset, measure), on the queries every system has.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from adaptlab.errors import ConfigError, DataError
from adaptlab.metrics import evaluate, parse_measures

__all__ = ["FRAME_COLUMNS", "Directions", "Groups", "store_groups"]

Directions = frozenset[tuple[str, str]]
"""Stored paired rows' ``(system, compared_to)``: a pair is shown in that direction."""

Groups = dict[tuple[str, str], tuple[tuple[str, ...], np.ndarray]]


def _row_values(system: str, measure: str, v: Any, n_q: int | None) -> np.ndarray:
    try:
        arr = np.asarray(v, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise DataError(f"system {system!r}, measure {measure!r}: per-query values must be numbers: {e}") from e
    if arr.ndim != 1 or (n_q is not None and arr.size != n_q):
        raise DataError(
            f"system {system!r}, measure {measure!r}: expected {n_q or 'a 1-D array of'} per-query "
            f"values (the same queries for every system), got shape {arr.shape}"
        )
    return arr


def _from_mapping(per_query: Mapping[str, Any], dataset: str, measures: Sequence[str] | None) -> Groups:
    """``{system: PerQueryMetrics | {measure: values}}`` -> groups of one dataset."""
    names = tuple(str(n) for n in per_query)
    tables = {n: v if isinstance(v, Mapping) else getattr(v, "values", v) for n, v in zip(names, per_query.values())}
    for n, t in tables.items():
        if not isinstance(t, Mapping):
            raise ConfigError(
                f"system {n!r}: expected adaptlab.evaluate's result or {{measure: values}}, got {type(t).__name__}"
            )
    ids = [getattr(v, "query_ids", None) for v in per_query.values()]
    if any(i is not None and i != ids[0] for i in ids):
        raise DataError("the systems were evaluated on different queries; evaluate them on the same qrels")
    wanted = [str(m) for m in parse_measures(measures)] if measures else list(tables[names[0]])
    groups: Groups = {}
    for m in wanted:
        missing = [n for n in names if m not in tables[n]]
        if missing:
            raise ConfigError(
                f"measure {m!r} is missing for system(s) {', '.join(missing)}; "
                f"measures of {names[0]!r}: {', '.join(tables[names[0]])}"
            )
        rows = [_row_values(names[0], m, tables[names[0]][m], None)]
        rows += [_row_values(n, m, tables[n][m], rows[0].size) for n in names[1:]]
        groups[(dataset, m)] = (names, np.stack(rows))
    return groups


def _store_records(store: Any, dataset: str | None) -> dict[str, dict[str, Any]]:
    """The latest per-query records of every (dataset, system) in the store."""
    from adaptlab.retrieval.records import PerQueryRecords

    filters = {} if dataset is None else {"dataset": dataset}
    table = store.per_query(latest=True, **filters)
    if table.num_rows == 0:
        raise ConfigError(
            "the store has no per-query records"
            + (f" on dataset {dataset!r}" if dataset else "")
            + "; run a study first, or check --dataset"
        )
    out: dict[str, dict[str, Any]] = {}
    for ds in sorted(set(table.column("dataset").to_pylist())):
        sub = table.filter(np.asarray(table.column("dataset").to_pylist()) == ds)
        systems = list(dict.fromkeys(sub.column("system").to_pylist()))
        out[ds] = {
            s: PerQueryRecords.from_arrow(sub.filter(np.asarray(sub.column("system").to_pylist()) == s))
            for s in systems
        }
    return out


FRAME_COLUMNS: tuple[str, ...] = ("system", "query_id", "measure", "value")
"""The columns of a long-format DataFrame input (``dataset`` optional)."""


def _canonical(measure: object) -> str:
    try:
        return str(parse_measures([str(measure)])[0])
    except ConfigError:  # a measure adaptlab does not compute (coe, a user's own): kept as given
        return str(measure)


def _frame_group(sub: Any, where: str) -> tuple[tuple[str, ...], np.ndarray]:
    """One (dataset, measure) of a long frame -> (system names, [S, Q] values)."""
    try:
        wide = sub.pivot(index="query_id", columns="system", values="value")
    except ValueError as e:
        raise DataError(f"{where}: a (system, query_id) pair appears twice: {e}") from e
    names = tuple(str(n) for n in dict.fromkeys(sub["system"]))
    wide = wide.loc[list(dict.fromkeys(sub["query_id"])), list(names)]  # queries and systems in input order
    holes = [n for n in names if wide[n].isna().any()]
    if holes:
        raise DataError(
            f"{where}: system(s) {', '.join(holes)} lack values for some queries; "
            "every system needs a value on every query"
        )
    return names, wide.to_numpy(dtype=np.float64).T


def _from_frame(frame: Any, dataset: str | None, measures: Sequence[str] | None) -> Groups:
    """A long DataFrame (one row per system, query and measure) -> groups."""
    missing = [c for c in FRAME_COLUMNS if c not in frame.columns]
    if missing:
        raise ConfigError(
            f"the DataFrame lacks column(s) {', '.join(missing)}; expected {', '.join(FRAME_COLUMNS)} "
            "and optionally dataset"
        )
    frame = frame.assign(measure=frame["measure"].map(_canonical))
    if "dataset" not in frame.columns:
        frame = frame.assign(dataset=dataset or "")
    elif dataset is not None:
        frame = frame[frame["dataset"] == dataset]
    wanted = [str(m) for m in parse_measures(measures)] if measures else list(dict.fromkeys(frame["measure"]))
    groups: Groups = {}
    for (ds, m), sub in frame[frame["measure"].isin(wanted)].groupby(["dataset", "measure"], sort=False):
        groups[(str(ds), str(m))] = _frame_group(sub, f"dataset {ds!r}, measure {m!r}")
    if not groups or any(len(names) < 2 for names, _ in groups.values()):
        raise ConfigError(f"compare needs at least 2 systems for every dataset and measure of {', '.join(wanted)}")
    return groups


def store_groups(store: Any, dataset: str | None, measures: Sequence[str] | None) -> Groups:
    """Per-query values recomputed from the stored records (gold documents have relevance 1)."""
    ms = parse_measures(measures or ["ndcg@10"])
    if any(m.needs_judgments for m in ms):
        raise ConfigError(
            f"{', '.join(str(m) for m in ms if m.needs_judgments)}: the store's records keep only the "
            "gold documents, not the judged non-relevant ones; compare TREC runs with their qrels"
        )
    groups: Groups = {}
    stored = _store_records(store, dataset)
    for ds, recs in stored.items():
        if len(recs) < 2:
            continue
        first = next(iter(recs.values()))
        common = [q for q in first.query_ids if all(q in set(r.query_ids) for r in recs.values())]
        qrels = {q: {g: 1 for g in gold} for r in recs.values() for q, gold in zip(r.query_ids, r.gold_ids)}
        per_query = {s: evaluate(qrels, r.to_run(), ms, query_ids=common) for s, r in recs.items()}
        groups.update(_from_mapping(per_query, ds, [str(m) for m in ms]))
    if not groups:
        have = "; ".join(f"{ds}: {', '.join(recs)}" for ds, recs in stored.items())
        raise ConfigError(f"at least 2 systems with per-query records on one dataset are needed; the store has {have}")
    return groups


def _stored_directions(store: Any) -> Directions:
    """``(system, compared_to)`` of the store's latest paired rows (empty when it has none)."""
    rows = store.metrics(kind="comparison", latest=True, columns=["system", "compared_to"]).to_pylist()
    return frozenset((str(r["system"]), str(r["compared_to"])) for r in rows if r["compared_to"])


def _select_systems(groups: Groups, systems: Sequence[str] | None) -> Groups:
    """The groups restricted to ``systems``, in that order (the first named minus the second)."""
    if systems is None:
        return groups
    wanted = [str(s) for s in systems]
    if len(wanted) < 2 or len(set(wanted)) != len(wanted):
        raise ConfigError(f"systems: name at least 2 distinct systems, got {wanted}")
    out: Groups = {}
    for key, (names, values) in groups.items():
        missing = [s for s in wanted if s not in names]
        if missing:
            raise ConfigError(
                f"systems: {', '.join(missing)} not among the systems of {key[0] or 'the data'} "
                f"({key[1]}): {', '.join(names)}"
            )
        out[key] = (tuple(wanted), values[[names.index(s) for s in wanted]])
    return out
