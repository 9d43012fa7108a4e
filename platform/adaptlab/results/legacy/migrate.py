"""Convert a store of the previous layout (commit directories, read by
:mod:`adaptlab.results.legacy.legacy`) into a Delta Lake store. (Rows of an older schema version are
upgraded on the way by :mod:`adaptlab.results.legacy.schema_upgrade`.)

Every commit of the old store is copied with its commit id and row order, in batches of
whole commits (one Delta commit per batch). Each batch is written under a Delta
application id derived from the two locations, so a migration that was interrupted
continues where it stopped when run again, and never writes a batch twice. At the end,
every table of both stores is read back and compared row by row (NaN equals NaN).
"""

from __future__ import annotations

import hashlib
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adaptlab.errors import StoreError
from adaptlab.results.legacy.legacy import LegacyReader, is_legacy_store
from adaptlab.results.schema import TABLES

__all__ = ["MigrationReport", "migrate_store"]

_BATCH_ROWS = 200_000


@dataclass
class MigrationReport:
    """What :func:`migrate_store` copied: rows per table in both stores, commits, batches."""

    source: str
    target: str
    commits: int = 0
    batches: int = 0
    skipped_batches: int = 0
    rows: dict[str, tuple[int, int]] = field(default_factory=dict)  # table -> (old, new)
    version: int | None = None

    def lines(self) -> list[str]:
        out = [
            f"migrated {self.commits} commit(s) from {self.source} to {self.target} "
            f"in {self.batches} batch(es) (skipped, already there: {self.skipped_batches}); "
            f"store version {self.version}"
        ]
        for name, (old, new) in self.rows.items():
            out.append(f"  {name}: {old} row(s) before, {new} after, values identical")
        return out


def _same_values(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_values(x, y) for x, y in zip(a, b))
    return a == b


def _compare(name: str, old: Any, new: Any) -> None:
    if old.num_rows != new.num_rows:
        raise StoreError(f"migration check: table {name!r} has {old.num_rows} rows before and {new.num_rows} after")
    if old.column_names != new.column_names:
        raise StoreError(f"migration check: table {name!r} columns differ: {old.column_names} vs {new.column_names}")
    step = 50_000
    for start in range(0, old.num_rows, step):
        a = old.slice(start, step).to_pylist()
        b = new.slice(start, step).to_pylist()
        for i, (ra, rb) in enumerate(zip(a, b)):
            for col in old.column_names:
                if not _same_values(ra[col], rb[col]):
                    raise StoreError(
                        f"migration check: table {name!r} row {start + i} column {col!r} differs: "
                        f"{ra[col]!r} before, {rb[col]!r} after"
                    )


def migrate_store(
    source: str | os.PathLike[str], target: str | os.PathLike[str], *, storage_options: dict[str, str] | None = None
) -> MigrationReport:
    """Copy the previous-layout store at ``source`` into a new Delta store at ``target``.

    ``target`` must not exist, be empty, or hold only an earlier run of this same
    migration. Raises :class:`StoreError` if the source is not a store of the previous
    layout, if it has a newer schema, or if the check after copying finds any difference.
    """
    from adaptlab.results.store import ResultsStore, normalize_uri

    old, src_uri = _open_source(source)
    tgt_uri, tgt_local = normalize_uri(target)
    _check_target(src_uri, tgt_uri, tgt_local)
    new = ResultsStore(tgt_uri, create=True, storage_options=storage_options)
    app_id = "adaptlab-migrate-" + hashlib.sha256(f"{src_uri}\n{tgt_uri}".encode()).hexdigest()[:16]
    done = new.transactions_done(app_id)
    if new.version() > 0 and done == 0:
        raise StoreError(f"migrate: {tgt_uri} already holds results; give a new location for NEW")

    report = MigrationReport(source=str(old.root), target=tgt_uri)
    commit_ids = old.commit_ids()  # raises for newer schema versions
    report.commits = len(commit_ids)
    for seq, batch in enumerate(_batches(old, commit_ids), start=1):
        if seq <= done:
            report.skipped_batches += 1
            continue
        report.batches += 1
        new.append_once(_batch_rows(old, batch), app_id, seq)  # verified like any commit
    _check_copy(old, new, report)
    report.version = new.version()
    new.close()
    return report


def _open_source(source: str | os.PathLike[str]) -> tuple[LegacyReader, str]:
    """The reader of the previous-layout store at ``source``, and its normalised URI."""
    from adaptlab.results.store import normalize_uri

    src_uri, src_local = normalize_uri(source)
    if src_local is None or not is_legacy_store(src_local):
        if src_local is not None and not src_local.exists():
            raise StoreError(f"migrate: {src_local} does not exist; expected a results store of the previous layout")
        raise StoreError(
            f"migrate: {src_uri} is not a results store of the previous layout (no adaptlab-store.json); "
            "only local stores written before Delta Lake need migrating"
        )
    return LegacyReader(src_local), src_uri


def _check_target(src_uri: str, tgt_uri: str, tgt_local: Path | None) -> None:
    """Refuse a target that is the source, a file, another old store, or a folder of other files."""
    if tgt_uri == src_uri:
        raise StoreError(f"migrate: OLD and NEW are the same location {src_uri}; give a new location for NEW")
    if tgt_local is None:
        return
    if tgt_local.exists() and not tgt_local.is_dir():
        raise StoreError(f"migrate: {tgt_local} is a file; give a new directory for NEW")
    if is_legacy_store(tgt_local):
        raise StoreError(f"migrate: {tgt_local} is itself a store of the previous layout; give a new location")
    if tgt_local.is_dir() and any(tgt_local.iterdir()) and not (tgt_local / "_delta_log").is_dir():
        raise StoreError(f"migrate: {tgt_local} exists and is not empty; give a new location for NEW")


def _batches(old: LegacyReader, commit_ids: list[str]) -> list[list[str]]:
    """Whole commits grouped into batches of at most ``_BATCH_ROWS`` rows (a bigger commit alone)."""
    batches: list[list[str]] = []
    rows_in_batch = 0
    for cid in commit_ids:
        n = sum(old.manifest(cid).tables.values())
        if batches and rows_in_batch + n <= _BATCH_ROWS:
            batches[-1].append(cid)
            rows_in_batch += n
        else:
            batches.append([cid])
            rows_in_batch = n
    return batches


def _batch_rows(old: LegacyReader, batch: list[str]) -> Any:
    """The Delta rows of a batch of old commits, each under its own commit id."""
    import pyarrow as pa

    from adaptlab.results.store import rows_for_delta

    return pa.concat_tables(
        [rows_for_delta({name: old.commit_table(cid, name) for name in TABLES}, cid) for cid in batch]
    )


def _check_copy(old: LegacyReader, new: Any, report: MigrationReport) -> None:
    """Compare every table of both stores, row by row; record the row counts in ``report``."""
    for name in ("runs", "per_query"):
        a, b = old.table(name), new.table(name)
        _compare(name, a, b)
        report.rows[name] = (a.num_rows, b.num_rows)
    a, b = old.table("metrics"), new.metrics(kind="all")
    _compare("metrics", a, b)
    report.rows["metrics"] = (a.num_rows, b.num_rows)
