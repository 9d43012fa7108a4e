"""Plain-text tables of an evaluation, laid out like Table 2 of the reference study
(000_2bab498a74ac645b.txt): per system the point value, bootstrap mean, CI (labelled from the
stored ``confidence`` and interval method) and CI width; paired differences with raw and
multiplicity-adjusted p-values and the family size."""

from __future__ import annotations

from collections.abc import Sequence

from adaptlab.evaluation.summary import EvaluationSummary
from adaptlab.stats.pvalues import SMALL_SAMPLE_Q, ci_label, format_p_value

__all__ = ["format_pairs", "format_summary", "render_table"]

_ADJ_NAMES = {"holm": "Holm", "bh": "Benjamini-Hochberg", "none": "no adjustment"}


def render_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Left-aligned text columns; floats with 4 decimals."""
    cells = [[f"{c:.4f}" if isinstance(c, float) else str(c) for c in row] for row in rows]
    widths = [max(len(str(h)), *(len(r[i]) for r in cells)) if cells else len(str(h)) for i, h in enumerate(header)]
    line = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths]), *(line(r) for r in cells)])


def format_summary(s: EvaluationSummary) -> str:
    """Per system and measure: value, bootstrap mean, CI and its width; the judged queries each
    run lacks (scored 0) are counted in the header and per system."""
    ranked = any(r.rank is not None for per in s.systems.values() for r in per.values())
    rows = [
        [name, m, r.value, r.boot_mean, f"[{r.ci_low:.4f}, {r.ci_high:.4f}]", r.ci_width]
        + ([_rank(r)] if ranked else [])
        for name, per in s.systems.items() for m, r in per.items()
    ]
    head = (f"{s.n_queries} queries ({len(s.excluded_queries)} without relevant documents excluded); "
            f"{s.n_resamples} bootstrap resamples of {s.sample_size} queries, seed {s.seed}")
    missing = {n: c for n, c in s.missing_from_run.items() if c}
    if missing:
        head += "\njudged queries missing from the run (scored 0): " + ", ".join(f"{n} {c}" for n, c in missing.items())
    if s.small_sample:
        head += (f"\nwarning: fewer than {SMALL_SAMPLE_Q} queries; bootstrap CIs are unreliable, read the exact "
                 "paired tests")
    header = ["system", "measure", "value", "boot_mean", ci_label(s.confidence, s.interval), "CI width"]
    if ranked:
        header.append("rank [interval]")
        head += "\nrank [interval]: from the shared bootstrap resamples; * = statistically tied with the best"
    return head + "\n" + render_table(header, rows)


def _rank(r: object) -> str:
    if getattr(r, "rank", None) is None:
        return ""
    star = "*" if r.rank_low == 1 else ""  # type: ignore[attr-defined]
    return f"{r.rank} [{r.rank_low}, {r.rank_high}]{star}"  # type: ignore[attr-defined]


def format_pairs(s: EvaluationSummary) -> str:
    """Paired differences a - b with CI, the two-sided bootstrap p-value, the p-value adjusted
    within its family (one dataset, one measure) and, for small samples, the exact sign test."""
    if not s.pairs:
        return ""
    exact = any(p.p_exact is not None for p in s.pairs)
    header = ["pair", "measure", "diff", ci_label(s.confidence, s.interval), "p", "p adj (n)"]
    if exact:
        header += ["p sign", "p wilcoxon"]
    rows = []
    for p in s.pairs:
        row = [f"{p.a} - {p.b}", p.measure, p.diff, f"[{p.ci_low:.4f}, {p.ci_high:.4f}]",
               format_p_value(p.p_value, s.n_resamples),
               f"{format_p_value(p.p_adjusted)} ({p.family_size})" if p.p_adjusted is not None else "n/a"]
        if exact:
            row += [format_p_value(p.p_exact), format_p_value(p.p_wilcoxon)]
        rows.append(row)
    adj = _ADJ_NAMES.get(s.adjustment, s.adjustment)
    note = (f"p: two-sided paired bootstrap ({s.n_resamples} resamples, floor 1/(m+1)); p adj: {adj} within "
            "each measure, (n) = family size")
    return render_table(header, rows) + "\n" + note
