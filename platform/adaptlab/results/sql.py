"""DuckDB SQL over one snapshot of the results store (:meth:`ResultsStore.sql`).

DuckDB reads the Delta table's files through the pyarrow dataset it is given: no DuckDB
extension is downloaded or loaded, and a query can read nothing but the views defined here
(no file or network access: ``COPY ... TO``, ``read_csv('/etc/passwd')``, ``ATTACH`` fail).
duckdb is optional and loads on first use. A query returns a pandas DataFrame, as the store's
other queries do with ``as_frame=True``, every selected column kept; ``as_arrow=True`` returns the
pyarrow Table DuckDB produced instead (no copy to pandas).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from adaptlab.errors import StoreError
from adaptlab.results.schema import COLUMNS

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["VIEWS", "run_sql"]

VIEWS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("runs", ("runs",), "runs"),
    ("metrics", ("scores",), "metrics"),
    ("comparisons", ("comparisons",), "metrics"),
    ("metrics_all", ("scores", "comparisons"), "metrics"),
    ("per_query", ("per_query",), "per_query"),
    ("groups", ("scores", "comparisons"), "metrics"),
    ("scaling", ("scaling",), "scaling"),
)
"""``(view, kinds of rows, logical table)``: the views a query sees. ``metrics``, ``comparisons``
and ``metrics_all`` hold the whole-dataset rows (``group`` null), ``groups`` the per-group rows
(scores and comparisons, ``group`` = ``column=value``), as the store's ``metrics()`` separates them;
``scaling`` the data-scaling fits of scale studies (``store.scaling()``)."""


def run_sql(
    query: str, params: list[Any] | None, dataset: Callable[[], Any], *, as_arrow: bool = False
) -> pd.DataFrame | pa.Table:
    """Run ``query`` over the views of :data:`VIEWS` on ``dataset()`` (the pyarrow dataset of
    every kind of row, opened only once the query is known to be a non-empty string); a pandas
    DataFrame, or with ``as_arrow`` the pyarrow Table."""
    try:
        import duckdb
    except ImportError as e:
        raise StoreError("store.sql() needs duckdb: pip install 'duckdb>=1.1'") from e
    if not isinstance(query, str) or not query.strip():
        raise StoreError("store.sql(): give a SQL query string, e.g. SELECT * FROM metrics")
    ds = dataset()
    con = duckdb.connect(
        config={
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            "enable_external_access": False,
        }
    )
    try:
        con.register("adaptlab_rows", ds)
        _create_views(con, set(ds.schema.names))
        try:
            res = con.sql(query, params=params) if params else con.sql(query)
            table = res.to_arrow_table() if res is not None else pa.table({})
        except (duckdb.Error, OSError) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise StoreError(
                f"SQL error: {first}; the views are runs, metrics (scores), comparisons, "
                "metrics_all, per_query, groups and scaling"
            ) from e
    finally:
        con.close()
    return table if as_arrow else table.to_pandas()


def _create_views(con: Any, present: set[str]) -> None:
    """One view per entry of :data:`VIEWS` over the registered ``adaptlab_rows``; a column
    the store's files do not hold yet (added by a newer schema) reads as NULL."""
    for view, kinds, table in VIEWS:
        cols = ", ".join(f'"{c}"' if c in present else f'NULL AS "{c}"' for c in (col.name for col in COLUMNS[table]))
        ks = ", ".join(f"'{k}'" for k in kinds)
        where = f"kind IN ({ks})"
        if table == "metrics":
            group = '"group" IS NOT NULL' if view == "groups" else '"group" IS NULL'
            where += f" AND {group}" if "group" in present else (" AND FALSE" if view == "groups" else "")
        con.execute(f"CREATE VIEW {view} AS SELECT {cols} FROM adaptlab_rows WHERE {where}")
