"""Commit an evaluation to the results store: one ``runs`` row per system, long ``metrics``
rows, and optionally the per-query records, all in one atomic commit.

The returned :class:`StoredRuns` maps each system to its run id and carries the commit's id and
the store ``version`` it created (what a paper cites: ``results.open(uri, version=N)``). A job
started by ``adaptlab submit`` records the submitted code (``ADAPTLAB_SUBMITTED_CODE``: version,
git commit, hash of the uploaded files) under ``config["submitted_code"]`` of every run."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from adaptlab import results
from adaptlab.evaluation.summary import EvaluationSummary
from adaptlab.storage.names import check_name, check_names

__all__ = ["SUBMITTED_CODE_ENV", "StoredRuns", "commit_summary"]

SUBMITTED_CODE_ENV = "ADAPTLAB_SUBMITTED_CODE"
"""Set by ``adaptlab submit`` in the job's environment: JSON describing the uploaded code."""


class StoredRuns(dict):
    """``{system: run_id}`` of one commit, with ``commit_id`` and the store ``version`` it created
    (``None`` when the store could not tell) and the store's ``uri``."""

    commit_id: str | None
    version: int | None
    uri: str

    def __init__(self, run_ids: Mapping[str, str], *, commit_id: str | None = None, version: int | None = None,
                 uri: str = "") -> None:
        super().__init__(run_ids)
        self.commit_id, self.version, self.uri = commit_id, version, uri


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
) -> StoredRuns:
    """Write ``summary`` atomically; returns ``{system: run_id}`` with ``.version`` (the store
    version of the commit) and ``.commit_id``.

    ``provenance[system]`` may give ``model_id`` and ``model_revision``; ``records`` are
    :class:`~adaptlab.retrieval.records.PerQueryRecords` whose rows go to ``per_query``.
    ``extra_metric_rows`` (analysis measures such as ``coe``) need ``system`` and ``measure``;
    their ``run_id`` is filled in. ``dataset`` and the system names pass
    :func:`adaptlab.storage.check_name` (a ConfigError before anything is written).
    """
    import pyarrow as pa  # deferred: only a commit with per-query records needs Arrow

    dataset = check_name(dataset, "commit_summary(): dataset")
    check_names(summary.systems, "commit_summary(): system names")  # the same rule as every user-given name
    store = results.open(store_root, create=True)
    provenance = provenance or {}
    run_ids = {s: results.new_run_id() for s in summary.systems}
    config = dict(config)
    code = submitted_code()
    if code is not None:
        config.setdefault("submitted_code", code)
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
    commit = store.commit(runs, rows, per_query)
    return StoredRuns(run_ids, commit_id=str(commit), version=getattr(commit, "version", None), uri=store.uri)
