"""ranx-compatible runs and qrels: JSON files and DataFrames in and out, and from a store.

ranx's JSON is ``{query_id: {doc_id: score}}`` (a run: float scores; qrels: integer relevance)
and its ``from_df`` reads the columns ``q_id``, ``doc_id``, ``score``. Both are what
:func:`adaptlab.evaluate` accepts, so ``evaluate(read_ranx_json(q), read_ranx_json(r))`` and
``evaluate(qrels_frame, run_frame)`` give the numbers of the TREC files.

From a store: :func:`store_run` is a stored run's top-k (``per_query.topk_ids`` /
``topk_scores``), :func:`store_qrels` its gold documents (``gold_ids``, relevance 1: the store
keeps which documents are relevant, not their grades); :func:`export_ranx` writes
``out/DATASET/qrels.json`` and ``out/DATASET/runs/SYSTEM.json`` for the latest run of each, all
files or none, and refuses two systems (or datasets) whose names become one file name.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adaptlab.errors import DataError, StoreError
from adaptlab.storage.files import READABLE, safe_name

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from adaptlab.results.store import ResultsStore

__all__ = [
    "RANX_COLUMNS",
    "export_ranx",
    "from_ranx_frame",
    "read_ranx_json",
    "store_qrels",
    "store_run",
    "to_ranx_frame",
    "write_ranx_json",
]

RANX_COLUMNS = ("q_id", "doc_id", "score")
"""The column names of ranx's ``Run.from_df`` / ``Qrels.from_df`` defaults."""

Nested = dict[str, dict[str, Any]]


def _check_nested(data: Any, source: str, integer: bool) -> Nested:
    """``{str: {str: number}}`` or one error line naming ``source`` and the bad entry."""
    if not isinstance(data, Mapping):
        raise DataError(f"{source}: expected a JSON object {{query_id: {{doc_id: score}}}}, got {type(data).__name__}")
    out: Nested = {}
    for q, docs in data.items():
        if not isinstance(docs, Mapping):
            raise DataError(f"{source}: query {q!r} maps to {type(docs).__name__}, expected {{doc_id: score}}")
        row: dict[str, Any] = {}
        for d, v in docs.items():
            if (
                isinstance(v, bool)
                or not isinstance(v, (int, float))
                or (integer and v != int(v))
                or (isinstance(v, float) and math.isnan(v))
            ):
                want = "an integer relevance" if integer else "a number"
                raise DataError(f"{source}: query {q!r}, document {d!r} has {v!r}, expected {want}")
            row[str(d)] = int(v) if integer else float(v)
        out[str(q)] = row
    return out


def read_ranx_json(path: str | os.PathLike[str], *, qrels: bool = False) -> Nested:
    """A ranx JSON run (``qrels=True``: qrels, integer relevance) as a nested dict."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise DataError(f"{path}: not valid JSON ({e.msg}, line {e.lineno})") from e
    return _check_nested(data, str(path), qrels)


def write_ranx_json(data: Mapping[str, Mapping[str, Any]], path: str | os.PathLike[str]) -> Path:
    """Write ``{query_id: {doc_id: score}}`` as ranx's JSON (parent folders created; whole or not at all)."""
    from adaptlab.results.exports.export_files import write_all

    return write_all([(Path(path), _ranx_text(data))])[0]


def _ranx_text(data: Mapping[str, Mapping[str, Any]]) -> str:
    return json.dumps({str(q): {str(d): v for d, v in docs.items()} for q, docs in data.items()})


def to_ranx_frame(data: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """A long DataFrame with ranx's columns ``q_id``, ``doc_id``, ``score`` (one row per pair)."""
    import pandas as pd

    rows = [(str(q), str(d), v) for q, docs in data.items() for d, v in docs.items()]
    return pd.DataFrame(rows, columns=list(RANX_COLUMNS))


def from_ranx_frame(
    frame: pd.DataFrame,
    *,
    qrels: bool = False,
    q_id_col: str = "q_id",
    doc_id_col: str = "doc_id",
    score_col: str = "score",
) -> Nested:
    """``{query_id: {doc_id: score}}`` from a long DataFrame (ranx's ``from_df`` column names by
    default); a (query, document) listed twice is an error."""
    missing = [c for c in (q_id_col, doc_id_col, score_col) if c not in frame.columns]
    if missing:
        raise DataError(
            f"ranx DataFrame: no column(s) {', '.join(missing)}; columns are {', '.join(map(str, frame.columns))}"
        )
    out: dict[str, dict[str, Any]] = {}
    for q, d, v in zip(frame[q_id_col].astype(str), frame[doc_id_col].astype(str), frame[score_col]):
        docs = out.setdefault(q, {})
        if d in docs:
            raise DataError(f"ranx DataFrame: query {q!r}, document {d!r} appears twice; keep one row each")
        docs[d] = v.item() if hasattr(v, "item") else v
    return _check_nested(out, "ranx DataFrame", qrels)


def _per_query_rows(store: ResultsStore, columns: list[str], **filters: Any) -> list[dict[str, Any]]:
    rows = store.per_query(columns=columns, latest="run_id" not in filters, **filters).to_pylist()
    if not rows:
        raise StoreError(
            f"no per-query rows in the store for {filters}; check the names (adaptlab results --table runs lists them)"
        )
    return rows


def store_run(store: ResultsStore, *, system: str, dataset: str, run_id: str | None = None) -> Nested:
    """The top-k of the latest run (or ``run_id``) of ``system`` on ``dataset`` as a ranx run."""
    filters = {"system": system, "dataset": dataset, **({"run_id": run_id} if run_id else {})}
    rows = _per_query_rows(store, ["query_id", "topk_ids", "topk_scores"], **filters)
    return {r["query_id"]: {d: float(s) for d, s in zip(r["topk_ids"] or [], r["topk_scores"] or [])} for r in rows}


def store_qrels(store: ResultsStore, *, dataset: str, system: str | None = None) -> Nested:
    """The gold documents of ``dataset`` (relevance 1) from the latest runs' per-query rows."""
    filters = {"dataset": dataset, **({"system": system} if system else {})}
    out: Nested = {}
    for r in _per_query_rows(store, ["query_id", "gold_ids"], **filters):
        out.setdefault(r["query_id"], {}).update({d: 1 for d in r["gold_ids"] or []})
    return out


def export_ranx(
    store: ResultsStore, out_dir: str | os.PathLike[str], *, system: str | None = None, dataset: str | None = None
) -> list[Path]:
    """Write ``out_dir/DATASET/qrels.json`` and ``out_dir/DATASET/runs/SYSTEM.json`` (ranx JSON) for
    the latest run of each (system, dataset) in ``store``; returns the paths written."""
    filters: dict[str, Any] = {k: v for k, v in (("system", system), ("dataset", dataset)) if v is not None}
    pairs = sorted({(r["system"], r["dataset"]) for r in store.runs(latest=True, **filters).to_pylist()})
    if not pairs:
        raise StoreError(f"no runs in the store for {filters or 'any system'}; run a study first or check the filter")
    from adaptlab.results.exports.export_files import refuse_shared_files, write_all

    targets: list[tuple[str, Path]] = []
    for s, ds in pairs:
        folder = Path(out_dir) / safe_name(ds, READABLE)
        targets += [
            (f"dataset {ds!r}", folder / "qrels.json"),
            (f"system {s!r} on dataset {ds!r}", folder / "runs" / f"{safe_name(s, READABLE)}.json"),
        ]
    refuse_shared_files(targets, "export to ranx")  # before reading anything: nothing is written
    files = []
    for ds in sorted({d for _, d in pairs}):
        folder = Path(out_dir) / safe_name(ds, READABLE)
        files.append((folder / "qrels.json", _ranx_text(store_qrels(store, dataset=ds, system=system))))
        files += [
            (folder / "runs" / f"{safe_name(s, READABLE)}.json", _ranx_text(store_run(store, system=s, dataset=ds)))
            for s, d in pairs
            if d == ds
        ]
    return write_all(files)
