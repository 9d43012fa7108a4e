"""The previous results store layout (layout 1, before Delta Lake): commit directories
published with ``os.rename``. Stores written by it open read-only through
:func:`adaptlab.results.open` and convert with ``adaptlab results migrate OLD NEW``
(:func:`adaptlab.results.migrate.migrate_store`); the writable class stays for tests and
for the store benchmark, which measures it against the Delta Lake store.

The previous store: atomic commits of (runs, metrics, per_query) rows, and queries.

Atomicity (all or nothing, also under SIGKILL) and concurrency (any number of writer
processes, no lost rows, no locks) come from the layout in :mod:`adaptlab.results.layout`:

1. a commit's tables and its manifest are written into a fresh temporary directory
   ``tmp/<commit id>.<host>.<pid>.tmp`` inside the root (same file system) and fsynced;
2. one ``os.rename`` publishes it as ``commits/<commit id>`` (a directory rename is atomic
   on POSIX file systems), then ``commits/`` is fsynced.

Readers list only ``commits/``, so a commit is either entirely visible or absent; a
killed writer leaves at most a temporary directory, which readers never look at and
:meth:`LegacyStore.clean` removes once its writer is dead (same host) or it is older than
``stale_after`` seconds (other hosts).

:meth:`LegacyStore.compact` merges the visible commits into one new commit whose
manifest lists the ids it ``replaces``; readers skip replaced commits, so publishing the
merged commit switches atomically from the old commits to the new one, and the old
directories are removed afterwards. Compactions take a lock (``flock`` on
``.compact.lock``) among themselves; writers never wait for it. A reader that overlaps a
compaction notices it (a commit it read disappeared, or a new merged commit appeared) and
reads again.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adaptlab.errors import StoreError
from adaptlab.results.layout import (
    COMMIT_RE,
    COMMITS,
    LAYOUT_VERSION,
    LOCK,
    MANIFEST,
    MARKER,
    TMP,
    Manifest,
    fsync_dir,
    new_commit_id,
    parse_tmp_name,
    pid_alive,
    remove_tree,
    safe_name,
    tmp_name,
    tree_mtime,
    write_bytes,
    write_parquet,
)
from adaptlab.results.provenance import host_name
from adaptlab.results.query import Filter, apply_filters, check_columns, parse_filters
from adaptlab.results.schema import SCHEMA_VERSION, TABLES, VERSION_KEY, arrow_schema

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

__all__ = ["LegacyStore", "is_legacy_store"]

_FORMAT = "adaptlab.results"
_READ_ATTEMPTS = 20
_FLUSH_ROWS = 65_536  # rows per row group when compacting
_PRUNE_COLUMNS = {"run_id": "run_ids", "system": "systems", "dataset": "datasets"}


class _Vanished(Exception):
    """A commit directory moved away while being read (a concurrent compaction)."""


class LegacyStore:
    """A store of the previous layout rooted at a directory (``read_only`` refuses writes)."""

    read_only: bool

    def __init__(self, root: str | os.PathLike[str], *, create: bool = False, read_only: bool = False) -> None:
        self.root = Path(os.path.abspath(os.fspath(root)))
        self.read_only = read_only
        if create:
            self._create()
        self._check_marker()
        self._manifests: dict[str, Manifest] = {}
        self._cleaned = False

    def __repr__(self) -> str:
        return f"LegacyStore({str(self.root)!r}{', read_only=True' if self.read_only else ''})"

    # -- layout ---------------------------------------------------------------------------
    @property
    def _commits(self) -> Path:
        return self.root / COMMITS

    @property
    def _tmp(self) -> Path:
        return self.root / TMP

    def _create(self) -> None:
        if self.root.exists() and not self.root.is_dir():
            raise StoreError(f"cannot create a results store at {self.root}: it is a file, not a directory")
        try:
            self._commits.mkdir(parents=True, exist_ok=True)
            self._tmp.mkdir(exist_ok=True)
            if not (self.root / MARKER).exists():
                data = json.dumps({"format": _FORMAT, "layout": LAYOUT_VERSION}).encode()
                part = self._tmp / f"marker.{os.getpid()}.{time.monotonic_ns()}.part"
                write_bytes(part, data)
                os.replace(part, self.root / MARKER)  # atomic; concurrent creators agree
                fsync_dir(self.root)
        except OSError as e:
            raise StoreError(f"cannot create a results store at {self.root}: {e}") from e

    def _check_marker(self) -> None:
        marker = self.root / MARKER
        if not self.root.is_dir():
            raise StoreError(
                f"no results store at {self.root}: the directory does not exist; "
                "create one with adaptlab.results.open(root, create=True)"
            )
        try:
            info = json.loads(marker.read_bytes())
            layout = int(info["layout"])
            ok = info.get("format") == _FORMAT
        except FileNotFoundError as e:
            raise StoreError(
                f"{self.root} is not an adaptlab results store (no {MARKER}); "
                "pass create=True to create one there"
            ) from e
        except (ValueError, KeyError, TypeError) as e:
            raise StoreError(
                f"{marker}: not a valid store marker ({e}); expected JSON with format {_FORMAT!r} and layout"
            ) from e
        if not ok:
            raise StoreError(f"{marker}: format is {info.get('format')!r}, expected {_FORMAT!r}")
        if layout > LAYOUT_VERSION:
            raise StoreError(
                f"{marker}: store layout version {layout} is newer than the version {LAYOUT_VERSION} "
                "this adaptlab reads; upgrade adaptlab"
            )
        if not self._commits.is_dir():
            raise StoreError(f"{self.root}: the store has no {COMMITS}/ directory; it is damaged")

    # -- listing ----------------------------------------------------------------------------
    def _manifest(self, commit_id: str) -> Manifest:
        m = self._manifests.get(commit_id)
        if m is None:
            path = self._commits / commit_id / MANIFEST
            try:
                m = Manifest.read(path)
            except FileNotFoundError as e:
                if (self._commits / commit_id).exists():
                    raise StoreError(
                        f"{path.parent}: commit directory without {MANIFEST}; it is damaged or was not "
                        f"written by adaptlab: move it out of {self._commits}"
                    ) from e
                raise _Vanished(commit_id) from e
            if m.schema_version > SCHEMA_VERSION:
                raise StoreError(
                    f"{path}: commit has results schema version {m.schema_version}, newer than the "
                    f"version {SCHEMA_VERSION} this adaptlab reads; upgrade adaptlab"
                )
            self._manifests[commit_id] = m
        return m

    def _all_manifests(self) -> list[Manifest]:
        try:
            names = sorted(n for n in os.listdir(self._commits) if COMMIT_RE.match(n))
        except FileNotFoundError as e:
            raise StoreError(f"{self._commits} vanished; the store was removed") from e
        return [self._manifest(n) for n in names]

    @staticmethod
    def _visible_of(manifests: list[Manifest]) -> list[Manifest]:
        replaced: set[str] = set()
        for m in manifests:
            replaced.update(m.replaces)
        return [m for m in manifests if m.commit_id not in replaced]

    def commit_ids(self) -> list[str]:
        """Ids of the visible commits, oldest first."""
        for _ in range(_READ_ATTEMPTS):
            try:
                return [m.commit_id for m in self._visible_of(self._all_manifests())]
            except _Vanished:
                continue
        raise StoreError(f"{self.root}: could not list commits (compactions keep changing them); try again")

    # -- reading ----------------------------------------------------------------------------
    def _read_commit_table(
        self, m: Manifest, name: str, filters: list[Filter], columns: list[str] | None
    ) -> pa.Table | None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        from adaptlab.results.migrations import conform, migrate

        if not m.tables.get(name, 0):
            return None
        path = self._commits / m.commit_id / f"{name}.parquet"
        try:
            source = pa.OSFile(str(path))  # the open file stays readable if the directory moves
        except OSError as e:
            if not path.parent.exists():
                raise _Vanished(m.commit_id) from e
            raise StoreError(f"{path}: cannot open ({e}); the commit is damaged") from e
        with source:
            try:
                pf = pq.ParquetFile(source)
                meta = pf.schema_arrow.metadata or {}
            except (pa.ArrowInvalid, OSError) as e:
                raise StoreError(f"{path}: not a readable Parquet file ({e}); the commit is damaged") from e
            raw = meta.get(VERSION_KEY)
            if raw is None:
                raise StoreError(f"{path}: no {VERSION_KEY.decode()} in the Parquet metadata; not written by adaptlab")
            try:
                version = int(raw)
            except ValueError as e:
                raise StoreError(f"{path}: invalid {VERSION_KEY.decode()} {raw!r}; expected an integer") from e
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{path} has results schema version {version}, newer than the version "
                    f"{SCHEMA_VERSION} this adaptlab reads; upgrade adaptlab to read it"
                )
            if pf.metadata.num_rows != m.tables[name]:
                raise StoreError(
                    f"{path}: {pf.metadata.num_rows} rows, but the commit manifest says {m.tables[name]}; "
                    "the commit is damaged"
                )
            if version == SCHEMA_VERSION:
                need = None
                if columns is not None:
                    need = list(dict.fromkeys([*columns, *(f.column for f in filters)]))
                try:
                    table = pf.read(columns=need)
                except (pa.ArrowInvalid, OSError) as e:
                    raise StoreError(f"{path}: cannot read ({e}); the commit is damaged") from e
                table = conform(name, table, source=str(path), columns=need)
            else:
                table = migrate(name, pf.read(), version, source=str(path))
        table = apply_filters(table, filters)
        return table if columns is None else table.select(columns)

    @staticmethod
    def _may_match(m: Manifest, filters: list[Filter]) -> bool:
        for f in filters:
            key = _PRUNE_COLUMNS.get(f.column)
            if key is not None and f.python_values().isdisjoint(getattr(m, key)):
                return False
        return True

    def table(self, name: str, *, columns: list[str] | None = None, **filters: Any) -> pa.Table:
        """Rows of table ``name`` (``runs``, ``metrics`` or ``per_query``) that pass the filters.

        ``column=value`` keeps rows equal to ``value``; a list, tuple or set keeps rows equal
        to any of its items; ``None`` is ignored. ``columns`` selects columns. Rows come in
        commit order. Unknown columns raise :class:`StoreError` listing the valid ones.
        """
        import pyarrow as pa

        if name not in TABLES:
            raise StoreError(f"unknown table {name!r}; expected one of {', '.join(TABLES)}")
        flt = parse_filters(name, filters)
        cols = check_columns(name, columns)
        for attempt in range(_READ_ATTEMPTS):
            if attempt:
                time.sleep(0.005 * attempt)
            try:
                visible = self._visible_of(self._all_manifests())
                parts = [self._read_commit_table(m, name, flt, cols) for m in visible if self._may_match(m, flt)]
                after = self._visible_of(self._all_manifests())
            except _Vanished:
                continue
            ids = {m.commit_id for m in visible}
            after_ids = {m.commit_id for m in after}
            # consistent unless a compaction ran meanwhile: every commit read is still
            # visible, and the commits that appeared are plain commits (no merges)
            if ids <= after_ids and not any(m.replaces for m in after if m.commit_id not in ids):
                tables = [t for t in parts if t is not None and t.num_rows]
                if tables:
                    return pa.concat_tables(tables)
                schema = arrow_schema(name).remove_metadata()
                if cols is not None:
                    schema = pa.schema([schema.field(c) for c in cols])
                return schema.empty_table()
        raise StoreError(f"{self.root}: could not read a consistent snapshot (compactions keep changing it); try again")

    def runs(self, *, columns: list[str] | None = None, **filters: Any) -> pa.Table:
        """The ``runs`` table (one row per evaluated system and dataset, with provenance)."""
        return self.table("runs", columns=columns, **filters)

    def metrics(self, *, columns: list[str] | None = None, **filters: Any) -> pa.Table:
        """The ``metrics`` table (long format: one row per run, measure and comparison)."""
        return self.table("metrics", columns=columns, **filters)

    def per_query(self, *, columns: list[str] | None = None, **filters: Any) -> pa.Table:
        """The ``per_query`` table (``run_id`` + :meth:`PerQueryRecords.to_arrow` columns)."""
        return self.table("per_query", columns=columns, **filters)

    # -- writing ----------------------------------------------------------------------------
    def commit(self, runs: Any, metrics: Any = None, per_query: Any = None) -> str:
        """Write the rows of one evaluation atomically; returns the commit id.

        ``runs`` and ``metrics`` are lists of row dicts or pyarrow Tables (or DataFrames);
        ``per_query`` a pyarrow Table, a :class:`PerQueryRecords` or a list of them, or None.
        Rows of ``metrics``/``per_query`` without ``run_id`` get the id of this commit's run
        with the same (system, dataset). Every ``run_id`` they use must be defined by this
        commit's ``runs`` or by an earlier commit. Raises :class:`StoreError` naming any
        missing, unknown or mistyped column; on error nothing is written.
        """
        from adaptlab.results.validate import prepare_commit, referenced_run_ids, unique_values

        self._check_writable("commit to")
        tables = prepare_commit(runs, metrics, per_query)
        dangling = referenced_run_ids(tables)
        if dangling:
            known = set(self.runs(columns=["run_id"], run_id=sorted(dangling)).column("run_id").to_pylist())
            if dangling - known:
                raise StoreError(
                    f"run_id(s) {', '.join(sorted(dangling - known)[:5])} used in metrics/per_query are "
                    "neither in this commit's runs nor in the store; commit their runs rows too"
                )
        host, pid = host_name(), os.getpid()
        commit_id = new_commit_id()
        run_ids: set[str] = set()
        systems: set[str] = set()
        datasets: set[str] = set()
        for t in tables.values():
            run_ids.update(unique_values(t, "run_id"))
            systems.update(unique_values(t, "system"))
            datasets.update(unique_values(t, "dataset"))
        manifest = Manifest(
            commit_id=commit_id, schema_version=SCHEMA_VERSION,
            tables={n: t.num_rows for n, t in tables.items()},
            run_ids=sorted(run_ids), systems=sorted(systems), datasets=sorted(datasets),
            created=datetime.now(timezone.utc).isoformat(), host=host, pid=pid,
        )

        def write(tmp: Path) -> None:
            for name, t in tables.items():
                if t.num_rows:
                    write_parquet(tmp / f"{name}.parquet", t)

        self._publish(manifest, write)
        if not self._cleaned:
            self._cleaned = True
            try:
                self.clean()
            except (OSError, StoreError):  # cleaning is best effort
                pass
        return commit_id

    def _publish(self, manifest: Manifest, write: Any) -> None:
        """Write a commit into a temporary directory, then rename it into ``commits/``."""
        tmp = self._tmp / tmp_name(manifest.commit_id, manifest.host, manifest.pid)
        published = False
        try:
            self._tmp.mkdir(exist_ok=True)
            tmp.mkdir()
            write(tmp)
            write_bytes(tmp / MANIFEST, manifest.to_bytes())
            fsync_dir(tmp)
            try:
                os.rename(tmp, self._commits / manifest.commit_id)
            except FileNotFoundError as e:
                raise StoreError(
                    f"{tmp}: the commit's temporary directory vanished before it was published "
                    "(removed by clean() on another host?); commit again"
                ) from e
            published = True
            fsync_dir(self._commits)
        except OSError as e:
            raise StoreError(f"{self.root}: cannot write commit {manifest.commit_id}: {e}") from e
        finally:
            if not published:
                shutil.rmtree(tmp, ignore_errors=True)
        self._manifests[manifest.commit_id] = manifest

    def _check_writable(self, what: str) -> None:
        if self.read_only:
            raise StoreError(
                f"{self.root} is a results store of the previous layout (before Delta Lake); it opens "
                f"read-only, so adaptlab cannot {what} it. Convert it with "
                f"`adaptlab results migrate {self.root} NEW` and use NEW"
            )

    # -- maintenance --------------------------------------------------------------------------
    @contextmanager
    def _compaction_lock(self, wait: bool) -> Iterator[bool]:
        try:
            import fcntl
        except ImportError as e:  # pragma: no cover - Windows
            raise StoreError("compaction needs POSIX file locks (fcntl); not available on this platform") from e
        fd = os.open(self.root / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
            yield True
        finally:
            os.close(fd)  # releases the lock

    def compact(self, *, wait: bool = True) -> str | None:
        """Merge all visible commits into one; returns its id (None: nothing to merge).

        Safe under concurrent writers (their new commits stay separate) and readers, and
        atomic (the merged commit replaces the old ones in one rename); old files are
        migrated to the current schema on the way. Compactions exclude each other through
        a lock; with ``wait=False`` a busy lock raises :class:`StoreError`.
        """
        self._check_writable("compact")
        with self._compaction_lock(wait) as got:
            if not got:
                raise StoreError(f"{self.root}: another compaction is running")
            return self._compact_locked()

    def _compact_locked(self) -> str | None:
        everything = self._all_manifests()  # nothing vanishes: only lock holders remove commits
        visible = self._visible_of(everything)
        if len(visible) < 2:
            self._remove_replaced(everything, visible)
            return None
        host, pid = host_name(), os.getpid()
        counts: dict[str, int] = {}

        def write(tmp: Path) -> None:
            for name in TABLES:
                counts[name] = self._merge_table(name, visible, tmp / f"{name}.parquet")

        # the merged id sorts where its newest rows did; ``counts`` is filled by write()
        # before the manifest is written
        merged_id = f"{visible[-1].commit_id.split('-')[0]}-{secrets.token_hex(6)}"
        manifest = Manifest(
            commit_id=merged_id, schema_version=SCHEMA_VERSION, tables=counts,
            run_ids=sorted(set().union(*(m.run_ids for m in visible))),
            systems=sorted(set().union(*(m.systems for m in visible))),
            datasets=sorted(set().union(*(m.datasets for m in visible))),
            created=datetime.now(timezone.utc).isoformat(), host=host, pid=pid,
            replaces=sorted(m.commit_id for m in everything),
        )
        self._publish(manifest, write)
        for m in everything:
            remove_tree(self._commits / m.commit_id, self._tmp)
        fsync_dir(self._commits)
        return manifest.commit_id

    def _merge_table(self, name: str, commits: list[Manifest], path: Path) -> int:
        """Stream table ``name`` of ``commits`` (migrated) into one Parquet file; row count."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        schema = arrow_schema(name)
        total = 0
        pending: list[pa.Table] = []
        f = None
        writer = None
        try:
            for i, m in enumerate(commits):
                t = self._read_commit_table(m, name, [], None)
                if t is not None and t.num_rows:
                    pending.append(t)
                    total += t.num_rows
                if pending and (sum(x.num_rows for x in pending) >= _FLUSH_ROWS or i == len(commits) - 1):
                    if writer is None:
                        f = path.open("xb")
                        writer = pq.ParquetWriter(f, schema, compression="zstd")
                    writer.write_table(pa.concat_tables(pending).replace_schema_metadata(schema.metadata))
                    pending = []
        finally:
            if writer is not None:
                writer.close()
            if f is not None:
                f.flush()
                os.fsync(f.fileno())
                f.close()
        return total

    def _remove_replaced(self, everything: list[Manifest], visible: list[Manifest]) -> list[str]:
        keep = {m.commit_id for m in visible}
        gone = [m.commit_id for m in everything if m.commit_id not in keep]
        for cid in gone:
            remove_tree(self._commits / cid, self._tmp)
        return gone

    def clean(self, *, stale_after: float = 3600.0) -> list[str]:
        """Remove leftovers of killed writers and compactions; returns what was removed.

        A temporary commit directory is removed when it has not changed for ``stale_after``
        seconds and its writer is not a live process on this host (directories of other
        hosts are judged by age alone). Commits replaced by a compaction that was
        interrupted are removed too (skipped while a compaction runs).
        """
        self._check_writable("clean")
        removed: list[str] = []
        me = safe_name(host_name())
        now = time.time()
        try:
            entries = sorted(os.listdir(self._tmp))
        except FileNotFoundError:
            entries = []
        for name in entries:
            path = self._tmp / name
            if name.endswith(".trash"):
                shutil.rmtree(path, ignore_errors=True)
                removed.append(f"{TMP}/{name}")
                continue
            owner = parse_tmp_name(name)
            if owner is None:
                if name.endswith(".part") and now - tree_mtime(path) >= stale_after:  # store markers
                    path.unlink(missing_ok=True)
                    removed.append(f"{TMP}/{name}")
                continue
            host, pid = owner
            if host == me and pid_alive(pid):
                continue
            if now - tree_mtime(path) < stale_after:
                continue
            remove_tree(path, self._tmp)
            removed.append(f"{TMP}/{name}")
        with self._compaction_lock(wait=False) as got:
            if got:
                everything = self._all_manifests()
                removed += [f"{COMMITS}/{c}" for c in self._remove_replaced(everything, self._visible_of(everything))]
        return removed


def is_legacy_store(root: str | os.PathLike[str]) -> bool:
    """Whether the local directory ``root`` holds a store of the previous layout."""
    return (Path(os.fspath(root)) / MARKER).is_file()
