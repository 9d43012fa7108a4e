"""Round trip, filters, validation and layout of the results store (Delta Lake)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timezone

import numpy as np
import pyarrow as pa
import pytest

from adaptlab import results
from adaptlab.errors import StoreError
from adaptlab.results.layout import COMMIT_RE
from adaptlab.retrieval.records import PerQueryRecords


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
    return results.open(tmp_path / "store", create=True)


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
    assert cid.version == 1 == store.version()  # version 0 is the table's creation

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


def test_per_query_records_objects_and_dataframes_are_accepted(store):
    pd = pytest.importorskip("pandas")
    run_a, run_b = _run("a"), _run("b")
    metrics = pd.DataFrame(
        {"system": ["a", "b"], "dataset": ["toy", "toy"], "measure": ["mrr", "mrr"], "value": [0.5, 0.25]}
    )
    store.commit([run_a, run_b], metrics, [_records("a"), _records("b")])
    assert store.per_query(system="b").num_rows == 3
    got = {(r["system"], r["run_id"]) for r in store.metrics().to_pylist()}
    assert got == {("a", run_a["run_id"]), ("b", run_b["run_id"])}


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
    assert store.metrics(measure="nDCG@10", kind="all").num_rows == 4  # canonicalised like on write
    # the paired difference minilm - bge is a comparison, not a score: not in the default view
    assert store.metrics(measure="nDCG@10").num_rows == 3
    assert store.metrics(measure="nDCG@10", kind="score").num_rows == 3
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


def test_open_errors_and_create(tmp_path):
    with pytest.raises(StoreError, match="no results store at .*: run a study first or check the path"):
        results.open(tmp_path / "missing")
    (tmp_path / "plain").mkdir()
    with pytest.raises(StoreError, match="not an adaptlab results store"):
        results.open(tmp_path / "plain")
    (tmp_path / "file").write_text("x")
    with pytest.raises(StoreError, match="is a file"):
        results.open(tmp_path / "file", create=True)
    s = results.open(tmp_path / "new" / "nested", create=True)
    assert results.open(tmp_path / "new" / "nested").commit_ids() == []
    assert results.open(s.root, create=True).root == s.root  # idempotent
    with pytest.raises(StoreError, match="unsupported scheme 'ftp'"):
        results.open("ftp://host/store")
    with pytest.raises(StoreError, match="without credentials"):
        results.open("s3://KEY:SECRET@bucket/store")


def _bad_commit(case: str) -> tuple:
    """(runs, metrics, per_query) of one invalid commit."""
    run = _run()
    t = _records().to_arrow()
    return {
        "runs_missing_columns": ([{"system": "a"}], None, None),
        "runs_not_rows": ("RUNS", None, None),
        "runs_single_dict": (run, None, None),
        "empty": ([], [], None),
        "metric_missing_value": ([run], [{"system": "minilm", "dataset": "toy", "measure": "mrr"}], None),
        "metric_unknown_column": ([run], [_metric(valu=1.0)], None),
        "metric_wrong_type": ([run], [_metric(value="high")], None),
        "metric_null_value": ([run], [_metric(value=None)], None),
        "metric_unknown_system": ([run], [_metric(system="other")], None),
        "metric_empty_measure": ([run], [_metric(measure="")], None),
        "metric_extra_not_json": ([run], [_metric(extra={"x": object()})], None),
        "metric_unknown_run": ([run], [_metric(run_id="ghost")], None),
        "duplicate_run_id": ([run, dict(run)], None, None),
        "per_query_duplicate_query": ([run], None, pa.concat_tables([t, t])),
        "per_query_unknown_column": ([run], None, t.append_column("oops", pa.array([1, 2, 3]))),
        "per_query_missing_column": ([run], None, t.drop_columns(["sim_random"])),
        "naive_timestamp": ([dict(run, timestamp=datetime(2024, 1, 1))], None, None),
        "seed_not_int": ([dict(run, seed="seven")], None, None),
    }[case]


@pytest.mark.parametrize(
    ("case", "pattern"),
    [
        ("runs_missing_columns", r"runs: missing required column\(s\) 'run_id', 'dataset'"),
        ("runs_not_rows", "expected a list of row dicts"),
        ("runs_single_dict", "single dict"),
        ("empty", "nothing to commit"),
        ("metric_missing_value", r"missing required column\(s\) 'value'"),
        ("metric_unknown_column", r"metrics row 0: unknown column\(s\) 'valu'; valid columns: run_id"),
        ("metric_wrong_type", r"metrics column 'value': cannot store the values as float64"),
        ("metric_null_value", r"metrics row 0: column 'value' is null"),
        ("metric_unknown_system", r"no run for system 'other'"),
        ("metric_empty_measure", r"column 'measure' is empty"),
        ("metric_extra_not_json", "cannot be stored as JSON"),
        ("metric_unknown_run", "ghost.*neither in this commit's runs nor in the store"),
        ("duplicate_run_id", "occurs more than once"),
        ("per_query_duplicate_query", r"\(run_id, query_id\) pair occurs more than once"),
        ("per_query_unknown_column", r"per_query: unknown column\(s\) 'oops'"),
        ("per_query_missing_column", r"per_query: missing required column\(s\) 'sim_random'"),
        ("naive_timestamp", "has no time zone"),
        ("seed_not_int", "cannot store the values as int64"),
    ],
)
def test_commit_validation_names_the_problem_and_writes_nothing(store, case, pattern):
    with pytest.raises(StoreError, match=pattern):
        store.commit(*_bad_commit(case))
    assert store.commit_ids() == [] and store.version() == 0


def test_ambiguous_run_id_inference_is_an_error(store):
    a, b = _run(), _run()  # same system and dataset twice (e.g. two seeds)
    with pytest.raises(StoreError, match="2 runs for system 'minilm'"):
        store.commit([a, b], [_metric()])
    store.commit([a, b], [_metric(run_id=b["run_id"])])
    assert store.metrics().column("run_id").to_pylist() == [b["run_id"]]


def test_later_commit_may_add_rows_to_an_earlier_run(filled):
    store, r1, _ = filled
    store.commit([], [_metric(run_id=r1["run_id"], measure="coe", value=0.31, extra={"bins": 10})])
    coe = store.metrics(measure="coe").to_pylist()
    assert len(coe) == 1 and coe[0]["run_id"] == r1["run_id"] and json.loads(coe[0]["extra"]) == {"bins": 10}


def test_aware_timestamps_are_stored_in_utc(store):
    from datetime import timedelta

    when = datetime(2024, 5, 1, 14, 0, tzinfo=timezone(timedelta(hours=2)))
    store.commit([dict(_run(), timestamp=when)])
    got = store.runs().column("timestamp").to_pylist()[0]
    assert got == when and got.utcoffset() == timedelta(0) and got.hour == 12


def test_names_never_become_paths(store, tmp_path):
    evil = ["../../escape", "a/b\\c", "..", "/abs/path", "nul\x00byte?"]
    before = set(os.listdir(tmp_path))
    for i, name in enumerate(evil):
        store.commit(
            [_run(name, name + "-ds")],
            [_metric(name, name + "-ds", value=float(i))],
            _records(name, name + "-ds").to_arrow(),
        )
    assert set(os.listdir(tmp_path)) == before
    for dirpath, _dirnames, _filenames in os.walk(store.root):
        rel = os.path.relpath(dirpath, store.root)
        assert (
            rel in (".", "_delta_log", "_adaptlab_checksums")
            or rel.startswith("_delta_log" + os.sep)
            or rel in {f"kind={k}" for k in ("runs", "scores", "per_query")}
        ), rel
    assert sorted(store.runs().column("system").to_pylist()) == sorted(evil)
    assert store.metrics(system="../../escape").column("value").to_pylist() == [0.0]


def test_run_record_provenance_and_checks():
    r = _run(study="scale")
    assert set(r) == {c.name for c in results.COLUMNS["runs"]}
    assert len(r["run_id"]) == 32 and r["run_id"] != _run()["run_id"]
    assert r["timestamp"].tzinfo is not None and r["host"] and r["study"] == "scale"
    assert r["config"] == '{"b":[1,2],"k":2}'
    numpy_config = {"arr": np.arange(3), "f": np.float32(0.5)}
    assert json.loads(_run(config=numpy_config)["config"]) == {"arr": [0, 1, 2], "f": 0.5}
    with pytest.raises(StoreError, match="config of run 'minilm' on 'toy' cannot be stored as JSON"):
        _run(config={"x": object()})
    with pytest.raises(StoreError, match="seed must be an integer"):
        _run(seed=1.5)
    with pytest.raises(StoreError, match="system must be a non-empty string"):
        results.run_record("", "toy", model_id="m", model_revision=None, dataset_fingerprint="f", seed=0, config={})
    assert results.new_run_id() != results.new_run_id()


def test_run_record_takes_its_provenance_whole_or_as_keywords():
    fields = dict(model_id="m", model_revision="r1", dataset_fingerprint="fp", seed=3, config={"k": 2}, study="s")
    by_keywords = results.run_record("sys", "toy", run_id="r" * 32, **fields)
    whole = results.run_record("sys", "toy", results.RunProvenance(run_id="r" * 32, **fields))
    mixed = results.run_record("sys", "toy", results.RunProvenance(**{**fields, "seed": 9}), seed=3, run_id="r" * 32)
    for row in (whole, mixed):
        assert {k: v for k, v in row.items() if k != "timestamp"} == {
            k: v for k, v in by_keywords.items() if k != "timestamp"
        }
    with pytest.raises(
        TypeError,
        match=r"run_record\(\) got an unexpected keyword argument 'revision'; expected one of .*model_revision",
    ):
        results.run_record("sys", "toy", revision="r1", **fields)


def test_compact_keeps_every_row_and_history(filled):
    store, *_ = filled
    for name in "cde":
        store.commit([_run(name)], [_metric(name)], _records(name).to_arrow())

    def rows():  # NaN == NaN through JSON
        return {n: json.dumps(store.table(n).to_pylist(), default=str) for n in results.TABLES}

    before = rows()
    files = store._table().file_uris()
    out = store.compact()
    assert out["files_removed"] >= 2 and out["files_vacuumed"] == 0  # default retention keeps old files
    assert len(store._table().file_uris()) < len(files)
    assert rows() == before  # same rows, same order
    assert results.open(store.root, version=2).runs().num_rows == 3  # time travel still works
    out = store.compact(retention_hours=0)  # no writer active: old files may go
    assert out["files_vacuumed"] >= 1
    assert results.open(store.root).runs().num_rows == 6
    with pytest.raises(StoreError, match="retention_hours must be >= 0"):
        store.compact(retention_hours=-1)


def test_import_is_light():
    code = (
        "import sys, time; t = time.perf_counter(); import adaptlab.results as r; "
        "dt = time.perf_counter() - t; "
        "assert callable(r.open) and r.open is not open; "
        "bad = [m for m in ('pyarrow', 'torch', 'ray') if m in sys.modules]; "
        "assert not bad, bad; print(dt)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert float(out.stdout) < 1.0


@pytest.mark.parametrize("name", ["a b", "x; touch y; echo", "100%", "ünï"])
def test_store_folder_names_that_urls_encode_still_verify(tmp_path, name):
    """delta-rs percent-encodes file URIs; the checksum check must map them back to the files."""
    store = results.open(tmp_path / name, create=True)
    run = _run("a")
    store.commit(
        [run],
        [{"run_id": run["run_id"], "system": "a", "dataset": "toy", "measure": "mrr", "value": 0.5}],
        [_records("a")],
    )
    reread = results.open(tmp_path / name)
    assert reread.metrics().column("value").to_pylist() == [0.5]
    assert reread.per_query(system="a").num_rows == 3
