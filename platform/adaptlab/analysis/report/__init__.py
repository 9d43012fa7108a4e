"""A Markdown + HTML report of a results store: tables of every stored measure with its CI,
paired comparisons, thresholds, COE/ROE, isotropy, correlations, and the figures that can be
drawn from the store (CI forest plots, similarity densities, nDCG@k curves, thresholds).

For a scale study it adds: a "Training" table (per adapted model: steps, epochs asked and run,
warm-up and total steps, peak learning rate, first and last loss, relative weight change and the
training checks' warnings; from ``config.systems`` of the runs, else the artifact manifests);
measures against the data scale with paired gains over each family's own base (a ColBERT
variant against ``colbert-base``); nDCG@k for k = 1..10 per scale and variant with CI bands
(reference 004, Figure 3); and an "Inspection" section (win/loss counts beside the paired tests,
and the queries where an adapted system and its base differ most). Every figure has labelled
axes, a legend, its CI level and a one-line caption saying what to look for.

``build_report(store_root, out_dir)`` writes ``out_dir/report.md``, ``out_dir/report.html``
and ``out_dir/figures/`` (PNG by default, or SVG or PDF; every figure also embedded in the HTML, so
report.html is self-contained) and returns the Markdown path. For each (system, dataset,
measure, comparison) the row of the most recent run is shown. When the store has per-query
records but no ``threshold``/``coe`` rows for a system, those analyses are computed for the
report (``compute_missing=True``; marked as such). Figures that need embeddings (domain shift
histograms, topic maps) cannot be drawn from the store: make them with
:mod:`adaptlab.analysis.plots`.

The modules, one concept each: :mod:`~adaptlab.analysis.report.build` (reading the store and the
layout), :mod:`~adaptlab.analysis.report.document` (the Markdown/HTML writer),
:mod:`~adaptlab.analysis.report.scores` and :mod:`~adaptlab.analysis.report.scale` (the
sections), :mod:`~adaptlab.analysis.report.missing` (analyses computed when the store lacks
them), :mod:`~adaptlab.analysis.report.training` (the training table, manifests read through the
artifacts API) and :mod:`~adaptlab.analysis.report.cells` (what a cell says about stored rows).
Every number is written by :mod:`adaptlab.analysis.present`, as in the CLI and LaTeX.
"""

from __future__ import annotations

from adaptlab.analysis.report.build import build_report

__all__ = ["build_report"]
