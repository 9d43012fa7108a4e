"""From per-query metrics to the numbers users read: CIs, paired tests, adjusted p, ranks (the
tables that print them: :mod:`adaptlab.analysis.evaluation_table`).

The bootstrap of each (dataset x measure) group runs in-process or as a Ray task
(``summarise(..., workers="auto"|"local"|"ray")``, threshold :data:`RAY_MIN_CELLS`) with the
same numbers either way.
"""

from adaptlab.evaluation.entry import Evaluation, evaluate
from adaptlab.evaluation.groups import GroupedSummary, check_group_column, summarise_groups
from adaptlab.evaluation.persist import RunContext, commit_summary
from adaptlab.evaluation.summary import (
    EvaluationSummary,
    GroupSummary,
    MeasureSummary,
    PairSummary,
    summarise,
    summarise_arrays,
    summarise_datasets,
    summarise_runs,
)
from adaptlab.evaluation.workers import RAY_MIN_CELLS, WORKERS

__all__ = [
    "RAY_MIN_CELLS",
    "WORKERS",
    "Evaluation",
    "EvaluationSummary",
    "GroupSummary",
    "GroupedSummary",
    "MeasureSummary",
    "PairSummary",
    "RunContext",
    "check_group_column",
    "commit_summary",
    "evaluate",
    "summarise",
    "summarise_arrays",
    "summarise_datasets",
    "summarise_groups",
    "summarise_runs",
]
