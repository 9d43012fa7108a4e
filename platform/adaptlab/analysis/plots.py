"""Figures of the analyses as matplotlib :class:`~matplotlib.figure.Figure` objects, drawn on
the Agg canvas (no display, no pyplot global state: safe in worker processes and tests).

Every ``plot_*`` function returns the Figure (show it in a notebook, combine or restyle it);
``path`` is optional: when given, the figure is also saved there in the format of its suffix
(``.png``, ``.pdf`` or ``.svg``; PNG at ``dpi``, default 200) and parent folders are created.
:func:`save_figure` saves a Figure later; :func:`figure_bytes` renders one in memory (the report
embeds its figures that way). Tick labels are at least 10 pt, axis labels and legends 9.5 pt or
more, so a figure stays readable in a two-column paper.

- :func:`plot_forest`: one multi-measure forest plot (rows = systems, one panel per measure):
  the point estimate (the value the tables print) with its confidence interval.
- :func:`plot_ci_forest`: the same for one measure.
- :func:`plot_paired_differences`: each paired difference against its baseline with its CI,
  filled where the multiplicity-adjusted p (Holm, as stored) is below ``alpha``.
- :func:`plot_similarity_densities`: densities of ``S_rand`` (red), ``S_corr`` (green) and
  ``S_topK`` (blue), one panel per system (reference 000, Figure 1).
- :func:`plot_ndcg_curves`: nDCG@k against k per system with CI bands (reference 004, Fig. 3);
  integer k ticks up to the largest k computed; hollow markers flag lower bounds (k beyond the
  retrieval depth).
- :func:`plot_ndcg_at_k`: nDCG@k for k = 1..10 in panels (one per model family and variant,
  one line per data scale, the base dashed), with CI bands (reference 004, Fig. 3).
- :func:`plot_shift_histograms`: histograms of the domain-shift distances ``Delta`` (000, Fig. 2).
- :func:`plot_topic_map`: a 2-D map of the contexts coloured by topic (004, Figure 1).
- :func:`plot_thresholds`: accuracy against the threshold ``tau(psi)`` with the chosen one marked.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np

from adaptlab.analysis._options import split_options
from adaptlab.analysis.present import ALPHA, significance_mark
from adaptlab.errors import ConfigError

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from typing_extensions import Unpack

__all__ = [
    "DEFAULT_DPI",
    "FIGURE_FORMATS",
    "check_dpi",
    "figure_bytes",
    "figure_format",
    "plot_ci_forest",
    "plot_forest",
    "plot_ndcg_at_k",
    "plot_ndcg_curves",
    "plot_paired_differences",
    "plot_shift_histograms",
    "plot_similarity_densities",
    "plot_thresholds",
    "plot_topic_map",
    "save_figure",
    "score_scale",
]

DEFAULT_DPI = 200
"""Resolution of saved PNG figures (dots per inch); vector formats ignore it."""
FIGURE_FORMATS = ("png", "pdf", "svg")
"""The formats :func:`save_figure` writes, chosen by the file suffix."""

_COLORS = {"rand": "tab:red", "corr": "tab:green", "topk": "tab:blue"}
_TICK_PT, _LABEL_PT, _TITLE_PT, _LEGEND_PT = 10.0, 11.0, 12.0, 9.5
_K_TICKS = (1, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)

Target = str | Path | None


def _figure(width: float, height: float) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def check_dpi(dpi: Any) -> int:
    """``dpi`` as an int, or a ConfigError naming the valid range."""
    if isinstance(dpi, bool) or not isinstance(dpi, (int, np.integer)) or not 10 <= int(dpi) <= 2400:
        raise ConfigError(f"dpi: expected an integer from 10 to 2400, got {dpi!r}")
    return int(dpi)


def figure_format(path: str | Path) -> str:
    """The format of a figure file from its suffix (``png``, ``pdf`` or ``svg``)."""
    fmt = Path(path).suffix.lower().lstrip(".")
    if fmt not in FIGURE_FORMATS:
        raise ConfigError(
            f"figure file {str(path)!r}: unsupported suffix {Path(path).suffix or '(none)'!r}; "
            f"expected one of {', '.join('.' + f for f in FIGURE_FORMATS)}"
        )
    return fmt


def save_figure(fig: Figure, path: str | Path, *, dpi: int = DEFAULT_DPI) -> Path:
    """Save ``fig`` to ``path`` in the format of its suffix (PNG at ``dpi``); returns the path.
    A PNG is exactly ``figsize * dpi`` pixels (no tight cropping: the layout is constrained)."""
    fmt = figure_format(path)
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(figure_bytes(fig, fmt, dpi=dpi))
    return p


def figure_bytes(fig: Figure, fmt: str = "png", *, dpi: int = DEFAULT_DPI) -> bytes:
    """``fig`` rendered in memory as ``fmt`` (``png``, ``pdf`` or ``svg``)."""
    if fmt not in FIGURE_FORMATS:
        raise ConfigError(f"figure format {fmt!r}: expected one of {', '.join(FIGURE_FORMATS)}")
    buf = io.BytesIO()
    meta = {"Date": None} if fmt == "svg" else {}
    fig.savefig(buf, format=fmt, dpi=check_dpi(dpi), metadata=meta)
    return buf.getvalue()


def _readable(fig: Figure) -> None:
    """Raise every tick label, axis label, title and legend text to the minimum readable size."""
    for ax in fig.axes:
        ax.tick_params(labelsize=_TICK_PT)
        for text, size in ((ax.xaxis.label, _LABEL_PT), (ax.yaxis.label, _LABEL_PT), (ax.title, _TITLE_PT)):
            text.set_fontsize(max(text.get_fontsize(), size))
    legends = [ax.get_legend() for ax in fig.axes] + list(fig.legends)
    for leg in (lg for lg in legends if lg is not None):
        for text in [*leg.get_texts(), leg.get_title()]:
            text.set_fontsize(max(text.get_fontsize(), _LEGEND_PT))


def title_texts(fig: Figure) -> list[Any]:
    """The non-empty title Text objects of ``fig``: its suptitle and every visible axes' titles."""
    texts = [getattr(fig, "_suptitle", None)]
    texts += [
        t
        for ax in fig.axes
        if ax.get_visible()
        for t in (ax.title, getattr(ax, "_left_title", None), getattr(ax, "_right_title", None))
    ]
    return [t for t in texts if t is not None and t.get_visible() and t.get_text()]


def _fit_titles(fig: Figure) -> None:
    """Wrap every title wider than the canvas (or reaching past an edge) onto more lines, so no
    title is clipped (issue 30: the similarity-density title was cut at both edges): after a
    layout pass, a title whose box leaves ``[0, width]`` is refilled with proportionally fewer
    characters per line, up to 6 times."""
    import textwrap

    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]  # the Agg canvas of _figure has one
    width = fig.bbox.width
    for text in title_texts(fig):
        words = " ".join(text.get_text().split())
        for _ in range(6):
            box = text.get_window_extent(renderer)
            if box.x0 >= 0 and box.x1 <= width:
                break
            per_line = max(max(len(line) for line in text.get_text().split("\n")), 1)
            chars = int(per_line * 0.95 * width / max(box.width, 1))
            chars = max(8, min(chars, per_line - max(1, per_line // 6)))  # narrower, even if only off-centre
            text.set_text(textwrap.fill(words, chars))
            fig.draw_without_rendering()


def _finish(fig: Figure, path: Target, dpi: int) -> Figure:
    """Readable fonts, titles that fit the canvas; saved to ``path`` when one is given; the Figure returned."""
    _readable(fig)
    _fit_titles(fig)
    check_dpi(dpi)
    if path is not None:
        save_figure(fig, path, dpi=dpi)
    return fig


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


def plot_topic_map(
    coords: Any, labels: Any, path: Target = None, *, title: str | None = None, dpi: int = DEFAULT_DPI
) -> Figure:
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
    return _finish(fig, path, dpi)


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
