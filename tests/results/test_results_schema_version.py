"""Schema versions of the Delta Lake store, and migration from the previous layout.

A store with a newer schema is refused with a message naming it; a store of the previous
layout (including its v0 files) opens read-only and converts with identical results.
"""

from __future__ import annotations

import json

import pytest
from test_results_legacy_schema_version import _write_v0_commit
from test_results_store import _metric, _records, _run

from adaptlab import results
from adaptlab.errors import StoreError
from adaptlab.results.legacy.legacy import LegacyReader
from adaptlab.results.legacy.migrate import migrate_store
from adaptlab.results.store import delta_schema
from testkit.legacy_writer import LegacyWriter


def _newer_store(root, **info):
    from deltalake import DeltaTable

    desc = {"format": "adaptlab.results", "layout": 2, "schema_version": results.SCHEMA_VERSION + 1, **info}
    DeltaTable.create(str(root), delta_schema(), partition_by=["kind"], description=json.dumps(desc))


def test_newer_schema_is_refused_naming_store_and_version(tmp_path):
    _newer_store(tmp_path / "new")
    newer = results.SCHEMA_VERSION + 1
    with pytest.raises(StoreError, match=rf"new: results schema version {newer} .*newer.*upgrade adaptlab"):
        results.open(tmp_path / "new")
    with pytest.raises(StoreError, match="newer"):
        results.open(tmp_path / "new", create=True)


def test_foreign_delta_table_is_not_a_store(tmp_path):
    from deltalake import DeltaTable

    DeltaTable.create(str(tmp_path / "other"), delta_schema(), description="someone else's table")
    with pytest.raises(StoreError, match="not an adaptlab results store"):
        results.open(tmp_path / "other")


@pytest.fixture
def legacy(tmp_path):
    """A store of the previous layout: a v0 commit, then two commits of the last version."""
    store = LegacyWriter(tmp_path / "old")
    _write_v0_commit(store.root)
    a, b = _run("minilm"), _run("bge")
    store.commit(
        [a, b],
        [
            _metric("minilm", value=0.6, ci_low=0.5, ci_high=0.7),
            _metric("bge", value=0.4),
            _metric("minilm", value=0.2, compared_to="bge", p_value=0.03),
            _metric("bge", "toy", "mrr"),
        ],
        [_records("minilm"), _records("bge")],
    )
    store.commit([_run("c", "other")], [_metric("c", "other", value=float("nan"))])
    return store


def test_previous_layout_opens_read_only(legacy):
    old = results.open(legacy.root)
    assert type(old) is LegacyReader and old.read_only
    assert old.runs().num_rows == 4
    with pytest.raises(StoreError, match=r"previous layout.*read-only.*adaptlab results migrate"):
        results.open(legacy.root, create=True).commit([_run()])
    with pytest.raises(StoreError, match="has no versions"):
        results.open(legacy.root, version=0)


def test_migrate_converts_with_identical_results(legacy, tmp_path):
    report = migrate_store(legacy.root, tmp_path / "new")
    assert report.commits == 3 and report.batches == 1
    assert report.rows == {"runs": (4, 4), "per_query": (8, 8), "metrics": (7, 7)}
    new = results.open(tmp_path / "new")
    assert new.commit_ids() == legacy.commit_ids()  # ids and order kept
    for name in ("runs", "per_query"):
        assert json.dumps(new.table(name).to_pylist(), default=str) == json.dumps(
            legacy.table(name).to_pylist(), default=str
        )
    assert new.metrics(compared_to="bge").column("value").to_pylist() == [0.2]
    assert new.metrics(kind="all").num_rows == legacy.metrics().num_rows
    assert new.runs(system="old").column("model_revision").to_pylist() == ["rev0"]  # v0 migrated on the way
    # running it again continues (nothing left to do) and never duplicates
    again = migrate_store(legacy.root, tmp_path / "new")
    assert again.batches == 0 and again.skipped_batches == 1 and results.open(tmp_path / "new").runs().num_rows == 4


def test_migrate_refuses_bad_locations(legacy, tmp_path):
    with pytest.raises(StoreError, match="does not exist"):
        migrate_store(tmp_path / "missing", tmp_path / "x")
    with pytest.raises(StoreError, match="same location"):
        migrate_store(legacy.root, legacy.root)
    full = results.open(tmp_path / "full", create=True)
    full.commit([_run()])
    with pytest.raises(StoreError, match="already holds results"):
        migrate_store(legacy.root, tmp_path / "full")
    with pytest.raises(StoreError, match="not a results store of the previous layout"):
        migrate_store(tmp_path / "full", tmp_path / "y")
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "f.txt").write_text("x")
    with pytest.raises(StoreError, match="not empty"):
        migrate_store(legacy.root, tmp_path / "junk")


def test_migrate_refuses_a_newer_previous_layout_commit(legacy, tmp_path):
    cid = legacy.commit_ids()[-1]
    path = legacy.root / "commits" / cid / "_commit.json"
    data = json.loads(path.read_text())
    data["schema_version"] = 99
    path.write_text(json.dumps(data))
    with pytest.raises(StoreError, match="schema version 99, newer"):
        migrate_store(legacy.root, tmp_path / "new")


def test_append_once_writes_a_transaction_once_and_records_its_checksums(tmp_path):
    """The writer's public path for migration: (app_id, seq) lands once, is counted, and its data
    files get checksums, so a flipped byte in a migrated file is found like in any commit."""
    from adaptlab.results.store import rows_for_delta
    from adaptlab.results.validate import prepare_commit

    store = results.open(tmp_path / "s", create=True)
    rows = rows_for_delta(prepare_commit([_run()], [_metric()], None), "c1")
    assert store.transactions_done("app") == 0
    store.append_once(rows, "app", 1)
    store.append_once(rows, "app", 1)  # already landed: not written again
    assert store.transactions_done("app") == 1 and store.runs().num_rows == 1
    with pytest.raises(StoreError, match="past snapshot"):
        results.open(tmp_path / "s", version=1).append_once(rows, "app", 2)
    data = next((tmp_path / "s").glob("kind=runs/*.parquet"))
    raw = bytearray(data.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    data.write_bytes(bytes(raw))
    with pytest.raises(StoreError, match=r"kind=runs/part-.*: corrupted data file"):
        results.open(tmp_path / "s").runs()
