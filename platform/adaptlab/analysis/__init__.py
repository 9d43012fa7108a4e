"""Analyses of the reference studies, computed from per-query records and embeddings.

- :mod:`~adaptlab.analysis.thresholds`: similarity thresholds by paired bootstrap (000, Sec. 2.2)
- :mod:`~adaptlab.analysis.overlap`: similarity distributions, COE and ROE (000, Sec. 2.3)
- :mod:`~adaptlab.analysis.isotropy`: ``I_A`` (Mu et al.) and ``I_B`` (IsoScore) (000, Sec. 2.5)
- :mod:`~adaptlab.analysis.transforms`: standardisation, whitening, all-but-the-top
- :mod:`~adaptlab.analysis.shift`: domain shift ``Delta(D, D')`` and its comparison (000, Sec. 2.6)
- :mod:`~adaptlab.analysis.correlation`: Pearson/Spearman across systems (000, Table 3)
- :mod:`~adaptlab.analysis.diversity`: topic diversity of a benchmark (004, Sec. 3.4.2)
- :mod:`~adaptlab.analysis.curves`: nDCG@k curves (004, Figure 3)
- :mod:`~adaptlab.analysis.compare`: all-pairs comparison, significance letters, tiers, MDE
- :mod:`~adaptlab.analysis.evaluation_table`: the text tables of an evaluation (:func:`format_summary`)
- :mod:`~adaptlab.analysis.plan`: power planning, queries needed to detect an effect (:func:`plan_sample_size`)
- :mod:`~adaptlab.analysis.evalrank`: EvalRank MRR / Hits@k over positive pairs (003)
- :mod:`~adaptlab.analysis.plots`: figures (matplotlib Figures; PNG, SVG or PDF when saved); :mod:`~adaptlab.analysis.report`: Markdown/HTML report

Results are dataclasses whose ``to_metric_rows()`` gives rows for the store's ``metrics``
table (without ``run_id``); the measure names are listed in docs/metrics.md.
Importing this package imports NumPy and :mod:`adaptlab.stats` (with ``scipy.special``) only;
the rest of scipy, scikit-learn, matplotlib and pyarrow load on use.
"""

from __future__ import annotations

from adaptlab.analysis.compare import Comparison, compare
from adaptlab.analysis.correlation import Correlation, correlation_table, default_correlation_pairs, measure_values
from adaptlab.analysis.curves import DEFAULT_NDCG_KS, NDCGCurve, ndcg_curve, ndcg_curve_from_records, ndcg_curves
from adaptlab.analysis.diversity import (
    TopicDiversity,
    average_cosine_distance,
    cosine_silhouette,
    topic_diversity,
    topic_entropy,
    topic_map,
)
from adaptlab.analysis.evalrank import EvalRankResult, PairPool, evalrank, evalrank_ranks, load_pairs
from adaptlab.analysis.evaluation_table import format_groups, format_pairs, format_summary
from adaptlab.analysis.inspect import (
    default_pair,
    format_inspection,
    inspect_queries,
    inspection_scaling,
    recorded_texts,
    same_system_note,
    win_loss,
)
from adaptlab.analysis.isotropy import IsotropyResult, isoscore, isotropy, isotropy_mu, isotropy_mu_exact
from adaptlab.analysis.overlap import (
    DEFAULT_OVERLAP_PSI,
    OverlapResult,
    SimilarityDistributions,
    overlap_from_arrays,
    overlap_metrics,
    similarity_distributions,
)
from adaptlab.analysis.plan import Plan, PlanSettings, pilot_from_store, plan_sample_size
from adaptlab.analysis.plots import (
    DEFAULT_DPI,
    FIGURE_FORMATS,
    plot_ci_forest,
    plot_forest,
    plot_ndcg_curves,
    plot_paired_differences,
    plot_shift_histograms,
    plot_similarity_densities,
    plot_thresholds,
    plot_topic_map,
    save_figure,
)
from adaptlab.analysis.present import DIGITS, format_p, render_table, terminal_escape, terminal_escape_lines
from adaptlab.analysis.report import build_report
from adaptlab.analysis.report.build import ReportSettings
from adaptlab.analysis.report.groups import render_groups, rows_of_column, stored_group_columns
from adaptlab.analysis.scaling import (
    SCALING_MODELS,
    ScalingFit,
    comparison_scaling,
    fit_scaling,
    fits_from_store_rows,
    format_scaling,
    plot_scaling,
    record_scaling,
    scaling_from_records,
    scaling_from_store,
    scaling_rows,
    scaling_store_rows,
    scaling_summary,
    scaling_summary_rows,
    stored_scaling,
)
from adaptlab.analysis.shift import DEFAULT_QUANTILES, ShiftComparison, compare_shift, domain_shift
from adaptlab.analysis.tables import render, wide_table
from adaptlab.analysis.thresholds import (
    GAMMAS,
    PSI_GRID,
    TESTS,
    ThresholdResult,
    ThresholdRule,
    similarity_thresholds,
    thresholds_from_arrays,
)
from adaptlab.analysis.transforms import (
    TRANSFORMS,
    AllButTheTop,
    EmbeddingTransform,
    Identity,
    Standardize,
    TransformedSpace,
    Whiten,
    make_transform,
    transform_space,
)

__all__ = [
    "AllButTheTop",
    "DEFAULT_DPI",
    "FIGURE_FORMATS",
    "Comparison",
    "Correlation",
    "DEFAULT_NDCG_KS",
    "DEFAULT_OVERLAP_PSI",
    "DEFAULT_QUANTILES",
    "DIGITS",
    "EmbeddingTransform",
    "EvalRankResult",
    "GAMMAS",
    "Identity",
    "IsotropyResult",
    "NDCGCurve",
    "OverlapResult",
    "PSI_GRID",
    "PairPool",
    "Plan",
    "PlanSettings",
    "ReportSettings",
    "ShiftComparison",
    "SimilarityDistributions",
    "Standardize",
    "TESTS",
    "TRANSFORMS",
    "ThresholdResult",
    "ThresholdRule",
    "TopicDiversity",
    "TransformedSpace",
    "Whiten",
    "average_cosine_distance",
    "build_report",
    "render_groups",
    "rows_of_column",
    "stored_group_columns",
    "compare",
    "compare_shift",
    "correlation_table",
    "cosine_silhouette",
    "default_correlation_pairs",
    "domain_shift",
    "evalrank",
    "evalrank_ranks",
    "default_pair",
    "format_groups",
    "format_inspection",
    "format_p",
    "format_pairs",
    "format_summary",
    "inspect_queries",
    "recorded_texts",
    "same_system_note",
    "isoscore",
    "isotropy",
    "isotropy_mu",
    "isotropy_mu_exact",
    "load_pairs",
    "make_transform",
    "measure_values",
    "ndcg_curve",
    "ndcg_curve_from_records",
    "ndcg_curves",
    "overlap_from_arrays",
    "overlap_metrics",
    "pilot_from_store",
    "plan_sample_size",
    "plot_ci_forest",
    "plot_forest",
    "plot_ndcg_curves",
    "plot_paired_differences",
    "plot_shift_histograms",
    "plot_similarity_densities",
    "plot_thresholds",
    "plot_topic_map",
    "save_figure",
    "render",
    "render_table",
    "similarity_distributions",
    "similarity_thresholds",
    "terminal_escape",
    "terminal_escape_lines",
    "thresholds_from_arrays",
    "topic_diversity",
    "topic_entropy",
    "topic_map",
    "transform_space",
    "wide_table",
    "win_loss",
]
__all__ += [
    "SCALING_MODELS",
    "ScalingFit",
    "fit_scaling",
    "format_scaling",
    "plot_scaling",
    "scaling_from_records",
    "scaling_from_store",
    "scaling_rows",
    "comparison_scaling",
    "fits_from_store_rows",
    "record_scaling",
    "scaling_store_rows",
    "scaling_summary",
    "scaling_summary_rows",
    "stored_scaling",
    "inspection_scaling",
]
