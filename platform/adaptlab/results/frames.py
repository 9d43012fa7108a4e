"""pandas DataFrames of the results store, for notebooks.

- :func:`to_frame`: a query result (a pyarrow Table) as a DataFrame with tidy columns: the
  columns that are null on every row (a score row leaves the 10 comparison columns null, a run
  row the metric ones) are dropped unless asked for by name.
- :func:`wide_frame`: the cells of ``adaptlab results --wide`` as numbers (from the same rows,
  :meth:`~adaptlab.results.ResultsStore.wide_rows`): one row per (dataset, system), columns
  ``(measure, "value" | "ci_low" | "ci_high")`` holding floats (the text of the CLI, the report
  and LaTeX comes from :mod:`adaptlab.analysis.present`, which formats these same floats).

pandas loads on first use; importing this module does not import it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    import pyarrow as pa

__all__ = ["WIDE_STATS", "to_frame", "wide_frame"]

WIDE_STATS: tuple[str, ...] = ("value", "ci_low", "ci_high")
"""The second level of :func:`wide_frame`'s columns, per measure."""


def to_frame(table: pa.Table, *, keep: list[str] | None = None) -> pd.DataFrame:
    """``table`` as a DataFrame without its all-null columns (``keep``: columns kept whatever
    their values, e.g. the ones a caller named). An empty table keeps every column, so the
    frame still says what a row would hold."""
    frame = table.to_pandas()
    if not table.num_rows:
        return frame
    wanted = set(keep or ())
    null = [c for c in table.column_names if c not in wanted and table.column(c).null_count == table.num_rows]
    return frame.drop(columns=null)


def wide_frame(rows: Iterable[Mapping[str, Any]], measures: Sequence[str] | None = None) -> pd.DataFrame:
    """The score rows among ``rows`` (those without ``compared_to``) pivoted as floats, with the
    rules of ``adaptlab results --wide`` (:func:`adaptlab.analysis.tables.wide_table`): one row
    per (dataset, system) in first-appearance order grouped by dataset, index ``(dataset,
    system)``; columns a MultiIndex ``(measure, stat)`` with ``stat`` in :data:`WIDE_STATS`
    (NaN where not stored), ``measures`` first, then the others as they appear; a measure with
    several rows for one system and dataset is left out, with a note in ``frame.attrs["notes"]``."""
    import pandas as pd

    grid: dict[tuple[str, str], dict[str, Mapping[str, Any]]] = {}
    several: dict[str, str] = {}
    for r in rows:
        if r.get("compared_to") is not None:
            continue
        key, m = (str(r["dataset"]), str(r["system"])), str(r["measure"])
        per = grid.setdefault(key, {})
        if m in per:
            several.setdefault(m, f"{key[1]} on {key[0]}")
        per.setdefault(m, r)
    present = list(dict.fromkeys(m for per in grid.values() for m in per))
    first = [m for m in (measures or ()) if m in present]
    order = [m for m in dict.fromkeys(first + present) if m not in several]
    datasets = {ds: i for i, ds in enumerate(dict.fromkeys(k[0] for k in grid))}
    keys = sorted(grid, key=lambda k: datasets[k[0]])  # stable: systems keep their order
    data = [[_float(grid[k][m].get(s)) if m in grid[k] else float("nan") for m in order for s in WIDE_STATS]
            for k in keys]
    frame = pd.DataFrame(data, index=pd.MultiIndex.from_tuples(keys, names=["dataset", "system"]),
                         columns=pd.MultiIndex.from_product([order, list(WIDE_STATS)], names=["measure", "stat"]),
                         dtype="float64")
    frame.attrs["notes"] = [f"left out {m}: several rows for {where} (keep one run per system and dataset)"
                            for m, where in several.items()]
    return frame


def _float(x: Any) -> float:
    return float("nan") if x is None else float(x)
