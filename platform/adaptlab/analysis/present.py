"""The one presentation layer: how every number is written and how every table is laid out,
for the terminal (``adaptlab results``, ``evaluate``, ``run``), the report (Markdown and HTML) and
the paper table (LaTeX), so one value prints with the same digits everywhere.

Numbers (:func:`format_number`): ``DIGITS`` = 3 decimals by default (what the paper table and
``adaptlab results --wide`` print), ``-0.000`` shown as ``0.000``, ``n/a`` for None and NaN,
integers as integers. An estimate with its interval (:func:`format_estimate`) reads
``0.645 [0.601, 0.688]``; p-values keep their own rule (:func:`format_p`: four significant digits,
a p at its Monte Carlo floor, or an adjusted p set by one, printed as the bound ``<= p``; see
:mod:`adaptlab.stats.pvalues`); a significant comparison adds :data:`DAGGER`.

Tables (:func:`render_table`): one list of header names and rows of cells (text, numbers, or an
:class:`Estimate`) rendered in a style: ``text`` (aligned columns for a terminal), ``markdown``,
``html`` or ``latex`` (a booktabs ``tabular``). Each style escapes what it prints: the terminal
style shows control characters (ESC, NUL, newline, ...) as ``\\x1b``, ``\\x00``, ``\\n`` so a name
stored with an ANSI escape never reaches the terminal raw (:func:`terminal_escape`); Markdown
escapes ``|`` as well, HTML its markup characters, LaTeX its special characters
(:func:`latex_escape`).

Verdicts and names: :func:`verdict_line` states one paired comparison in words, built only from
the numbers of its row (the ones printed below it): which system is ahead, by how much on which measure, the
interval of the difference, the raw p and the adjusted p with the family it was adjusted over::

    minilm-ft-s120 > minilm-base by 0.010 ndcg@10 [0.002, 0.019], p 0.0112 (Holm 0.18: not significant over 21 pairs)

A row whose difference is ``a - b < 0`` is stated the other way round (``b > a``) with the
negated interval, which is exactly the interval of ``b - a`` (the paired intervals are
antisymmetric). :func:`headline_pair` picks the row the verdict states: on the first measure,
the best system against the baseline when every pair shares one, else the two systems with the
highest means. p-values go through the one formatter, :func:`adaptlab.stats.pvalues.format_p_value`
(a p at its Monte Carlo floor prints ``<= p``).

:func:`lookalike_names` and :func:`warn_lookalike_names` (system names that look the same but are
different strings) are :mod:`adaptlab.storage.names`'s, re-exported here.
"""

from __future__ import annotations

import html
import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from adaptlab.analysis._rows import p_bounds
from adaptlab.errors import ConfigError
from adaptlab.stats.pvalues import format_p_value
from adaptlab.storage.names import LookalikeNamesWarning, lookalike_names, warn_lookalike_names

__all__ = [
    "ALPHA",
    "DAGGER",
    "DIGITS",
    "LATEX_DAGGER",
    "RULE",
    "STYLES",
    "CellValue",
    "Estimate",
    "LookalikeNamesWarning",
    "check_digits",
    "format_estimate",
    "format_interval",
    "format_number",
    "format_p",
    "format_percent",
    "format_scientific",
    "format_setting",
    "headline_pair",
    "is_missing",
    "latex_escape",
    "lookalike_names",
    "render_cell",
    "render_table",
    "significance_mark",
    "terminal_escape",
    "terminal_escape_lines",
    "verdict_line",
    "warn_lookalike_names",
]

DIGITS: int = 3
"""Decimals of every number printed by default (CLI, report and LaTeX alike)."""
ALPHA: float = 0.05
"""A comparison is marked significant when its p-value is below this."""
DAGGER: str = "\u2020"
"""The significance mark of text, Markdown and HTML."""
LATEX_DAGGER: str = r"\textsuperscript{\dag}"
"""The significance mark of LaTeX."""
STYLES: tuple[str, ...] = ("text", "markdown", "html", "latex")
"""The table styles :func:`render_table` writes."""
RULE: str = "\x00rule"
"""A row of this one value separates groups: ``\\midrule`` in LaTeX, nothing elsewhere."""

_SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
}


# -- numbers ------------------------------------------------------------------------------------
def is_missing(x: Any) -> bool:
    """None or a float NaN: printed as ``n/a``."""
    return x is None or (isinstance(x, float) and math.isnan(x))


def check_digits(digits: object) -> int:
    """``digits`` if it is an integer in 0..12, else a :class:`~adaptlab.errors.ConfigError`."""
    if isinstance(digits, bool) or not isinstance(digits, int) or not 0 <= digits <= 12:
        raise ConfigError(f"digits must be an integer between 0 and 12, got {digits!r}")
    return digits


def format_number(x: Any, digits: int = DIGITS) -> str:
    """``x`` with ``digits`` decimals (``-0.000`` shown as ``0.000``); integers as they are;
    ``n/a`` for None and NaN; anything else as ``str``.

    >>> format_number(0.64508), format_number(-0.0001), format_number(338), format_number(None)
    ('0.645', '0.000', '338', 'n/a')
    """
    if is_missing(x):
        return "n/a"
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        return str(x)
    if isinstance(x, numbers.Integral):
        return str(int(x))
    text = f"{float(x):.{digits}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def format_scientific(x: Any, digits: int = 2) -> str:
    """``x`` in scientific notation with ``digits`` decimals (``1.50e-03``), for values that span
    orders of magnitude (relative weight changes); ``n/a`` for None and NaN."""
    return "n/a" if is_missing(x) else f"{float(x):.{digits}e}"


def format_setting(x: Any) -> str:
    """A setting as written in a config (``2e-05``, ``0.133``, ``16``): shortest general form;
    ``n/a`` for None and NaN."""
    return "n/a" if is_missing(x) else format(float(x), "g")


def format_percent(x: Any, decimals: int = 1) -> str:
    """A share as a percentage (``0.04`` -> ``4.0%``); ``n/a`` for None and NaN."""
    return "n/a" if is_missing(x) else f"{100 * float(x):.{decimals}f}%"


def format_interval(low: Any, high: Any, digits: int = DIGITS) -> str:
    """``[0.601, 0.688]``; ``n/a`` when either end is missing."""
    if is_missing(low) or is_missing(high):
        return "n/a"
    return f"[{format_number(float(low), digits)}, {format_number(float(high), digits)}]"


def format_estimate(value: Any, low: Any = None, high: Any = None, digits: int = DIGITS) -> str:
    """``0.645 [0.601, 0.688]``, or just the value when the interval is not known."""
    return render_cell(Estimate(value, low, high), "text", digits)


def format_p(p: float | None, n_resamples: int | None = None, *, sides: int = 2, bound: bool = False) -> str:
    """A p-value: four significant digits, ``<= p`` when ``bound`` (a p at its Monte Carlo floor,
    or an adjusted p set by one), ``<= 2/(m+1)`` at a bootstrap floor, ``n/a`` for None (the rule
    of :func:`adaptlab.stats.pvalues.format_p_value`, the one p formatter)."""
    return format_p_value(p, n_resamples, sides=sides, bound=bound)


def significance_mark(p: float | None, alpha: float = ALPHA, mark: str = DAGGER) -> str:
    """``mark`` when ``p < alpha``, else ``""``."""
    return mark if p is not None and not is_missing(p) and p < alpha else ""


# -- escaping -----------------------------------------------------------------------------------
def _escape_char(ch: str) -> str:
    if ch in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def terminal_escape(text: object) -> str:
    """``text`` safe to print on a terminal: every non-printable character (control characters
    such as ESC, NUL, newline and tab; C1 controls; bidirectional overrides; line separators) is
    shown as its escape (``\\x1b``, ``\\x00``, ``\\n``, ``\\t``, ``\\u202e``); printable text,
    spaces and non-ASCII letters are kept."""
    s = str(text)
    if s.isprintable():
        return s
    return "".join(ch if ch.isprintable() or ch == " " else _escape_char(ch) for ch in s)


def terminal_escape_lines(text: str) -> str:
    """Each line of ``text`` through :func:`terminal_escape` (the line breaks kept), for
    multi-line messages built from stored names."""
    return "\n".join(terminal_escape(line) for line in str(text).split("\n"))


def latex_escape(text: object) -> str:
    """``text`` safe in LaTeX text mode: ``\\ & % $ # _ { } ~ ^ < > |`` become commands or
    escapes (``<=``, as in a p-value at its floor, becomes ``$\\leq$``), line breaks become
    spaces, other control characters their visible escape."""
    s = "".join(" " if ch in "\r\n" else ch for ch in str(text))
    return r"$\leq$".join("".join(_LATEX_SPECIAL.get(ch, ch) for ch in part) for part in terminal_escape(s).split("<="))


def _markdown_escape(text: object) -> str:
    return terminal_escape(text).replace("|", "\\|")


def _html_escape(text: object) -> str:
    return html.escape(terminal_escape(text))


# -- cells --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Estimate:
    """A number cell: the point estimate, its interval (``None`` when not known), whether it is
    marked significant and whether it is shown bold (LaTeX only)."""

    value: Any
    ci_low: Any = None
    ci_high: Any = None
    marked: bool = False
    bold: bool = False


CellValue = str | int | float | None | Estimate


@dataclass(frozen=True)
class _Style:
    escape: Callable[[object], str]
    number: Callable[[str], str] = str
    bold: Callable[[str], str] = str
    mark: str = DAGGER


def _latex_number(text: str) -> str:
    return "$-$" + text[1:] if text.startswith("-") else text


_STYLES = {
    "text": _Style(terminal_escape),
    "markdown": _Style(_markdown_escape),
    "html": _Style(_html_escape),
    "latex": _Style(latex_escape, _latex_number, lambda s: rf"\textbf{{{s}}}", LATEX_DAGGER),
}


def _style(style: str) -> _Style:
    if style not in _STYLES:
        raise ConfigError(f"table style {style!r}: expected one of {', '.join(STYLES)}")
    return _STYLES[style]


def render_cell(cell: CellValue, style: str = "text", digits: int = DIGITS) -> str:
    """One cell as ``style`` prints it: text escaped, numbers with ``digits`` decimals, an
    :class:`Estimate` as ``value [low, high]`` plus the mark; ``""`` for None."""
    st = _style(style)
    if cell is None:
        return ""
    if isinstance(cell, Estimate):
        value = st.number(format_number(cell.value, digits))
        text = st.bold(value) if cell.bold else value
        if not (is_missing(cell.ci_low) or is_missing(cell.ci_high)):
            low, high = (st.number(format_number(float(v), digits)) for v in (cell.ci_low, cell.ci_high))
            text += f" [{low}, {high}]"
        return text + (st.mark if cell.marked else "")
    if isinstance(cell, str):
        return st.escape(cell)
    if isinstance(cell, numbers.Real) and not isinstance(cell, bool):
        return st.number(format_number(cell, digits))
    return st.escape(cell)


# -- tables -------------------------------------------------------------------------------------
def _text_table(header: list[str], body: list[list[str]]) -> str:
    """Left-aligned columns under a dashed rule."""
    widths = [max([len(h), *(len(r[i]) for r in body)]) for i, h in enumerate(header)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths]), *(line(r) for r in body)])


def _markdown_table(header: list[str], body: list[list[str]]) -> str:
    return "\n".join(
        [
            "| " + " | ".join(header) + " |",
            "|" + "|".join("---" for _ in header) + "|",
            *("| " + " | ".join(r) + " |" for r in body),
        ]
    )


def _html_table(header: list[str], body: list[list[str]]) -> str:
    head = "".join(f"<th>{c}</th>" for c in header)
    rows = ["<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in body]
    return "\n".join([f"<table><thead><tr>{head}</tr></thead><tbody>", *rows, "</tbody></table>"])


def _latex_table(header: list[str], body: list[list[str] | None], align: str) -> str:
    lines = [rf"\begin{{tabular}}{{{align}}}", r"\toprule", " & ".join(header) + r" \\", r"\midrule"]
    lines += [r"\midrule" if r is None else " & ".join(r) + r" \\" for r in body]
    return "\n".join([*lines, r"\bottomrule", r"\end{tabular}"])


def render_table(
    header: Sequence[str],
    rows: Sequence[Sequence[CellValue] | str],
    style: str = "text",
    *,
    digits: int = DIGITS,
    align: str | None = None,
) -> str:
    """The table in ``style`` (one of :data:`STYLES`): every cell through :func:`render_cell`,
    so all styles print the same digits. A row equal to :data:`RULE` separates groups (LaTeX
    ``\\midrule``; dropped elsewhere). ``align`` is the LaTeX column spec (default all ``l``)."""
    check_digits(digits)
    st = _style(style)
    head = [st.escape(h) for h in header]
    body: list[list[str] | None] = [
        None if isinstance(r, str) and r == RULE else [render_cell(c, style, digits) for c in r] for r in rows
    ]
    if style == "latex":
        return _latex_table(head, body, align or "l" * len(head))
    kept = [r for r in body if r is not None]
    return {"text": _text_table, "markdown": _markdown_table, "html": _html_table}[style](head, kept)


# -- the verdict line -----------------------------------------------------------------------
_ADJ = {"holm": "Holm", "bh": "BH", "none": ""}


def _get(row: Mapping[str, Any], *keys: str) -> Any:
    for k in keys:
        if k in row and row[k] is not None:
            return row[k]
    return None


def verdict_line(row: Mapping[str, Any], *, alpha: float = 0.05) -> str:
    """The verdict of one paired row: ``a``/``system``, ``b``/``compared_to``, ``measure``,
    ``diff``/``value`` (``a - b``), ``ci_low``, ``ci_high``, ``p_value`` and optionally
    ``p_adjusted``, ``adjustment``, ``family_size``, ``p_bound``, ``p_adjusted_bound`` (a
    :class:`~adaptlab.evaluation.summary.PairSummary` as a dict, a :func:`adaptlab.compare`
    pairs row or a stored ``metrics`` row). Significant means adjusted p (raw p without one) below
    ``alpha``.

    >>> verdict_line(
    ...     {
    ...         "a": "ft",
    ...         "b": "base",
    ...         "measure": "ndcg@10",
    ...         "diff": 0.0104,
    ...         "ci_low": 0.0021,
    ...         "ci_high": 0.0187,
    ...         "p_value": 0.0112,
    ...         "p_adjusted": 0.18,
    ...         "adjustment": "holm",
    ...         "family_size": 21,
    ...     }
    ... )
    'ft > base by 0.010 ndcg@10 [0.002, 0.019], p 0.0112 (Holm 0.18: not significant over 21 pairs)'
    """
    a, b = str(_get(row, "a", "system")), str(_get(row, "b", "compared_to"))
    diff, lo, hi = (
        float(_get(row, k, *alt) if _get(row, k, *alt) is not None else math.nan)
        for k, alt in (("diff", ("value",)), ("ci_low", ()), ("ci_high", ()))
    )
    measure = str(row.get("measure", ""))
    p_bound, adj_bound = p_bounds(row)
    p_raw = _get(row, "p_value")
    p_adj = _get(row, "p_adjusted")
    family = int(_get(row, "family_size") or 1)
    if diff < 0:
        a, b, diff, lo, hi = b, a, -diff, -hi, -lo
    head = (
        f"{a} = {b} on {measure}: difference 0 [{format_number(lo)}, {format_number(hi)}]"
        if diff == 0
        else f"{a} > {b} by {format_number(diff)} {measure} [{format_number(lo)}, {format_number(hi)}]"
    )
    if p_raw is None:
        return head
    text = f"{head}, p {format_p_value(p_raw, bound=p_bound)}"
    adjustment = str(row.get("adjustment") or "none")
    decisive = p_adj if p_adj is not None and adjustment != "none" and family > 1 else p_raw
    word = "significant" if float(decisive) < alpha else "not significant"
    if decisive is p_raw:
        return f"{text} ({word} at {alpha:g})"
    name = _ADJ.get(adjustment, adjustment)
    return f"{text} ({name} {format_p_value(p_adj, bound=adj_bound)}: {word} over {family} pairs)"


def headline_pair(pairs: Sequence[Mapping[str, Any]], means: Mapping[str, float]) -> Mapping[str, Any] | None:
    """The row a verdict states: among the rows of the first measure, the best system (highest of
    ``means``) against the shared baseline when every row has the same ``b``; else the row of
    the two systems with the highest means; ``None`` without rows."""
    if not pairs:
        return None
    measure = pairs[0].get("measure")
    rows = [p for p in pairs if p.get("measure") == measure]
    ends = [(str(_get(p, "a", "system")), str(_get(p, "b", "compared_to"))) for p in rows]
    bases = {b for _, b in ends}
    if len(bases) == 1:
        return max(zip(rows, ends), key=lambda x: means.get(x[1][0], -math.inf))[0]
    top = sorted(means, key=lambda n: -means[n])[:2]
    for p, (a, b) in zip(rows, ends):
        if {a, b} == set(top):
            return p
    return rows[0]
