"""Data-scaling fits: how an adaptation variant's gain over its base grows with the data scale.

For a scale study (systems ``<label>-<variant>-s<N>`` beside ``<label>-base``, see
:mod:`adaptlab.models.variants`) and one measure, the per-query gains
``g_q(n) = v_q(<label>-<variant>-s<n>) - v_q(<label>-base)`` are averaged to the mean gain
``G(n)`` at each scale ``n`` (documents). Two curves are fitted to the points ``(n, G(n))`` by
least squares, with ``x = log2(n)``:

- **log-linear** (2 parameters): ``G(n) = a + b log2(n)``; ``b`` is the gain per doubling of the
  data (``b log2(10)`` per 10x). It never levels off, so its extrapolations are optimistic when
  the real curve saturates.
- **saturating** (3 parameters): ``G(n) = c - a n^(-alpha)``, ``alpha > 0``: the gain approaches
  ``c`` as the data grows, the power-law learning curve of Hestness et al. (2017), "Deep Learning
  Scaling is Predictable, Empirically", arXiv:1712.00409. It is fitted by profiling ``alpha`` over
  a log-spaced grid (:data:`ALPHA_GRID`) with ``(c, a)`` linear least squares at each ``alpha``.

**Choice (stated criterion).** The saturating form is considered only with at least
:data:`MIN_SCALES_SATURATING` scales (so each leave-one-out fit of its 3 parameters keeps a
residual degree of freedom); it is chosen when its leave-one-out root-mean-square prediction error
over the scales is smaller than the log-linear fit's (Stone 1974, "Cross-validatory choice and
assessment of statistical predictions", JRSS B 36(2)). With fewer scales the log-linear form is
used and the result says so. The reported form and point estimates are those chosen on the
measured gains.

**Uncertainty.** The queries are resampled with the same indices for every system
(:func:`adaptlab.stats.resample_indices`: paired, so the correlation of the gains across scales
is kept). Each resample repeats the whole procedure on its own mean gains: where the form is
chosen from the data (``model="auto"`` with at least :data:`MIN_SCALES_SATURATING` scales) the
resample chooses its form again by the same criterion, then fits it. The percentile interval over
the resamples (Efron & Tibshirani 1993, "An Introduction to the Bootstrap", section 13.3) gives
the CI of every reported number and the pointwise band of the curve; being the bootstrap of the
choice and the fit together, it carries the uncertainty of the choice of form (Efron 2014,
"Estimation and accuracy after model selection", JASA 109(507), section 2). The bands cover the
sampling variation of the queries, not the randomness of training (one trained model per scale)
nor a truth of neither form.

Reported per (label, variant): the slope per doubling (and per 10x) at the largest scale with
its CI and whether the gain still rises there (the CI above 0); the predicted gain at the next
scale (2x the largest), an **extrapolation**; the scale at which the fitted gain first reaches a
target (searched up to 10x the largest scale, else "not reached within 10x"); and the gain per
training hour at each scale, from the seconds the store records for each model's training.

The package, one concept per module: :mod:`~adaptlab.analysis.scaling.forms` (the two curve forms,
their fits and the choice between them), :mod:`~adaptlab.analysis.scaling.result`
(:class:`ScalingFit`), :mod:`~adaptlab.analysis.scaling.fit` (:func:`fit_scaling` and its
selection-aware paired bootstrap), :mod:`~adaptlab.analysis.scaling.projection` (trend, target
scale, gain per hour), :mod:`~adaptlab.analysis.scaling.sources` (training seconds, a store's or
records' per-query values), :mod:`~adaptlab.analysis.scaling.stored` (the store's ``scaling``
rows), :mod:`~adaptlab.analysis.scaling.render` (JSON rows, figure, tables) and
:mod:`~adaptlab.analysis.scaling.summary` (the paragraph of ``compare`` and ``inspect``).
"""

from __future__ import annotations

from adaptlab.analysis.scaling.fit import fit_scaling
from adaptlab.analysis.scaling.forms import (
    ALPHA_GRID,
    LOG_LINEAR,
    MIN_SCALES_SATURATING,
    NEXT_FACTOR,
    SATURATING,
    SCALING_MODELS,
    SEARCH_FACTOR,
)
from adaptlab.analysis.scaling.render import format_scaling, plot_scaling, scaling_rows, scaling_tables
from adaptlab.analysis.scaling.result import ScalingFit
from adaptlab.analysis.scaling.sources import scaling_from_records, scaling_from_store, training_seconds
from adaptlab.analysis.scaling.stored import fits_from_store_rows, record_scaling, scaling_store_rows, stored_scaling
from adaptlab.analysis.scaling.summary import (
    comparison_scaling,
    scale_curve_fits,
    scaling_summary,
    scaling_summary_rows,
)

__all__ = [
    "ALPHA_GRID",
    "LOG_LINEAR",
    "MIN_SCALES_SATURATING",
    "NEXT_FACTOR",
    "SATURATING",
    "SCALING_MODELS",
    "SEARCH_FACTOR",
    "ScalingFit",
    "comparison_scaling",
    "fit_scaling",
    "fits_from_store_rows",
    "format_scaling",
    "plot_scaling",
    "record_scaling",
    "scale_curve_fits",
    "scaling_from_records",
    "scaling_from_store",
    "scaling_rows",
    "scaling_store_rows",
    "scaling_summary",
    "scaling_summary_rows",
    "scaling_tables",
    "stored_scaling",
    "training_seconds",
]
