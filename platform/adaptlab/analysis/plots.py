"""PNG figures of the analyses, drawn with matplotlib's Agg canvas (no display, no pyplot
global state: safe in worker processes and tests).

Every function writes one PNG to ``path`` (parent folders are created) and returns the path.

- :func:`plot_similarity_densities`: densities of ``S_rand`` (red), ``S_corr`` (green) and
  ``S_topK`` (blue), one panel per system (reference 000, Figure 1).
- :func:`plot_ci_forest`: point estimates with their confidence intervals across systems.
- :func:`plot_ndcg_curves`: nDCG@k against k per system with CI bands (reference 004, Fig. 3);
  hollow markers flag lower bounds (k beyond the retrieval depth).
- :func:`plot_ndcg_at_k`: nDCG@k for k = 1..10 in panels (one per model family and variant,
  one line per data scale, the base dashed), with CI bands (reference 004, Fig. 3).
- :func:`plot_shift_histograms`: histograms of the domain-shift distances ``Delta`` (000, Fig. 2).
- :func:`plot_topic_map`: a 2-D map of the contexts coloured by topic (004, Figure 1).
- :func:`plot_thresholds`: accuracy against the threshold ``tau(psi)`` with the chosen one marked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from adaptlab.errors import ConfigError

__all__ = [
    "plot_ci_forest",
    "plot_ndcg_at_k",
    "plot_ndcg_curves",
    "plot_shift_histograms",
    "plot_similarity_densities",
    "plot_thresholds",
    "plot_topic_map",
]

_COLORS = {"rand": "tab:red", "corr": "tab:green", "topk": "tab:blue"}


def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _save(fig: Any, path: str | Path) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(fig)
    fig.savefig(p, format="png", bbox_inches="tight")
    return p


def _density(ax: Any, values: np.ndarray, color: str, label: str) -> None:
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return
    if v.size < 3 or np.ptp(v) == 0:
        ax.axvline(float(v.mean()), color=color, label=label)
        return
    from scipy.stats import gaussian_kde

    try:
        kde = gaussian_kde(v)
    except np.linalg.LinAlgError:
        ax.hist(v, bins=30, density=True, histtype="step", color=color, label=label)
        return
    pad = 0.1 * np.ptp(v)
    xs = np.linspace(v.min() - pad, v.max() + pad, 256)
    ax.plot(xs, kde(xs), color=color, label=label)
    ax.fill_between(xs, kde(xs), color=color, alpha=0.15)


def plot_similarity_densities(
    distributions: Sequence[Any] | Mapping[str, Any], path: str | Path, *, title: str | None = None
) -> Path:
    """Densities of ``S_rand``, ``S_corr`` and ``S_topK`` per system: one panel per system with
    shared x and y scales, every panel labelled, one legend for the figure.

    ``distributions``: :class:`~adaptlab.analysis.overlap.SimilarityDistributions` objects (a
    sequence, or a mapping from panel title to object).
    """
    items = list(distributions.items()) if isinstance(distributions, Mapping) else [
        (getattr(d, "system", "") or f"system {i + 1}", d) for i, d in enumerate(distributions)
    ]
    if not items:
        raise ConfigError("plot_similarity_densities: nothing to plot")
    ncols = min(4, len(items))
    nrows = (len(items) + ncols - 1) // ncols
    fig = _figure(3.6 * ncols, 2.8 * nrows + 0.6)
    axes = fig.subplots(nrows, ncols, squeeze=False, sharex=True, sharey=True)
    for ax in axes.ravel()[len(items):]:
        ax.set_visible(False)
    ks = {getattr(d, "k", None) for _, d in items}
    k = ks.pop() if len(ks) == 1 else "K"
    for ax, (name, d) in zip(axes.ravel(), items):
        _density(ax, d.rand, _COLORS["rand"], "S_rand: query vs a random document")
        _density(ax, d.corr, _COLORS["corr"], "S_corr: query vs its gold document")
        _density(ax, d.topk, _COLORS["topk"], f"S_top{k}: query vs its top-{k} retrieved")
        ax.set_title(str(name), fontsize=9)
        ax.set_xlabel("similarity", fontsize=8)
        ax.set_ylabel("density", fontsize=8)
        ax.tick_params(labelsize=7)
    handles, labels = axes.ravel()[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=3, fontsize=8)
    fig.suptitle(title or f"Similarity densities (S_rand, S_corr, S_top{k})")
    return _save(fig, path)


def plot_ci_forest(
    labels: Sequence[str],
    values: Sequence[float],
    ci_low: Sequence[float],
    ci_high: Sequence[float],
    path: str | Path,
    *,
    measure: str = "",
    title: str | None = None,
    ci: str = "95% CI",
) -> Path:
    """A forest plot: one row per label with its value and confidence interval (``ci`` names the
    level, shown in the legend)."""
    v = np.asarray(values, dtype=np.float64)
    lo = np.asarray(ci_low, dtype=np.float64)
    hi = np.asarray(ci_high, dtype=np.float64)
    n = len(labels)
    if n == 0 or not (v.shape == lo.shape == hi.shape == (n,)):
        raise ConfigError("plot_ci_forest: labels, values, ci_low and ci_high must be non-empty and of equal length")
    fig = _figure(6.0, 0.45 * n + 1.2)
    ax = fig.subplots()
    y = np.arange(n)[::-1]
    err = np.vstack([np.where(np.isfinite(lo), v - lo, 0.0), np.where(np.isfinite(hi), hi - v, 0.0)])
    ax.errorbar(v, y, xerr=np.clip(err, 0.0, None), fmt="o", color="tab:blue", ecolor="tab:gray", capsize=3,
                label=f"bootstrap mean with {ci}")
    ax.set_yticks(y)
    ax.set_yticklabels([str(s) for s in labels], fontsize=8)
    ax.set_xlabel(measure or "value")
    ax.set_ylabel("system")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    if title:
        ax.set_title(title)
    return _save(fig, path)


def plot_ndcg_curves(curves: Sequence[Any], path: str | Path, *, title: str | None = None,
                     ci: str = "95% CI") -> Path:
    """nDCG@k against k (log axis) per system, with CI bands (``ci`` names the level, in the
    legend); hollow markers are lower bounds (k beyond the stored ranking depth)."""
    if not curves:
        raise ConfigError("plot_ndcg_curves: nothing to plot")
    fig = _figure(6.5, 4.0)
    ax = fig.subplots()
    lower = False
    for i, c in enumerate(curves):
        ks = np.asarray(c.ks, dtype=np.float64)
        color = f"C{i % 10}"
        ax.plot(ks, c.boot_mean, color=color, label=c.system or f"system {i + 1}")
        ax.fill_between(ks, c.ci_low, c.ci_high, color=color, alpha=0.15)
        ex = np.asarray(c.exact, dtype=bool)
        ax.scatter(ks[ex], np.asarray(c.boot_mean)[ex], color=color, s=18)
        if (~ex).any():
            lower = True
            ax.scatter(ks[~ex], np.asarray(c.boot_mean)[~ex], facecolors="none", edgecolors=color, s=24)
    if lower:
        ax.scatter([], [], facecolors="none", edgecolors="k", s=24, label="lower bound (k > depth)")
    ax.set_xscale("log")
    ax.set_xlabel("k (rank cut-off, log scale)")
    ax.set_ylabel("nDCG@k (bootstrap mean)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, title=f"shaded: {ci}", title_fontsize=8)
    if title:
        ax.set_title(title)
    return _save(fig, path)


def plot_ndcg_at_k(
    panels: Mapping[str, Sequence[tuple[str, Any]]], path: str | Path, *, title: str | None = None,
    ci: str = "95% CI",
) -> Path:
    """nDCG@k against k (linear axis, e.g. k = 1..10) in panels (reference 004, Figure 3).

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
    for ax in axes.ravel()[len(names):]:
        ax.set_visible(False)
    for ax, t in zip(axes.ravel(), names):
        for lab, c in panels[t]:
            ks = np.asarray(c.ks, dtype=np.float64)
            base = lab.endswith("base")
            color = "k" if base else colors[lab]
            ax.plot(ks, c.boot_mean, color=color, linestyle="--" if base else "-", marker="." if not base else None,
                    label=lab)
            ax.fill_between(ks, c.ci_low, c.ci_high, color=color, alpha=0.08 if base else 0.15)
        ax.set_title(t, fontsize=9)
        ax.set_xlabel("k (rank cut-off)")
        ax.set_ylabel("nDCG@k")
        ax.set_xticks(np.asarray(panels[t][0][1].ks, dtype=np.float64))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, title=f"shaded: {ci}", title_fontsize=7, loc="lower right")
    fig.suptitle(title or f"nDCG@k ({ci})")
    return _save(fig, path)


def plot_shift_histograms(
    deltas: Mapping[str, Any], path: str | Path, *, bins: int = 50, title: str | None = None
) -> Path:
    """Overlaid histograms of ``Delta`` distances, one per label (e.g. base vs adapted)."""
    if not deltas:
        raise ConfigError("plot_shift_histograms: nothing to plot")
    arrays = {k: np.asarray(v, dtype=np.float64).ravel() for k, v in deltas.items()}
    allv = np.concatenate([a[np.isfinite(a)] for a in arrays.values()])
    if allv.size == 0:
        raise ConfigError("plot_shift_histograms: no finite distances")
    edges = np.histogram_bin_edges(allv, bins=int(bins))
    fig = _figure(6.0, 3.8)
    ax = fig.subplots()
    for label, a in arrays.items():
        ax.hist(a[np.isfinite(a)], bins=edges, alpha=0.5, label=str(label))
    ax.set_xlabel("L2 distance to the nearest reference embedding")
    ax.set_ylabel("count")
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title)
    return _save(fig, path)


def plot_topic_map(coords: Any, labels: Any, path: str | Path, *, title: str | None = None) -> Path:
    """Scatter of 2-D ``coords`` [N, 2] coloured by topic ``labels`` [N]."""
    xy = np.asarray(coords, dtype=np.float64)
    lab = np.asarray(labels)
    if xy.ndim != 2 or xy.shape[1] != 2 or lab.shape != (xy.shape[0],) or xy.shape[0] == 0:
        raise ConfigError(f"plot_topic_map: coords must be [N, 2] and labels [N], got {xy.shape} and {lab.shape}")
    _, codes = np.unique(lab, return_inverse=True)
    fig = _figure(5.5, 5.0)
    ax = fig.subplots()
    ax.scatter(xy[:, 0], xy[:, 1], c=codes, cmap="tab20", s=8, alpha=0.8)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_xlabel("map dimension 1")
    ax.set_ylabel("map dimension 2")
    ax.set_title(title or f"{codes.max() + 1} topics (colour = topic)")
    return _save(fig, path)


def plot_thresholds(results: Sequence[Any], path: str | Path, *, title: str | None = None,
                    ci: str = "95% CI") -> Path:
    """Bootstrapped top-K accuracy after dropping retrieved documents below ``tau(psi)``,
    against ``tau``, per system: line = bootstrap mean, band = its ``ci`` interval, dotted line
    = the accuracy without a threshold, star = the chosen threshold."""
    if not results:
        raise ConfigError("plot_thresholds: nothing to plot")
    fig = _figure(6.5, 4.2)
    ax = fig.subplots()
    starred = False
    for i, r in enumerate(results):
        color = f"C{i % 10}"
        ax.plot(r.tau, r.acc_boot_mean, color=color, marker=".", label=r.system or f"system {i + 1}")
        ax.fill_between(r.tau, r.acc_ci_low, r.acc_ci_high, color=color, alpha=0.12)
        if getattr(r, "base_acc", None) is not None:
            ax.axhline(float(r.base_acc), color=color, linestyle=":", linewidth=1)
        if r.chosen is not None:
            starred = True
            ax.scatter([r.chosen_tau], [r.acc_boot_mean[r.chosen]], color=color, marker="*", s=120, zorder=3)
    ax.plot([], [], color="gray", linestyle=":", label="accuracy without a threshold")
    if starred:
        ax.scatter([], [], color="gray", marker="*", s=80, label="chosen threshold")
    ax.set_xlabel("threshold tau(psi): similarity below which retrieved documents are dropped")
    ax.set_ylabel(f"top-{_k_of(results)} accuracy (bootstrap mean)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, title=f"shaded: {ci}", title_fontsize=8)
    if title:
        ax.set_title(title)
    return _save(fig, path)


def _k_of(results: Sequence[Any]) -> str:
    ks = {getattr(r, "k", None) for r in results}
    k = ks.pop() if len(ks) == 1 else None
    return str(k) if k is not None else "K"
