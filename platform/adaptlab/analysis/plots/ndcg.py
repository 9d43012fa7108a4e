"""nDCG@k curves: against k per system, and k = 1..10 per data scale (reference 004, Figure 3)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from adaptlab.analysis.plots.figure import DEFAULT_DPI, Target, _figure, _finish
from adaptlab.errors import ConfigError

if TYPE_CHECKING:
    from matplotlib.figure import Figure


_K_TICKS = (1, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)


def _k_axis(ax: Any, ks: Sequence[float]) -> None:
    """A log k axis with plain integer ticks (1, 5, 10, 20, 50, 100, ... as the data allows, and
    the largest k), reaching the largest k."""
    from matplotlib.ticker import NullLocator

    lo, hi = int(min(ks)), int(max(ks))
    ticks = sorted({k for k in _K_TICKS if lo <= k <= hi} | {lo, hi})
    ax.set_xscale("log")
    ax.set_xticks(ticks, labels=[str(k) for k in ticks])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlim(lo / 1.15, hi * 1.15)


def plot_ndcg_curves(
    curves: Sequence[Any], path: Target = None, *, title: str | None = None, ci: str = "95% CI", dpi: int = DEFAULT_DPI
) -> Figure:
    """nDCG@k against k (log axis with integer k ticks up to the largest k computed) per system:
    the point estimate with its ``ci`` band (the level named in the legend); hollow markers are
    lower bounds (k beyond the stored ranking depth)."""
    if not curves:
        raise ConfigError("plot_ndcg_curves: nothing to plot")
    fig = _figure(7.0, 4.6)
    ax = fig.subplots()
    lower = False
    for i, c in enumerate(curves):
        ks = np.asarray(c.ks, dtype=np.float64)
        values = np.asarray(c.values, dtype=np.float64)
        color = f"C{i % 10}"
        ax.plot(ks, values, color=color, label=c.system or f"system {i + 1}")
        ax.fill_between(ks, c.ci_low, c.ci_high, color=color, alpha=0.15)
        ex = np.asarray(c.exact, dtype=bool)
        ax.scatter(ks[ex], values[ex], color=color, s=22)
        if (~ex).any():
            lower = True
            ax.scatter(ks[~ex], values[~ex], facecolors="none", edgecolors=color, s=28)
    if lower:
        ax.scatter([], [], facecolors="none", edgecolors="k", s=28, label="lower bound (k > depth)")
    _k_axis(ax, [k for c in curves for k in c.ks])
    ax.set_xlabel("k (rank cut-off, log scale)")
    ax.set_ylabel("nDCG@k")
    ax.grid(alpha=0.3)
    ax.legend(title=f"shaded: {ci}")
    if title:
        ax.set_title(title)
    return _finish(fig, path, dpi)


def plot_ndcg_at_k(
    panels: Mapping[str, Sequence[tuple[str, Any]]],
    path: Target = None,
    *,
    title: str | None = None,
    ci: str = "95% CI",
    dpi: int = DEFAULT_DPI,
) -> Figure:
    """nDCG@k against k (linear axis, e.g. k = 1..10) in panels (reference 004, Figure 3): the
    point estimates (the values the tables print) with CI bands.

    ``panels``: panel title -> ``(line label, NDCGCurve)`` pairs. A line whose label ends with
    ``"base"`` is drawn black and dashed; every other label keeps one colour across panels (e.g.
    one colour per data scale). Shaded bands are the curves' ``ci`` intervals; y is shared.
    """
    if not panels or not any(panels.values()):
        raise ConfigError("plot_ndcg_at_k: nothing to plot")
    names = [t for t, lines in panels.items() if lines]
    colors: dict[str, str] = {}
    for t in names:
        for lab, _ in panels[t]:
            if not lab.endswith("base") and lab not in colors:
                colors[lab] = f"C{len(colors) % 10}"
    ncols = min(3, len(names))
    nrows = (len(names) + ncols - 1) // ncols
    fig = _figure(4.2 * ncols, 3.3 * nrows + 0.5)
    axes = fig.subplots(nrows, ncols, squeeze=False, sharey=True)
    for ax in axes.ravel()[len(names) :]:
        ax.set_visible(False)
    for ax, t in zip(axes.ravel(), names):
        for lab, c in panels[t]:
            ks = np.asarray(c.ks, dtype=np.float64)
            base = lab.endswith("base")
            color = "k" if base else colors[lab]
            ax.plot(
                ks, c.values, color=color, linestyle="--" if base else "-", marker="." if not base else None, label=lab
            )
            ax.fill_between(ks, c.ci_low, c.ci_high, color=color, alpha=0.08 if base else 0.15)
        ax.set_title(t)
        ax.set_xlabel("k (rank cut-off)")
        ax.set_ylabel("nDCG@k")
        kt = sorted({int(k) for _, c in panels[t] for k in c.ks})
        ax.set_xticks(kt, labels=[str(k) for k in kt])
        ax.grid(alpha=0.3)
        ax.legend(title=f"shaded: {ci}", loc="lower right")
    fig.suptitle(title or f"nDCG@k ({ci})")
    return _finish(fig, path, dpi)
