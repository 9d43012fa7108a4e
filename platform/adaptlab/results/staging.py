"""Data files written before their commit, with the SHA-256 the commit itself records.

A commit of the results store is two steps (the way Delta Lake writers work: data files first,
the log entry last, Armbrust et al. 2020, "Delta Lake: High-Performance ACID Table Storage over
Cloud Object Stores", section 3.2):

1. :func:`stage` writes each ``kind`` partition of the rows as one Parquet file under
   ``kind=<kind>/`` and hashes its bytes as written;
2. the caller commits the ``add`` actions of those files in one log entry whose ``commitInfo``
   holds their hashes under :data:`CHECKSUMS_KEY` (``{relative path: {"sha256", "size"}}``), with
   ``max_commit_retries=0``: the log entry of version N+1 is created only if absent, so a commit
   planned on version N either lands as N+1 or fails, and the caller re-reads the store and decides
   again (never a rebase onto a version it did not read).

The hash of a file therefore travels with the commit that added it: deleting the checksum folder
cannot erase it. :func:`discard` deletes the staged files of a commit that did not land.

This module imports pyarrow and deltalake.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake.transaction import AddAction

from adaptlab.results.delta_protocol import CHECKSUMS_KEY

__all__ = ["CHECKSUMS_KEY", "Staged", "discard", "stage", "write_bytes"]


@dataclass
class Staged:
    """The data files written for one commit: their ``add`` actions and checksums."""

    adds: list[AddAction] = field(default_factory=list)
    checksums: dict[str, dict[str, Any]] = field(default_factory=dict)

    removes: int = 0

    @property
    def paths(self) -> list[str]:
        return [a.path for a in self.adds]

    def metrics(self) -> dict[str, int]:
        """The commit's ``operationMetrics`` (what the log's damage check counts a commit file by)."""
        rows = sum(int(json.loads(a.stats)["numRecords"]) for a in self.adds)
        return {"num_added_files": len(self.adds), "num_removed_files": self.removes, "num_added_rows": rows}


def write_bytes(fs: Any, rel: str, data: bytes) -> None:
    """Write ``data`` to the store-relative path ``rel`` through the store's file system (delta-rs'
    object store handler takes bytes, not pyarrow Buffers)."""
    handler = getattr(getattr(fs, "handler", None), "_handler", None)
    if handler is not None:
        parent = rel.rsplit("/", 1)[0]
        if "/" in rel:
            fs.create_dir(parent, recursive=True)
        out = handler.open_output_stream(rel, None)
        try:
            out.write(data)
        finally:
            out.close()
        return
    with fs.open_output_stream(rel) as out:  # pragma: no cover - a plain pyarrow file system
        out.write(data)


def _stats(table: pa.Table) -> str:
    """The Delta ``add`` statistics of a file's rows: ``numRecords`` and each column's ``nullCount``
    (no min/max values, so no reader ever skips a file on a statistic of ours)."""
    return json.dumps(
        {
            "numRecords": table.num_rows,
            "nullCount": {name: table.column(name).null_count for name in table.column_names},
        }
    )


def stage(fs: Any, data: pa.Table, *, data_change: bool = True) -> Staged:
    """Write the rows of ``data`` (the Delta table's schema, a ``kind`` column) as one Parquet file
    per ``kind`` under ``kind=<kind>/``, hashing each file's bytes; returns their actions."""
    out = Staged()
    if not data.num_rows:
        return out
    kinds = pc.unique(data.column("kind")).to_pylist()
    try:
        for kind in kinds:
            part = data.filter(pc.equal(data.column("kind"), kind)).drop_columns(["kind"])
            sink = pa.BufferOutputStream()
            pq.write_table(part, sink, compression="zstd")
            raw = sink.getvalue().to_pybytes()
            rel = f"kind={kind}/part-00000-{uuid.uuid4()}-c000.zstd.parquet"
            write_bytes(fs, rel, raw)
            out.checksums[rel] = {"sha256": hashlib.sha256(raw).hexdigest(), "size": len(raw)}
            out.adds.append(
                AddAction(rel, len(raw), {"kind": kind}, int(time.time() * 1000), data_change, _stats(part))
            )
    except BaseException:
        discard(fs, out)
        raise
    return out


def discard(fs: Any, staged: Staged) -> list[str]:
    """Delete the staged files of a commit that did not land; returns those that could not be."""
    left = []
    for rel in staged.paths:
        try:
            fs.delete_file(rel)
        except Exception:  # noqa: BLE001 - already gone, or storage trouble: reported by the caller
            left.append(rel)
    return left
