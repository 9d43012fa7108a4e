"""Turn what a caller commits (dict rows, Arrow tables, DataFrames, per-query records) into
tables of the current layout, with errors that name the table, column and row.

Rules: unknown columns are rejected; required columns must be given; optional ones are
filled with nulls; values are converted to the column type (a value that does not convert
is an error, never silently coerced). ``config`` and ``extra`` accept dicts (stored as
JSON with sorted keys); ``measure`` strings that parse as ranking measures are stored in
canonical form (``"nDCG@10"`` -> ``"ndcg@10"``); timestamps must be timezone-aware.
A ``metrics`` or ``per_query`` row without ``run_id`` gets the id of the run of this
commit with the same (system, dataset), when exactly one exists.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from adaptlab.errors import StoreError
from adaptlab.results.provenance import to_json
from adaptlab.results.schema import COLUMNS, SCHEMA_VERSION, arrow_schema, arrow_type, column_names

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

__all__ = ["canonical_measure", "prepare_commit", "prepare_rows", "referenced_run_ids", "unique_values"]

_JSON_COLUMNS = frozenset({"config", "extra"})
_NON_EMPTY = ("run_id", "system", "dataset", "measure", "query_id")


def canonical_measure(text: str) -> str:
    """``Measure.parse(text)`` as a string when ``text`` is a ranking measure, else ``text``
    unchanged (analysis measures such as ``coe`` or ``isoscore`` are free strings)."""
    from adaptlab.errors import ConfigError
    from adaptlab.metrics.measures import Measure

    try:
        return str(Measure.parse(text))
    except ConfigError:
        return text


def _timestamp(value: Any, where: str) -> Any:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError as e:
            raise StoreError(f"{where}: cannot parse timestamp {value!r}; expected ISO 8601 with a UTC offset") from e
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise StoreError(
                f"{where}: timestamp {value!r} has no time zone; give an aware datetime, "
                "e.g. datetime.now(timezone.utc)"
            )
        return value.astimezone(timezone.utc)
    return value


def _to_arrow_table(data: Any, label: str) -> pa.Table | list[Mapping[str, Any]]:
    """An Arrow table, or the list of row dicts, from whatever the caller gave."""
    import pyarrow as pa

    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if hasattr(data, "to_arrow") and hasattr(data, "query_ids"):  # one PerQueryRecords
        return data.to_arrow()
    if type(data).__name__ == "DataFrame" and hasattr(data, "to_dict"):  # pandas
        return pa.Table.from_pandas(data, preserve_index=False)
    if isinstance(data, Mapping):
        raise StoreError(
            f"{label}: expected a list of row dicts or a pyarrow Table, got a single dict; wrap it in a list"
        )
    if isinstance(data, Iterable) and not isinstance(data, (str, bytes)):
        items = list(data)
        if items and all(hasattr(x, "to_arrow") and hasattr(x, "query_ids") for x in items):
            return pa.concat_tables([x.to_arrow() for x in items])
        for i, row in enumerate(items):
            if not isinstance(row, Mapping):
                raise StoreError(f"{label} row {i}: expected a dict, got {type(row).__name__}")
        return items
    raise StoreError(f"{label}: expected a list of row dicts or a pyarrow Table, got {type(data).__name__}")


def _unknown(label: str, table: str, names: Iterable[str], where: str = "") -> None:
    valid = column_names(table)
    extra = [n for n in names if n not in valid]
    if extra:
        raise StoreError(
            f"{label}{where}: unknown column(s) {', '.join(map(repr, extra))}; valid columns: {', '.join(valid)}"
        )


def _raw_columns(table: str, data: Any, label: str) -> tuple[dict[str, pa.ChunkedArray | pa.Array], int]:
    """Typed arrays of the columns given (missing ones absent), and the row count."""
    import pyarrow as pa

    spec = {c.name: c for c in COLUMNS[table]}
    got = _to_arrow_table(data, label)
    out: dict[str, Any] = {}
    if isinstance(got, list):
        n = len(got)
        present: dict[str, None] = {}
        for i, row in enumerate(got):
            _unknown(label, table, row.keys(), f" row {i}")
            present.update(dict.fromkeys(row))
        for name in present:
            col = spec[name]
            absent = [i for i, row in enumerate(got) if name not in row]
            if absent and col.required and not (name == "run_id" and table != "runs"):
                raise StoreError(f"{label} row {absent[0]} lacks required column {name!r}")
            values = [row.get(name) for row in got]
            where = f"{label} column {name!r}"
            if name in _JSON_COLUMNS:
                values = [
                    None if v is None else to_json(v, what=f"{label} row {i} {name}") for i, v in enumerate(values)
                ]
            elif col.kind == "timestamp":
                values = [_timestamp(v, f"{label} row {i} column {name!r}") for i, v in enumerate(values)]
            try:
                out[name] = pa.array(values, arrow_type(col.kind))
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as e:
                raise StoreError(f"{where}: cannot store the values as {col.kind}: {e}") from e
    else:
        n = got.num_rows
        _unknown(label, table, got.column_names)
        if len(set(got.column_names)) != len(got.column_names):
            raise StoreError(f"{label}: duplicate column names in {got.column_names}")
        for name in got.column_names:
            col = spec[name]
            arr = got.column(name)
            if name in _JSON_COLUMNS and not pa.types.is_string(arr.type) and not pa.types.is_null(arr.type):
                raise StoreError(f"{label} column {name!r}: expected JSON strings, got {arr.type}")
            try:
                out[name] = arr.cast(arrow_type(col.kind))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
                raise StoreError(f"{label} column {name!r}: cannot store {arr.type} values as {col.kind}: {e}") from e
    if "measure" in out and table in ("metrics", "scaling"):
        out["measure"] = pa.array(
            [None if m is None else canonical_measure(m) for m in out["measure"].to_pylist()], pa.string()
        )
    inferable = {"run_id"} if table != "runs" else set()
    missing = [c.name for c in COLUMNS[table] if c.required and c.name not in out and c.name not in inferable]
    if missing and n:
        raise StoreError(
            f"{label}: missing required column(s) {', '.join(map(repr, missing))}; "
            f"given: {', '.join(out) or 'none'}"
            + ("; build runs rows with adaptlab.results.run_record(...)" if table == "runs" else "")
        )
    return out, n


def _finish(table: str, cols: dict[str, Any], n: int, label: str) -> pa.Table:
    """Fill optional columns, check nulls and emptiness, assemble with the stored schema."""
    import pyarrow as pa
    import pyarrow.compute as pc

    schema = arrow_schema(table)
    arrays = []
    for col, field in zip(COLUMNS[table], schema):
        if col.name in cols:
            arr = cols[col.name]
        elif col.name == "schema_version":
            arr = pa.array([SCHEMA_VERSION] * n, pa.int32())
        elif col.name == "run_id" and n:
            raise StoreError(f"{label}: missing required column 'run_id'")
        else:
            arr = pa.nulls(n, field.type)
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
        if not col.nullable and arr.null_count:
            first = pc.index(pc.is_null(arr), True).as_py()
            raise StoreError(f"{label} row {first}: column {col.name!r} is null or missing; it is required")
        if col.name in _NON_EMPTY and n and pc.any(pc.equal(arr, "")).as_py():
            first = pc.index(pc.equal(arr, ""), True).as_py()
            raise StoreError(f"{label} row {first}: column {col.name!r} is empty; give a non-empty string")
        if col.name == "schema_version" and n and pc.any(pc.not_equal(arr, SCHEMA_VERSION)).as_py():
            raise StoreError(f"{label}: schema_version must be {SCHEMA_VERSION} (the version this adaptlab writes)")
        arrays.append(arr)
    return pa.Table.from_arrays(arrays, schema=schema)


def _infer_run_ids(cols: dict[str, Any], n: int, runs: pa.Table, label: str) -> None:
    """Fill a missing or null ``run_id`` from the commit's run with the same (system, dataset)."""
    import pyarrow as pa

    have = cols.get("run_id")
    if have is not None and have.null_count == 0:
        return
    if "system" not in cols or "dataset" not in cols:
        return  # reported as a missing required column later
    index: dict[tuple[str, str], list[str]] = {}
    for rid, s, d in zip(
        runs.column("run_id").to_pylist(), runs.column("system").to_pylist(), runs.column("dataset").to_pylist()
    ):
        index.setdefault((s, d), []).append(rid)
    ids = have.to_pylist() if have is not None else [None] * n
    systems, datasets = cols["system"].to_pylist(), cols["dataset"].to_pylist()
    for i in range(n):
        if ids[i] is not None:
            continue
        cand = index.get((systems[i], datasets[i]), [])
        if len(cand) != 1:
            how = "no run" if not cand else f"{len(cand)} runs"
            raise StoreError(
                f"{label} row {i} has no run_id and this commit has {how} for system {systems[i]!r} "
                f"on dataset {datasets[i]!r}; give the run_id explicitly"
            )
        ids[i] = cand[0]
    cols["run_id"] = pa.array(ids, pa.string())


def prepare_commit(runs: Any, metrics: Any, per_query: Any) -> dict[str, pa.Table]:
    """Validated tables ``{"runs", "metrics", "per_query"}`` of one commit."""
    out: dict[str, pa.Table] = {}
    cols, n = _raw_columns("runs", [] if runs is None else runs, "runs")
    out["runs"] = _finish("runs", cols, n, "runs")
    ids = out["runs"].column("run_id").to_pylist()
    if len(set(ids)) != len(ids):
        dup = next(r for r in ids if ids.count(r) > 1)
        raise StoreError(f"runs: run_id {dup!r} occurs more than once in this commit")
    for name, data in (("metrics", metrics), ("per_query", per_query)):
        cols, n = _raw_columns(name, [] if data is None else data, name)
        _infer_run_ids(cols, n, out["runs"], name)
        out[name] = _finish(name, cols, n, name)
    pq_t = out["per_query"]
    if pq_t.num_rows:
        uniq = pq_t.select(["run_id", "query_id"]).group_by(["run_id", "query_id"]).aggregate([])
        if uniq.num_rows != pq_t.num_rows:
            raise StoreError("per_query: a (run_id, query_id) pair occurs more than once")
    if not any(t.num_rows for t in out.values()):
        raise StoreError("nothing to commit: runs, metrics and per_query are all empty")
    return out


def prepare_rows(table: str, data: Any) -> pa.Table:
    """Validated rows of a table committed on its own (``scaling``), by the rules of the module doc."""
    cols, n = _raw_columns(table, data, table)
    if not n:
        raise StoreError(f"nothing to commit: no {table} rows")
    return _finish(table, cols, n, table)


def referenced_run_ids(tables: Mapping[str, pa.Table]) -> set[str]:
    """Run ids used by ``metrics`` and ``per_query`` but not defined in ``runs`` of the commit."""
    import pyarrow.compute as pc

    own = set(tables["runs"].column("run_id").to_pylist())
    used: set[str] = set()
    for name in ("metrics", "per_query"):
        if tables[name].num_rows:
            used.update(pc.unique(tables[name].column("run_id")).to_pylist())
    return used - own


def unique_values(table: pa.Table, column: str) -> Sequence[str]:
    """Sorted distinct non-null values of a string column."""
    import pyarrow.compute as pc

    if not table.num_rows:
        return []
    return sorted(v for v in pc.unique(table.column(column)).to_pylist() if v is not None)
