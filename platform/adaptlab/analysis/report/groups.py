"""Per-group results read from stored rows (``metrics.group`` = ``column=value``): the report's
per-group section and figure, and the tables ``adaptlab compare --by COLUMN`` prints.

Each group's values and CIs are computed on that group's queries alone; its paired p-values
are adjusted within each measure across the groups of the column (the stored ``p_adjusted`` and
``family_size``, :mod:`adaptlab.evaluation.groups`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from adaptlab.analysis import plots
from adaptlab.analysis.present import CellValue, format_interval, format_number, format_p, render_table
from adaptlab.analysis.report.cells import adjusted_cell, ci_label_of
from adaptlab.analysis.report.document import Page, slug

__all__ = ["group_tables", "groups_section", "render_groups", "rows_of_column", "stored_group_columns"]


def _split(label: Any) -> tuple[str, str]:
    column, _, value = str(label).partition("=")
    return column, value


def stored_group_columns(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The grouping columns of stored per-group rows, in sorted order."""
    return sorted({_split(r["group"])[0] for r in rows if r.get("group")})


def rows_of_column(rows: Sequence[dict[str, Any]], column: str) -> list[dict[str, Any]]:
    """The rows of one grouping column, with ``group_value`` set, sorted by group, measure, system."""
    out = [
        {**r, "group_value": _split(r["group"])[1]} for r in rows if r.get("group") and _split(r["group"])[0] == column
    ]
    return sorted(
        out, key=lambda r: (r["group_value"], str(r["measure"]), str(r["system"]), str(r.get("compared_to") or ""))
    )


def group_tables(
    rows: Sequence[dict[str, Any]],
    column: str,
) -> tuple[tuple[list[str], list[list[CellValue]]], tuple[list[str], list[list[CellValue]]]]:
    """``((header, rows) of the scores, (header, rows) of the paired differences)`` of one
    column's stored rows (see :func:`rows_of_column`)."""
    mine = rows_of_column(rows, column)
    scores = [r for r in mine if not r.get("compared_to")]
    pairs = [r for r in mine if r.get("compared_to")]
    s_head = [column, "queries", "system", "measure", "value", ci_label_of(scores) if scores else "CI"]
    s_rows: list[list[CellValue]] = [
        [
            r["group_value"],
            format_number(r.get("n_queries")),
            r["system"],
            r["measure"],
            format_number(r["value"]),
            format_interval(r.get("ci_low"), r.get("ci_high")),
        ]
        for r in scores
    ]
    p_head = [
        column,
        "pair",
        "measure",
        "difference",
        ci_label_of(pairs) if pairs else "CI",
        "p",
        "p adjusted (across groups)",
    ]
    p_rows: list[list[CellValue]] = [
        [
            r["group_value"],
            f"{r['system']} - {r['compared_to']}",
            r["measure"],
            format_number(r["value"]),
            format_interval(r.get("ci_low"), r.get("ci_high")),
            format_p(r.get("p_value")),
            adjusted_cell(r),
        ]
        for r in pairs
    ]
    return (s_head, s_rows), (p_head, p_rows)


def render_groups(rows: Sequence[dict[str, Any]], column: str, style: str = "text") -> str:
    """The two tables of :func:`group_tables` in ``style`` (text, markdown, latex, html)."""
    (sh, sr), (ph, pr) = group_tables(rows, column)
    out = f"per {column}\n" + render_table(sh, sr, style)
    if pr:
        out += (
            f"\n\npaired differences per {column}\n"
            + render_table(ph, pr, style)
            + (f"\np adjusted: within each measure across the groups of {column} (family size n)")
        )
    return out


def groups_section(page: Page, rows: Sequence[dict[str, Any]]) -> None:
    """One subsection per grouping column of the dataset's stored per-group rows: the scores per
    group, the paired differences per group and their figure (nothing without per-group rows)."""
    for column in stored_group_columns(rows):
        (sh, sr), (ph, pr) = group_tables(rows, column)
        page.doc.h(3, f"Per-group results by {column}")
        page.doc.p(
            f"Each group's values, intervals and paired tests are computed on the queries of that group "
            f"alone; p adjusted is within each measure across the groups of {column} (the family size n)."
        )
        page.doc.table(sh, sr)
        if pr:
            page.doc.table(ph, pr)
            _figure(page, column, [r for r in rows_of_column(rows, column) if r.get("compared_to")])


def _figure(page: Page, column: str, pairs: list[dict[str, Any]]) -> None:
    """The per-group paired differences with their CIs, one row per (group, pair)."""
    shown = [{**r, "system": f"{r['group_value']}: {r['system']}"} for r in pairs]
    label = ci_label_of(pairs)
    fig = plots.plot_paired_differences(
        shown, title=f"Paired differences per {column} on {page.ds} ({label})", ci=label
    )
    page.figure(
        fig,
        f"groups_{slug(column)}",
        f"paired differences per {column} with {label} on {page.ds}",
        f"each group's difference A - B with its {label}; a filled point is significant after the "
        f"adjustment across the groups of {column} (p adjusted < 0.05), a hollow one is not.",
    )
