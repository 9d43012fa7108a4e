"""Vacuum: deleting the data files no version of the store needs, safely beside writers,
compactions and other vacuums.

What may go (Delta Lake's rule, Armbrust et al. 2020, "Delta Lake: High-Performance ACID Table
Storage over Cloud Object Stores", section 3.3): a file removed from the table longer than
``retention_hours`` ago (an expired tombstone: only versions older than that referenced it), and a
file under ``kind=`` that no commit of the log has ever added and that is older than
``retention_hours`` (what a writer that died between writing its files and its log entry left).

The danger is the second kind: a writer's data files exist before its log entry does, so a vacuum
that sees them in between would delete files a commit in flight is about to reference. A vacuum
therefore commits like every other maintenance step, on the version it planned on:

1. plan on the snapshot at version N: the files to delete;
2. commit one log entry at version N+1, created only if absent (``max_commit_retries=0``, the
   commit protocol's conditional put), that adds and removes nothing and names those files in its
   ``commitInfo`` under :data:`VACUUM_FILES_KEY`; when another commit took N+1, plan again on the
   new snapshot (where that commit's files are referenced, so never deleted);
3. only then delete the files (a file already gone, deleted by a concurrent vacuum, is no error).

A writer whose files were written before a vacuum's entry and whose log entry comes after it sees
that entry when it reads the store again before committing (every commit is made on the version
it read) and, when the entry names any of its files, writes them again under new names
(:func:`vacuumed_since`). A writer whose entry lands first makes the vacuum's entry fail. So no
committed version, and no commit that will land, references a deleted file.
"""

from __future__ import annotations

import time
from typing import Any

import deltalake
import pyarrow as pa

from adaptlab.errors import StoreError
from adaptlab.results.damage import relative_path
from adaptlab.results.native import is_permanent, quiet_native

__all__ = ["VACUUM_FILES_KEY", "VACUUM_OPERATION", "vacuum_table", "vacuumed_since"]

VACUUM_OPERATION = "vacuum"
"""The ``adaptlab.operation`` of a vacuum's log entry."""
VACUUM_FILES_KEY = "adaptlab.vacuum_files"
"""The ``commitInfo`` key of the store-relative paths a vacuum deletes after its entry landed."""
_ATTEMPTS = 20


def vacuum_table(store: Any, schema: pa.Schema, retention_hours: float) -> dict[str, int]:
    """Delete the files of ``store`` (a :class:`~adaptlab.results.writer.ResultsStore`) that no
    version younger than ``retention_hours`` needs and no commit in flight will reference;
    returns ``{"files_vacuumed": n, "version": v}`` (files this call deleted, the store version)."""
    for _ in range(_ATTEMPTS):
        dt = store._table()
        doomed = _plan(store, dt, retention_hours)
        if not doomed:
            return {"files_vacuumed": 0, "version": int(dt.version())}
        if _announce(dt, doomed, schema):
            return {"files_vacuumed": _delete(store._health.fs, doomed), "version": int(dt.version()) + 1}
    raise StoreError(
        f"{store.uri}: vacuum did not land in {_ATTEMPTS} attempts (the store kept changing under it); "
        "nothing was deleted: run it again when fewer writers are active"
    )


def _plan(store: Any, dt: Any, retention_hours: float) -> list[str]:
    """The store-relative paths to delete, planned on the snapshot ``dt``: expired tombstones
    (delta-rs' own rule) and old files no commit of the log added."""
    health = store._health
    listing = health.listing()
    state = health.check_log(listing, upto=int(dt.version()))
    live = set(health.live_files(dt))
    expired = _tombstones(store, dt, retention_hours) - live
    known = live | set(state.added) | _tombstones(store, dt, 0.0)  # a checkpoint's tombstones included
    strays = [p for p in listing.files if p.startswith("kind=") and p not in known]
    return sorted(expired | set(_older_than(health.fs, strays, retention_hours)))


def _tombstones(store: Any, dt: Any, hours: float) -> set[str]:
    """The files the snapshot ``dt`` records as removed more than ``hours`` ago (delta-rs' rule)."""
    with quiet_native("vacuum"):
        paths = dt.vacuum(retention_hours=int(hours), dry_run=True, enforce_retention_duration=False)
    return {relative_path(store.uri, p) for p in paths}


def _older_than(fs: Any, paths: list[str], hours: float) -> list[str]:
    """The files of ``paths`` last modified more than ``hours`` ago (gone ones are left out)."""
    import pyarrow.fs as pafs

    if not paths:
        return []
    cutoff = time.time() - hours * 3600.0
    infos = fs.get_file_info(paths)
    return [
        p
        for p, info in zip(paths, infos)
        if info.type == pafs.FileType.File and info.mtime is not None and info.mtime.timestamp() < cutoff
    ]


def _announce(dt: Any, doomed: list[str], schema: pa.Schema) -> bool:
    """The vacuum's log entry (no actions; the files it deletes) at the version after ``dt``'s;
    False when that version exists already."""
    from deltalake.exceptions import CommitFailedError

    props = deltalake.CommitProperties(
        custom_metadata={
            "adaptlab.operation": VACUUM_OPERATION,
            VACUUM_FILES_KEY: doomed,
            "operationMetrics": {"num_added_files": 0, "num_removed_files": 0, "num_added_rows": 0},
        },
        max_commit_retries=0,
    )
    try:
        with quiet_native("vacuum"):
            dt.create_write_transaction([], "append", schema, ["kind"], commit_properties=props)
    except CommitFailedError as e:
        if is_permanent(e):
            raise
        return False
    return True


def _delete(fs: Any, doomed: list[str]) -> int:
    """Delete ``doomed``; returns how many this call deleted (a concurrent vacuum may have taken
    some first: a file already gone is skipped)."""
    import pyarrow.fs as pafs

    gone = 0
    for path in doomed:
        try:
            fs.delete_file(path)
        except Exception:  # noqa: BLE001 - any backend's "not found"; other trouble is raised below
            if fs.get_file_info(path).type == pafs.FileType.File:
                raise
            continue
        gone += 1
    return gone


def vacuumed_since(dt: Any, since: int, paths: list[str]) -> bool:
    """Whether a vacuum whose log entry is newer than version ``since`` (and in the snapshot
    ``dt``) deletes any of ``paths``: a writer that wrote ``paths`` after reading version ``since``
    must then write its files again before committing."""
    newer = int(dt.version()) - since
    if newer <= 0:
        return False
    mine = set(paths)
    for info in dt.history(newer):
        if info.get("adaptlab.operation") == VACUUM_OPERATION and mine & set(info.get(VACUUM_FILES_KEY) or ()):
            return True
    return False
