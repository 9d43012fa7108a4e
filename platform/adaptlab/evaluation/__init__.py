"""From per-query metrics to the numbers users read: CIs, paired tests, tables."""

from adaptlab.evaluation.summary import EvaluationSummary, MeasureSummary, PairSummary, summarise, summarise_runs
from adaptlab.evaluation.table import format_pairs, format_summary

__all__ = ["EvaluationSummary", "MeasureSummary", "PairSummary", "format_pairs", "format_summary",
           "summarise", "summarise_runs"]
