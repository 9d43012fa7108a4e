"""Paired differences against their baselines with CIs, marked by their adjusted p-values."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from adaptlab.analysis.plots.figure import _LEGEND_PT, _TITLE_PT, DEFAULT_DPI, Target, _figure, _finish
from adaptlab.analysis.plots.forest import _num
from adaptlab.analysis.present import ALPHA, significance_mark
from adaptlab.errors import ConfigError

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _diff_label(row: Mapping[str, Any]) -> str:
    return f"{row['system']} - {row['compared_to']}"


def _check_pairs(rows: Sequence[Mapping[str, Any]]) -> None:
    if not rows:
        raise ConfigError("plot_paired_differences: nothing to plot")
    for i, r in enumerate(rows):
        missing = [k for k in ("system", "compared_to", "measure", "value") if r.get(k) is None]
        if missing:
            raise ConfigError(
                f"plot_paired_differences: row {i} lacks {', '.join(missing)} (expected comparison "
                "rows of the store: system, compared_to, measure, value, ci_low, ci_high, p_adjusted)"
            )


def _pair_marks(
    ax: Any, xs: np.ndarray, ys: np.ndarray, rows: Sequence[Mapping[str, Any]], alpha: float, color: str
) -> None:
    """Filled: adjusted p < alpha; hollow: not significant; cross: no adjusted p stored."""
    adj = [r.get("p_adjusted") for r in rows]
    sig = np.array([bool(significance_mark(p, alpha)) for p in adj])
    none = np.array([p is None for p in adj])
    ax.scatter(xs[sig], ys[sig], color=color, s=46, zorder=3)
    ax.scatter(xs[~sig & ~none], ys[~sig & ~none], facecolors="white", edgecolors=color, s=46, zorder=3)
    ax.scatter(xs[none], ys[none], color=color, marker="x", s=46, zorder=3)


def _pair_panel(ax: Any, rows: Sequence[Mapping[str, Any]], labels: Sequence[str], alpha: float, color: str) -> None:
    pos = {lab: len(labels) - 1 - i for i, lab in enumerate(labels)}
    ys = np.array([pos[_diff_label(r)] for r in rows], dtype=np.float64)
    xs = np.array([float(r["value"]) for r in rows])
    lo = np.array([_num(r.get("ci_low")) for r in rows])
    hi = np.array([_num(r.get("ci_high")) for r in rows])
    err = np.clip(
        np.vstack([np.where(np.isfinite(lo), xs - lo, 0.0), np.where(np.isfinite(hi), hi - xs, 0.0)]), 0.0, None
    )
    ax.errorbar(xs, ys, xerr=err, fmt="none", ecolor="dimgray", capsize=4)
    _pair_marks(ax, xs, ys, rows, alpha, color)
    ax.axvline(0.0, color="k", linewidth=1)
    ax.grid(axis="x", alpha=0.3)


def _pair_legend(fig: Figure, alpha: float, adjustment: str) -> None:
    from matplotlib.lines import Line2D

    handles = [
        Line2D([], [], marker="o", color="k", linestyle="", label=f"{adjustment} p < {alpha:g}"),
        Line2D(
            [], [], marker="o", color="k", markerfacecolor="white", linestyle="", label=f"{adjustment} p >= {alpha:g}"
        ),
        Line2D([], [], marker="x", color="k", linestyle="", label="no adjusted p stored"),
    ]
    wide = fig.get_size_inches()[0] >= 8.5  # three entries side by side fit only a wide figure
    fig.legend(handles=handles, loc="outside lower center", ncols=3 if wide else 1, fontsize=_LEGEND_PT)


def plot_paired_differences(
    rows: Sequence[Mapping[str, Any]],
    path: Target = None,
    *,
    alpha: float = ALPHA,
    title: str | None = None,
    ci: str = "95% CI",
    dpi: int = DEFAULT_DPI,
) -> Figure:
    """Paired differences A - B with their ``ci`` intervals, one panel per measure, one row per
    pair, a vertical line at 0; a point is filled when its multiplicity-adjusted p (``p_adjusted``,
    e.g. Holm within the family, as the store records it) is below ``alpha``, hollow when not,
    a cross when the row has no adjusted p.

    ``rows``: comparison rows (mappings with ``system``, ``compared_to``, ``measure``, ``value``
    = the difference, ``ci_low``, ``ci_high``, ``p_adjusted`` and optionally ``adjustment``).
    """
    _check_pairs(rows)
    measures = sorted({str(r["measure"]) for r in rows})
    labels = list(dict.fromkeys(_diff_label(r) for r in rows))
    adjustments = {str(r.get("adjustment")).capitalize() for r in rows if r.get("adjustment")}
    ncols = min(4, len(measures))
    nrows = (len(measures) + ncols - 1) // ncols
    fig = _figure(max(5.0, 0.09 * max(map(len, labels)) + 0.6 + 3.0 * ncols), (0.42 * len(labels) + 1.3) * nrows + 1.1)
    axes = fig.subplots(nrows, ncols, squeeze=False, sharey=True)
    for ax in axes.ravel()[len(measures) :]:
        ax.set_visible(False)
    for i, (ax, m) in enumerate(zip(axes.ravel(), measures)):
        _pair_panel(ax, [r for r in rows if str(r["measure"]) == m], labels, alpha, f"C{i % 10}")
        ax.set_title(m)
        ax.set_xlabel(f"difference A - B ({ci})")
        ax.set_yticks(np.arange(len(labels))[::-1], labels=labels)
        ax.set_ylim(-0.6, len(labels) - 0.4)
    _pair_legend(fig, alpha, "/".join(sorted(adjustments)) + "-adjusted" if adjustments else "adjusted")
    fig.suptitle(title or f"Paired differences with their {ci}", fontsize=_TITLE_PT)
    return _finish(fig, path, dpi)
