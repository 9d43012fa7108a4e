"""Row filters of the query API: ``column=value`` keeps equal rows, ``column=[a, b]``
(list, tuple, set or frozenset) keeps rows equal to any of them, ``column=None`` is
ignored. ``metrics``' ``group`` column is the exception: without a ``group`` filter only
whole-dataset rows (``group`` null) are read, ``group="question_type=factoid"`` (or a list)
reads those groups' rows and ``group="*"`` (:data:`ANY_GROUP`) every group's. Values are converted to the column's type (strings such as ``"0"`` are parsed
for numeric columns, so CLI filters work); a value that does not convert is an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from adaptlab.errors import StoreError
from adaptlab.results.schema import COLUMNS, arrow_type, column_names

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

__all__ = ["ANY_GROUP", "Filter", "apply_filters", "check_columns", "group_rows", "parse_filters"]

ANY_GROUP = "*"
"""The ``group`` filter value that keeps the rows of every query group (not the whole-dataset rows)."""


@dataclass(frozen=True)
class Filter:
    """Keep rows whose ``column`` is one of ``values`` (typed Arrow array)."""

    column: str
    values: pa.Array

    def python_values(self) -> set[Any]:
        return set(self.values.to_pylist())


def _filterable(table: str) -> list[str]:
    return [c.name for c in COLUMNS[table] if not c.kind.startswith("list")]


def parse_filters(table: str, filters: Mapping[str, Any]) -> list[Filter]:
    """Validated, typed filters for ``table``; raises StoreError naming a bad column or value."""
    import pyarrow as pa

    kinds = {c.name: c.kind for c in COLUMNS[table]}
    out: list[Filter] = []
    for name, value in filters.items():
        if name not in kinds:
            raise StoreError(
                f"{table}: cannot filter on unknown column {name!r}; valid columns: {', '.join(_filterable(table))}"
            )
        if kinds[name].startswith("list"):
            raise StoreError(
                f"{table}: cannot filter on list column {name!r}; filterable columns: {', '.join(_filterable(table))}"
            )
        if value is None:
            continue
        values = list(value) if isinstance(value, (list, tuple, set, frozenset)) else [value]
        if name == "measure":
            from adaptlab.results.validate import canonical_measure

            values = [canonical_measure(v) if isinstance(v, str) else v for v in values]
        type_ = arrow_type(kinds[name])
        try:
            arr = pa.array(values, type_)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
            try:  # "0" for an int column, "0.5" for a float column (CLI filters)
                arr = pa.array([str(v) for v in values], pa.string()).cast(type_)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
                raise StoreError(
                    f"{table}: filter {name}={value!r} does not match the column type {kinds[name]}"
                ) from e
        out.append(Filter(name, arr))
    return out


def check_columns(table: str, columns: Any) -> list[str] | None:
    """Validated column projection (None = all columns)."""
    if columns is None:
        return None
    if isinstance(columns, str):
        columns = [columns]
    valid = column_names(table)
    cols = list(columns)
    bad = [c for c in cols if c not in valid]
    if bad:
        raise StoreError(f"{table}: unknown column(s) {', '.join(map(repr, bad))}; valid columns: {', '.join(valid)}")
    return cols


def apply_filters(table: pa.Table, filters: list[Filter]) -> pa.Table:
    """Rows of ``table`` that pass every filter."""
    import pyarrow.compute as pc

    if not filters or not table.num_rows:
        return table
    mask = None
    for f in filters:
        m = pc.is_in(table.column(f.column), value_set=f.values)
        mask = m if mask is None else pc.and_(mask, m)
    return table.filter(mask)


def group_rows(table: pa.Table, group: Any) -> pa.Table:
    """The rows of ``table`` (with a ``group`` column) that a ``group`` filter keeps: the
    whole-dataset rows (``group`` null) when ``group`` is None, the rows of any group for
    :data:`ANY_GROUP`, else the rows whose ``group`` is ``group`` (or one of a list of them)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not table.num_rows:
        return table
    column = table.column("group")
    if group is None:
        return table.filter(pc.is_null(column))
    values = [str(v) for v in group] if isinstance(group, (list, tuple, set, frozenset)) else [str(group)]
    if ANY_GROUP in values:
        return table.filter(pc.is_valid(column))
    return table.filter(pc.is_in(column, value_set=pa.array(values, pa.string())))
