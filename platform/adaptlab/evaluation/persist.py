"""Commit an evaluation to the results store: one ``runs`` row per system, long ``metrics``
rows, and optionally the per-query records, all in one atomic commit.

The returned :class:`StoredRuns` maps each system to its run id and carries the commit's id and
the store ``version`` it created (what a paper cites: ``results.open(uri, version=N)``). A job
started by ``adaptlab submit`` records the submitted code (``ADAPTLAB_SUBMITTED_CODE``: version,
git commit, hash of the uploaded files) under ``config["submitted_code"]`` of every run.

Running the same evaluation again adds nothing. The run ids of a commit are derived from
:func:`evaluation_key`, the SHA-256 of what the evaluation *is*, never of where its inputs were
read from or how they were listed: the adaptlab version, dataset and its fingerprint, study, the
inputs by content (``key_content``: a run file's or the qrels' SHA-256, a model's content
address; without it the run config and provenance with paths and reuse flags left out, see
:func:`_key_view`), the summary's settings and values as a set of rows (measure order does not
matter), the per-query records and extra metric rows:
``run_id = SHA-256(key, NUL, system)[:32 hex]``. Running the same evaluation again (for instance
after a commit whose outcome was unknown, from another folder, or with the measures in another
order) finds those run ids in the store
(:meth:`~adaptlab.results.writer.ResultsStore.commit_of`) and adds nothing; any different input,
setting or value is a new key, so new runs. Two identical evaluations committing at the same
moment store one: the store's commit protocol lets only one log entry of those run ids land,
and the other finds it and reports "already in the store". ``again=True`` draws random run ids
instead (a new commit of the same evaluation, as before)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypedDict

from adaptlab import results
from adaptlab.evaluation.groups import GroupedSummary
from adaptlab.evaluation.summary import EvaluationSummary
from adaptlab.options import one_way_in
from adaptlab.results.provenance import to_json
from adaptlab.stats.options import Unpack
from adaptlab.stats.settings import check_option_keys
from adaptlab.storage.names import check_name, check_names

__all__ = [
    "SUBMITTED_CODE_ENV",
    "RunContext",
    "RunOptions",
    "StoredRuns",
    "commit_summary",
    "evaluation_key",
    "keyed_run_ids",
]

SUBMITTED_CODE_ENV = "ADAPTLAB_SUBMITTED_CODE"
"""Set by ``adaptlab submit`` in the job's environment: JSON describing the uploaded code."""


class StoredRuns(dict):
    """``{system: run_id}`` of one commit, with ``commit_id`` and the store ``version`` it created
    (``None`` when the store could not tell), the store's ``uri``, and ``added``: False when the
    store already held this evaluation (a retry: nothing was written; ``version`` is the
    commit that holds it)."""

    commit_id: str | None
    version: int | None
    uri: str
    added: bool

    def __init__(
        self,
        run_ids: Mapping[str, str],
        *,
        commit_id: str | None = None,
        version: int | None = None,
        uri: str = "",
        added: bool = True,
    ) -> None:
        super().__init__(run_ids)
        self.commit_id, self.version, self.uri, self.added = commit_id, version, uri, added

    def already_stored(self) -> str:
        """The one line that says a retry added nothing:
        ``already in the store as run R (version V); nothing added``."""
        ids = list(self.values())
        runs = f"run {ids[0]}" if len(ids) == 1 else "runs " + ", ".join(f"{r} ({s})" for s, r in self.items())
        return f"already in the store as {runs} (version {self.version}); nothing added"


def submitted_code() -> dict[str, Any] | None:
    """The code description ``adaptlab submit`` put in this job's environment, if any."""
    raw = os.environ.get(SUBMITTED_CODE_ENV)
    if not raw:
        return None
    try:
        info = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(info, dict):
        return None
    return {k: info.get(k) for k in ("version", "commit", "dirty", "tree_sha256")}


class RunOptions(TypedDict, total=False):
    """The :class:`RunContext` fields as keyword options of :func:`commit_summary`."""

    dataset: str
    config: Mapping[str, Any]
    provenance: Mapping[str, Mapping[str, Any]] | None
    dataset_fingerprint: str
    study: str | None
    key_content: Mapping[str, Any] | None


@dataclass(frozen=True)
class RunContext:
    """What the runs of one commit are, shared by every system's ``runs`` row and by the
    evaluation's key (:func:`evaluation_key`).

    ``dataset`` (a name, :func:`adaptlab.storage.check_name`) and its ``dataset_fingerprint``,
    ``study``; ``config``, the run configuration stored with every run; ``provenance[system]``,
    which may give ``model_id`` and ``model_revision``; ``key_content``, the inputs by content
    (file digests, model content addresses): when given it replaces ``config`` and ``provenance``
    in the key (they are still stored as given).
    """

    dataset: str
    config: Mapping[str, Any]
    provenance: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    dataset_fingerprint: str = ""
    study: str | None = None
    key_content: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.provenance is None:  # "no provenance", as the keyword option allows
            object.__setattr__(self, "provenance", {})


def _run_context(context: RunContext | None, options: Mapping[str, Any]) -> RunContext:
    """The run context of :func:`commit_summary`, given one way: ``context`` or its fields as
    keyword options (``dataset`` and ``config`` required), not both."""
    check_option_keys("commit_summary", options, RunOptions)
    if context is None:
        missing = [k for k in ("dataset", "config") if k not in options]
        if missing:
            raise TypeError(f"commit_summary() needs {' and '.join(f'{k}=' for k in missing)} (or context=)")
        return RunContext(**options)
    return one_way_in("commit_summary", RunContext, context, options, "context")


def commit_summary(
    store_root: str | Path,
    summary: EvaluationSummary,
    *,
    context: RunContext | None = None,
    records: Sequence[Any] = (),
    extra_metric_rows: Sequence[Mapping[str, Any]] = (),
    groups: Sequence[GroupedSummary] = (),
    again: bool = False,
    **options: Unpack[RunOptions],
) -> StoredRuns:
    """Write ``summary`` atomically; returns ``{system: run_id}`` with ``.version`` (the store
    version of the commit) and ``.commit_id``.

    What the runs are comes as one :class:`RunContext` (``context=``) or as its fields, the
    keyword options ``dataset``, ``config`` (both required then), ``provenance``,
    ``dataset_fingerprint``, ``study`` and ``key_content``; not both. The run ids come from
    :func:`evaluation_key`: when the store already holds them (the same evaluation committed
    before) nothing is written and the result's ``.added`` is False. ``again=True`` commits new
    random run ids whatever the store holds.

    ``records`` are :class:`~adaptlab.retrieval.records.PerQueryRecords` whose rows go to
    ``per_query``. ``extra_metric_rows`` (analysis measures such as ``coe``) need ``system`` and
    ``measure``; their ``run_id`` is filled in. ``groups``
    (:class:`~adaptlab.evaluation.groups.GroupedSummary`) add the per-group rows (``group`` =
    ``column=value``; the whole-dataset rows leave it null). The dataset and the system names pass
    :func:`adaptlab.storage.check_name` (a ConfigError before anything is written).
    """
    context = _run_context(context, options)
    dataset = check_name(context.dataset, "commit_summary(): dataset")
    check_names(summary.systems, "commit_summary(): system names")  # the same rule as every user-given name
    store = results.open(store_root, create=True)
    config = dict(context.config)
    code = submitted_code()
    if code is not None:
        config.setdefault("submitted_code", code)
    context = replace(context, dataset=dataset, config=config)
    extra = [*extra_metric_rows, *_group_rows(groups, summary.systems, dataset)]
    if again:
        run_ids = {s: results.new_run_id() for s in summary.systems}
    else:
        run_ids = keyed_run_ids(
            evaluation_key(summary, context, records=records, extra_metric_rows=extra), list(summary.systems)
        )
        landed = _stored(store, run_ids)
        if landed is not None:  # this evaluation is in the store already: a retry adds nothing
            return landed
    rows = summary.metric_rows(run_ids, dataset) + _extra_rows(summary, run_ids, dataset, extra)
    return _commit(
        store, run_ids, _run_rows(summary, run_ids, context), rows, _per_query_table(records, run_ids), again=again
    )


def _group_rows(
    groups: Sequence[GroupedSummary],
    systems: Mapping[str, Any],
    dataset: str,
) -> list[dict[str, Any]]:
    """The per-group rows with ``system`` standing for the run id (filled in with the others)."""
    names = {s: s for s in systems}
    return [{k: v for k, v in row.items() if k != "run_id"} for g in groups for row in g.metric_rows(names, dataset)]


def _stored(store: Any, run_ids: Mapping[str, str]) -> StoredRuns | None:
    """The store's commit of these content-derived run ids (``added=False``), None when absent."""
    landed = store.commit_of(list(run_ids.values()))
    if landed is None:
        return None
    return StoredRuns(run_ids, commit_id=str(landed), version=landed.version, uri=store.uri, added=False)


def _run_rows(summary: EvaluationSummary, run_ids: Mapping[str, str], context: RunContext) -> list[dict[str, Any]]:
    """One ``runs`` row per system."""
    provenance = context.provenance
    return [
        results.run_record(
            s,
            context.dataset,
            run_id=run_ids[s],
            model_id=str(provenance.get(s, {}).get("model_id", "")),
            model_revision=str(provenance.get(s, {}).get("model_revision", "")),
            dataset_fingerprint=context.dataset_fingerprint,
            seed=summary.seed,
            config=dict(context.config),
            study=context.study,
        )
        for s in summary.systems
    ]


def _extra_rows(
    summary: EvaluationSummary, run_ids: Mapping[str, str], dataset: str, extra_metric_rows: Sequence[Mapping[str, Any]]
) -> list[dict[str, object]]:
    """``extra_metric_rows`` completed: run id of their system, the summary's bootstrap settings."""
    rows = []
    for extra in extra_metric_rows:
        row: dict[str, object] = {
            "dataset": dataset,
            "run_id": run_ids[str(extra["system"])],
            "compared_to": None,
            "p_value": None,
            "boot_mean": None,
            "ci_low": None,
            "ci_high": None,
            "n_queries": summary.n_queries,
            "n_resamples": summary.n_resamples,
            "sample_size": summary.sample_size,
            "seed": summary.seed,
        }
        row.update(extra)
        rows.append(row)
    return rows


def _per_query_table(records: Sequence[Any], run_ids: Mapping[str, str]) -> Any:
    """The ``per_query`` rows of ``records`` with their run ids as one Arrow table (None without)."""
    if not records:
        return None
    import pyarrow as pa  # deferred: only a commit with per-query records needs Arrow

    tables = []
    for rec in records:
        t = rec.to_arrow()
        tables.append(t.append_column("run_id", pa.array([run_ids[rec.system]] * t.num_rows, pa.string())))
    return pa.concat_tables(tables)


def _commit(
    store: Any,
    run_ids: Mapping[str, str],
    runs: list[dict[str, Any]],
    rows: list[dict[str, object]],
    per_query: Any,
    *,
    again: bool,
) -> StoredRuns:
    """One commit; a keyed commit that lost the race to an identical one returns the winner."""
    try:
        commit = store.commit(runs, rows, per_query)
    except results.StoreError:
        if again:
            raise
        winner = _landed_meanwhile(store, run_ids)
        if winner is None:
            raise
        return winner  # an identical evaluation committed at the same moment won
    if not again and getattr(commit, "added", True) is False:
        return StoredRuns(run_ids, commit_id=str(commit), version=commit.version, uri=store.uri, added=False)
    return StoredRuns(run_ids, commit_id=str(commit), version=getattr(commit, "version", None), uri=store.uri)


def _landed_meanwhile(store: Any, run_ids: Mapping[str, str]) -> StoredRuns | None:
    """The stored commit of these (content-derived) run ids, when one landed while this commit was
    written; None when the store does not hold them (the error was something else)."""
    try:
        return _stored(store, run_ids)
    except results.StoreError:
        return None


def evaluation_key(
    summary: EvaluationSummary,
    context: RunContext,
    *,
    records: Sequence[Any] = (),
    extra_metric_rows: Sequence[Mapping[str, Any]] = (),
) -> str:
    """The idempotency key of one evaluation: SHA-256 (hex) over the adaptlab version, the
    context's ``dataset``, ``study`` and ``dataset_fingerprint``, the inputs (its ``key_content``
    when given, else its ``config`` and ``provenance`` through :func:`_key_view`), the summary's
    metric rows as a set (sorted by system,
    measure and compared system: bootstrap settings, every value, CI, p-value and rank), the query
    ids, ``extra_metric_rows`` (sorted) and each per-query record's ids and arrays
    (:func:`_records_digest`, in system order). Equal keys mean the commit would store the same
    rows, up to run ids, timestamps, host and where the inputs were read from."""
    from adaptlab import __version__

    c = context
    names = {s: s for s in summary.systems}
    rows = sorted((_key_view(r) for r in summary.metric_rows(names, c.dataset)), key=_row_order)
    inputs = (
        {"content": _key_view(c.key_content)}
        if c.key_content is not None
        else {"config": _key_view(c.config), "provenance": _key_view(c.provenance)}
    )
    head = {
        "adaptlab": __version__,
        "dataset": c.dataset,
        "study": c.study,
        "dataset_fingerprint": c.dataset_fingerprint,
        **inputs,
        "rows": rows,
        "query_ids": sorted(summary.query_ids),
        "excluded": sorted(summary.excluded_queries),
        "extra": sorted((_key_view(r) for r in extra_metric_rows), key=_row_order),
    }
    h = hashlib.sha256(to_json(head, what="the evaluation's key").encode("utf-8"))
    for rec in sorted(records, key=lambda r: str(r.system)):
        _records_digest(h, rec)
    return h.hexdigest()


_NOT_CONTENT = frozenset({"reused", "artifact_path", "source", "system_order"})
"""Run-config keys that say where or how an input was found, not what it is: whether an adapted
model was trained now or reused, its local folder, the study file's path, the listing order."""
_SETS = frozenset({"metrics", "measures"})
"""Run-config keys whose list is a set (the measures asked for, in any order)."""


def _key_view(value: Any) -> Any:
    """``value`` as the key sees it: dict keys of :data:`_NOT_CONTENT` left out at any depth, the
    lists under :data:`_SETS` sorted, every other value as it is."""
    if isinstance(value, Mapping):
        return {
            str(k): (sorted(map(str, v)) if k in _SETS and isinstance(v, (list, tuple)) else _key_view(v))
            for k, v in value.items()
            if k not in _NOT_CONTENT
        }
    if isinstance(value, (list, tuple)):
        return [_key_view(v) for v in value]
    return value


def _row_order(row: Mapping[str, Any]) -> str:
    return json.dumps([str(row.get(k)) for k in ("system", "measure", "compared_to")]) + to_json(
        row, what="the evaluation's key"
    )


def _records_digest(h: Any, rec: Any) -> None:
    """Feed one :class:`~adaptlab.retrieval.records.PerQueryRecords` into the hash ``h``: its names
    and id lists as JSON (unambiguous for any character), then the shape and bytes of each array."""
    import numpy as np

    ids = [rec.system, rec.dataset, rec.query_ids, rec.topk_ids, rec.gold_ids, rec.random_ids]
    h.update(json.dumps(ids, separators=(",", ":")).encode("utf-8"))
    for name in ("topk_scores", "gold_rank", "sim_gold", "sim_random"):
        arr = np.ascontiguousarray(getattr(rec, name))
        h.update(f"{name}{arr.dtype.str}{arr.shape}".encode("ascii"))
        h.update(arr.tobytes())


def keyed_run_ids(key: str, systems: Sequence[str]) -> dict[str, str]:
    """``{system: run_id}`` derived from an :func:`evaluation_key`: the first 32 hex digits of
    SHA-256(key, NUL, system), the shape of :func:`adaptlab.results.new_run_id`'s ids."""
    return {s: hashlib.sha256(f"{key}\0{s}".encode()).hexdigest()[:32] for s in systems}
