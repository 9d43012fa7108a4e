"""Ranking measures: value objects and trec_eval-exact per-query kernels."""

from adaptlab.metrics.measures import MEASURE_NAMES, Measure, parse_measures
from adaptlab.metrics.ranking import PerQueryMetrics, evaluate, rank_documents, ranked_values

__all__ = [
    "MEASURE_NAMES",
    "Measure",
    "PerQueryMetrics",
    "evaluate",
    "parse_measures",
    "rank_documents",
    "ranked_values",
]
