"""Similarity distributions: densities of ``S_rand``, ``S_corr`` and ``S_topK`` per system (reference
000, Figure 1) and histograms of the domain-shift distances (000, Figure 2), on a score axis that
fits the scores.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from adaptlab.analysis.plots.figure import _LEGEND_PT, DEFAULT_DPI, Target, _figure, _finish
from adaptlab.errors import ConfigError

if TYPE_CHECKING:
    from matplotlib.figure import Figure


_COLORS = {"rand": "tab:red", "corr": "tab:green", "topk": "tab:blue"}


SIMILARITY, NONNEGATIVE, SCORE = "similarity", "nonnegative", "score"


_AXIS_LABEL = {SIMILARITY: "similarity (unit vectors)", NONNEGATIVE: "score (>= 0, e.g. BM25)", SCORE: "score"}


def score_scale(*arrays: Any) -> str:
    """The scale of a system's scores: ``"similarity"`` when every finite value lies in [-1, 1]
    (adaptlab's embeddings are unit vectors, so their inner products do), ``"nonnegative"`` when
    every value is >= 0 but some exceed 1 (BM25), else ``"score"`` (e.g. ColBERT MaxSim sums).
    Systems of the ``"similarity"`` scale share an axis; every other system gets its own."""
    v = np.concatenate([np.asarray(a, dtype=np.float64).ravel() for a in arrays] or [np.zeros(0)])
    v = v[np.isfinite(v)]
    if v.size == 0 or (v.min() >= -1.0 - 1e-6 and v.max() <= 1.0 + 1e-6):
        return SIMILARITY
    return NONNEGATIVE if v.min() >= 0.0 else SCORE


def _bounds(scale: str) -> tuple[float | None, float | None]:
    """The smallest and largest possible score of a scale (None: unbounded)."""
    return {SIMILARITY: (-1.0, 1.0), NONNEGATIVE: (0.0, None)}.get(scale, (None, None))


def _scale_groups(scales: Sequence[str]) -> list[list[int]]:
    """Indices of the panels sharing an axis: all ``"similarity"`` systems together (first), every
    other system alone."""
    shared = [i for i, sc in enumerate(scales) if sc == SIMILARITY]
    return ([shared] if shared else []) + [[i] for i, sc in enumerate(scales) if sc != SIMILARITY]


def _density(
    ax: Any, values: np.ndarray, color: str, label: str, bounds: tuple[float | None, float | None] = (None, None)
) -> None:
    """A Gaussian kernel density of ``values`` drawn only within ``bounds`` (the scale's possible
    scores), with the mass that would spill past a bound reflected back (Schuster 1985,
    "Incorporating support constraints into nonparametric estimators of densities",
    Communications in Statistics - Theory and Methods 14(5)), so the curve integrates to 1 on
    the possible scores and never runs below the smallest (BM25's 0)."""
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
    lower, upper = bounds
    pad = 0.1 * np.ptp(v)
    lo = v.min() - pad if lower is None else max(v.min() - pad, lower)
    hi = v.max() + pad if upper is None else min(v.max() + pad, upper)
    xs = np.linspace(lo, hi, 256)
    ys = kde(xs)
    for b in (lower, upper):
        if b is not None:
            ys = ys + kde(2.0 * b - xs)
    ax.plot(xs, ys, color=color, label=label)
    ax.fill_between(xs, ys, color=color, alpha=0.15)


def _share(axes: Sequence[Any], groups: list[list[int]]) -> None:
    """Panels of one group share x and y with the group's first panel."""
    for group in groups:
        for i in group[1:]:
            axes[i].sharex(axes[group[0]])
            axes[i].sharey(axes[group[0]])


def plot_similarity_densities(
    distributions: Sequence[Any] | Mapping[str, Any],
    path: Target = None,
    *,
    title: str | None = None,
    dpi: int = DEFAULT_DPI,
) -> Figure:
    """Densities of ``S_rand``, ``S_corr`` and ``S_topK`` per system: one panel per system, every
    panel labelled, one legend for the figure. Panels of systems on the similarity scale
    (:func:`score_scale`) share their x and y axes; any other system (BM25's scores, 0 to 40)
    has axes of its own, so no panel squeezes another's curves into a spike. Densities stay
    within the scale's possible scores (:func:`_density`).

    ``distributions``: :class:`~adaptlab.analysis.overlap.SimilarityDistributions` objects (a
    sequence, or a mapping from panel title to object).
    """
    items = (
        list(distributions.items())
        if isinstance(distributions, Mapping)
        else [(getattr(d, "system", "") or f"system {i + 1}", d) for i, d in enumerate(distributions)]
    )
    if not items:
        raise ConfigError("plot_similarity_densities: nothing to plot")
    ncols = min(3, len(items))
    nrows = (len(items) + ncols - 1) // ncols
    fig = _figure(3.8 * ncols, 3.0 * nrows + 0.9)
    grid = fig.subplots(nrows, ncols, squeeze=False)
    for ax in grid.ravel()[len(items) :]:
        ax.set_visible(False)
    axes = list(grid.ravel()[: len(items)])
    scales = [score_scale(d.rand, d.corr, d.topk) for _, d in items]
    _share(axes, _scale_groups(scales))
    ks = {getattr(d, "k", None) for _, d in items}
    k = ks.pop() if len(ks) == 1 else "K"
    for ax, (name, d), scale in zip(axes, items, scales):
        _density(ax, d.rand, _COLORS["rand"], "S_rand: query vs a random document", _bounds(scale))
        _density(ax, d.corr, _COLORS["corr"], "S_corr: query vs its gold document", _bounds(scale))
        _density(ax, d.topk, _COLORS["topk"], f"S_top{k}: query vs its top-{k} retrieved", _bounds(scale))
        ax.set_title(str(name))
        ax.set_xlabel(_AXIS_LABEL[scale])
        ax.set_ylabel("density")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=min(3, ncols), fontsize=_LEGEND_PT)
    fig.suptitle(title or f"Similarity densities (S_rand, S_corr, S_top{k})")
    return _finish(fig, path, dpi)


def plot_shift_histograms(
    deltas: Mapping[str, Any],
    path: Target = None,
    *,
    bins: int = 50,
    title: str | None = None,
    dpi: int = DEFAULT_DPI,
) -> Figure:
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
        ax.hist(a[np.isfinite(a)], bins=edges.tolist(), alpha=0.5, label=str(label))
    ax.set_xlabel("L2 distance to the nearest reference embedding")
    ax.set_ylabel("count")
    ax.legend()
    if title:
        ax.set_title(title)
    return _finish(fig, path, dpi)
