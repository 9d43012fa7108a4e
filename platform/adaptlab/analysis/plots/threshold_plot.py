"""Similarity thresholds: accuracy against ``tau(psi)`` with the chosen threshold marked."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from adaptlab.analysis.plots.densities import _AXIS_LABEL, _scale_groups, score_scale
from adaptlab.analysis.plots.figure import _LEGEND_PT, DEFAULT_DPI, Target, _figure, _finish
from adaptlab.errors import ConfigError

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def plot_thresholds(
    results: Sequence[Any], path: Target = None, *, title: str | None = None, ci: str = "95% CI", dpi: int = DEFAULT_DPI
) -> Figure:
    """Bootstrapped top-K accuracy after dropping retrieved documents below ``tau(psi)``,
    against ``tau``, per system: line = bootstrap mean, band = its ``ci`` interval, dotted line
    = the accuracy without a threshold, star = the chosen threshold. One panel per score scale
    (:func:`score_scale` of the thresholds): the systems on the similarity scale together, every
    other system (BM25) in a panel of its own, so no x-axis mixes BM25 scores with cosines."""
    if not results:
        raise ConfigError("plot_thresholds: nothing to plot")
    scales = [score_scale(r.tau) for r in results]
    groups = _scale_groups(scales)
    fig = _figure(6.5 if len(groups) == 1 else 4.6 * len(groups), 4.2)
    axes = fig.subplots(1, len(groups), squeeze=False, sharey=True)[0]
    for ax, group in zip(axes, groups):
        starred = False
        for i in group:
            starred |= _threshold_curve(ax, results[i], f"C{i % 10}", results[i].system or f"system {i + 1}")
        ax.plot([], [], color="gray", linestyle=":", label="accuracy without a threshold")
        if starred:
            ax.scatter([], [], color="gray", marker="*", s=80, label="chosen threshold")
        ax.set_xlabel(f"threshold tau(psi): {_AXIS_LABEL[scales[group[0]]]}")
        ax.grid(alpha=0.3)
        ax.legend(title=f"shaded: {ci}")
    axes[0].set_ylabel(f"top-{_k_of(results)} accuracy (bootstrap mean)")
    fig.supxlabel("retrieved documents scoring below the threshold are dropped", fontsize=_LEGEND_PT)
    if title:
        (axes[0].set_title if len(groups) == 1 else fig.suptitle)(title)
    return _finish(fig, path, dpi)


def _threshold_curve(ax: Any, r: Any, color: str, label: str) -> bool:
    """One system's accuracy-against-threshold curve with its band; True when a star was drawn."""
    ax.plot(r.tau, r.acc_boot_mean, color=color, marker=".", label=label)
    ax.fill_between(r.tau, r.acc_ci_low, r.acc_ci_high, color=color, alpha=0.12)
    if getattr(r, "base_acc", None) is not None:
        ax.axhline(float(r.base_acc), color=color, linestyle=":", linewidth=1)
    if r.chosen is None:
        return False
    ax.scatter([r.chosen_tau], [r.acc_boot_mean[r.chosen]], color=color, marker="*", s=120, zorder=3)
    return True


def _k_of(results: Sequence[Any]) -> str:
    ks = {getattr(r, "k", None) for r in results}
    k = ks.pop() if len(ks) == 1 else None
    return str(k) if k is not None else "K"
