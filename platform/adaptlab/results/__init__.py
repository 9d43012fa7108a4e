"""The results store: tables ``runs``, ``metrics`` and ``per_query`` on Delta Lake (a local
directory or an ``s3://``, ``gs://``, ``az://`` URI), with atomic commits, SQL and time travel.

::

    from adaptlab import results

    store = results.open("results/", create=True)
    run = results.run_record(
        "minilm",
        "scifact",
        model_id="minilm",
        model_revision=None,
        dataset_fingerprint=ds.fingerprint(),
        seed=0,
        config={"k": 100},
    )
    store.commit(
        [run], [{"system": "minilm", "dataset": "scifact", "measure": "ndcg@10", "value": 0.645}], records.to_arrow()
    )
    store.metrics(measure="ndcg@10", system=["minilm", "bge"])  # scores only, a pyarrow Table
    store.metrics(dataset="scifact", as_frame=True)  # a pandas DataFrame, all-null columns dropped
    store.wide()  # floats: (dataset, system) x (measure, value/ci_low/ci_high)
    store.metrics(compared_to="minilm")  # paired comparisons, from either side
    store.sql("SELECT system, avg(value) FROM metrics GROUP BY system")  # a DataFrame (as_arrow=True: Arrow)
    results.open("s3://bucket/study", version=3)  # a read-only snapshot

Importing this package does not import pyarrow (it loads on first use), torch or ray.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from adaptlab.errors import StoreError
from adaptlab.results.damage import StoreDamagedError
from adaptlab.results.exports.mlflow_log import log_to_mlflow
from adaptlab.results.exports.mteb import MtebTaskResult, compare_mteb, export_mteb, import_mteb, mteb_results
from adaptlab.results.exports.ranx_io import (
    export_ranx,
    from_ranx_frame,
    read_ranx_json,
    store_qrels,
    store_run,
    to_ranx_frame,
    write_ranx_json,
)
from adaptlab.results.exports.wandb_log import log_to_wandb
from adaptlab.results.health.repair import repair_store
from adaptlab.results.legacy.migrate import migrate_store
from adaptlab.results.location import check_store_location
from adaptlab.results.opening import open  # noqa: A004 - `open` shadows the builtin on purpose
from adaptlab.results.provenance import RunProvenance, new_run_id, run_record
from adaptlab.results.query import ANY_GROUP
from adaptlab.results.schema import COLUMNS, SCHEMA_VERSION, TABLES
from adaptlab.results.store import CommitId
from adaptlab.results.validate import canonical_measure

if TYPE_CHECKING:  # pragma: no cover
    from adaptlab.results.writer import ResultsStore

__all__ = [
    "ANY_GROUP",
    "COLUMNS",
    "CommitId",
    "MtebTaskResult",
    "ResultsStore",
    "RunProvenance",
    "SCHEMA_VERSION",
    "StoreDamagedError",
    "StoreError",
    "TABLES",
    "canonical_measure",
    "check_store_location",
    "compare_mteb",
    "export_mteb",
    "import_mteb",
    "export_ranx",
    "from_ranx_frame",
    "log_to_mlflow",
    "log_to_wandb",
    "migrate_store",
    "mteb_results",
    "new_run_id",
    "open",
    "read_ranx_json",
    "repair_store",
    "run_record",
    "store_qrels",
    "store_run",
    "to_ranx_frame",
    "write_ranx_json",
]


def __getattr__(name: str) -> Any:
    """``ResultsStore`` loads (with pyarrow and deltalake) on first use, so importing this package
    stays light; :func:`open` returns one without it."""
    if name == "ResultsStore":
        from adaptlab.results.writer import ResultsStore

        return ResultsStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
