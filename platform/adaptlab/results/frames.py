"""pandas DataFrames of the results store, for notebooks.

- :func:`to_frame`: a query result (a pyarrow Table) as a DataFrame with tidy columns: the
  columns that are null on every row (a score row leaves the 10 comparison columns null, a run
  row the metric ones) are dropped unless asked for by name.
- :func:`score_grid`: the one pivot rule of the wide table (rows, column order, measures left
  out), shared by :func:`wide_frame` and :func:`adaptlab.analysis.tables.wide_table`.
- :func:`wide_frame`: the cells of ``adaptlab results --wide`` as numbers (from the same rows,
  :meth:`~adaptlab.results.ResultsStore.wide_rows`): one row per (dataset, system), columns
  ``(measure, "value" | "ci_low" | "ci_high")`` holding floats (the text of the CLI, the report
  and LaTeX comes from :mod:`adaptlab.analysis.present`, which formats these same floats).

pandas loads on first use; importing this module does not import it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    import pyarrow as pa

__all__ = ["WIDE_STATS", "ScoreGrid", "is_score_row", "score_grid", "to_frame", "wide_frame"]

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


def is_score_row(row: Mapping[str, Any]) -> bool:
    """A score row (``compared_to`` None or NaN), not a paired comparison."""
    other = row.get("compared_to")
    return other is None or (isinstance(other, float) and math.isnan(other))


@dataclass(frozen=True)
class ScoreGrid:
    """Score rows pivoted by the one rule of the wide table (``adaptlab results --wide``, the paper
    table, :func:`wide_frame`): ``cells`` maps ``(dataset, system)`` to ``{measure: row}`` in
    first-appearance order grouped by dataset; ``measures`` the columns in order; ``left_out``
    each measure with several rows for one system and dataset, with an example (``"b on toy"``)."""

    cells: dict[tuple[str, str], dict[str, Mapping[str, Any]]]
    measures: tuple[str, ...]
    left_out: dict[str, str]

    @property
    def notes(self) -> list[str]:
        """One line per left-out measure, saying why and what to do."""
        return [
            f"left out {m}: several rows for {where} (keep one run per system and dataset, e.g. the latest, "
            "or filter the rows)"
            for m, where in self.left_out.items()
        ]


def score_grid(rows: Iterable[Mapping[str, Any]], measures: Sequence[str] | None = None) -> ScoreGrid:
    """The score rows among ``rows`` (comparisons are skipped) as a :class:`ScoreGrid`: the
    columns are ``measures`` (those present) first, then the others in the order the rows first
    name them; a measure with several rows for one system and dataset is left out."""
    grid: dict[tuple[str, str], dict[str, Mapping[str, Any]]] = {}
    several: dict[str, str] = {}
    present: dict[str, None] = {}
    for r in rows:
        if not is_score_row(r):
            continue
        key, m = (str(r["dataset"]), str(r["system"])), str(r["measure"])
        per = grid.setdefault(key, {})
        if m in per:
            several.setdefault(m, f"{key[1]} on {key[0]}")
        per.setdefault(m, r)
        present[m] = None
    first = [m for m in (measures or ()) if m in present]
    order = tuple(m for m in dict.fromkeys(first + list(present)) if m not in several)
    datasets = {ds: i for i, ds in enumerate(dict.fromkeys(k[0] for k in grid))}
    cells = dict(sorted(grid.items(), key=lambda kv: datasets[kv[0][0]]))  # stable: systems keep their order
    return ScoreGrid(cells, order, several)


def wide_frame(rows: Iterable[Mapping[str, Any]], measures: Sequence[str] | None = None) -> pd.DataFrame:
    """The score rows among ``rows`` pivoted as floats by :func:`score_grid` (the rule of
    ``adaptlab results --wide``): one row per (dataset, system), index ``(dataset, system)``;
    columns a MultiIndex ``(measure, stat)`` with ``stat`` in :data:`WIDE_STATS` (NaN where not
    stored); a left-out measure is named in ``frame.attrs["notes"]``."""
    import pandas as pd

    grid = score_grid(rows, measures)
    data = [
        [_float(per[m].get(s)) if m in per else float("nan") for m in grid.measures for s in WIDE_STATS]
        for per in grid.cells.values()
    ]
    index = pd.MultiIndex.from_tuples(list(grid.cells), names=["dataset", "system"])
    columns = pd.MultiIndex.from_product([list(grid.measures), list(WIDE_STATS)], names=["measure", "stat"])
    frame = pd.DataFrame(data, index=index, columns=columns, dtype="float64")
    frame.attrs["notes"] = grid.notes
    return frame


def _float(x: Any) -> float:
    return float("nan") if x is None else float(x)
