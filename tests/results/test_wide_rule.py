"""One pivot rule for the wide table: the notebook frame (results.frames.wide_frame) and the
paper table (analysis.tables.wide_table) lay out the same rows the same way (issue 21)."""

from __future__ import annotations

import math

from adaptlab.analysis.tables import wide_table
from adaptlab.results.frames import score_grid, wide_frame


def _row(ds: str, system: str, measure: str, value: float, **kw) -> dict:
    return {
        "dataset": ds,
        "system": system,
        "measure": measure,
        "value": value,
        "ci_low": value - 0.1,
        "ci_high": value + 0.1,
        "compared_to": None,
        **kw,
    }


# interleaved datasets, a measure first named by a later system, a repeated measure, a
# comparison row (NaN compared_to counts as a score row, as the store's readers give it)
ROWS = [
    _row("toy", "a", "mrr", 0.5),
    _row("web", "a", "ndcg@10", 0.6),
    _row("toy", "a", "recall@100", 0.7),
    _row("toy", "b", "mrr", 0.4, compared_to="a", p_value=0.01),
    _row("toy", "b", "mrr", 0.45, compared_to=float("nan")),
    _row("web", "b", "map", 0.3),
    _row("web", "b", "map", 0.31),
]


def test_score_grid_orders_rows_and_columns_and_leaves_out_repeats():
    grid = score_grid(ROWS, measures=["recall@100"])
    assert list(grid.cells) == [("toy", "a"), ("toy", "b"), ("web", "a"), ("web", "b")]  # grouped by dataset
    assert grid.measures == ("recall@100", "mrr", "ndcg@10")  # asked first, then as the rows name them
    assert grid.left_out == {"map": "b on web"} and grid.notes[0].startswith("left out map: several rows for b on web")
    assert grid.cells[("toy", "b")]["mrr"]["value"] == 0.45  # the comparison row is not a score


def test_the_frame_and_the_paper_table_agree_cell_by_cell():
    frame = wide_frame(ROWS)
    table = wide_table(ROWS)
    assert list(frame.index) == [(r.dataset, r.system) for r in table.rows]
    assert list(dict.fromkeys(frame.columns.get_level_values("measure"))) == list(table.measures)
    assert frame.attrs["notes"] == list(table.notes)
    for r in table.rows:
        for m in table.measures:
            cell = r.cells.get(m)
            got = list(frame.loc[(r.dataset, r.system), m])
            if cell is None:
                assert all(math.isnan(x) for x in got)
            else:
                assert got == [cell.value, cell.ci_low, cell.ci_high]
