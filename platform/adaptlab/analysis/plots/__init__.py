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

The package, one concept per module: :mod:`~adaptlab.analysis.plots.figure` (the shared figure
plumbing), :mod:`~adaptlab.analysis.plots.forest`, :mod:`~adaptlab.analysis.plots.pairs`,
:mod:`~adaptlab.analysis.plots.densities`, :mod:`~adaptlab.analysis.plots.ndcg`,
:mod:`~adaptlab.analysis.plots.maps` and :mod:`~adaptlab.analysis.plots.threshold_plot`.
"""

from __future__ import annotations

from adaptlab.analysis.plots.densities import plot_shift_histograms, plot_similarity_densities, score_scale
from adaptlab.analysis.plots.figure import (
    DEFAULT_DPI,
    FIGURE_FORMATS,
    check_dpi,
    figure_bytes,
    figure_format,
    save_figure,
    title_texts,
)
from adaptlab.analysis.plots.forest import ForestOptions, plot_ci_forest, plot_forest
from adaptlab.analysis.plots.maps import plot_topic_map
from adaptlab.analysis.plots.ndcg import plot_ndcg_at_k, plot_ndcg_curves
from adaptlab.analysis.plots.pairs import plot_paired_differences
from adaptlab.analysis.plots.threshold_plot import plot_thresholds

__all__ = [
    "DEFAULT_DPI",
    "FIGURE_FORMATS",
    "ForestOptions",
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
    "title_texts",
]
