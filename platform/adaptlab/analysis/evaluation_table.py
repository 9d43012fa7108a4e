"""Plain-text tables of an evaluation, laid out like Table 2 of the reference study
(000_2bab498a74ac645b.txt): per system the point value, bootstrap mean, CI (labelled from the
stored ``confidence`` and interval method) and CI width; paired differences with raw and
multiplicity-adjusted p-values and the family size. Numbers and layout come from
:mod:`adaptlab.analysis.present` (the digits the report and the paper table print)."""

from __future__ import annotations

from adaptlab.analysis.present import (
    CellValue,
    format_interval,
    format_p,
    headline_pair,
    render_table,
    terminal_escape_lines,
    verdict_line,
)
from adaptlab.evaluation.groups import GroupedSummary
from adaptlab.evaluation.summary import EvaluationSummary, MeasureSummary, PairSummary
from adaptlab.stats.pvalues import SMALL_SAMPLE_Q, ci_label, p_value_note

__all__ = ["format_groups", "format_pairs", "format_summary", "summary_verdict"]

_ADJ_NAMES = {"holm": "Holm", "bh": "Benjamini-Hochberg", "none": "no adjustment"}


def summary_verdict(s: EvaluationSummary) -> str:
    """The one-line verdict of an evaluation (:func:`adaptlab.analysis.present.verdict_line` of
    :func:`~adaptlab.analysis.present.headline_pair`), "" without paired comparisons; significance
    at ``1 - confidence``."""
    if not s.pairs:
        return ""
    first = s.pairs[0].measure
    means = {n: per[first].value for n, per in s.systems.items() if first in per}
    row = headline_pair([p.as_dict() for p in s.pairs], means)
    return "" if row is None else verdict_line(row, alpha=1.0 - s.confidence)


def format_summary(s: EvaluationSummary) -> str:
    """Per system and measure: value, bootstrap mean, CI and its width; the judged queries each
    run lacks (scored 0) are counted in the header and per system. The first line is the verdict
    (:func:`summary_verdict`) when systems were compared."""
    ranked = any(r.rank is not None for per in s.systems.values() for r in per.values())
    methods = {r.interval for per in s.systems.values() for r in per.values()}
    mixed = len(methods) > 1  # interval "auto": Wilson for 0/1 measures, percentile for graded ones
    rows: list[list[CellValue]] = [
        [
            name,
            m,
            r.value,
            r.boot_mean,
            format_interval(r.ci_low, r.ci_high),
            r.ci_width,
            *([r.interval] if mixed else []),
            *([_rank(r)] if ranked else []),
        ]
        for name, per in s.systems.items()
        for m, r in per.items()
    ]
    head = (
        f"{s.n_queries} queries ({len(s.excluded_queries)} without relevant documents excluded); "
        f"{s.n_resamples} bootstrap resamples of {s.sample_size} queries, seed {s.seed}"
    )
    verdict = summary_verdict(s)
    if verdict:
        head = f"verdict: {verdict}\n{head}"
    missing = {n: c for n, c in s.missing_from_run.items() if c}
    if missing:
        head += "\njudged queries missing from the run (scored 0): " + ", ".join(f"{n} {c}" for n, c in missing.items())
    if s.small_sample:
        head += (
            f"\nwarning: fewer than {SMALL_SAMPLE_Q} queries; bootstrap CIs are unreliable, read the exact paired tests"
        )
    label = ci_label(s.confidence, None if mixed else next(iter(methods), s.interval))
    header = ["system", "measure", "value", "boot_mean", label, "CI width"] + (["CI method"] if mixed else [])
    if ranked:
        header.append("rank [interval]")
        head += (
            "\nrank [interval]: from the paired sign-flip tests of all pairs (adjusted as the p column); "
            "* = tied with the best (no system significantly better); " + _guarantee(s)
        )
    return terminal_escape_lines(head) + "\n" + render_table(header, rows)


def _guarantee(s: EvaluationSummary) -> str:
    """The simultaneous guarantee of the rank intervals, one phrase."""
    alpha = 1.0 - s.confidence
    if s.adjustment != "holm":
        return f"no simultaneous guarantee with adjustment {s.adjustment}"
    return (
        f"with probability >= {s.confidence:g} all rank intervals hold at once and the starred set contains "
        f"the best (Holm, alpha {alpha:.2g})"
    )


def _rank(r: MeasureSummary) -> str:
    if r.rank is None:
        return ""
    star = "*" if r.rank_low == 1 else ""
    return f"{r.rank} [{r.rank_low}, {r.rank_high}]{star}"


def format_pairs(s: EvaluationSummary) -> str:
    """Paired differences a - b with CI, the two-sided bootstrap p-value, the p-value adjusted
    within its family (one dataset, one measure) and, for small samples, the exact sign test."""
    if not s.pairs:
        return ""
    exact = any(p.p_exact is not None for p in s.pairs)
    methods = sorted({p.interval for p in s.pairs})
    mixed = len(methods) > 1  # named per row where the rows differ
    header = (
        ["pair", "measure", "diff", ci_label(s.confidence, None if mixed else methods[0])]
        + (["CI method"] if mixed else [])
        + ["p", "p adj (n)"]
    )
    if exact:
        header += ["p sign", "p wilcoxon"]
    rows: list[list[CellValue]] = []
    for p in s.pairs:
        row: list[CellValue] = [*_pair_cells(p)[:4], *([p.interval] if mixed else []), *_pair_cells(p)[4:]]
        if exact:
            row += [format_p(p.p_exact), format_p(p.p_wilcoxon)]
        rows.append(row)
    adj = _ADJ_NAMES.get(s.adjustment, s.adjustment)
    tests = sorted({p.test for p in s.pairs})
    note = f"{p_value_note(s.n_queries, s.n_resamples, tests=tests, n_vectors=max(p.p_draws for p in s.pairs))}; p adj: {adj} within each measure, (n) = family size"
    return render_table(header, rows) + "\n" + note


def _pair_cells(p: PairSummary) -> list[CellValue]:
    """A paired row's cells: the pair (first named minus second), measure, difference, CI, p and
    adjusted p with its family size."""
    adjusted = f"{p.p_adjusted_text} ({p.family_size})" if p.p_adjusted is not None else "n/a"
    return [f"{p.a} - {p.b}", p.measure, p.diff, format_interval(p.ci_low, p.ci_high), p.p_text, adjusted]


def format_groups(grouped: GroupedSummary) -> str:
    """The per-group table of one grouping column: per group, system and measure the value and
    CI; then the paired differences per group with p adjusted within each measure across groups."""
    first = next(iter(grouped.groups.values()))
    label = ci_label(first.confidence, None)
    rows: list[list[CellValue]] = [
        [value, s.n_queries, name, m, r.value, format_interval(r.ci_low, r.ci_high), r.interval]
        for value, s in grouped.groups.items()
        for name, per in s.systems.items()
        for m, r in per.items()
    ]
    head = f"per {grouped.column}: {len(grouped.groups)} groups"
    if grouped.unassigned:
        head += f" ({len(grouped.unassigned)} queries without a {grouped.column} are in no group)"
    out = (
        terminal_escape_lines(head)
        + "\n"
        + render_table([grouped.column, "queries", "system", "measure", "value", label, "CI method"], rows)
    )
    pairs = [(value, p) for value, s in grouped.groups.items() for p in s.pairs]
    if not pairs:
        return out
    prow: list[list[CellValue]] = [[value, *_pair_cells(p)] for value, p in pairs]
    adj = _ADJ_NAMES.get(first.adjustment, first.adjustment)
    note = (
        f"p: paired sign-flip test within the group; p adj: {adj} within each measure across the "
        f"{len(grouped.groups)} groups, (n) = family size"
    )
    return (
        out
        + f"\n\npaired differences per {terminal_escape_lines(grouped.column)}\n"
        + render_table([grouped.column, "pair", "measure", "diff", label, "p", "p adj (n)"], prow)
        + "\n"
        + note
    )
