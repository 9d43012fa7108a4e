"""Reading the results store: opening it (and creating it), its versions and snapshots, the
damage checks run on open, and the queries (``table``, ``runs``, ``metrics``, ``comparisons``,
``per_query``, ``scaling``, ``wide``, ``sql``). :class:`StoreReader` is the read side of
:class:`~adaptlab.results.writer.ResultsStore`; the layout of the one Delta table it reads is
described in :mod:`adaptlab.results.delta_table`.

This module imports pyarrow and deltalake; ``adaptlab.results`` loads it on first use.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import json
import os
import time
import weakref
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

import deltalake
import pyarrow as pa
import pyarrow.compute as pc

from adaptlab.errors import StoreError
from adaptlab.results.damage import Health, Listing, LogState
from adaptlab.results.delta_table import (
    COMMIT_KEY,
    DEFAULT_METRICS_KIND,
    FORMAT,
    KINDS,
    LAYOUT_VERSION,
    METRIC_KINDS,
    description,
    native_line,
    normalize_uri,
    refuse_unrelated_folder,
)
from adaptlab.results.frames import to_frame, wide_frame
from adaptlab.results.integrity import Checksums
from adaptlab.results.layout import is_legacy_store
from adaptlab.results.native import quiet_native, remote_options
from adaptlab.results.query import Filter, check_columns, group_rows, parse_filters
from adaptlab.results.schema import COLUMNS, SCALING, SCHEMA_VERSION, TABLES, arrow_schema, arrow_type
from adaptlab.results.sql import run_sql
from adaptlab.results.validate import canonical_measure

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["StoreReader", "delta_schema"]

_Store = TypeVar("_Store", bound="StoreReader")
_OPEN: weakref.WeakSet[StoreReader] = weakref.WeakSet()

_REMOTE_SCANS: list[bool] = []
"""Non-empty once this process scanned an object store through delta-rs' Python file system."""
_DRAIN_SECONDS = 0.25


def _drop_all_tables() -> None:
    """Drop every cached Delta table object before the interpreter exits: delta-rs
    processes that read from S3 can abort at exit otherwise (delta-rs #2184). After a scan of an
    object store, also give pyarrow's worker threads a moment (the GIL released) to free the
    Python buffers they still hold, while the interpreter can still hand them the GIL."""
    for store in list(_OPEN):
        store.close()
    if _REMOTE_SCANS:
        gc.collect()
        time.sleep(_DRAIN_SECONDS)


atexit.register(_drop_all_tables)


def delta_schema() -> pa.Schema:
    """The Arrow schema of the store's one Delta table (all columns nullable)."""
    fields: dict[str, pa.Field] = {"kind": pa.field("kind", pa.string())}
    for name in COLUMNS:
        for c in COLUMNS[name]:
            t = arrow_type(c.kind)
            if c.name in fields and fields[c.name].type != t:  # pragma: no cover - schema invariant
                raise StoreError(f"column {c.name!r} has two types in the results schema")
            fields.setdefault(c.name, pa.field(c.name, t))
    fields["commit_id"] = pa.field("commit_id", pa.string())
    fields["commit_row"] = pa.field("commit_row", pa.int64())
    return pa.schema(list(fields.values()))


def _expr(filters: list[Filter]) -> Any:
    """The filters as one pyarrow expression (all must hold); None without filters."""
    expr = None
    for f in filters:
        e = pc.field(f.column).isin(f.values)
        expr = e if expr is None else expr & e
    return expr


def _values(filters: list[Filter], column: str) -> Any:
    """The values the filters allow in ``column``; None when it is not filtered."""
    return next((f.values for f in filters if f.column == column), None)


class StoreReader:
    """The read side of the results store at a local path or object-store URI: opening,
    versions, damage checks and queries; :class:`~adaptlab.results.writer.ResultsStore` adds
    commits and compaction. See :func:`adaptlab.results.open`."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        create: bool = False,
        version: int | None = None,
        as_of: datetime | str | None = None,
        storage_options: dict[str, str] | None = None,
        strict: bool = False,
    ) -> None:
        self.uri, local = normalize_uri(root)
        self.root: Path | str = local if local is not None else self.uri
        self._options = (
            remote_options(storage_options) if local is None else (dict(storage_options) if storage_options else None)
        )
        self._health = Health(self.uri, self._options)
        self._checksums = Checksums(local) if local is not None else Checksums(self.uri, lambda: self._health.fs)
        self._checksums.strict = bool(strict)
        self._dt: Any = None
        if version is not None and as_of is not None:
            raise StoreError("open(): give version= or as_of=, not both")
        if version is not None and (isinstance(version, bool) or not isinstance(version, int) or version < 0):
            raise StoreError(f"open(): version must be a store version >= 0, got {version!r}")
        self.read_only = version is not None or as_of is not None
        if create and self.read_only:
            raise StoreError("open(): create=True cannot be combined with version= or as_of= (a past snapshot)")
        if create:
            self._create()
        self._load(version, as_of)
        _OPEN.add(self)

    def __repr__(self) -> str:
        pinned = f", version={self._dt.version()}" if self.read_only and self._dt is not None else ""
        return f"{type(self).__name__}({self.uri!r}{pinned})"

    def __enter__(self: _Store) -> _Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Drop the cached Delta table object (call before exit after reading from S3)."""
        self._dt = None

    # -- opening ----------------------------------------------------------------------------
    def _is_table(self) -> bool:
        try:
            with quiet_native("open"):  # a Rust panic's lines before the one-line error stay off the terminal
                return bool(deltalake.DeltaTable.is_deltatable(self.uri, storage_options=self._options))
        except Exception as e:  # noqa: BLE001 - delta-rs raises plain errors for storage problems
            raise StoreError(f"{self.uri}: cannot reach the results store: {native_line(e)}") from e

    def _create(self) -> None:
        local = self.root if isinstance(self.root, Path) else None
        if local is not None:
            if local.exists() and not local.is_dir():
                raise StoreError(f"cannot create a results store at {local}: it is a file, not a directory")
            if is_legacy_store(local):
                return  # opens read-only below, with the message that says how to migrate
            refuse_unrelated_folder(local, self._is_table)
            try:
                local.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise StoreError(f"cannot create a results store at {local}: {e}") from e
        if self._is_table():
            return
        try:
            deltalake.DeltaTable.create(
                self.uri,
                delta_schema(),
                partition_by=["kind"],
                mode="error",
                name=FORMAT,
                description=description(),
                storage_options=self._options,
            )
        except Exception as e:  # noqa: BLE001
            if self._is_table():  # a concurrent creator won; its table is the same
                return
            raise StoreError(f"cannot create a results store at {self.uri}: {native_line(e)}") from e
        with contextlib.suppress(Exception):  # not damage: the first commit's checksum record creates it too
            self._checksums.create_folder()

    def _load(self, version: int | None, as_of: datetime | str | None) -> None:
        if isinstance(self.root, Path):
            if not self.root.exists():
                raise StoreError(f"no results store at {self.root}: run a study first or check the path")
            if not self.root.is_dir():
                raise StoreError(f"no results store at {self.root}: it is a file, not a directory")
        listing = self._health.listing()
        state = self._health.check_log(listing, version) if listing.commits else None
        if not self._is_table():
            raise StoreError(
                f"{self.uri} is not an adaptlab results store (no Delta table there): run a study first "
                "or check the path"
            )
        try:
            with quiet_native("open"):
                dt = deltalake.DeltaTable(self.uri, storage_options=self._options)
        except Exception as e:  # noqa: BLE001
            raise StoreError(f"{self.uri}: cannot open the results store: {native_line(e)}") from e
        self._check_metadata(dt)
        if version is not None or as_of is not None:
            try:
                if as_of is not None:
                    dt.load_as_version(_version_at(dt, _parse_time(as_of)))
                elif version is not None:
                    dt.load_as_version(version)
            except Exception as e:  # noqa: BLE001
                what = f"version {version}" if as_of is None else f"as_of={as_of!s}"
                raise StoreError(
                    f"{self.uri}: no snapshot at {what} (current version {self._latest_version(dt)}): {native_line(e)}"
                ) from e
        if state is not None:
            self._check_files(dt, listing, state)
        self._dt = dt

    def _check_files(self, dt: Any, listing: Listing, state: LogState) -> None:
        """Every data file of the snapshot ``dt`` is present with its recorded size."""
        live = self._health.check_data(dt, listing, state)
        if self._checksums.orphans(listing, state):  # a writer may have committed during the listing: look again
            listing = self._health.listing()
            state = self._health.check_log(listing)
        self._checksums.use_log(state.checksums)
        self._checksums.check_records(self.uri, live, listing, state)

    def check(self) -> int:
        """Check every commit file of the log and every data file of the latest version (or the
        pinned one); raises :class:`~adaptlab.results.damage.StoreDamagedError` naming the first
        damaged file and its version. Returns the version checked. Runs before every commit."""
        return int(self._check()[0].version())

    def _check(self) -> tuple[Any, Listing]:
        listing = self._health.listing()
        pinned = int(self._dt.version()) if self.read_only and self._dt is not None else None
        state = self._health.check_log(listing, pinned)
        dt = self._table()
        self._check_files(dt, listing, state)
        return dt, listing

    def _file_uris(self, dt: Any) -> list[str]:
        try:
            return list(dt.file_uris())
        except Exception as e:  # noqa: BLE001
            raise StoreError(f"{self.uri}: cannot list the store's files: {native_line(e)}") from e

    @staticmethod
    def _latest_version(dt: Any) -> int:
        try:
            return int(dt.version())
        except Exception:  # noqa: BLE001  # pragma: no cover
            return -1

    def _check_metadata(self, dt: Any) -> None:
        md = dt.metadata()
        try:
            info = json.loads(md.description or "")
            ok = info.get("format") == FORMAT
            schema_version = int(info.get("schema_version", 0))
            layout = int(info.get("layout", 0))
        except (ValueError, TypeError, AttributeError):
            ok = False
        if not ok:
            raise StoreError(
                f"{self.uri} holds a Delta table that is not an adaptlab results store "
                f"(table description {md.description!r}); use another location"
            )
        if schema_version > SCHEMA_VERSION or layout > LAYOUT_VERSION:
            raise StoreError(
                f"{self.uri}: results schema version {schema_version} (layout {layout}) is newer than the version "
                f"{SCHEMA_VERSION} (layout {LAYOUT_VERSION}) this adaptlab reads; upgrade adaptlab"
            )

    def _table(self) -> Any:
        """The Delta table at the snapshot to read: the latest (refreshed) unless pinned."""
        if self._dt is None:
            if self.read_only:
                raise StoreError(f"{self!r} was closed; open it again")
            with quiet_native("open"):
                self._dt = deltalake.DeltaTable(self.uri, storage_options=self._options)
        elif not self.read_only:
            try:
                with quiet_native("refresh"):
                    self._dt.update_incremental()
            except Exception as e:  # noqa: BLE001
                self._health.check_log(self._health.listing())  # names the damaged file when that is the cause
                raise StoreError(f"{self.uri}: cannot read the store's log: {native_line(e)}") from e
        return self._dt

    # -- versions ---------------------------------------------------------------------------
    def version(self) -> int:
        """The store version read by queries now (the latest, or the pinned snapshot)."""
        return int(self._table().version())

    def history(self, limit: int | None = None) -> pa.Table:
        """One row per store version, newest first: ``version``, ``timestamp``, ``operation``,
        ``commit_id`` (null for maintenance), ``n_rows`` added."""
        rows = []
        for h in self._table().history(limit):
            metrics = h.get("operationMetrics") or {}
            rows.append(
                {
                    "version": h.get("version"),
                    "operation": h.get("operation"),
                    "commit_id": h.get(COMMIT_KEY),
                    "timestamp": datetime.fromtimestamp(h.get("timestamp", 0) / 1000, timezone.utc),
                    "n_rows": metrics.get("num_added_rows"),
                }
            )
        schema = pa.schema(
            [
                ("version", pa.int64()),
                ("timestamp", pa.timestamp("ms", tz="UTC")),
                ("operation", pa.string()),
                ("commit_id", pa.string()),
                ("n_rows", pa.int64()),
            ]
        )
        return pa.Table.from_pylist(rows, schema=schema)

    def commit_ids(self) -> list[str]:
        """Ids of the commits in this snapshot, oldest first."""
        t = self._dataset(KINDS).to_table(columns=["commit_id"])
        return sorted(pc.unique(t.column("commit_id")).to_pylist()) if t.num_rows else []

    # -- reading ----------------------------------------------------------------------------
    def _dataset(self, kinds: tuple[str, ...]) -> Any:
        dt = self._table()
        marks = tuple(f"kind={k}/" for k in kinds)  # a corrupted file is an error naming it, before any byte is decoded
        self._checksums.verify(u for u in self._file_uris(dt) if any(m in u for m in marks))
        fs = self._arrow_fs()
        if fs is None and not _REMOTE_SCANS:
            _REMOTE_SCANS.append(True)
        try:
            with quiet_native("read"):
                return dt.to_pyarrow_dataset(partitions=[("kind", "in", list(kinds))], filesystem=fs)
        except Exception as e:  # noqa: BLE001
            raise StoreError(f"{self.uri}: cannot read the store: {native_line(e)}") from e

    def _arrow_fs(self) -> Any:
        """The file system pyarrow reads a local store's files through: its own native one, so no
        buffer of a scan is a Python object. Through delta-rs' Python file system (its default,
        kept for object stores) a pyarrow worker thread can free the last such buffer after the
        interpreter began to exit, and that thread aborts the process ("terminate called without
        an active exception", status -6, in about 5% of short scripts that read a store)."""
        if not isinstance(self.root, Path):
            return None
        import pyarrow.fs as pafs

        return pafs.SubTreeFileSystem(str(self.root.resolve()), pafs.LocalFileSystem())

    def _read(self, name: str, kinds: tuple[str, ...], expr: Any, cols: list[str] | None) -> pa.Table:
        schema = arrow_schema(name).remove_metadata()
        want = [f.name for f in schema] if cols is None else cols
        ds = self._dataset(kinds)
        present = set(ds.schema.names)
        read_cols = [c for c in want if c in present] + ["commit_id", "commit_row"]
        try:
            with quiet_native("read"):
                t = ds.to_table(columns=read_cols, filter=expr)
        except (pa.ArrowInvalid, OSError) as e:
            raise StoreError(f"{self.uri}: cannot read table {name!r}: {native_line(e)}") from e
        except Exception as e:  # noqa: BLE001 - delta-rs storage errors
            raise StoreError(f"{self.uri}: cannot read table {name!r}: {native_line(e)}") from e
        if t.num_rows > 1:
            t = t.sort_by([("commit_id", "ascending"), ("commit_row", "ascending")])
        arrays = []
        for c in want:
            f = schema.field(c)
            arrays.append(t.column(c).cast(f.type) if c in t.column_names else pa.nulls(t.num_rows, f.type))
        return pa.Table.from_arrays(arrays, schema=pa.schema([schema.field(c) for c in want]))

    @overload
    def table(
        self,
        name: str,
        *,
        columns: list[str] | None = ...,
        latest: bool = ...,
        as_frame: Literal[False] = ...,
        **filters: Any,
    ) -> pa.Table: ...
    @overload
    def table(
        self, name: str, *, columns: list[str] | None = ..., latest: bool = ..., as_frame: Literal[True], **filters: Any
    ) -> pd.DataFrame: ...
    @overload
    def table(
        self, name: str, *, columns: list[str] | None = ..., latest: bool = ..., as_frame: bool, **filters: Any
    ) -> pa.Table | pd.DataFrame: ...

    def table(
        self,
        name: str,
        *,
        columns: list[str] | None = None,
        latest: bool = False,
        as_frame: bool = False,
        **filters: Any,
    ) -> pa.Table | pd.DataFrame:
        """Rows of ``name`` (``runs``, ``metrics``, ``comparisons``, ``per_query`` or ``scaling``)
        that pass the filters; see :meth:`metrics` for ``metrics``' own arguments. ``as_frame=True``
        returns a pandas DataFrame without the columns that are null on every row (named
        ``columns`` are always kept) instead of a pyarrow Table."""
        if as_frame:
            return _frame(self.table(name, columns=columns, latest=latest, **filters), columns)
        if name == "metrics":
            return self.metrics(columns=columns, latest=latest, **filters)
        if name == "comparisons":
            return self.comparisons(columns=columns, latest=latest, **filters)
        if name == SCALING:
            return self.scaling(columns=columns, latest=latest, **filters)
        if name not in TABLES:
            raise StoreError(f"unknown table {name!r}; expected one of runs, metrics, comparisons, per_query, scaling")
        flt = parse_filters(name, filters)
        cols = check_columns(name, columns)
        if latest:
            latest_flt = self._latest_filter(name, flt)
            if latest_flt is None:
                return self._read(name, (name,), None, cols).slice(0, 0)
            flt = latest_flt
        return self._read(name, (name,), _expr(flt), cols)

    @overload
    def runs(
        self, *, columns: list[str] | None = ..., latest: bool = ..., as_frame: Literal[False] = ..., **filters: Any
    ) -> pa.Table: ...
    @overload
    def runs(
        self, *, columns: list[str] | None = ..., latest: bool = ..., as_frame: Literal[True], **filters: Any
    ) -> pd.DataFrame: ...
    @overload
    def runs(
        self, *, columns: list[str] | None = ..., latest: bool = ..., as_frame: bool, **filters: Any
    ) -> pa.Table | pd.DataFrame: ...

    def runs(
        self, *, columns: list[str] | None = None, latest: bool = False, as_frame: bool = False, **filters: Any
    ) -> pa.Table | pd.DataFrame:
        """The ``runs`` table (one row per evaluated system and dataset, with provenance).

        ``latest=True`` keeps, per (system, dataset), the run with the newest timestamp;
        ``as_frame=True``: a DataFrame (see :meth:`table`)."""
        return self.table("runs", columns=columns, latest=latest, as_frame=as_frame, **filters)

    @overload
    def metrics(
        self,
        *,
        columns: list[str] | None = ...,
        kind: str | None = ...,
        latest: bool = ...,
        as_frame: Literal[False] = ...,
        **filters: Any,
    ) -> pa.Table: ...
    @overload
    def metrics(
        self,
        *,
        columns: list[str] | None = ...,
        kind: str | None = ...,
        latest: bool = ...,
        as_frame: Literal[True],
        **filters: Any,
    ) -> pd.DataFrame: ...
    @overload
    def metrics(
        self,
        *,
        columns: list[str] | None = ...,
        kind: str | None = ...,
        latest: bool = ...,
        as_frame: bool,
        **filters: Any,
    ) -> pa.Table | pd.DataFrame: ...

    def metrics(
        self,
        *,
        columns: list[str] | None = None,
        kind: str | None = None,
        latest: bool = False,
        as_frame: bool = False,
        **filters: Any,
    ) -> pa.Table | pd.DataFrame:
        """Metric rows (long format). ``kind="score"``: scores only (one system's value);
        ``kind="comparison"`` or any ``compared_to=X``: paired comparisons, found from either
        side: a comparison of A with B is stored once (``system`` A, ``compared_to`` B,
        ``value`` = A - B for differences) and matches ``compared_to=A`` as well as
        ``compared_to=B``. ``kind="all"`` returns both. The default (:data:`DEFAULT_METRICS_KIND`) is
        scores only, so a score and a difference never share one result by accident.
        ``latest=True`` keeps the rows of the latest run of each (system, dataset);
        ``as_frame=True``: a DataFrame of the columns that hold a value (see :meth:`table`)."""
        if as_frame:
            return _frame(self.metrics(columns=columns, kind=kind, latest=latest, **filters), columns)
        group = filters.pop("group", None)
        cols = check_columns("metrics", columns)
        read_cols = cols if cols is None or "group" in cols else [*cols, "group"]
        table = group_rows(self._metric_rows(kind, filters, read_cols, latest), group)
        return table if read_cols is cols else table.drop_columns(["group"])

    def _metric_rows(self, kind: str | None, filters: dict[str, Any], cols: list[str] | None, latest: bool) -> pa.Table:
        """The rows of :meth:`metrics` of every group (the ``group`` filter is applied after)."""
        if kind is None:
            kind = "comparison" if filters.get("compared_to") is not None else DEFAULT_METRICS_KIND
        if kind not in METRIC_KINDS:
            raise StoreError(f"metrics(kind={kind!r}): expected one of {', '.join(METRIC_KINDS)}")
        flt = parse_filters("metrics", filters)
        if latest:
            latest_flt = self._latest_filter("metrics", flt)
            if latest_flt is None:
                return self._read("metrics", METRIC_KINDS[kind], None, cols).slice(0, 0)
            flt = latest_flt
        cmp_values = _values(flt, "compared_to")
        sys_values = _values(flt, "system")
        if cmp_values is None:
            return self._read("metrics", METRIC_KINDS[kind], _expr(flt), cols)
        rest = _expr([f for f in flt if f.column not in ("compared_to", "system")])
        if sys_values is None:
            side = pc.field("compared_to").isin(cmp_values) | (
                pc.field("system").isin(cmp_values) & pc.field("compared_to").is_valid()
            )
        else:
            side = (pc.field("system").isin(sys_values) & pc.field("compared_to").isin(cmp_values)) | (
                pc.field("system").isin(cmp_values) & pc.field("compared_to").isin(sys_values)
            )
        return self._read("metrics", METRIC_KINDS[kind], side if rest is None else side & rest, cols)

    @overload
    def comparisons(
        self, *, columns: list[str] | None = ..., latest: bool = ..., as_frame: Literal[False] = ..., **filters: Any
    ) -> pa.Table: ...
    @overload
    def comparisons(
        self, *, columns: list[str] | None = ..., latest: bool = ..., as_frame: Literal[True], **filters: Any
    ) -> pd.DataFrame: ...
    @overload
    def comparisons(
        self, *, columns: list[str] | None = ..., latest: bool = ..., as_frame: bool, **filters: Any
    ) -> pa.Table | pd.DataFrame: ...

    def comparisons(
        self, *, columns: list[str] | None = None, latest: bool = False, as_frame: bool = False, **filters: Any
    ) -> pa.Table | pd.DataFrame:
        """Paired comparisons only: ``metrics(kind="comparison", ...)``."""
        if as_frame:
            return _frame(self.comparisons(columns=columns, latest=latest, **filters), columns)
        return self.metrics(columns=columns, kind="comparison", latest=latest, **filters)

    @overload
    def per_query(
        self, *, columns: list[str] | None = ..., latest: bool = ..., as_frame: Literal[False] = ..., **filters: Any
    ) -> pa.Table: ...
    @overload
    def per_query(
        self, *, columns: list[str] | None = ..., latest: bool = ..., as_frame: Literal[True], **filters: Any
    ) -> pd.DataFrame: ...
    @overload
    def per_query(
        self, *, columns: list[str] | None = ..., latest: bool = ..., as_frame: bool, **filters: Any
    ) -> pa.Table | pd.DataFrame: ...

    def per_query(
        self, *, columns: list[str] | None = None, latest: bool = False, as_frame: bool = False, **filters: Any
    ) -> pa.Table | pd.DataFrame:
        """The ``per_query`` table (``run_id`` + :meth:`PerQueryRecords.to_arrow` columns);
        ``as_frame=True``: a DataFrame (see :meth:`table`)."""
        return self.table("per_query", columns=columns, latest=latest, as_frame=as_frame, **filters)

    @overload
    def scaling(
        self, *, columns: list[str] | None = ..., latest: bool = ..., as_frame: Literal[False] = ..., **filters: Any
    ) -> pa.Table: ...
    @overload
    def scaling(
        self, *, columns: list[str] | None = ..., latest: bool = ..., as_frame: Literal[True], **filters: Any
    ) -> pd.DataFrame: ...
    @overload
    def scaling(
        self, *, columns: list[str] | None = ..., latest: bool = ..., as_frame: bool, **filters: Any
    ) -> pa.Table | pd.DataFrame: ...

    def scaling(
        self, *, columns: list[str] | None = None, latest: bool = False, as_frame: bool = False, **filters: Any
    ) -> pa.Table | pd.DataFrame:
        """The ``scaling`` table: one row per data-scaling fit a scale study recorded (dataset,
        label, variant, measure; :mod:`adaptlab.analysis.scaling`). A store written before the
        table existed has none (an empty table). ``latest=True`` keeps, per (dataset, label,
        variant, measure), the rows of the newest fit; ``as_frame=True``: a DataFrame (see
        :meth:`table`)."""
        if as_frame:
            return _frame(self.scaling(columns=columns, latest=latest, **filters), columns)
        flt = parse_filters(SCALING, filters)
        cols = check_columns(SCALING, columns)
        if flt and not {f.column for f in flt} <= set(self._dataset((SCALING,)).schema.names):
            return _empty(SCALING, cols)  # a store from before the table: no column to filter, no row
        if not latest:
            return self._read(SCALING, (SCALING,), _expr(flt), cols)
        t = self._read(SCALING, (SCALING,), _expr(flt), None)
        keep = _newest_fits(t.to_pylist())
        t = t.take(pa.array(keep, pa.int64()))
        return t if cols is None else t.select(cols)

    # -- wide tables ------------------------------------------------------------------------
    def wide_rows(self, **filters: Any) -> list[dict[str, Any]]:
        """The rows behind ``adaptlab results --wide`` and :meth:`wide`: the scores of the latest
        run of each (system, dataset) unless ``run_id=`` picks runs, and the paired comparisons
        of those runs (read without the ``system`` filter: a system's comparison may be stored
        from its baseline's side)."""
        latest = "run_id" not in filters
        scores = self.metrics(kind="score", latest=latest, **filters).to_pylist()
        other = {k: v for k, v in filters.items() if k != "system"}
        return scores + self.comparisons(latest=latest, **other).to_pylist()

    def wide(self, *, measures: list[str] | None = None, **filters: Any) -> pd.DataFrame:
        """The scores as a DataFrame of floats, the cells of ``adaptlab results --wide``: index
        ``(dataset, system)``, columns ``(measure, "value" | "ci_low" | "ci_high")``;
        ``measures`` (default: the ``measure`` filter's values) come first. What was left out is
        in ``frame.attrs["notes"]``; ``frame.xs("value", axis=1, level="stat")`` is the point
        estimates alone."""
        wanted = measures if measures is not None else filters.get("measure")
        names = [wanted] if isinstance(wanted, str) else list(wanted or [])
        return wide_frame(self.wide_rows(**filters), [canonical_measure(str(m)) for m in names])

    def latest_run_ids(self, **filters: Any) -> list[str]:
        """Run ids of the latest run (newest ``timestamp``) of each (system, dataset)."""
        runs = self._read(
            "runs", ("runs",), _expr(parse_filters("runs", filters)), ["run_id", "system", "dataset", "timestamp"]
        ).to_pylist()
        best: dict[tuple[str, str], tuple[Any, int, str]] = {}
        for i, r in enumerate(runs):  # commit order breaks timestamp ties
            key = (r["system"], r["dataset"])
            rank = (r["timestamp"], i, r["run_id"])
            if key not in best or rank >= best[key]:
                best[key] = rank
        return sorted(v[2] for v in best.values())

    def _latest_filter(self, name: str, flt: list[Filter]) -> list[Filter] | None:
        ids = self.latest_run_ids(**{f.column: f.values.to_pylist() for f in flt if f.column == "dataset"})
        if not ids:
            return None
        return [*flt, Filter("run_id", pa.array(ids, pa.string()))]

    # -- SQL --------------------------------------------------------------------------------
    def sql(self, query: str, params: list[Any] | None = None, *, as_arrow: bool = False) -> pd.DataFrame | pa.Table:
        """Run a DuckDB SQL query over the views ``runs``, ``metrics`` (scores),
        ``comparisons``, ``metrics_all``, ``per_query``, ``groups`` (per-group rows) and ``scaling`` (the
        data-scaling fits) of this snapshot; returns a pandas
        DataFrame (``as_arrow=True``: a pyarrow Table). DuckDB reads the Delta table's files
        through pyarrow: no DuckDB extension is downloaded or loaded (see :mod:`adaptlab.results.sql`)."""
        return run_sql(query, params, lambda: self._dataset((*KINDS, SCALING)), as_arrow=as_arrow)


def _empty(name: str, cols: list[str] | None) -> pa.Table:
    """No row of table ``name`` (the ``cols`` asked for, else all its columns)."""
    schema = arrow_schema(name).remove_metadata()
    return (schema if cols is None else pa.schema([schema.field(c) for c in cols])).empty_table()


def _newest_fits(rows: list[dict[str, Any]]) -> list[int]:
    """Indices of the rows of the newest fit (timestamp, then commit order) of each (dataset,
    label, variant, measure), in stored order."""
    best: dict[tuple[Any, ...], Any] = {}
    for i, r in enumerate(rows):
        key = (r["dataset"], r["label"], r["variant"], r["measure"])
        if key not in best or r["timestamp"] >= rows[best[key]]["timestamp"]:
            best[key] = i
    return sorted(best.values())


def _frame(table: pa.Table, columns: list[str] | str | None) -> pd.DataFrame:
    """``table`` as a DataFrame without all-null columns, keeping the ``columns`` asked for."""
    return to_frame(table, keep=[columns] if isinstance(columns, str) else columns)


def _version_at(dt: Any, when: datetime) -> int:
    """The newest version whose commit time, as :meth:`StoreReader.history` shows it (the
    commit's own ``timestamp``, ms), is at or before ``when``. delta-rs' own ``as_of`` compares
    the log files' modification times, which trail that timestamp by the write (more than a
    millisecond on a loaded machine), so a time read from ``history()`` could open the version
    before it."""
    limit = int(when.timestamp() * 1000)
    times = {int(h["version"]): int(h.get("timestamp", 0)) for h in dt.history() if h.get("version") is not None}
    eligible = [v for v, t in times.items() if t <= limit]
    if not eligible:
        first = datetime.fromtimestamp(min(times.values(), default=0) / 1000, timezone.utc)
        raise ValueError(f"the first commit is at {first.isoformat()}")
    return max(eligible)


def _parse_time(value: datetime | str) -> datetime:
    """``as_of=`` as an aware datetime (UTC when no zone is given)."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError as e:
            raise StoreError(f"as_of={value!r}: expected an ISO 8601 time, e.g. 2025-01-31T12:00:00+00:00") from e
    if not isinstance(value, datetime):
        raise StoreError(f"as_of must be a datetime or an ISO 8601 string, got {type(value).__name__}")
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value
