"""Compaction: small data files of one ``kind`` merged into larger ones, in one commit that lands
only on the version it was planned on.

delta-rs' own ``optimize.compact`` rebases its commit onto whatever landed meanwhile without
noticing that a concurrent compaction removed the same files, so two at once both commit and
every row is stored twice (and it ignores ``max_commit_retries``). This module plans the merge
on the snapshot at version N, writes the merged files (:func:`~adaptlab.results.staging.stage`,
hashed), and commits their ``add`` and the old files' ``remove`` actions with
``max_commit_retries=0``: the log entry of version N+1 is created only if absent (the commit
protocol's conditional put). When another writer took N+1, the merged files are deleted and the
merge is planned again on the new snapshot, where a concurrent compaction's work shows as nothing
left to merge. Each compaction also writes the Delta application transaction
:data:`MAINTENANCE_APP` (Delta protocol, "Transaction Identifiers").

Bin packing: per ``kind``, files under :data:`TARGET_BYTES` are taken in path order into groups
whose sizes add up to at most that; a group of two or more files becomes one file.
"""

from __future__ import annotations

import time
from typing import Any

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
from deltalake.transaction import RemoveAction

from adaptlab.errors import StoreError
from adaptlab.results.native import is_permanent
from adaptlab.results.staging import CHECKSUMS_KEY, Staged, discard, stage

__all__ = ["MAINTENANCE_APP", "TARGET_BYTES", "compact_table", "plan"]

TARGET_BYTES = 64 << 20
"""The size up to which small files are merged into one."""
MAINTENANCE_APP = "adaptlab-maintenance"
"""The Delta application id whose transaction number counts the store's compactions."""
_ATTEMPTS = 20


def plan(live: dict[str, int]) -> list[list[str]]:
    """Groups of two or more small files of one ``kind`` to merge (store-relative paths)."""
    by_kind: dict[str, list[str]] = {}
    for path, size in sorted(live.items()):
        if size < TARGET_BYTES:
            by_kind.setdefault(path.split("/", 1)[0], []).append(path)
    groups: list[list[str]] = []
    for paths in by_kind.values():
        group: list[str] = []
        total = 0
        for path in paths:
            if group and total + live[path] > TARGET_BYTES:
                groups.append(group)
                group, total = [], 0
            group.append(path)
            total += live[path]
        groups.append(group)
    return [g for g in groups if len(g) > 1]


def _rows(fs: Any, paths: list[str], schema: pa.Schema) -> pa.Table:
    """The rows of ``paths`` (one ``kind``) in the Delta table's schema, ``kind`` included."""
    kind = paths[0].split("/", 1)[0].removeprefix("kind=")
    parts = []
    for path in paths:
        with fs.open_input_file(path) as f:
            t = pq.read_table(f)
        cols = [
            pa.array([kind] * t.num_rows, pa.string())
            if fld.name == "kind"
            else t.column(fld.name).cast(fld.type)
            if fld.name in t.column_names
            else pa.nulls(t.num_rows, fld.type)
            for fld in schema
        ]
        parts.append(pa.Table.from_arrays(cols, schema=schema))
    return pa.concat_tables(parts)


def compact_table(store: Any, schema: pa.Schema) -> dict[str, int]:
    """Merge the small files of ``store`` (a :class:`~adaptlab.results.writer.ResultsStore`) in one
    commit planned on the version it lands after; returns the files added and removed."""
    for _ in range(_ATTEMPTS):
        dt = store._table()
        raw = {_rel(store, p): p for p in pa.table(dt.get_add_actions(flatten=True)).column("path").to_pylist()}
        live = store._health.live_files(dt)
        groups = plan(live)
        if not groups:
            return {"files_added": 0, "files_removed": 0}
        store._checksums.verify(store._file_uris(dt))  # never merge a changed file into a new one
        staged = Staged()
        removes = []
        try:
            for group in groups:
                part = stage(store._health.fs, _rows(store._health.fs, group, schema), data_change=False)
                staged.adds += part.adds
                staged.checksums.update(part.checksums)
                removes += [
                    RemoveAction(
                        raw[p],
                        False,
                        int(time.time() * 1000),
                        live[p],
                        {"kind": p.split("/", 1)[0].removeprefix("kind=")},
                    )
                    for p in group
                ]
            staged.removes = len(removes)
            if _commit(dt, staged, removes, schema):
                return {"files_added": len(staged.adds), "files_removed": len(removes)}
        except BaseException:
            discard(store._health.fs, staged)
            raise
        discard(store._health.fs, staged)  # another writer took the version: plan again on the new one
    raise StoreError(
        f"{store.uri}: compaction did not land in {_ATTEMPTS} attempts (the store kept changing under "
        "it); nothing was changed: run it again when fewer writers are active"
    )


def _commit(dt: Any, staged: Staged, removes: list[Any], schema: pa.Schema) -> bool:
    """One log entry at the version after ``dt``'s; False when that version exists already."""
    from deltalake.exceptions import CommitFailedError

    done = int(dt.transaction_version(MAINTENANCE_APP) or 0)
    props = deltalake.CommitProperties(
        custom_metadata={
            "adaptlab.operation": "compact",
            CHECKSUMS_KEY: staged.checksums,
            "operationMetrics": staged.metrics(),
        },
        max_commit_retries=0,
        app_transactions=[deltalake.Transaction(MAINTENANCE_APP, done + 1)],
    )
    try:
        dt.create_write_transaction([*staged.adds, *removes], "append", schema, ["kind"], commit_properties=props)
    except CommitFailedError as e:
        if is_permanent(e):
            raise
        return False
    return True


def _rel(store: Any, path: str) -> str:
    from adaptlab.results.damage import relative_path

    return relative_path(store.uri, path)
