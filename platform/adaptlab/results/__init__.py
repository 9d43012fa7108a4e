"""The results store: atomic Arrow/Parquet tables ``runs``, ``metrics`` and ``per_query``.

::

    from adaptlab import results

    store = results.open("results/", create=True)
    run = results.run_record("minilm", "scifact", model_id="minilm", model_revision=None,
                             dataset_fingerprint=ds.fingerprint(), seed=0, config={"k": 100})
    store.commit([run], [{"system": "minilm", "dataset": "scifact", "measure": "ndcg@10",
                          "value": 0.645}], records.to_arrow())
    store.metrics(measure="ndcg@10", system=["minilm", "bge"]).to_pandas()

Importing this package does not import pyarrow (it loads on first use), torch or ray.
"""

from __future__ import annotations

from adaptlab.errors import StoreError
from adaptlab.results.provenance import new_run_id, run_record
from adaptlab.results.schema import COLUMNS, SCHEMA_VERSION, TABLES
from adaptlab.results.store import ResultsStore, open  # noqa: A004 - `open` shadows the builtin on purpose

__all__ = [
    "COLUMNS",
    "ResultsStore",
    "SCHEMA_VERSION",
    "StoreError",
    "TABLES",
    "new_run_id",
    "open",
    "run_record",
]
