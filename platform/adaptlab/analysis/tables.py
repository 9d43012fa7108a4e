"""Paper tables of scores: one row per (dataset, system), one column per measure.

Pure functions over the results store's ``metrics`` rows, as a list of dicts (what
``store.metrics(kind="all").to_pylist()`` gives): score rows have no ``compared_to``; paired
comparisons (``system`` A, ``compared_to`` B, value A - B) only decide the significance mark.
Nothing here reads a store.

- :func:`wide_table` pivots the rows into a :class:`WideTable`;
- :func:`to_text`, :func:`to_records`, :func:`to_csv` and :func:`to_latex` render it;
  :func:`format_wide` does both in one call.

Cells read ``0.727 [0.674, 0.780]``: the point estimate and its confidence interval, with
``digits`` decimals (default :data:`~adaptlab.analysis.present.DIGITS`), written by
:mod:`adaptlab.analysis.present`, the renderer the CLI and the report share. A cell is marked
(``†``; LaTeX ``\\textsuperscript{\\dag}``) when the paired comparison of the system with its
baseline has an adjusted p-value (``p_adjusted``, else ``p_value``) below ``alpha``. The
baseline is the one given, or else read from the comparisons: when, in a dataset, every compared
system has exactly one ``compared_to`` and no baseline is itself compared with another, each
system's ``compared_to`` is its baseline; comparisons of every pair have no such baseline and
mark nothing. In LaTeX the highest point estimate of each column
within a dataset is bold (values equal at the shown precision are all bold); bold says nothing
about significance, and the caption says so.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from adaptlab.analysis.present import (
    ALPHA,
    DAGGER,
    DIGITS,
    LATEX_DAGGER,
    RULE,
    Estimate,
    check_digits,
    format_number,
    is_missing,
    latex_escape,
    render_cell,
    render_table,
    significance_mark,
    terminal_escape,
)
from adaptlab.errors import ConfigError
from adaptlab.results.frames import is_score_row, score_grid

__all__ = [
    "ALPHA",
    "DAGGER",
    "FORMATS",
    "LATEX_DAGGER",
    "Cell",
    "WideRow",
    "WideTable",
    "caption",
    "format_cell",
    "format_number",
    "format_wide",
    "latex_escape",
    "mark_note",
    "render",
    "to_csv",
    "to_latex",
    "to_records",
    "to_text",
    "wide_table",
]

FORMATS: tuple[str, ...] = ("table", "csv", "json", "latex")

_METHODS = {
    "percentile": "percentile bootstrap",
    "bca": "BCa bootstrap",
    "basic": "basic bootstrap",
    "wilson": "Wilson score interval",
    "jeffreys": "Jeffreys interval",
}
_BOOTSTRAP_METHODS = {"percentile", "bca", "basic", None}
_ADJUSTMENTS = {"holm": "Holm", "bh": "Benjamini-Hochberg"}


@dataclass(frozen=True)
class Cell:
    """One measure of one system: the point estimate, the CI ends (``None`` when not stored) and
    the p-value of the paired comparison with the system's baseline (``None`` without one)."""

    value: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    p: float | None = None

    def marked(self, alpha: float = ALPHA) -> bool:
        """Whether the comparison with the baseline has p < ``alpha``."""
        return bool(significance_mark(self.p, alpha))


@dataclass(frozen=True)
class WideRow:
    """One (dataset, system) row: its baseline (``None`` without one) and a cell per measure it has."""

    dataset: str
    system: str
    baseline: str | None
    cells: Mapping[str, Cell]


@dataclass(frozen=True)
class WideTable:
    """The pivoted scores. ``scores`` and ``comparisons`` are the rows behind the cells and the
    marks (they feed the caption); ``notes`` say what was left out and why."""

    measures: tuple[str, ...]
    rows: tuple[WideRow, ...]
    scores: tuple[Mapping[str, Any], ...]
    comparisons: tuple[Mapping[str, Any], ...] = ()
    alpha: float = ALPHA
    notes: tuple[str, ...] = field(default=())

    def datasets(self) -> list[str]:
        """The datasets in table order."""
        return list(dict.fromkeys(r.dataset for r in self.rows))


def _num(x: Any) -> float | None:
    return None if x is None else float(x)


# -- pivoting ---------------------------------------------------------------------------------------
def _auto_baselines(comparisons: Sequence[Mapping[str, Any]]) -> tuple[dict[tuple[str, str], str], list[str]]:
    """Each compared system's baseline per dataset, when the comparisons have that design; and the
    datasets whose comparisons do not (every pair, or a system against several others)."""
    partners: dict[str, dict[str, set[str]]] = {}
    for r in comparisons:
        partners.setdefault(str(r["dataset"]), {}).setdefault(str(r["system"]), set()).add(str(r["compared_to"]))
    found: dict[tuple[str, str], str] = {}
    unclear: list[str] = []
    for ds, per in partners.items():
        targets = set().union(*per.values())
        if targets & set(per) or any(len(p) != 1 for p in per.values()):
            unclear.append(ds)
            continue
        found.update({(ds, s): next(iter(p)) for s, p in per.items()})
    return found, unclear


def _named_baselines(
    grid: Mapping[tuple[str, str], Any], pairs: Mapping[tuple[str, str, str, str], Any], baseline: str | Sequence[str]
) -> dict[tuple[str, str], str]:
    """Each (dataset, system)'s baseline among the named ones: the first with which the store holds
    a paired comparison of that system (either side), e.g. ``["colbert-base", "minilm-base"]``
    marks ColBERT variants against ``colbert-base`` and the others against ``minilm-base``. A named
    baseline is marked only against names after it (``colbert-base`` against ``minilm-base``, not
    the reverse). With one name, every other system against it."""
    names = [baseline] if isinstance(baseline, str) else list(baseline)
    if len(names) == 1:
        return {k: names[0] for k in grid if k[1] != names[0]}
    compared = {(ds, a, b) for ds, a, b, _ in pairs} | {(ds, b, a) for ds, a, b, _ in pairs}
    out: dict[tuple[str, str], str] = {}
    for ds, system in grid:
        later = names[names.index(system) + 1 :] if system in names else names  # a named base: only later ones
        first = next((b for b in later if (ds, system, b) in compared), None)
        if first is not None:
            out[(ds, system)] = first
    return out


def _p(row: Mapping[str, Any]) -> float | None:
    """The comparison's adjusted p-value, else its raw one."""
    for key in ("p_adjusted", "p_value"):
        if not is_missing(row.get(key)):
            return float(row[key])
    return None


def wide_table(
    rows: Iterable[Mapping[str, Any]],
    *,
    measures: Sequence[str] | None = None,
    baseline: str | Sequence[str] | None = None,
    alpha: float = ALPHA,
) -> WideTable:
    """Pivot metric rows into one row per (dataset, system) and one column per measure.

    ``measures`` orders the columns (others follow in first-appearance order); ``baseline`` names
    the system every other one is marked against, or several (each system against the first of
    them it was compared with: per-family baselines); default: each system's ``compared_to`` when
    the comparisons have one baseline per system. A measure with several rows for one system and
    dataset (several runs, or per-space analysis rows) is left out, with a note. Raises
    :class:`~adaptlab.errors.ConfigError` when no score row is left."""
    rows = list(rows)
    scores = [r for r in rows if is_score_row(r)]
    comparisons = [r for r in rows if not is_score_row(r)]
    pivot = score_grid(scores, measures)  # the one rule, shared with results' wide_frame
    grid, order, notes = pivot.cells, pivot.measures, pivot.notes
    if not order:
        raise ConfigError(
            "no score rows to tabulate" + (f" ({notes[0]})" if notes else ": the store or the filters select none")
        )
    pairs: dict[tuple[str, str, str, str], Mapping[str, Any]] = {}
    for r in comparisons:
        pairs.setdefault((str(r["dataset"]), str(r["system"]), str(r["compared_to"]), str(r["measure"])), r)
    if baseline is None:
        bases, unclear = _auto_baselines(comparisons)
        notes += [f"no marks on {ds}: its comparisons have no single baseline per system (name one)" for ds in unclear]
    else:
        bases = _named_baselines(grid, pairs, baseline)
    out, used = [], []
    for (ds, system), per in grid.items():
        base = bases.get((ds, system))
        cells = {}
        for m in order:
            if m not in per:
                continue
            cmp = (pairs.get((ds, system, base, m)) or pairs.get((ds, base, system, m))) if base else None
            used += [cmp] if cmp is not None else []
            r = per[m]
            cells[m] = Cell(
                _num(r.get("value")), _num(r.get("ci_low")), _num(r.get("ci_high")), None if cmp is None else _p(cmp)
            )
        out.append(WideRow(ds, system, base if any(c.p is not None for c in cells.values()) else None, cells))
    if baseline is not None and not used and comparisons:
        names = [baseline] if isinstance(baseline, str) else list(baseline)
        notes.append(f"no marks: no paired comparison with {' or '.join(names)} among the rows")
    kept = [r for r in scores if str(r["measure"]) in order]
    return WideTable(order, tuple(out), tuple(kept), tuple(used), alpha, tuple(notes))


# -- cells --------------------------------------------------------------------------------------
def format_cell(
    cell: Cell | None, digits: int = DIGITS, *, alpha: float = ALPHA, style: str = "text", bold: bool = False
) -> str:
    """``"0.727 [0.674, 0.780]"`` (just the value when the CI is not stored; ``"-"`` for no cell),
    with the style's mark appended when the comparison with the baseline has p < ``alpha``;
    ``bold`` (LaTeX) wraps the point estimate. See :func:`adaptlab.analysis.present.render_cell`."""
    return render_cell(_estimate(cell, alpha, bold), style, digits)


def _best(table: WideTable, dataset: str, measure: str, digits: int) -> set[str]:
    """Systems of ``dataset`` with the highest point estimate of ``measure`` at the shown precision."""
    shown = {
        r.system: float(format_number(r.cells[measure].value, digits))
        for r in table.rows
        if r.dataset == dataset and measure in r.cells and not is_missing(r.cells[measure].value)
    }
    top = max(shown.values(), default=None)
    return {s for s, v in shown.items() if v == top}


# -- captions and notes -----------------------------------------------------------------------------
def _pct(x: float) -> str:
    pct = 100 * float(x)
    return f"{pct:.0f}%" if abs(pct - round(pct)) < 1e-9 else f"{pct:g}%"


def _join(items: Iterable[Any]) -> str:
    return ", ".join(str(i) for i in items)


def _span(values: set[int]) -> str:
    return str(min(values)) if len(values) == 1 else f"{min(values)}-{max(values)}"


def _interval_text(scores: Sequence[Mapping[str, Any]]) -> str:
    """What the brackets hold: level, method (per measure when they differ) and bootstrap size."""
    with_ci = [r for r in scores if not (is_missing(r.get("ci_low")) or is_missing(r.get("ci_high")))]
    if not with_ci:
        return "Point estimates (no confidence intervals stored)."
    levels = sorted({float(r["confidence"]) for r in with_ci if not is_missing(r.get("confidence"))})
    level = (
        f"{_pct(levels[0])} confidence intervals"
        if len(levels) == 1
        else f"confidence intervals (levels {_join(_pct(v) for v in levels)})"
        if levels
        else "confidence intervals (level not stored)"
    )
    by_method: dict[str | None, list[str]] = {}
    for r in with_ci:
        names = by_method.setdefault(r.get("interval_method") or None, [])
        if str(r["measure"]) not in names:
            names.append(str(r["measure"]))
    methods = [_METHODS.get(m, m) if m else "method not stored" for m in by_method]
    how = (
        methods[0]
        if len(methods) == 1
        else "; ".join(f"{t} for {_join(ms)}" for t, ms in zip(methods, by_method.values()))
    )
    boot = [r for r in with_ci if r.get("interval_method") in _BOOTSTRAP_METHODS]
    sizes = {int(r["n_resamples"]) for r in boot if not is_missing(r.get("n_resamples"))}
    if sizes:
        how += f"; {_span(sizes)} bootstrap resamples"
        drawn = {
            int(r["sample_size"])
            for r in boot
            if not is_missing(r.get("sample_size"))
            and not is_missing(r.get("n_queries"))
            and int(r["sample_size"]) != int(r["n_queries"])
        }
        how += (
            (
                f" of {_span(drawn)} queries each, so each CI is that of a {_span(drawn)}-query mean, wider than "
                "the CI of the mean over all queries"
            )
            if drawn
            else ""
        )
    return f"Point estimates with {level} in brackets ({how})."


def _queries_text(table: WideTable) -> str:
    counts: dict[str, set[int]] = {}
    for r in table.scores:
        if not is_missing(r.get("n_queries")):
            counts.setdefault(str(r["dataset"]), set()).add(int(r["n_queries"]))
    if not counts:
        return ""
    return "Queries: " + "; ".join(f"{ds} {_span(counts[ds])}" for ds in table.datasets() if ds in counts) + "."


def caption(table: WideTable, *, bold: bool = False) -> str:
    """The caption as plain text: what the cells hold, the number of queries and, with ``bold``,
    what bold means (the LaTeX table)."""
    parts = [_interval_text(table.scores), _queries_text(table)]
    if bold:
        parts.append(
            "Bold: the highest point estimate in each column within a dataset (equal values at the "
            "shown precision all bold); bold is not a claim of significance."
        )
    return " ".join(p for p in parts if p)


def mark_note(table: WideTable) -> str:
    """What the mark means (without the mark itself), or ``""`` when no comparison was used."""
    used = table.comparisons
    if not used:
        return ""
    groups: dict[str, list[str]] = {}
    for r in table.rows:
        if r.baseline is not None:
            groups.setdefault(r.baseline, [])
            groups[r.baseline] += [r.system] if r.system not in groups[r.baseline] else []
    if not groups:
        return ""
    against = "; ".join(f"{_join(systems)} against {base}" for base, systems in groups.items())
    adjusted = [r for r in used if not is_missing(r.get("p_adjusted"))]
    names = sorted({str(r.get("adjustment") or "an unnamed adjustment") for r in adjusted})
    names = [_ADJUSTMENTS.get(n, n) for n in names]
    sizes = {int(r["family_size"]) for r in adjusted if not is_missing(r.get("family_size"))}
    if adjusted and names != ["none"]:
        how = f"p-values adjusted with {' or '.join(names)} within each family of one dataset and one measure" + (
            f" ({_span(sizes)} {'test' if sizes == {1} else 'tests'} per family)" if sizes else ""
        )
        how += "; unadjusted where no adjusted p-value is stored" if len(adjusted) < len(used) else ""
    else:
        how = "p-values not adjusted for multiple comparisons"
    return f"p < {table.alpha:g} in the paired test of the system against its baseline ({against}); {how}."


# -- renderers ----------------------------------------------------------------------------------
def _estimate(cell: Cell | None, alpha: float, bold: bool = False) -> Estimate | str:
    return "-" if cell is None else Estimate(cell.value, cell.ci_low, cell.ci_high, cell.marked(alpha), bold)


def to_text(table: WideTable, digits: int = DIGITS) -> str:
    """The table as aligned text: ``dataset``, ``system`` and a column per measure, followed by
    the caption, what the mark means and the notes; every name escaped for the terminal."""
    digits = check_digits(digits)
    body = [
        [r.dataset, r.system, *(_estimate(r.cells.get(m), table.alpha) for m in table.measures)] for r in table.rows
    ]
    lines = [render_table(["dataset", "system", *table.measures], body, "text", digits=digits), caption(table)]
    note = mark_note(table)
    lines += [f"{DAGGER} {note}"] if note else []
    lines += [f"note: {n}" for n in table.notes]
    return "\n".join([lines[0], *(terminal_escape(line) for line in lines[1:])])


def to_records(table: WideTable) -> list[dict[str, Any]]:
    """One dict per row: ``dataset``, ``system`` and, per measure ``m``, ``m``, ``m_ci_low`` and
    ``m_ci_high`` (``None`` where not stored); full precision."""
    out = []
    for r in table.rows:
        rec: dict[str, Any] = {"dataset": r.dataset, "system": r.system}
        for m in table.measures:
            c = r.cells.get(m)
            rec[m], rec[f"{m}_ci_low"], rec[f"{m}_ci_high"] = (
                (None, None, None) if c is None else (c.value, c.ci_low, c.ci_high)
            )
        out.append(rec)
    return out


def to_csv(table: WideTable) -> str:
    """:func:`to_records` as CSV with a header line; empty fields where a value is not stored."""
    buf = io.StringIO()
    names = ["dataset", "system", *(f"{m}{s}" for m in table.measures for s in ("", "_ci_low", "_ci_high"))]
    writer = csv.DictWriter(buf, fieldnames=names, lineterminator="\n")
    writer.writeheader()
    writer.writerows(to_records(table))
    return buf.getvalue()


def _latex_rows(table: WideTable, digits: int) -> list[list[Estimate | str] | str]:
    """The body of the tabular: one block per dataset, its name on the block's first row."""
    rows: list[list[Estimate | str] | str] = []
    for i, ds in enumerate(table.datasets()):
        rows += [RULE] if i else []
        best = {m: _best(table, ds, m, digits) for m in table.measures}
        for j, r in enumerate(x for x in table.rows if x.dataset == ds):
            cells = [
                _estimate(r.cells[m], table.alpha, r.system in best[m]) if m in r.cells else "--"
                for m in table.measures
            ]
            rows.append([ds if j == 0 else "", r.system, *cells])
    return rows


def to_latex(table: WideTable, digits: int = DIGITS, *, label: str | None = "tab:results") -> str:
    """A complete ``table`` environment (booktabs rules): caption, one ``tabular`` with a block
    per dataset and a column per measure, the best value of each column in bold, and a footnote
    line for the mark. Every name is escaped. Needs ``\\usepackage{booktabs}``."""
    digits = check_digits(digits)
    tabular = render_table(
        ["Dataset", "System", *table.measures],
        _latex_rows(table, digits),
        "latex",
        digits=digits,
        align="ll" + "c" * len(table.measures),
    )
    lines = [
        "% adaptlab paper table; needs \\usepackage{booktabs}",
        *(f"% note: {latex_escape(n)}" for n in table.notes),
        r"\begin{table}[t]",
        r"\centering",
        rf"\caption{{{latex_escape(caption(table, bold=True))}}}",
        *([rf"\label{{{label}}}"] if label else []),
        tabular,
    ]
    note = mark_note(table)
    if note:
        lines += [r"\par\smallskip", rf"{{\footnotesize {LATEX_DAGGER}\,{latex_escape(note)}\par}}"]
    return "\n".join([*lines, r"\end{table}"])


def render(table: WideTable, fmt: str = "table", digits: int = DIGITS, **latex: Any) -> str:
    """``table`` as ``fmt``: ``table`` (aligned text), ``csv``, ``json`` or ``latex``."""
    if fmt == "table":
        return to_text(table, digits)
    if fmt == "csv":
        return to_csv(table).rstrip("\n")
    if fmt == "json":
        return json.dumps(to_records(table), indent=2)
    if fmt == "latex":
        return to_latex(table, digits, **latex)
    raise ConfigError(f"table format {fmt!r}: expected one of {', '.join(FORMATS)}")


def format_wide(
    rows: Iterable[Mapping[str, Any]],
    fmt: str = "table",
    *,
    digits: int = DIGITS,
    measures: Sequence[str] | None = None,
    baseline: str | Sequence[str] | None = None,
    alpha: float = ALPHA,
    **latex: Any,
) -> str:
    """:func:`wide_table` of ``rows`` rendered as ``fmt`` (see :func:`render`)."""
    return render(wide_table(rows, measures=measures, baseline=baseline, alpha=alpha), fmt, digits, **latex)
