"""The query model of the Delta Lake store: scores vs comparisons, compared_to from either
side, latest runs, time travel, SQL through DuckDB, idempotent commits, and the CLI."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from test_results_store import _metric, _records, _run

from adaptlab import results
from adaptlab.errors import StoreError


@pytest.fixture
def two_runs(tmp_path):
    """minilm and bge evaluated twice on toy; each time one paired difference bge - minilm."""
    store = results.open(tmp_path / "store", create=True)
    ids = []
    for i, score in enumerate((0.542, 0.6)):
        t = datetime(2025, 1, 1 + i, tzinfo=timezone.utc)
        a, b = dict(_run("minilm"), timestamp=t), dict(_run("bge"), timestamp=t)
        cid = store.commit(
            [a, b],
            [
                _metric("minilm", value=score),
                _metric("bge", value=0.3),
                _metric("bge", value=0.3 - score, compared_to="minilm", p_value=0.01),
            ],
            [_records("minilm"), _records("bge")],
        )
        ids.append((cid, a["run_id"], b["run_id"]))
    return store, ids


def test_scores_and_comparisons_are_kept_apart(two_runs):
    store, ids = two_runs
    scores = store.metrics(system="minilm", measure="ndcg@10", kind="score")
    assert scores.column("value").to_pylist() == [0.542, 0.6]
    assert store.metrics(system="bge", kind="score").column("compared_to").null_count == 2  # no difference
    # compared_to finds the comparison from either side, stored once as bge - minilm
    for side in ("minilm", "bge"):
        got = store.metrics(compared_to=side)
        assert got.num_rows == 2 and set(got.column("system").to_pylist()) == {"bge"}
    assert store.metrics(system="minilm", compared_to="bge").num_rows == 2
    assert store.comparisons(system="bge").num_rows == 2
    assert store.metrics(kind="all").num_rows == 6
    with pytest.raises(StoreError, match="kind='nope'.*score, comparison, all"):
        store.metrics(kind="nope")


def test_latest_runs(two_runs):
    store, ids = two_runs
    last = {ids[1][1], ids[1][2]}
    assert set(store.latest_run_ids()) == last
    assert set(store.runs(latest=True).column("run_id").to_pylist()) == last
    assert store.metrics(system="minilm", latest=True, kind="score").column("value").to_pylist() == [0.6]
    assert store.comparisons(latest=True).column("value").to_pylist() == [pytest.approx(0.3 - 0.6)]
    assert store.per_query(latest=True).num_rows == 6
    assert store.metrics(latest=True, dataset="other").num_rows == 0


def test_time_travel_and_versions(two_runs):
    store, ids = two_runs
    assert [cid.version for cid, *_ in ids] == [1, 2] and store.version() == 2
    old = results.open(store.root, version=1)
    assert old.runs().num_rows == 2 and old.version() == 1
    with pytest.raises(StoreError, match="past snapshot"):
        old.commit([_run()])
    hist = store.history()
    assert hist.column("version").to_pylist() == [2, 1, 0]
    assert hist.column("commit_id").to_pylist()[:2] == [ids[1][0], ids[0][0]]
    when = hist.column("timestamp").to_pylist()[1]
    assert results.open(store.root, as_of=when + timedelta(milliseconds=1)).runs().num_rows == 2
    assert results.open(store.root, as_of=datetime.now(timezone.utc).isoformat()).runs().num_rows == 4
    with pytest.raises(StoreError, match="no snapshot at version 9"):
        results.open(store.root, version=9)
    with pytest.raises(StoreError, match="as_of='yesterday'"):
        results.open(store.root, as_of="yesterday")


def test_as_of_follows_the_commit_times_history_shows_not_file_times(two_runs):
    """A log file written a while after its commit's timestamp (a loaded machine: the full suite
    once opened version 0 for history's version-1 time + 1 ms) still belongs to that time."""
    store, _ = two_runs
    when = store.history().column("timestamp").to_pylist()[1]  # version 1
    for log in sorted((Path(store.root) / "_delta_log").glob("*.json")):
        os.utime(log, (log.stat().st_atime, log.stat().st_mtime + 5))  # every file 5 s after its commit
    assert results.open(store.root, as_of=when + timedelta(milliseconds=1)).version() == 1
    with pytest.raises(StoreError, match="no snapshot at as_of=.*first commit"):
        results.open(store.root, as_of=when - timedelta(days=1))
    with pytest.raises(StoreError, match="version= or as_of=, not both"):
        results.open(store.root, version=1, as_of="2025-01-01")


def test_sql_over_the_views(two_runs):
    store, _ = two_runs
    t = store.sql("SELECT system, count(*) AS n, max(value) AS best FROM metrics GROUP BY system ORDER BY system")
    # a DataFrame like every other query; the metrics view holds scores only
    assert isinstance(t, pd.DataFrame)
    assert t.to_dict("records") == [{"system": "bge", "n": 2, "best": 0.3}, {"system": "minilm", "n": 2, "best": 0.6}]
    assert store.sql("SELECT count(*) AS n FROM comparisons")["n"].tolist() == [2]
    assert store.sql("SELECT count(*) AS n FROM per_query WHERE gold_rank = ?", [1])["n"].tolist() == [4]
    joined = store.sql(
        "SELECT r.timestamp, m.value FROM metrics m JOIN runs r USING (run_id) "
        "WHERE m.system = 'minilm' ORDER BY r.timestamp"
    )
    assert joined["value"].tolist() == [0.542, 0.6]
    assert results.open(store.root, version=1).sql("SELECT count(*) AS n FROM runs")["n"].tolist() == [2]
    arrow = store.sql("SELECT system, value FROM metrics ORDER BY system, value", as_arrow=True)  # Arrow on request
    assert isinstance(arrow, pa.Table) and arrow.column("value").to_pylist() == [0.3, 0.3, 0.542, 0.6]
    empty = store.sql("SELECT system, compared_to FROM metrics WHERE value > 9")
    assert list(empty.columns) == ["system", "compared_to"] and empty.empty  # the columns asked for, even empty
    with pytest.raises(StoreError, match="SQL error: .*views are runs, metrics"):
        store.sql("SELECT * FROM nope")
    with pytest.raises(StoreError, match="give a SQL query"):
        store.sql("  ")


def test_a_retry_never_duplicates_a_commit(tmp_path, monkeypatch):
    """The first attempt lands but reports an error (e.g. a lost response): the retry sees it."""
    import deltalake

    store = results.open(tmp_path / "s", create=True)
    real = deltalake.DeltaTable.create_write_transaction
    calls = []

    def flaky(*args, **kwargs):
        calls.append(1)
        real(*args, **kwargs)
        if len(calls) == 1:
            raise OSError("connection reset after the commit landed")

    monkeypatch.setattr(deltalake.DeltaTable, "create_write_transaction", flaky)
    monkeypatch.setattr("adaptlab.results.writer.time.sleep", lambda s: None)
    store.commit([_run()], [_metric()])
    assert len(calls) == 1 and store.runs().num_rows == 1 and store.version() == 1

    def failing(*args, **kwargs):
        calls.append(1)
        raise OSError("storage down")

    monkeypatch.setattr(deltalake.DeltaTable, "create_write_transaction", failing)
    with pytest.raises(
        StoreError,
        match=r"failed after 4 attempts.*storage down; nothing was committed \(the store was at version 1 before it\)",
    ):
        store.commit([_run()])
    assert store.runs().num_rows == 1


def test_cli_shows_run_and_time_latest_sql_and_errors(two_runs, cli):
    store, ids = two_runs
    root = str(store.root)
    res = cli("results", "--store", root)
    assert res.returncode == 0, res.stderr
    assert "run" in res.stdout.splitlines()[0] and "2025-01-02 00:00:00" in res.stdout
    assert ids[0][1][:8] in res.stdout and "(4 rows)" in res.stdout and "-0.2420" not in res.stdout
    res = cli("results", "--store", root, "--latest", "--format", "json", "--filter", "system=minilm")
    assert [r["value"] for r in json.loads(res.stdout)] == [0.6]
    res = cli(
        "results", "--store", root, "--table", "comparisons", "--filter", "compared_to=minilm", "--format", "json"
    )
    assert [r["system"] for r in json.loads(res.stdout)] == ["bge", "bge"]
    res = cli("results", "--store", root, "--sql", "SELECT count(*) AS n FROM runs", "--format", "json")
    assert json.loads(res.stdout) == [{"n": 4}]
    res = cli("results", "--store", root, "--version", "1", "--table", "runs", "--format", "csv")
    assert res.returncode == 0 and res.stdout.count("\n") == 3
    res = cli("results", "--store", root, "--table", "history")
    assert "CREATE TABLE" in res.stdout and ids[1][0] in res.stdout
    for bad, needle in (
        (["--sql", "SELEC 1"], "SQL error"),
        (["--version", "7"], "no snapshot at version 7"),
        (["--filter", "colour=red"], "colour"),
    ):
        res = cli("results", "--store", root, *bad)
        assert res.returncode == 2 and needle in res.stderr and "Traceback" not in res.stderr, res.stderr
    res = cli("results", "compact", "--store", root)
    assert res.returncode == 0 and "store version 3" in res.stdout, res.stderr


def test_cli_migrate(tmp_path, cli):
    from testkit.legacy_writer import LegacyWriter

    old = LegacyWriter(tmp_path / "old")
    old.commit([_run()], [_metric()], _records().to_arrow())
    res = cli("results", "migrate", str(old.root), str(tmp_path / "new"))
    assert res.returncode == 0, res.stderr
    assert "runs: 1 row(s) before, 1 after" in res.stdout and "per_query: 3 row(s)" in res.stdout
    res = cli("results", "--store", str(old.root), "--format", "json")  # old store still reads
    assert res.returncode == 0 and len(json.loads(res.stdout)) == 1
    res = cli("results", "migrate", str(old.root))
    assert res.returncode == 2 and "expected two locations" in res.stderr
