"""The scaling fits for people: JSON rows, the figure, the text/Markdown/LaTeX tables."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from adaptlab.analysis.scaling.forms import NEXT_FACTOR
from adaptlab.analysis.scaling.result import ScalingFit
from adaptlab.errors import ConfigError

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def scaling_rows(fits: Sequence[ScalingFit]) -> list[dict[str, Any]]:
    """One JSON-ready dict per fit (the measured points under ``points``)."""

    def num(x: float | None) -> float | None:
        return None if x is None or not np.isfinite(x) else float(x)

    rows = []
    for f in fits:
        rows.append(
            {
                "dataset": f.dataset,
                "label": f.label,
                "variant": f.variant,
                "measure": f.measure,
                "model": f.model,
                "criterion": f.criterion,
                "params": f.params,
                "loo_rmse": f.loo_rmse,
                "slope_per_doubling": f.slope_per_doubling,
                "slope_per_doubling_ci": list(f.slope_ci),
                "slope_per_10x": f.slope_per_10x,
                "slope_per_10x_ci": list(f.slope_per_10x_ci),
                "trend": f.trend,
                "next_scale": f.next_scale,
                "predicted_next": f.predicted_next,
                "predicted_next_ci": list(f.predicted_next_ci),
                "extrapolation": True,
                "target": f.target,
                "target_scale": num(f.target_scale),
                "target_scale_ci": None if f.target_scale_ci is None else [num(v) for v in f.target_scale_ci],
                "target_note": f.target_note,
                "n_queries": f.n_queries,
                "n_resamples": f.n_resamples,
                "seed": f.seed,
                "confidence": f.confidence,
                "points": [
                    {
                        "n_documents": n,
                        "gain": g,
                        "gain_ci": list(c),
                        "training_hours": h,
                        "gain_per_hour": r,
                        "gain_per_hour_ci": None if rc is None else list(rc),
                    }
                    for n, g, c, h, r, rc in zip(
                        f.scales, f.gains, f.gain_ci, f.hours, f.gain_per_hour, f.gain_per_hour_ci
                    )
                ],
            }
        )
    return rows


def plot_scaling(
    fits: Sequence[ScalingFit], path: str | Path | None = None, *, title: str | None = None, dpi: int | None = None
) -> Figure:
    """The measured gains (points with their CI bars) and each fitted curve with its pointwise
    band, the part beyond the largest scale dashed (an extrapolation), against the data scale on
    a log axis; one panel per dataset, one legend below. Saved to ``path`` when given (PNG, PDF
    or SVG)."""
    if not fits:
        raise ConfigError("plot_scaling: nothing to plot")
    from adaptlab.analysis.plots.figure import DEFAULT_DPI, _figure, _finish

    datasets = list(dict.fromkeys(f.dataset for f in fits))
    ncols = min(3, len(datasets))
    nrows = (len(datasets) + ncols - 1) // ncols
    fig = _figure(max(7.2, 5.2 * ncols), 4.2 * nrows + 0.8)
    grid = fig.subplots(nrows, ncols, squeeze=False, sharey=True)
    for ax in grid.ravel()[len(datasets) :]:
        ax.set_visible(False)
    handles: dict[str, Any] = {}
    colors = {key: f"C{i % 10}" for i, key in enumerate(dict.fromkeys((f.label, f.variant) for f in fits))}
    for ax, ds in zip(grid.ravel(), datasets):
        _scaling_panel(ax, [f for f in fits if f.dataset == ds], colors, handles)
        if len(datasets) > 1 or ds:
            ax.set_title(ds)
    grid[0, 0].set_ylabel(f"{fits[0].measure}: variant - own base")
    fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncols=min(4, len(handles)))
    pct = f"{fits[0].confidence * 100:g}%"
    fig.suptitle(title or f"gain over own base against data scale (bands: pointwise {pct} CI)")
    return _finish(fig, path, DEFAULT_DPI if dpi is None else dpi)


def _scaling_panel(
    ax: Any, fits: Sequence[ScalingFit], colors: Mapping[tuple[str, str], str], handles: dict[str, Any]
) -> None:
    """One dataset's fits on ``ax`` (a colour per label and variant, the same in every panel);
    each variant's line handle goes into ``handles`` by legend label."""
    from matplotlib.ticker import NullLocator

    for f in fits:
        color, top = colors[(f.label, f.variant)], max(f.scales)
        inside = f.band_scales <= top * (1 + 1e-9)
        ax.fill_between(f.band_scales, f.band[0], f.band[2], color=color, alpha=0.15)
        (line,) = ax.plot(f.band_scales[inside], f.band[1][inside], color=color)
        handles.setdefault(f"{f.label} {f.variant} ({f.model} fit)", line)
        ax.plot(f.band_scales[~inside], f.band[1][~inside], color=color, linestyle="--")
        g = np.array(f.gains)
        err = np.clip(np.array([[gv - c[0], c[1] - gv] for gv, c in zip(g, f.gain_ci)]).T, 0.0, None)
        ax.errorbar(f.scales, g, yerr=err, fmt="o", color=color, capsize=3)
    ax.axhline(0.0, color="k", linewidth=1)
    ax.set_xscale("log")
    scales = sorted({n for f in fits for n in f.scales} | {f.next_scale for f in fits})
    ax.set_xticks(scales, labels=[str(n) for n in scales])  # the scales themselves and the next one
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("documents (log scale; dashed: extrapolation)")
    ax.grid(alpha=0.3)


def scaling_tables(
    fits: Sequence[ScalingFit],
) -> tuple[tuple[list[str], list[list[str]]], tuple[list[str], list[list[str]]]]:
    """Two tables ``(header, rows)``: one row per fit (form, slope, trend, the extrapolated next
    scale, the target), and one per measured point (gain, training hours, gain per hour)."""
    from adaptlab.analysis.present import format_interval, format_number

    pct = f"{fits[0].confidence * 100:g}% CI" if fits else "CI"
    fit_rows = [
        [
            f.dataset,
            f"{f.label} {f.variant}",
            f.model,
            f"{format_number(f.slope_per_doubling)} {format_interval(*f.slope_ci)}",
            f.trend,
            str(f.next_scale),
            f"{format_number(f.predicted_next)} {format_interval(*f.predicted_next_ci)}",
            f.target_note if f.target is not None else "-",
        ]
        for f in fits
    ]
    point_rows = [
        [
            f.dataset,
            f"{f.label} {f.variant}",
            str(n),
            f"{format_number(g)} {format_interval(*c)}",
            "not recorded" if h is None else f"{h:.3g}",
            "n/a" if r is None else f"{format_number(r)} {format_interval(*rc)}",
        ]
        for f in fits
        for n, g, c, h, r, rc in zip(f.scales, f.gains, f.gain_ci, f.hours, f.gain_per_hour, f.gain_per_hour_ci)
    ]
    return (
        (
            [
                "Dataset",
                "Variant",
                "Fit",
                f"Gain per doubling at the largest scale [{pct}]",
                "At the largest scale",
                "Next scale",
                f"Predicted gain there (extrapolation) [{pct}]",
                "Scale for the target gain",
            ],
            fit_rows,
        ),
        (
            [
                "Dataset",
                "Variant",
                "Documents",
                f"Gain over own base [{pct}]",
                "Training hours",
                f"Gain per training hour [{pct}]",
            ],
            point_rows,
        ),
    )


def format_scaling(fits: Sequence[ScalingFit], style: str = "text") -> str:
    """Both tables of :func:`scaling_tables` and a footer (measure, queries, resamples, the
    criterion of each fit, the extrapolation caveat) in a :func:`adaptlab.analysis.present.
    render_table` style."""
    from adaptlab.analysis.present import render_table

    if not fits:
        raise ConfigError("format_scaling: no fit to show")
    (h1, r1), (h2, r2) = scaling_tables(fits)
    f = fits[0]
    counts = dict.fromkeys(f"{g.dataset} {g.n_queries}" if g.dataset else str(g.n_queries) for g in fits)
    queries = f"{f.n_queries} queries" if len(counts) == 1 else f"the queries of each dataset ({', '.join(counts)})"
    notes = [
        f"{f.measure}: mean gain of each variant over its own <label>-base on {queries}; "
        f"intervals: percentile bootstrap over {f.n_resamples} paired resamples of the queries (seed {f.seed}).",
        *dict.fromkeys(f"{g.label} {g.variant}: {g.criterion}." for g in fits),
        f"The next scale ({NEXT_FACTOR:g}x the largest) and targets beyond the largest scale are extrapolations "
        "of the fitted form: they hold only if the curve keeps its shape; the intervals cover the query "
        "sample (and, where the form is chosen from the data, that choice), not one training run's luck nor a "
        "true curve of neither form.",
        *(
            []
            if any(h is not None for g in fits for h in g.hours)
            else ["Training hours: the store records no training seconds for these models (gain per hour n/a)."]
        ),
    ]
    return "\n\n".join([render_table(h1, r1, style), render_table(h2, r2, style), "\n".join(notes)])
