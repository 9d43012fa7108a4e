"""Forest plots: point estimates with their confidence intervals, one panel per measure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np

from adaptlab.analysis._options import split_options
from adaptlab.analysis.plots.figure import _TITLE_PT, DEFAULT_DPI, Target, _figure, _finish
from adaptlab.errors import ConfigError

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from typing_extensions import Unpack


Estimate = Sequence[float]
"""``(value, ci_low, ci_high)``: a point estimate and its interval (NaN or None: no interval)."""


def _triples(estimates: Mapping[str, Mapping[str, Estimate]]) -> tuple[list[str], list[str]]:
    """The measures and the systems (in first-seen order) of ``measure -> system -> estimate``."""
    measures = [str(m) for m, by in estimates.items() if by]
    systems: list[str] = []
    for m, by in estimates.items():
        for s, est in by.items():
            if len(est) != 3:
                raise ConfigError(
                    f"plot_forest: estimates[{m!r}][{s!r}]: expected (value, ci_low, ci_high), got {est!r}"
                )
            if str(s) not in systems:
                systems.append(str(s))
    if not measures:
        raise ConfigError("plot_forest: nothing to plot (expected measure -> system -> (value, ci_low, ci_high))")
    return measures, systems


def _num(x: Any) -> float:
    return float("nan") if x is None else float(x)


def _forest_panel(ax: Any, by: Mapping[str, Estimate], systems: Sequence[str], color: str) -> None:
    """One measure's points and intervals on rows ``systems`` (top to bottom)."""
    ys, v, lo, hi = [], [], [], []
    for i, s in enumerate(systems):
        if s in by:
            value, low, high = (_num(x) for x in by[s])
            ys.append(len(systems) - 1 - i)
            v.append(value)
            lo.append(value - low if np.isfinite(low) else 0.0)
            hi.append(high - value if np.isfinite(high) else 0.0)
    err = np.clip(np.array([lo, hi], dtype=np.float64), 0.0, None)
    ax.errorbar(v, ys, xerr=err, fmt="o", color=color, ecolor="dimgray", capsize=4, markersize=6)
    ax.grid(axis="x", alpha=0.3)


def plot_forest(
    estimates: Mapping[str, Mapping[str, Estimate]],
    path: Target = None,
    *,
    title: str | None = None,
    ci: str = "95% CI",
    dpi: int = DEFAULT_DPI,
) -> Figure:
    """A multi-measure forest plot: rows = systems, one panel per measure (at most four per row of
    panels), each point the estimate the tables print with its ``ci`` interval as a bar.

    ``estimates``: ``measure -> system -> (value, ci_low, ci_high)``; a missing system leaves its
    row empty in that panel, a NaN bound draws no bar on that side.
    """
    measures, systems = _triples(estimates)
    ncols = min(4, len(measures))
    nrows = (len(measures) + ncols - 1) // ncols
    label_w = 0.09 * max(len(s) for s in systems) + 0.6
    fig = _figure(max(5.0, label_w + 3.0 * ncols), (0.42 * len(systems) + 1.3) * nrows + 0.7)
    axes = fig.subplots(nrows, ncols, squeeze=False, sharey=True)
    for ax in axes.ravel()[len(measures) :]:
        ax.set_visible(False)
    for i, (ax, m) in enumerate(zip(axes.ravel(), measures)):
        _forest_panel(ax, estimates[m], systems, f"C{i % 10}")
        ax.set_title(m)
        ax.set_xlabel(f"{m} ({ci})")
        ax.set_yticks(np.arange(len(systems))[::-1], labels=systems)
        ax.set_ylim(-0.6, len(systems) - 0.4)
    fig.suptitle(title or f"Point estimate with its {ci}", fontsize=_TITLE_PT)
    return _finish(fig, path, dpi)


class ForestOptions(TypedDict, total=False):
    """The keywords of :func:`plot_ci_forest`: the measure's name (the panel title) and those of
    :func:`plot_forest`, whose defaults apply."""

    measure: str
    title: str | None
    ci: str
    dpi: int


def plot_ci_forest(
    labels: Sequence[str],
    values: Sequence[float],
    ci_low: Sequence[float],
    ci_high: Sequence[float],
    path: Target = None,
    **options: Unpack[ForestOptions],
) -> Figure:
    """A forest plot of one measure: one row per label with its value (the point estimate) and
    confidence interval (``ci`` names the level). :func:`plot_forest` draws several measures."""
    (style,) = split_options("plot_ci_forest", options, ForestOptions)
    measure = style.pop("measure", "")
    v = np.asarray(values, dtype=np.float64)
    lo = np.asarray(ci_low, dtype=np.float64)
    hi = np.asarray(ci_high, dtype=np.float64)
    n = len(labels)
    if n == 0 or not (v.shape == lo.shape == hi.shape == (n,)):
        raise ConfigError("plot_ci_forest: labels, values, ci_low and ci_high must be non-empty and of equal length")
    if len(set(map(str, labels))) != n:
        raise ConfigError("plot_ci_forest: labels must be distinct (one row per system)")
    by = {str(s): (a, b, c) for s, a, b, c in zip(labels, v, lo, hi)}
    return plot_forest({measure or "value": by}, path, **style)
