"""Repair a damaged results store, saying exactly what was moved where and how many rows left
the store; nothing is deleted, and no damaged file is given a checksum (issue 28).

``adaptlab results repair --store URI`` or :func:`repair_store`:

1. **A damaged log** (a commit file that is missing, empty, truncated, garbled, of the wrong
   shape or a directory at version D): the log is cut back to version D-1, the last whole
   version. The commit files (and checkpoints) from version D on are *moved* into
   ``_adaptlab_quarantine/<UTC time>/_delta_log/``. Version 0, the table's creation, cannot be
   cut: restore it from a backup. A malformed ``_delta_log/_last_checkpoint`` is moved there
   alone (delta-rs lists the log without it; no version is lost).
2. **The rows of the cut commits**: their data files (named by the lines of the cut commit files
   that still parse and by the cut commits' checksum records) are moved to the same quarantine
   folder under their own relative paths, and the report says how many rows per table they
   hold (from each Parquet footer). Data files of a cut version that nothing names stay in
   place, and the report says so.
3. **A missing or changed data file** (absent, another size than the log recorded, another
   SHA-256 than the checksum manifest recorded, or, without a recorded hash, not decoding as
   Parquet with the rows and null counts the log recorded) added at version V: the store is
   restored to version V-1 with Delta ``restore``, which writes a new version; the report says
   how many rows per table left the current version. The versions before the restore stay
   readable with ``open(uri, version=N)``.
4. **Checksum records whose commit vanished** (``_adaptlab_checksums/<commit id>.json`` for a commit
   the log no longer has) are moved into the quarantine folder too.
5. **Data files whose content nothing written at commit time confirms** (no SHA-256 in their
   commit's own log entry, where every commit records the hashes of the files it adds, nor in
   the checksum folder) are removed from the store in one commit and moved to the quarantine
   folder; the report names their rows and run ids. Their hash is never recorded: a damaged
   file that still decodes would be blessed.
6. Hashes that only the log holds (the checksum folder was deleted) are copied back into the
   folder, for files that matched them in step 3.

Every maintenance commit here (a restore, a removal) is made on the version repair checked and
created only if that version's successor does not exist yet (``max_commit_retries=0``): two
repairs at once never both commit.

Every step is one line of the report; a store without damage is left unchanged.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from adaptlab.errors import StoreError
from adaptlab.results.damage import (
    CHECKSUM_DIR,
    LAST_CHECKPOINT,
    LOG_DIR,
    QUARANTINE_DIR,
    Health,
    Listing,
    StoreDamagedError,
    commit_version,
    relative_path,
)
from adaptlab.results.delta_table import COMMIT_KEY
from adaptlab.results.native import is_permanent, quiet_native, remote_options, short_message

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
    if local is not None:
        _refuse_outside_quarantine(uri, local)
    health = Health(
        uri, remote_options(storage_options) if local is None else (dict(storage_options) if storage_options else None)
    )
    report = RepairReport(uri)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    quarantine = f"{QUARANTINE_DIR}/{stamp}"
    listing = health.listing()
    if not listing.commits and not listing.not_files:
        raise StoreError(f"{uri}: no Delta log ({LOG_DIR}/) there: not a results store, nothing to repair")
    report.version_before = max(listing.commits, default=0)
    cut = _Cut()
    for _ in range(_MAX_STEPS):
        listing = health.listing()
        try:
            health.check_log(listing)
            break
        except StoreDamagedError as e:
            if e.path == LAST_CHECKPOINT:
                _move(health, e.path, f"{quarantine}/{e.path}")
                report.actions.append(
                    f"{e.path} {e.problem}: moved it to {quarantine}/{e.path} (the log is read "
                    "without it; no version and no row is lost)"
                )
            else:
                _cut_log(health, listing, e, quarantine, report, cut)
    report.version_after = max(health.listing().commits)
    _quarantine_orphan_checksums(health, quarantine, report, cut)
    quarantine_cut_rows(health, quarantine, report, cut)
    _restore_whole_data(health, report)
    _quarantine_unverifiable(health, quarantine, report)
    _record_missing_checksums(health, report)
    return report


def _refuse_outside_quarantine(uri: str, local: Path) -> None:
    """Repair moves files only inside the store: a quarantine folder that is a symbolic link (or
    resolves elsewhere) is refused before anything is changed."""
    folder = local / QUARANTINE_DIR
    if not folder.is_symlink() and (not folder.exists() or folder.resolve().is_relative_to(local.resolve())):
        return
    target = os.readlink(folder) if folder.is_symlink() else str(folder.resolve())
    raise StoreError(
        f"{uri}: {QUARANTINE_DIR} is a symbolic link to {target}, outside the store; repair moves "
        f"damaged files only inside the store: make {QUARANTINE_DIR} a folder (or remove the link) and "
        "run repair again; nothing was changed"
    )


@dataclass
class _Cut:
    """What the cut commits held, as far as their files tell: the data files they added, the
    versions whose commit file named none, and the commit ids whose checksum records were found."""

    adds: set[str] = field(default_factory=set)
    unread: list[int] = field(default_factory=list)
    ids: set[str] = field(default_factory=set)
    manifests: int = 0


def _cut_log(
    health: Health, listing: Listing, damage: StoreDamagedError, quarantine: str, report: RepairReport, cut: _Cut
) -> None:
    """Move the commit files and checkpoints from the damaged version on into quarantine."""
    bad = damage.version if damage.version is not None else 0
    if bad == 0:
        raise StoreError(
            f"{health.uri}: {damage.path} (version 0, the table's creation) {damage.problem}: it cannot "
            "be cut off; restore it from a backup"
        ) from damage
    entries = dict((v, p) for v, (p, _) in listing.commits.items())
    for p in listing.not_files:
        found = commit_version(p)
        if found is not None:
            entries[found] = p
    moved = [p for v, p in sorted(entries.items()) if v >= bad]
    for v, p in sorted(entries.items()):
        if v >= bad:
            _read_cut_commit(health, v, p, listing, cut)
    moved += [p for v, p in sorted(listing.checkpoints.items()) if v >= bad]
    if LAST_CHECKPOINT in listing.files and _last_checkpoint(health) >= bad:
        moved.append(LAST_CHECKPOINT)
    for path in moved:
        _move(health, path, f"{quarantine}/{path}")
    last = max(entries)
    lost = f"version {bad} is" if last == bad else f"versions {bad}..{last} are"
    report.actions.append(
        f"{damage.path} (version {bad}) {damage.problem}: the log was cut back to version {bad - 1}, the last "
        f"whole version; {lost} no longer in the store: moved {len(moved)} log file(s) to {quarantine}/{LOG_DIR}/"
    )


def _read_cut_commit(health: Health, version: int, path: str, listing: Listing, cut: _Cut) -> None:
    """Collect the data files and commit id a cut commit file names, reading every line that
    still parses (a damaged file may hold whole lines besides the damaged one)."""
    import json

    raw = b""
    if path in listing.files:
        try:
            with health.fs.open_input_stream(path) as f:
                raw = f.read()
        except Exception:  # noqa: BLE001 - unreadable: its files are found through its checksum record
            raw = b""
    found = False
    for line in raw.decode("utf-8", "replace").splitlines():
        try:
            action = json.loads(line)
        except ValueError:
            continue
        add = action.get("add") if isinstance(action, dict) else None
        info = action.get("commitInfo") if isinstance(action, dict) else None
        if isinstance(add, dict) and isinstance(add.get("path"), str):
            cut.adds.add(relative_path(health.uri, add["path"]))
        if isinstance(info, dict):
            found = True
            if isinstance(info.get(COMMIT_KEY), str):
                cut.ids.add(info[COMMIT_KEY])
    if not found:
        cut.unread.append(version)


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
        raise StoreError(
            f"{health.uri}: could not move {src} to {dst} ({short_message(e)}); nothing else was changed in this step"
        ) from e


def _restore_whole_data(health: Health, report: RepairReport) -> None:
    """Restore to the version before the first missing, changed or undecodable data file was added."""
    from deltalake import CommitProperties
    from deltalake.exceptions import CommitFailedError

    for _ in range(_MAX_STEPS):
        listing = health.listing()
        state = health.check_log(listing)
        dt = _open_table(health)
        stats = _file_stats(health, dt)
        bad = _first_bad_file(health, dt, stats, listing, state)
        if bad is None:
            return
        path, added, problem = bad
        if added is None or added < 1:
            raise StoreError(
                f"{health.uri}: data file {path} {problem} and was added at an unknown version "
                "(before the oldest commit file): restore it from a backup"
            )
        before = int(dt.version())
        try:
            with quiet_native("restore"):
                dt.restore(
                    added - 1,
                    commit_properties=CommitProperties(
                        custom_metadata={"adaptlab.operation": f"repair: restore to version {added - 1}"},
                        max_commit_retries=0,
                    ),
                )  # lands on the version checked, or fails: never on a concurrent repair's
        except CommitFailedError as e:
            if is_permanent(e):
                raise StoreError(
                    f"{health.uri}: restore to version {added - 1} failed ({short_message(e)}); the store is unchanged"
                ) from e
            continue  # another process committed first (a concurrent repair): check the store again
        except Exception as e:  # noqa: BLE001
            raise StoreError(
                f"{health.uri}: restore to version {added - 1} failed ({short_message(e)}); the store is unchanged"
            ) from e
        after = _file_stats(health, _open_table(health))
        gone = {p: n for p, (n, _) in stats.items() if p not in after}
        report.version_after = before + 1
        report.actions.append(
            f"data file {path} (added at version {added}) {problem}: restored the store to version {added - 1} "
            f"as new version {before + 1}; {rows_by_kind(gone)} of the commits of versions {added}..{before} are no "
            f"longer in the current version: they stay in the history (`adaptlab results --store {health.uri} "
            f"--version {before}`), except those of {path} itself"
        )


def _open_table(health: Health) -> Any:
    from deltalake import DeltaTable

    try:
        with quiet_native("repair"):
            return DeltaTable(health.uri, storage_options=health._options)
    except Exception as e:  # noqa: BLE001 - delta-rs' own errors name no file: say what was done so far
        raise StoreError(
            f"{health.uri}: the store's log cannot be read after the checks ({short_message(e)}); "
            "nothing more was changed: restore the store from a backup"
        ) from e


def _file_stats(health: Health, dt: Any) -> dict[str, tuple[int | None, dict[str, int]]]:
    """The data files of the snapshot ``dt``: relative path -> (rows, null count per column), as
    the log recorded them (``numRecords`` and ``nullCount`` of the add action's statistics)."""
    import pyarrow as pa

    try:
        t = pa.table(dt.get_add_actions(flatten=True)).to_pylist()
    except Exception as e:  # noqa: BLE001
        raise StoreError(f"{health.uri}: cannot list the store's data files: {short_message(e)}") from e
    prefix = "null_count."
    return {
        relative_path(health.uri, r["path"]): (
            r.get("num_records"),
            {k[len(prefix) :]: v for k, v in r.items() if k.startswith(prefix) and isinstance(v, int)},
        )
        for r in t
    }


def _first_bad_file(
    health: Health, dt: Any, stats: dict[str, tuple[int | None, dict[str, int]]], listing: Listing, state: Any
) -> tuple[str, int | None, str] | None:
    """The earliest-added data file that is missing, resized, changed (by checksum) or, when no
    checksum was recorded for it, does not decode as Parquet with the rows the log recorded."""
    from adaptlab.results.integrity import Checksums

    live = health.live_files(dt)
    sums = Checksums.for_store(health.uri, health.fs)
    sums.use_log(state.checksums)
    recorded = sums.manifest()
    for path in sorted(live, key=lambda p: (state.added.get(p, -1), p)):
        size = listing.files.get(path)
        problem = None
        if size is None:
            problem = "is missing"
        elif size != live[path]:
            problem = f"has {size} bytes, the log recorded {live[path]}"
        elif path in recorded:
            if sums.digest(path) != recorded[path].get("sha256"):
                problem = "differs from its recorded SHA-256"
        else:
            problem = sums.parquet_problem(path, *stats.get(path, (None, {})))
        if problem is not None:
            return path, state.added.get(path), problem
    return None


def rows_by_kind(rows: dict[str, int | None]) -> str:
    """``"14 rows (per_query 6, runs 3, scores 5)"`` for data files (path -> rows) under ``kind=K/``."""
    kinds: dict[str, int] = {}
    unknown = 0
    for path, n in rows.items():
        if n is None:
            unknown += 1
            continue
        kind = path.split("/", 1)[0].removeprefix("kind=")
        kinds[kind] = kinds.get(kind, 0) + n
    parts = ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
    text = f"{sum(kinds.values())} row(s)" + (f" ({parts})" if parts else "")
    return text + (f" and {unknown} file(s) whose rows cannot be counted" if unknown else "")


def _quarantine_orphan_checksums(health: Health, quarantine: str, report: RepairReport, cut: _Cut) -> None:
    """Move the checksum records of commits the log no longer has to quarantine; the data files
    they list are the cut commits' (:func:`quarantine_cut_rows` moves them)."""
    from adaptlab.results.integrity import Checksums

    listing = health.listing()
    state = health.check_log(listing)
    sums = Checksums.for_store(health.uri, health.fs)
    for path in sums.orphans(listing, state):
        cut.adds.update(sums.listed(path))
        cut.manifests += path[len(CHECKSUM_DIR) + 1 : -len(".json")] not in cut.ids
        _move(health, path, f"{quarantine}/{path}")
        report.actions.append(
            f"{path} records the checksums of a commit that is not in the log: moved it to {quarantine}/{path}"
        )


def quarantine_cut_rows(health: Health, quarantine: str, report: RepairReport, cut: _Cut) -> None:
    """Move the data files of the commits cut from the log (referenced by no version left) to
    ``quarantine``, under the same relative paths, and say how many rows they hold."""
    if not cut.adds and not cut.unread:
        return
    listing = health.listing()
    state = health.check_log(listing)
    keep = set(state.added) | set(health.live_files(_open_table(health)))
    moving = sorted(p for p in cut.adds if p in listing.files and p not in keep)
    rows = {p: _parquet_rows(health, p) for p in moving}
    for path in moving:
        _move(health, path, f"{quarantine}/{path}")
    if moving:
        report.actions.append(
            f"{rows_by_kind(rows)} that were in the store before the cut are no longer in it: "
            f"moved their {len(moving)} data file(s) to {quarantine}/ (same folders)"
        )
    if len(cut.unread) > cut.manifests:
        shown = ", ".join(map(str, cut.unread))
        report.actions.append(
            f"the data files of version(s) {shown} cannot be identified (their commit file is "
            "unreadable and has no checksum record): they stay in place, unreferenced, and their "
            "rows are not counted above"
        )


def _parquet_rows(health: Health, path: str) -> int | None:
    """The rows of a Parquet file by its footer; None when the footer cannot be read."""
    import pyarrow.parquet as pq

    try:
        with health.fs.open_input_file(path) as f:
            return int(pq.ParquetFile(f).metadata.num_rows)
    except Exception:  # noqa: BLE001 - a damaged or partial file
        return None


def _quarantine_unverifiable(health: Health, quarantine: str, report: RepairReport) -> None:
    """Take out of the store the current version's data files whose content nothing written at
    commit time can confirm (no hash in their commit's log entry nor in the checksum folder): one
    commit removes them (on the version read, or not at all), then they move to ``quarantine``;
    the report names their rows. Their hash is never recorded (a damaged file that still decodes
    would be blessed)."""
    import time

    from deltalake import CommitProperties
    from deltalake.transaction import RemoveAction

    from adaptlab.results.integrity import Checksums

    listing = health.listing()
    state = health.check_log(listing)
    dt = _open_table(health)
    sums = Checksums.for_store(health.uri, health.fs)
    sums.use_log(state.checksums)
    known = sums.manifest()
    actions = _add_rows(health, dt)
    bad = {p: r for p, r in actions.items() if p not in known}
    if not bad:
        return
    now = int(time.time() * 1000)
    removes = [
        RemoveAction(r["path"], True, now, r["size_bytes"], {"kind": p.split("/", 1)[0].removeprefix("kind=")})
        for p, r in sorted(bad.items())
    ]
    before = int(dt.version())
    try:
        with quiet_native("repair"):
            dt.create_write_transaction(
                removes,
                "append",
                dt.schema(),
                ["kind"],
                commit_properties=CommitProperties(
                    custom_metadata={"adaptlab.operation": "repair: quarantine unverifiable data files"},
                    max_commit_retries=0,
                ),
            )
    except Exception as e:  # noqa: BLE001
        raise StoreError(
            f"{health.uri}: could not take {len(bad)} unverifiable data file(s) out of the store "
            f"({short_message(e)}); nothing was changed in this step: run repair again"
        ) from e
    report.version_after = before + 1
    for path in sorted(bad):
        who = _rows_of(health, path)
        _move(health, path, f"{quarantine}/{path}")
        report.actions.append(
            f"data file {path} (added at version {state.added.get(path, 'unknown')}) has no checksum written at "
            f"commit time (none in its commit's log entry, none in {CHECKSUM_DIR}/), so its content cannot be "
            f"verified: removed it from the store as version {before + 1} and moved it to {quarantine}/{path}; "
            f"its {who} are no longer in the current version"
        )


def _add_rows(health: Health, dt: Any) -> dict[str, dict[str, Any]]:
    """The ``add`` actions of the snapshot ``dt`` by store-relative path (path as logged, size)."""
    import pyarrow as pa

    rows = pa.table(dt.get_add_actions(flatten=True)).select(["path", "size_bytes"]).to_pylist()
    return {relative_path(health.uri, r["path"]): r for r in rows}


def _rows_of(health: Health, path: str) -> str:
    """``"3 row(s) (runs 1) of run(s) a, b"``: what a data file holds, as far as it decodes."""
    import pyarrow.parquet as pq

    n = _parquet_rows(health, path)
    try:
        with health.fs.open_input_file(path) as f:
            ids = sorted(set(pq.read_table(f, columns=["run_id"]).column("run_id").to_pylist()) - {None})
    except Exception:  # noqa: BLE001 - a damaged file: its rows cannot be named
        ids = []
    shown = ", ".join(map(str, ids[:5])) + (", ..." if len(ids) > 5 else "")
    return rows_by_kind({path: n}) + (f" of run(s) {shown}" if ids else " (their run ids cannot be read)")


def _record_missing_checksums(health: Health, report: RepairReport) -> None:
    """Copy into the checksum folder the hashes of the current version's data files that only
    their commits' log entries hold (the folder was deleted); each file matched its logged hash
    (:func:`_first_bad_file` ran just before). No other hash is ever recorded here."""
    from adaptlab.results.integrity import Checksums

    listing = health.listing()
    state = health.check_log(listing)
    dt = _open_table(health)
    live = health.live_files(dt)
    sums = Checksums.for_store(health.uri, health.fs)
    folder = sums.manifest()
    todo = sorted(p for p in live if p in state.checksums and p not in folder)
    if not todo:
        return
    label = f"repair-{int(dt.version())}-{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}"
    n = sums.record_relative(todo, label)
    if n:
        report.actions.append(
            f"copied the SHA-256 of {n} data file(s) from their commits' log entries into "
            f"{CHECKSUM_DIR}/{label}.json (each file matched the hash written at commit time)"
        )
