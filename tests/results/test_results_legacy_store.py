"""The reader of the previous store layout (commit directories, before Delta Lake; the source of
`adaptlab results migrate`): every table reads back as written, filters and column selection,
errors that name the problem, commits replaced by a compaction are skipped. Stores are written
by the test writer testkit/legacy_writer.py."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from adaptlab import results
from adaptlab.errors import StoreError
from adaptlab.results.layout import COMMIT_RE
from adaptlab.results.legacy.legacy import LegacyReader
from adaptlab.retrieval.records import PerQueryRecords
from testkit.legacy_writer import LegacyWriter


def _records(system: str = "minilm", dataset: str = "toy") -> PerQueryRecords:
    return PerQueryRecords(
        system=system,
        dataset=dataset,
        query_ids=["q1", "q2", "q3"],
        topk_ids=[["d1", "d2"], ["d3", "d1"], ["d2", "d3"]],
        topk_scores=np.array([[0.9, 0.5], [0.7, 0.2], [0.4, 0.3]]),
        gold_ids=[["d1"], ["d1", "d2"], ["d9"]],
        gold_rank=[1, 2, 0],
        sim_gold=[0.9, 0.2, np.nan],
        sim_random=[0.1, 0.05, -0.2],
        random_ids=["d7", "d8", "d2"],
    )


def _run(system: str = "minilm", dataset: str = "toy", **kw) -> dict:
    args = dict(
        model_id="sentence-transformers/all-MiniLM-L6-v2",
        model_revision="abc123",
        dataset_fingerprint="fp-" + dataset,
        seed=7,
        config={"k": 2, "b": [1, 2]},
    )
    args.update(kw)
    return results.run_record(system, dataset, **args)


def _metric(system: str = "minilm", dataset: str = "toy", measure: str = "ndcg@10", value: float = 0.5, **kw) -> dict:
    return {"system": system, "dataset": dataset, "measure": measure, "value": value, **kw}


@pytest.fixture
def store(tmp_path):
    return LegacyWriter(tmp_path / "store")


@pytest.fixture
def filled(store):
    """Two commits: minilm and bge on toy (with per-query rows), then minilm on other."""
    r1, r2 = _run("minilm"), _run("bge", study="s1")
    store.commit(
        [r1, r2],
        [
            _metric("minilm", value=0.6, ci_low=0.5, ci_high=0.7, n_queries=3, n_resamples=100, seed=0),
            _metric("bge", value=0.4),
            _metric("minilm", measure="mrr", value=0.55),
            _metric("minilm", value=0.2, compared_to="bge", p_value=0.03, extra={"test": "paired"}),
        ],
        pa.concat_tables([_records("minilm").to_arrow(), _records("bge").to_arrow()]),
    )
    store.commit([_run("minilm", "other", seed=None)], [_metric("minilm", "other", value=0.1)])
    return store, r1, r2


def test_round_trip_all_three_tables(store):
    run = _run()
    rec = _records()
    cid = store.commit([run], [_metric(value=0.625, ci_low=0.5, ci_high=0.75, n_queries=3)], rec.to_arrow())
    assert COMMIT_RE.match(cid) and store.commit_ids() == [cid]

    runs = store.runs().to_pylist()
    assert len(runs) == 1
    row = runs[0]
    assert row["run_id"] == run["run_id"] and row["system"] == "minilm" and row["dataset"] == "toy"
    from adaptlab import __version__

    assert row["package_version"] == __version__
    assert row["model_revision"] == "abc123" and row["seed"] == 7 and row["schema_version"] == results.SCHEMA_VERSION
    assert json.loads(row["config"]) == {"b": [1, 2], "k": 2}
    assert row["timestamp"] == run["timestamp"]  # microseconds, UTC

    m = store.metrics().to_pylist()
    assert [(x["measure"], x["value"], x["ci_low"], x["ci_high"], x["n_queries"], x["compared_to"]) for x in m] == [
        ("ndcg@10", 0.625, 0.5, 0.75, 3, None)
    ]
    assert m[0]["run_id"] == run["run_id"]  # inferred from (system, dataset)

    pq_t = store.per_query()
    assert pq_t.column_names == ["run_id", *rec.to_arrow().column_names]
    back = PerQueryRecords.from_arrow(pq_t)
    assert back.query_ids == rec.query_ids and back.topk_ids == rec.topk_ids
    np.testing.assert_array_equal(back.topk_scores, rec.topk_scores)
    np.testing.assert_array_equal(back.gold_rank, rec.gold_rank)
    np.testing.assert_array_equal(back.sim_gold, rec.sim_gold)  # NaN kept
    assert back.random_ids == rec.random_ids and back.gold_ids == rec.gold_ids
    df = store.metrics().to_pandas()
    assert list(df["measure"]) == ["ndcg@10"]


def test_filters_equality_in_none_and_types(filled):
    store, r1, r2 = filled
    assert store.runs().num_rows == 3
    assert store.runs(system="minilm").num_rows == 2
    assert store.runs(system=["minilm", "bge"], dataset="toy").num_rows == 2
    assert store.runs(system={"bge"}).column("run_id").to_pylist() == [r2["run_id"]]
    assert store.runs(system=("nope",)).num_rows == 0
    assert store.runs(system=None, study=None).num_rows == 3
    assert store.runs(study="s1").num_rows == 1
    assert store.runs(seed=7).num_rows == 2 and store.runs(seed="7").num_rows == 2  # CLI strings parse
    assert store.metrics(measure="nDCG@10").num_rows == 4  # canonicalised like on write
    assert store.metrics(compared_to="bge").column("p_value").to_pylist() == [0.03]
    assert store.metrics(value=0.6).num_rows == 1
    assert store.per_query(run_id=r2["run_id"]).column("system").to_pylist() == ["bge"] * 3
    assert store.per_query(gold_rank=[1, 2]).num_rows == 4
    assert store.per_query(dataset="other").num_rows == 0
    sub = store.metrics(columns=["system", "value"], measure="mrr")
    assert sub.column_names == ["system", "value"] and sub.to_pylist() == [{"system": "minilm", "value": 0.55}]
    assert store.per_query(columns="query_id", system="zzz").column_names == ["query_id"]


def test_filter_errors_name_the_column(filled):
    store, *_ = filled
    with pytest.raises(StoreError, match=r"unknown column 'sytem'.*valid columns: run_id, system, dataset"):
        store.runs(sytem="minilm")
    with pytest.raises(StoreError, match="list column 'topk_ids'"):
        store.per_query(topk_ids=["d1"])
    with pytest.raises(StoreError, match=r"filter seed='x'.*int64"):
        store.runs(seed="x")
    with pytest.raises(StoreError, match="unknown column"):
        store.metrics(columns=["nope"])
    with pytest.raises(StoreError, match="unknown table"):
        store.table("nope")


def test_empty_store_gives_empty_typed_tables(store):
    for name in results.TABLES:
        t = store.table(name)
        assert t.num_rows == 0
        assert t.column_names == [c.name for c in results.COLUMNS[name]]
    assert store.metrics().schema.field("value").type == pa.float64()
    assert store.commit_ids() == []


def test_open_errors_name_the_problem(tmp_path):
    with pytest.raises(StoreError, match="does not exist"):
        LegacyReader(tmp_path / "missing")
    (tmp_path / "plain").mkdir()
    with pytest.raises(StoreError, match="not an adaptlab results store of the previous layout"):
        LegacyReader(tmp_path / "plain")
    root = LegacyWriter(tmp_path / "old").root
    assert LegacyReader(root).commit_ids() == []
    (root / "adaptlab-store.json").write_text('{"format": "adaptlab.results", "layout": 9}')
    with pytest.raises(StoreError, match="layout version 9 is newer"):
        LegacyReader(root)
    (root / "adaptlab-store.json").write_text('{"format": "other", "layout": 1}')
    with pytest.raises(StoreError, match="format is 'other'"):
        LegacyReader(root)
    (root / "adaptlab-store.json").write_text("[1]")
    with pytest.raises(StoreError, match="adaptlab-store.json: not a valid store marker"):
        LegacyReader(root)


def test_the_reader_refuses_writes_and_sql_saying_how_to_migrate(filled, cli):
    store, r1, _ = filled
    reader = LegacyReader(store.root)
    for call in (
        lambda: reader.commit([_run()]),
        lambda: reader.compact(retention_hours=1),
        lambda: reader.sql("SELECT 1"),
    ):
        with pytest.raises(StoreError, match=r"previous layout.*read-only.*adaptlab results migrate .* NEW"):
            call()
    assert reader.runs().num_rows == 3  # nothing written
    for args in (["compact", "--store", str(store.root)], ["--store", str(store.root), "--sql", "SELECT 1"]):
        res = cli("results", *args)
        assert res.returncode == 2 and "adaptlab results migrate" in res.stderr, res.stderr
        assert "Traceback" not in res.stderr and res.stderr.count("\n") == 1


def test_close_is_there_and_releases_nothing(filled):
    """compare, plan and scaling close the store ``results.open`` returns in a ``finally``: a store
    of the previous layout must have ``close`` too, or its AttributeError hides the real outcome."""
    store, _, _ = filled
    reader = results.open(store.root)
    assert isinstance(reader, LegacyReader)
    reader.close()
    assert reader.runs().num_rows == 3  # nothing was held open: it still reads


def test_commits_replaced_by_a_compaction_are_skipped(filled):
    """An old compaction published a merged commit listing the ids it ``replaces``; when it was
    cut short, the replaced commits are still on disk and must not be read twice."""
    store, *_ = filled
    old = store.commit_ids()
    merged = store.commit([_run("m")], [_metric("m", value=0.9)], replaces=old[:1])
    reader = LegacyReader(store.root)
    assert reader.commit_ids() == [old[1], merged]
    assert sorted(reader.runs().column("system").to_pylist()) == ["m", "minilm"]
    assert reader.metrics(system="m").column("value").to_pylist() == [0.9]
