"""Plain-text tables of an evaluation, laid out like Table 2 of the reference study
(000_2bab498a74ac645b.txt): per system the point value, bootstrap mean, 95% CI and CI width."""

from __future__ import annotations

from collections.abc import Sequence

from adaptlab.evaluation.summary import EvaluationSummary

__all__ = ["format_pairs", "format_summary", "render_table"]


def render_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Left-aligned text columns; floats with 4 decimals."""
    cells = [[f"{c:.4f}" if isinstance(c, float) else str(c) for c in row] for row in rows]
    widths = [max(len(str(h)), *(len(r[i]) for r in cells)) if cells else len(str(h)) for i, h in enumerate(header)]
    line = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths]), *(line(r) for r in cells)])


def format_summary(s: EvaluationSummary) -> str:
    """Per system and measure: value, bootstrap mean, CI and its width."""
    pct = round(s.confidence * 100)
    rows = [
        [name, m, r.value, r.boot_mean, f"[{r.ci_low:.4f}, {r.ci_high:.4f}]", r.ci_width]
        for name, per in s.systems.items() for m, r in per.items()
    ]
    head = (f"{s.n_queries} queries ({len(s.excluded_queries)} without relevant documents excluded); "
            f"{s.n_resamples} bootstrap resamples of {s.sample_size} queries, seed {s.seed}")
    return head + "\n" + render_table(["system", "measure", "value", "boot_mean", f"{pct}% CI", "CI width"], rows)


def format_pairs(s: EvaluationSummary) -> str:
    """Paired differences a - b with CI and two-sided bootstrap p-value."""
    if not s.pairs:
        return ""
    rows = [[f"{p.a} - {p.b}", p.measure, p.diff, f"[{p.ci_low:.4f}, {p.ci_high:.4f}]", f"{p.p_value:.4g}"]
            for p in s.pairs]
    return render_table(["pair", "measure", "diff", f"{round(s.confidence * 100)}% CI", "p"], rows)
