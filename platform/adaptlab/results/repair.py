"""Repair a damaged results store, saying exactly what was moved where; nothing is deleted.

``adaptlab results repair --store URI`` or :func:`repair_store`:

1. **A damaged log** (a commit file that is missing, empty, truncated or garbled at version D):
   the log is cut back to version D-1, the last whole version. The commit files (and
   checkpoints) from version D on are *moved* into ``_adaptlab_quarantine/<UTC time>/_delta_log/``;
   the data files of those commits stay where they are, unreferenced (``compact`` deletes them
   after its retention period). Version 0, the table's creation, cannot be cut: restore it from a
   backup.
2. **A missing or changed data file** (absent, another size than the log recorded, or another
   SHA-256 than the checksum manifest recorded) added at version V: the store is restored to
   version V-1 with Delta ``restore``, which writes a new version. Nothing is deleted: the
   versions before the restore stay readable with ``open(uri, version=N)``.
3. **Checksum records whose commit vanished** (``_adaptlab_checksums/<commit id>.json`` for a commit
   the log no longer has) are moved into the quarantine folder too.
4. Data files of the current version with no checksum record get one (of their current bytes).

Every step is one line of the report; a store without damage is left unchanged.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from adaptlab.errors import StoreError
from adaptlab.results.health import LOG_DIR, QUARANTINE_DIR, Health, Listing, StoreDamagedError
from adaptlab.results.native import quiet_native, remote_options, short_message

__all__ = ["RepairReport", "repair_store"]

_MAX_STEPS = 50


@dataclass
class RepairReport:
    """What :func:`repair_store` did: one line per action, and the version before and after."""

    uri: str
    actions: list[str] = field(default_factory=list)
    version_before: int | None = None
    version_after: int | None = None

    @property
    def changed(self) -> bool:
        return bool(self.actions)

    def lines(self) -> list[str]:
        if not self.actions:
            return [f"{self.uri}: no damage found; nothing was changed (version {self.version_after})"]
        head = f"{self.uri}: repaired (version {self.version_before} -> {self.version_after}):"
        return [head, *(f"  - {a}" for a in self.actions)]


def repair_store(root: str | os.PathLike[str], *, storage_options: dict[str, str] | None = None) -> RepairReport:
    """Repair the store at ``root`` (see the module docstring); returns what was done."""
    from adaptlab.results.store import normalize_uri

    uri, local = normalize_uri(root)
    health = Health(uri, remote_options(storage_options) if local is None else
                    (dict(storage_options) if storage_options else None))
    report = RepairReport(uri)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    quarantine = f"{QUARANTINE_DIR}/{stamp}"
    listing = health.listing()
    if not listing.commits:
        raise StoreError(f"{uri}: no Delta log ({LOG_DIR}/) there: not a results store, nothing to repair")
    report.version_before = max(listing.commits)
    for _ in range(_MAX_STEPS):
        listing = health.listing()
        try:
            health.check_log(listing)
            break
        except StoreDamagedError as e:
            _cut_log(health, listing, e, quarantine, report)
    report.version_after = max(health.listing().commits)
    _restore_whole_data(health, report)
    _quarantine_orphan_checksums(health, quarantine, report)
    _record_missing_checksums(health, report)
    return report


def _cut_log(health: Health, listing: Listing, damage: StoreDamagedError, quarantine: str,
             report: RepairReport) -> None:
    """Move the commit files and checkpoints from the damaged version on into quarantine."""
    bad = damage.version if damage.version is not None else 0
    if bad == 0:
        raise StoreError(f"{health.uri}: {damage.path} (version 0, the table's creation) {damage.problem}: it cannot "
                         "be cut off; restore it from a backup") from damage
    moved = [p for v, (p, _) in sorted(listing.commits.items()) if v >= bad]
    moved += [p for v, p in sorted(listing.checkpoints.items()) if v >= bad]
    if f"{LOG_DIR}/_last_checkpoint" in listing.files and _last_checkpoint(health) >= bad:
        moved.append(f"{LOG_DIR}/_last_checkpoint")
    for path in moved:
        _move(health, path, f"{quarantine}/{path}")
    last = max(listing.commits)
    lost = f"version {bad} is" if last == bad else f"versions {bad}..{last} are"
    report.actions.append(
        f"{damage.path} (version {bad}) {damage.problem}: the log was cut back to version {bad - 1}, the last "
        f"whole version; {lost} no longer in the store: moved {len(moved)} log file(s) to {quarantine}/{LOG_DIR}/ "
        "(the data files of those commits stay, unreferenced)")


def _last_checkpoint(health: Health) -> int:
    import json

    try:
        with health.fs.open_input_stream(f"{LOG_DIR}/_last_checkpoint") as f:
            return int(json.loads(f.read()).get("version", -1))
    except Exception:  # noqa: BLE001 - unreadable: treat as pointing past the damage
        return 1 << 62


def _move(health: Health, src: str, dst: str) -> None:
    try:
        health.fs.create_dir(dst.rsplit("/", 1)[0], recursive=True)
        health.fs.move(src, dst)
    except Exception as e:  # noqa: BLE001
        raise StoreError(f"{health.uri}: could not move {src} to {dst} ({short_message(e)}); nothing else "
                         "was changed in this step") from e


def _restore_whole_data(health: Health, report: RepairReport) -> None:
    """Restore to the version before the first missing or changed data file was added."""
    from deltalake import CommitProperties, DeltaTable

    for _ in range(_MAX_STEPS):
        listing = health.listing()
        state = health.check_log(listing)
        with quiet_native("repair"):
            dt = DeltaTable(health.uri, storage_options=health._options)
        bad = _first_bad_file(health, dt, listing, state)
        if bad is None:
            return
        path, added, problem = bad
        if added is None or added < 1:
            raise StoreError(f"{health.uri}: data file {path} {problem} and was added at an unknown version "
                             "(before the oldest commit file): restore it from a backup")
        before = int(dt.version())
        try:
            with quiet_native("restore"):
                dt.restore(added - 1, commit_properties=CommitProperties(
                    custom_metadata={"adaptlab.operation": f"repair: restore to version {added - 1}"}))
        except Exception as e:  # noqa: BLE001
            raise StoreError(f"{health.uri}: restore to version {added - 1} failed ({short_message(e)}); the store "
                             "is unchanged") from e
        report.version_after = before + 1
        report.actions.append(
            f"data file {path} (added at version {added}) {problem}: restored the store to version {added - 1} "
            f"as new version {before + 1}; the commits of versions {added}..{before} are no longer in the current "
            f"version (nothing was deleted: the older versions stay in the history)")


def _first_bad_file(health: Health, dt: Any, listing: Listing, state: Any) -> tuple[str, int | None, str] | None:
    """The earliest-added data file of ``dt`` that is missing, resized or changed (by checksum)."""
    from adaptlab.results.integrity import Checksums

    live = health.live_files(dt)
    sums = Checksums.for_store(health.uri, health.fs)
    recorded = sums.manifest()
    for path in sorted(live, key=lambda p: (state.added.get(p, -1), p)):
        size = listing.files.get(path)
        if size is None:
            return path, state.added.get(path), "is missing"
        if size != live[path]:
            return path, state.added.get(path), f"has {size} bytes, the log recorded {live[path]}"
        entry = recorded.get(path)
        if entry is not None and sums.digest(path) != entry.get("sha256"):
            return path, state.added.get(path), "differs from its recorded SHA-256"
    return None


def _quarantine_orphan_checksums(health: Health, quarantine: str, report: RepairReport) -> None:
    from adaptlab.results.integrity import Checksums

    listing = health.listing()
    state = health.check_log(listing)
    sums = Checksums.for_store(health.uri, health.fs)
    for path in sums.orphans(listing, state):
        _move(health, path, f"{quarantine}/{path}")
        report.actions.append(f"{path} records the checksums of a commit that is not in the log: moved it to "
                              f"{quarantine}/{path}")


def _record_missing_checksums(health: Health, report: RepairReport) -> None:
    from deltalake import DeltaTable

    from adaptlab.results.integrity import Checksums

    with quiet_native("repair"):
        dt = DeltaTable(health.uri, storage_options=health._options)
    live = health.live_files(dt)
    sums = Checksums.for_store(health.uri, health.fs)
    label = f"repair-{int(dt.version())}-{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}"
    n = sums.record_relative(sorted(live), label)
    if n:
        report.actions.append(f"recorded the SHA-256 of {n} data file(s) that had no checksum record (of their "
                              f"current bytes) in _adaptlab_checksums/{label}.json")
