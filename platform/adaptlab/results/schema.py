"""The three tables of the results store, their columns and the schema version.

Version ``SCHEMA_VERSION`` of the layout:

- ``runs``: one row per evaluated (system, dataset) with its provenance;
- ``metrics``: long format, one row per (run, measure[, compared_to][, group]); ``group`` (version 2)
  is null on whole-dataset rows and ``column=value`` on the rows of one query group;
- ``per_query``: ``run_id`` plus the columns of
  :meth:`adaptlab.retrieval.records.PerQueryRecords.to_arrow`.

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
    _c("compared_to", "string", "the other system of a paired difference (null otherwise)",
       nullable=True, required=False),
    _c("p_value", "float64", "p-value of a paired test (null otherwise)", nullable=True, required=False),
    _c("extra", "string", "free JSON for measure-specific details", nullable=True, required=False),
    # added for issue 15: nullable and optional, so rows written before them still read (as nulls)
    _c("confidence", "float64", "coverage of the CI (0.95 = 95%)", nullable=True, required=False),
    _c("interval_method", "string", "how the CI was computed: percentile, bca, wilson or jeffreys",
       nullable=True, required=False),
    _c("p_adjusted", "float64", "p_value adjusted for multiplicity within its family", nullable=True,
       required=False),
    _c("adjustment", "string", "multiplicity adjustment of p_adjusted: holm, bh or none", nullable=True,
       required=False),
    _c("family_size", "int64", "number of tests in the adjustment family (one dataset, one measure)",
       nullable=True, required=False),
    _c("p_exact", "float64", "exact paired test p-value (small samples; null otherwise)", nullable=True,
       required=False),
    _c("exact_test", "string", "the exact paired test of p_exact: sign or wilcoxon", nullable=True,
       required=False),
    _c("rank_low", "int64", "best rank of the system in the bootstrap rank interval", nullable=True,
       required=False),
    _c("rank_high", "int64", "worst rank of the system in the bootstrap rank interval", nullable=True,
       required=False),
    _c("missing_from_run", "int64", "judged queries absent from the run (scored 0)", nullable=True,
       required=False),
    _c("group", "string", "the query group of a per-group row, column=value (question_type=factoid); null for "
       "the whole dataset", nullable=True, required=False),
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

COLUMNS: dict[str, tuple[Column, ...]] = {"runs": _RUNS, "metrics": _METRICS, "per_query": _PER_QUERY}
"""Columns of each table, in stored order."""


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
    }
    return types[kind]


@cache
def arrow_schema(table: str) -> pa.Schema:
    """The Arrow schema of ``table`` at :data:`SCHEMA_VERSION`, with its version metadata."""
    import pyarrow as pa

    fields = [pa.field(c.name, arrow_type(c.kind), nullable=c.nullable) for c in COLUMNS[table]]
    meta = {VERSION_KEY: str(SCHEMA_VERSION).encode(), TABLE_KEY: table.encode()}
    return pa.schema(fields, metadata=meta)
