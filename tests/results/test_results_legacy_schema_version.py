"""The previous store layout: newer files are rejected by name, older (v0) files are upgraded on read."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from adaptlab import results
from adaptlab.errors import StoreError
from adaptlab.results.legacy.legacy import LegacyReader
from adaptlab.results.schema import TABLE_KEY, VERSION_KEY
from adaptlab.retrieval.records import PerQueryRecords
from testkit.legacy_writer import LegacyWriter

V0_COMMIT = "20200101T000000000000Z-00000000000a"


def _records() -> PerQueryRecords:
    return PerQueryRecords(
        system="old",
        dataset="toy",
        query_ids=["q1", "q2"],
        topk_ids=[["d1", "d2"], ["d2", "d1"]],
        topk_scores=np.array([[0.9, 0.5], [0.7, 0.2]]),
        gold_ids=[["d1"], ["d1"]],
        gold_rank=[1, 2],
        sim_gold=[0.9, 0.2],
        sim_random=[0.1, 0.05],
        random_ids=["d3", "d4"],
    )


def _with_version(table: pa.Table, name: str, version: int) -> pa.Table:
    return table.replace_schema_metadata({VERSION_KEY: str(version).encode(), TABLE_KEY: name.encode()})


def _write_v0_commit(root) -> None:
    """A commit as the pre-release (v0) adaptlab wrote it: ``runs.revision``,
    ``metrics.metric``, no ``schema_version``/``compared_to``/``p_value``/``extra``."""
    utc = pa.timestamp("us", tz="UTC")
    tables = {
        "runs": pa.table(
            {
                "run_id": ["r0"],
                "system": ["old"],
                "dataset": ["toy"],
                "package_version": ["0.0.1"],
                "model_id": ["m"],
                "revision": ["rev0"],
                "dataset_fingerprint": ["fp"],
                "seed": pa.array([3], pa.int64()),
                "config": ['{"k":2}'],
                "timestamp": pa.array([datetime(2020, 1, 1, tzinfo=timezone.utc)], utc),
                "host": ["h"],
                "study": pa.array([None], pa.string()),
            }
        ),
        "metrics": pa.table(
            {
                "run_id": ["r0", "r0"],
                "system": ["old", "old"],
                "dataset": ["toy", "toy"],
                "metric": ["ndcg@10", "mrr"],
                "value": [0.5, 0.75],
                "boot_mean": [0.5, 0.74],
                "ci_low": [0.25, 0.5],
                "ci_high": [0.75, 1.0],
                "n_queries": [2, 2],
                "n_resamples": [10, 10],
                "sample_size": [2, 2],
                "seed": [0, 0],
            }
        ),
        "per_query": _records().to_arrow().add_column(0, "run_id", pa.array(["r0", "r0"])),
    }
    build = root / "tmp" / "v0-build"
    build.mkdir()
    for name, t in tables.items():
        pq.write_table(_with_version(t, name, 0), build / f"{name}.parquet")
    manifest = {
        "commit_id": V0_COMMIT,
        "schema_version": 0,
        "tables": {n: t.num_rows for n, t in tables.items()},
        "run_ids": ["r0"],
        "systems": ["old"],
        "datasets": ["toy"],
        "created": "2020-01-01T00:00:00+00:00",
        "host": "h",
        "pid": 1,
        "replaces": [],
    }
    (build / "_commit.json").write_text(json.dumps(manifest))
    os.rename(build, root / "commits" / V0_COMMIT)


@pytest.fixture
def store(tmp_path):
    return LegacyWriter(tmp_path / "store")


def _new_run(system: str = "new") -> dict:
    return results.run_record(
        system, "toy", model_id="m", model_revision="rev1", dataset_fingerprint="fp", seed=1, config={}
    )


def test_v0_files_are_upgraded_on_read(store):
    _write_v0_commit(store.root)
    store.commit(
        [_new_run()],
        [{"system": "new", "dataset": "toy", "measure": "mrr", "value": 0.5, "compared_to": "old", "p_value": 0.2}],
    )
    runs = store.runs().to_pylist()
    assert [(r["system"], r["model_revision"], r["schema_version"]) for r in runs] == [
        ("old", "rev0", 0),
        ("new", "rev1", results.SCHEMA_VERSION),
    ]
    m = store.metrics(system="old").to_pylist()
    assert [(x["measure"], x["value"], x["compared_to"], x["p_value"], x["extra"]) for x in m] == [
        ("ndcg@10", 0.5, None, None, None),
        ("mrr", 0.75, None, None, None),
    ]
    assert store.metrics(measure="mrr").column("system").to_pylist() == ["old", "new"]
    assert store.metrics(columns=["measure"], system="old").column("measure").to_pylist() == ["ndcg@10", "mrr"]
    back = PerQueryRecords.from_arrow(store.per_query(run_id="r0"))
    assert back.query_ids == ["q1", "q2"] and back.gold_rank.tolist() == [1, 2]


def test_newer_file_version_is_rejected_naming_file_and_version(store):
    cid = store.commit([_new_run()], [{"system": "new", "dataset": "toy", "measure": "mrr", "value": 0.5}])
    path = store.root / "commits" / cid / "metrics.parquet"
    t = pq.read_table(path)
    pq.write_table(_with_version(t, "metrics", results.SCHEMA_VERSION + 1), path)
    newer = results.SCHEMA_VERSION + 1
    with pytest.raises(StoreError, match=rf"{path}.*schema version {newer}, newer.*upgrade adaptlab"):
        LegacyReader(store.root).metrics()
    assert LegacyReader(store.root).runs().num_rows == 1  # other tables still read


def test_newer_manifest_version_is_rejected(store):
    cid = store.commit([_new_run()])
    path = store.root / "commits" / cid / "_commit.json"
    data = json.loads(path.read_text())
    data["schema_version"] = 99
    path.write_text(json.dumps(data))
    with pytest.raises(StoreError, match=r"_commit.json: commit has results schema version 99, newer"):
        LegacyReader(store.root).runs()


def test_files_without_version_or_damaged_are_reported(store):
    cid = store.commit([_new_run()], [{"system": "new", "dataset": "toy", "measure": "mrr", "value": 0.5}])
    cdir = store.root / "commits" / cid
    pq.write_table(pq.read_table(cdir / "metrics.parquet").replace_schema_metadata(None), cdir / "metrics.parquet")
    with pytest.raises(StoreError, match=r"metrics.parquet: no adaptlab.schema_version .*not written by adaptlab"):
        LegacyReader(store.root).metrics()
    t = pq.read_table(cdir / "runs.parquet")
    pq.write_table(pa.concat_tables([t, t]), cdir / "runs.parquet")
    with pytest.raises(StoreError, match=r"runs.parquet: 2 rows, but the commit manifest says 1"):
        LegacyReader(store.root).runs()
    (cdir / "_commit.json").unlink()
    with pytest.raises(StoreError, match=r"commit directory without _commit.json; it is damaged"):
        LegacyReader(store.root).runs()
