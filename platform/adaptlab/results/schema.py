"""The tables of the results store, their columns and the schema version.

Version ``SCHEMA_VERSION`` of the layout:

- ``runs``: one row per evaluated (system, dataset) with its provenance;
- ``metrics``: long format, one row per (run, measure[, compared_to][, group]); ``group`` (version 2)
  is null on whole-dataset rows and ``column=value`` on the rows of one query group;
- ``per_query``: ``run_id`` plus the columns of
  :meth:`adaptlab.retrieval.records.PerQueryRecords.to_arrow`;
- ``scaling``: one row per fitted data-scaling curve (dataset, label, variant, measure) of a
  scale study, written at the study's end.

Every Parquet file carries its version under the key :data:`VERSION_KEY` of the Arrow
schema metadata; readers upgrade older files (:mod:`adaptlab.results.legacy.schema_upgrade`) and
reject newer ones. pyarrow is imported only when a schema is first built, so importing
this module stays cheap.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

__all__ = [
    "COLUMNS",
    "Column",
    "SCALING",
    "SCHEMA_VERSION",
    "TABLES",
    "TABLE_KEY",
    "VERSION_KEY",
    "arrow_schema",
    "arrow_type",
    "column_names",
]

SCHEMA_VERSION: int = 2
"""Version of the table layout written by this adaptlab (2: ``metrics.group``, per-group rows)."""

VERSION_KEY: bytes = b"adaptlab.schema_version"
"""Parquet/Arrow schema-metadata key holding the layout version (ASCII integer)."""

TABLE_KEY: bytes = b"adaptlab.table"
"""Parquet/Arrow schema-metadata key holding the table name."""

TABLES: tuple[str, ...] = ("runs", "metrics", "per_query")
"""The tables of one evaluation's commit."""
SCALING: str = "scaling"
"""The table of data-scaling fits (its own commits; see :data:`COLUMNS`)."""


@dataclass(frozen=True)
class Column:
    """One column: its name, logical type, whether nulls are allowed, whether a commit
    must provide it (optional columns are filled with nulls) and what it holds."""

    name: str
    kind: str
    nullable: bool
    required: bool
    doc: str


def _c(name: str, kind: str, doc: str, *, nullable: bool = False, required: bool = True) -> Column:
    return Column(name, kind, nullable, required, doc)


_RUNS = (
    _c("run_id", "string", "unique id of this evaluation of one system on one dataset"),
    _c("system", "string", "name of the evaluated system (model variant)"),
    _c("dataset", "string", "name of the dataset"),
    _c("package_version", "string", "adaptlab.__version__ of the writer"),
    _c("model_id", "string", "model name or path (may be empty when unknown)"),
    _c("model_revision", "string", "model revision or weights hash", nullable=True, required=False),
    _c("dataset_fingerprint", "string", "Dataset.fingerprint() of the evaluated data"),
    _c("seed", "int64", "seed of the run's randomness", nullable=True, required=False),
    _c("config", "string", "the run's configuration as JSON (sorted keys)"),
    _c("timestamp", "timestamp", "when the run was recorded (UTC)"),
    _c("host", "string", "host name of the writer"),
    _c("study", "string", "name of the study the run belongs to", nullable=True, required=False),
    _c("schema_version", "int32", "layout version the row was written with", required=False),
)

_METRICS = (
    _c("run_id", "string", "the run the value belongs to"),
    _c("system", "string", "system name (as in runs)"),
    _c("dataset", "string", "dataset name (as in runs)"),
    _c("measure", "string", "canonical measure string, e.g. ndcg@10, mrr, coe, isoscore"),
    _c("value", "float64", "the point estimate on all queries (NaN allowed)"),
    _c("boot_mean", "float64", "mean over bootstrap resamples", nullable=True, required=False),
    _c("ci_low", "float64", "lower end of the confidence interval", nullable=True, required=False),
    _c("ci_high", "float64", "upper end of the confidence interval", nullable=True, required=False),
    _c("n_queries", "int64", "number of queries the value is computed on", nullable=True, required=False),
    _c("n_resamples", "int64", "number of bootstrap resamples", nullable=True, required=False),
    _c("sample_size", "int64", "queries per bootstrap resample", nullable=True, required=False),
    _c("seed", "int64", "seed of the bootstrap", nullable=True, required=False),
    _c(
        "compared_to",
        "string",
        "the other system of a paired difference (null otherwise)",
        nullable=True,
        required=False,
    ),
    _c("p_value", "float64", "p-value of a paired test (null otherwise)", nullable=True, required=False),
    _c("extra", "string", "free JSON for measure-specific details", nullable=True, required=False),
    # added for issue 15: nullable and optional, so rows written before them still read (as nulls)
    _c("confidence", "float64", "coverage of the CI (0.95 = 95%)", nullable=True, required=False),
    _c(
        "interval_method",
        "string",
        "how the CI was computed: percentile, bca, wilson or jeffreys",
        nullable=True,
        required=False,
    ),
    _c("p_adjusted", "float64", "p_value adjusted for multiplicity within its family", nullable=True, required=False),
    _c(
        "adjustment", "string", "multiplicity adjustment of p_adjusted: holm, bh or none", nullable=True, required=False
    ),
    _c(
        "family_size",
        "int64",
        "number of tests in the adjustment family (one dataset, one measure)",
        nullable=True,
        required=False,
    ),
    _c(
        "p_exact", "float64", "exact paired test p-value (small samples; null otherwise)", nullable=True, required=False
    ),
    _c("exact_test", "string", "the exact paired test of p_exact: sign or wilcoxon", nullable=True, required=False),
    _c("rank_low", "int64", "best rank of the system in the bootstrap rank interval", nullable=True, required=False),
    _c("rank_high", "int64", "worst rank of the system in the bootstrap rank interval", nullable=True, required=False),
    _c("missing_from_run", "int64", "judged queries absent from the run (scored 0)", nullable=True, required=False),
    _c(
        "group",
        "string",
        "the query group of a per-group row, column=value (question_type=factoid); null for the whole dataset",
        nullable=True,
        required=False,
    ),
)

_PER_QUERY = (
    _c("run_id", "string", "the run the row belongs to"),
    _c("system", "string", "system name"),
    _c("dataset", "string", "dataset name"),
    _c("query_id", "string", "query id"),
    _c("topk_ids", "list<string>", "ranked ids of the top-k documents", nullable=True),
    _c("topk_scores", "list<float32>", "their scores", nullable=True),
    _c("gold_ids", "list<string>", "ids of the relevant documents", nullable=True),
    _c("gold_rank", "int32", "1-based rank of the first gold document, 0 = not in top-k", nullable=True),
    _c("sim_gold", "float32", "similarity to the most similar gold document", nullable=True),
    _c("sim_random", "float32", "similarity to random_id", nullable=True),
    _c("random_id", "string", "one corpus document drawn at random", nullable=True),
)

_SCALING = (
    _c("dataset", "string", "dataset the gains are measured on"),
    _c("label", "string", "the model label of the scale study (systems <label>-<variant>-s<N>)"),
    _c("variant", "string", "the adaptation variant whose gain over <label>-base is fitted"),
    _c("measure", "string", "canonical measure string of the gains, e.g. ndcg@10"),
    _c("form", "string", "the fitted form: log-linear or saturating"),
    _c("criterion", "string", "why that form (the stated choice rule)"),
    _c("params", "string", "the form's fitted parameters as JSON (a, b or c, a, alpha)"),
    _c("loo_rmse", "string", "leave-one-out RMSE of each form as JSON (null where not computable)"),
    _c("slope_per_doubling", "float64", "fitted gain per doubling of the data at the largest scale"),
    _c("slope_low", "float64", "lower end of its CI"),
    _c("slope_high", "float64", "upper end of its CI"),
    _c("trend", "string", "still rising, falling or not shown to rise (from the slope's CI)"),
    _c("largest_scale", "int64", "the largest measured scale (documents)"),
    _c("next_scale", "int64", "the extrapolated next scale (2x the largest)"),
    _c("predicted_next", "float64", "predicted gain at next_scale (an extrapolation)"),
    _c("predicted_next_low", "float64", "lower end of its CI"),
    _c("predicted_next_high", "float64", "upper end of its CI"),
    _c("target", "float64", "the target gain asked for", nullable=True, required=False),
    _c(
        "target_scale", "float64", "first scale where the fitted gain reaches the target", nullable=True, required=False
    ),
    _c("target_scale_low", "float64", "lower end of its CI (inf: beyond the search)", nullable=True, required=False),
    _c("target_scale_high", "float64", "upper end of its CI (inf: beyond the search)", nullable=True, required=False),
    _c("target_note", "string", "the target's answer in words", nullable=True, required=False),
    _c("scales", "list<int64>", "the measured scales (documents)"),
    _c("gains", "list<float64>", "mean gain over the base at each scale"),
    _c("gains_low", "list<float64>", "lower CI end of each gain"),
    _c("gains_high", "list<float64>", "upper CI end of each gain"),
    _c(
        "training_hours",
        "list<float64>",
        "training hours of each scale's model (null: not recorded)",
        nullable=True,
        required=False,
    ),
    _c("band_scales", "list<float64>", "scales of the fitted curve's band", nullable=True, required=False),
    _c("band_low", "list<float64>", "pointwise lower CI end of the fitted curve", nullable=True, required=False),
    _c("band_fit", "list<float64>", "the fitted curve", nullable=True, required=False),
    _c("band_high", "list<float64>", "pointwise upper CI end of the fitted curve", nullable=True, required=False),
    _c("n_queries", "int64", "queries the gains are averaged over"),
    _c("n_resamples", "int64", "paired bootstrap resamples of the queries"),
    _c("seed", "int64", "seed of the resamples"),
    _c("confidence", "float64", "coverage of every CI (0.95 = 95%)"),
    _c("study", "string", "the study that wrote the fit", nullable=True, required=False),
    _c("timestamp", "timestamp", "when the fit was recorded (UTC)"),
    _c("schema_version", "int32", "layout version the row was written with", required=False),
)

COLUMNS: dict[str, tuple[Column, ...]] = {
    "runs": _RUNS,
    "metrics": _METRICS,
    "per_query": _PER_QUERY,
    "scaling": _SCALING,
}
"""Columns of each table, in stored order: the three tables of an evaluation's commit
(:data:`TABLES`) and ``scaling``, the data-scaling fits a scale study records at its end
(:mod:`adaptlab.analysis.scaling`; a store written before it has none and reads as empty)."""


def column_names(table: str) -> tuple[str, ...]:
    """Names of the columns of ``table`` in stored order."""
    return tuple(c.name for c in COLUMNS[table])


def arrow_type(kind: str) -> pa.DataType:
    """The Arrow type of a logical column kind."""
    import pyarrow as pa

    types = {
        "string": pa.string(),
        "int32": pa.int32(),
        "int64": pa.int64(),
        "float32": pa.float32(),
        "float64": pa.float64(),
        "timestamp": pa.timestamp("us", tz="UTC"),
        "list<string>": pa.list_(pa.string()),
        "list<float32>": pa.list_(pa.float32()),
        "list<int64>": pa.list_(pa.int64()),
        "list<float64>": pa.list_(pa.float64()),
    }
    return types[kind]


@cache
def arrow_schema(table: str) -> pa.Schema:
    """The Arrow schema of ``table`` at :data:`SCHEMA_VERSION`, with its version metadata."""
    import pyarrow as pa

    fields = [pa.field(c.name, arrow_type(c.kind), nullable=c.nullable) for c in COLUMNS[table]]
    meta = {VERSION_KEY: str(SCHEMA_VERSION).encode(), TABLE_KEY: table.encode()}
    return pa.schema(fields, metadata=meta)
