"""Commit an evaluation to the results store: one ``runs`` row per system, long ``metrics``
rows, and optionally the per-query records, all in one atomic commit."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from adaptlab import results
from adaptlab.evaluation.summary import EvaluationSummary

__all__ = ["commit_summary"]


def commit_summary(
    store_root: str | Path,
    summary: EvaluationSummary,
    *,
    dataset: str,
    config: Mapping[str, Any],
    provenance: Mapping[str, Mapping[str, Any]] | None = None,
    dataset_fingerprint: str = "",
    records: Sequence[Any] = (),
    extra_metric_rows: Sequence[Mapping[str, Any]] = (),
    study: str | None = None,
) -> dict[str, str]:
    """Write ``summary`` atomically; returns ``{system: run_id}``.

    ``provenance[system]`` may give ``model_id`` and ``model_revision``; ``records`` are
    :class:`~adaptlab.retrieval.records.PerQueryRecords` whose rows go to ``per_query``.
    ``extra_metric_rows`` (analysis measures such as ``coe``) need ``system`` and ``measure``;
    their ``run_id`` is filled in.
    """
    import pyarrow as pa  # deferred: only a commit with per-query records needs Arrow

    store = results.open(store_root, create=True)
    provenance = provenance or {}
    run_ids = {s: results.new_run_id() for s in summary.systems}
    runs = [
        results.run_record(
            s, dataset, run_id=run_ids[s],
            model_id=str(provenance.get(s, {}).get("model_id", "")),
            model_revision=str(provenance.get(s, {}).get("model_revision", "")),
            dataset_fingerprint=dataset_fingerprint, seed=summary.seed,
            config=dict(config), study=study,
        )
        for s in summary.systems
    ]
    rows = summary.metric_rows(run_ids, dataset)
    for extra in extra_metric_rows:
        row = {"dataset": dataset, "run_id": run_ids[str(extra["system"])], "compared_to": None,
               "p_value": None, "boot_mean": None, "ci_low": None, "ci_high": None,
               "n_queries": summary.n_queries, "n_resamples": summary.n_resamples,
               "sample_size": summary.sample_size, "seed": summary.seed}
        row.update(extra)
        rows.append(row)
    per_query = None
    if records:
        tables = []
        for rec in records:
            t = rec.to_arrow()
            tables.append(t.append_column("run_id", pa.array([run_ids[rec.system]] * t.num_rows, pa.string())))
        per_query = pa.concat_tables(tables)
    store.commit(runs, rows, per_query)
    return run_ids
