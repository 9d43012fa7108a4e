"""Upgrade tables of an older results schema version to the current one: new column names
and columns, the same values. Not to be confused with :mod:`adaptlab.results.legacy.migrate`,
which copies a store of the previous on-disk layout into a Delta Lake store (and uses this
module on the way).

Each step turns a table of schema version ``v`` into version ``v + 1``; :func:`upgrade`
chains them. Version 0 is the pre-release schema (kept as a worked example and so that
stores written by it stay readable):

- ``runs.revision`` was renamed ``model_revision``; ``runs`` had no ``schema_version``
  column (upgraded rows get ``0``, the version they were written with);
- ``metrics.metric`` was renamed ``measure``; ``metrics`` had no ``compared_to``,
  ``p_value`` or ``extra`` columns (upgraded rows get nulls);
- ``per_query`` is unchanged.

Version 1 -> 2: ``metrics`` gains ``group`` (the query group of a per-group row); every row of
a version-1 table is a whole-dataset row, so upgraded rows get null.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from adaptlab.errors import StoreError
from adaptlab.results.schema import COLUMNS, SCHEMA_VERSION, arrow_schema

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

__all__ = ["UPGRADES", "conform", "upgrade"]


def _rename(table: pa.Table, old: str, new: str) -> pa.Table:
    if old not in table.column_names or new in table.column_names:
        return table
    return table.rename_columns([new if c == old else c for c in table.column_names])


def _add_const(table: pa.Table, name: str, value: object, type_: pa.DataType) -> pa.Table:
    import pyarrow as pa

    if name in table.column_names:
        return table
    return table.append_column(pa.field(name, type_), pa.array([value] * table.num_rows, type_))


def _v0_to_v1(name: str, table: pa.Table) -> pa.Table:
    import pyarrow as pa

    if name == "runs":
        table = _rename(table, "revision", "model_revision")
        table = _add_const(table, "schema_version", 0, pa.int32())
    elif name == "metrics":
        table = _rename(table, "metric", "measure")
        table = _add_const(table, "compared_to", None, pa.string())
        table = _add_const(table, "p_value", None, pa.float64())
        table = _add_const(table, "extra", None, pa.string())
    return table


def _v1_to_v2(name: str, table: pa.Table) -> pa.Table:
    import pyarrow as pa

    if name == "metrics":
        table = _add_const(table, "group", None, pa.string())
    return table


UPGRADES: dict[int, Callable[[str, pa.Table], pa.Table]] = {0: _v0_to_v1, 1: _v1_to_v2}
"""``UPGRADES[v](table_name, table)`` turns a version-``v`` table into version ``v + 1``."""


def upgrade(name: str, table: pa.Table, version: int, *, source: str) -> pa.Table:
    """Upgrade ``table`` (table ``name``, written at schema ``version``) to the current schema.

    Returns the table with exactly the current columns, in stored order and types.
    ``source`` (the file) is named in errors.
    """
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{source} has results schema version {version}, newer than the version "
            f"{SCHEMA_VERSION} this adaptlab reads; upgrade adaptlab to read it"
        )
    for v in range(version, SCHEMA_VERSION):
        step = UPGRADES.get(v)
        if step is None:
            raise StoreError(f"{source} has results schema version {version}; no upgrade from version {v} exists")
        table = step(name, table)
    return conform(name, table, source=source)


def conform(name: str, table: pa.Table, *, source: str, columns: list[str] | None = None) -> pa.Table:
    """Select the current columns of table ``name`` (or ``columns`` of them) in stored
    order, cast to their types, without schema metadata. Optional nullable columns that an
    older writer did not know are filled with nulls; a missing required column is an error."""
    import pyarrow as pa

    schema = arrow_schema(name).remove_metadata()
    if columns is not None:
        schema = pa.schema([schema.field(c) for c in columns])
    spec = {c.name: c for c in COLUMNS[name]}
    optional = {n for n, c in spec.items() if c.nullable and not c.required}
    missing = [f.name for f in schema if f.name not in table.column_names and f.name not in optional]
    if missing:
        raise StoreError(
            f"{source}: table {name!r} lacks column(s) {', '.join(missing)} "
            f"(found {', '.join(table.column_names)}); the file is damaged or was not written by adaptlab"
        )
    try:
        cols = [
            table.column(f.name).cast(f.type)
            if f.name in table.column_names  # optional columns added
            else pa.nulls(table.num_rows, f.type)
            for f in schema
        ]  # later read as nulls
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise StoreError(f"{source}: table {name!r} has columns of unexpected types: {e}") from e
    return pa.Table.from_arrays(cols, schema=schema)
