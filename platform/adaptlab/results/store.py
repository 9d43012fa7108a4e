"""The results store on Delta Lake: atomic commits of (runs, metrics, per_query) rows, and queries.

Layout (store layout 2). The store is **one** Delta table at the store's URI (a local
directory, or ``s3://``, ``gs://``, ``az://``/``abfss://``), partitioned by a ``kind``
column:

- ``kind=runs``, ``kind=scores``, ``kind=comparisons``, ``kind=per_query``: the rows of the
  logical tables; the columns are the union of theirs (a row leaves the other tables'
  columns null, which costs nothing in Parquet) plus ``commit_id`` and ``commit_row``
  (order of the row in its commit).
- Paired comparisons (``metrics`` rows with ``compared_to``) have their own partition, so
  a default view never mixes a difference with a score.

Why one table: Delta Lake commits are atomic per table. Writing every logical table of a
commit in ONE Delta commit makes the commit all-or-nothing across tables with no extra
protocol (no marker to write last and read first, no orphan rows to filter): a writer
killed mid-commit leaves at most unreferenced Parquet files, which readers never see and
``compact`` removes after the retention period. One table also gives one version number
per commit, which is what :func:`open` ``(version=N)`` and citations use.

Concurrency: delta-rs retries conflicting appends itself (``max_commit_retries``, raised
from its default 15, which ran out under 8 writers); the outer retry here is bounded and
never duplicates a commit: each store object writes under its own Delta application id
(``Transaction(app_id, n)``) and, before retrying, checks whether commit ``n`` already
landed. On S3 delta-rs commits with a conditional put (``If-None-Match``), no locking
provider needed.

Credentials come from the environment (``AWS_*``, ``GOOGLE_*``, ``AZURE_*``) or the
``storage_options`` argument; they are never written into the store, its provenance,
error messages or ``repr``.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import secrets
import time
import weakref
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

from adaptlab.errors import StoreError
from adaptlab.results.health import Health, Listing, LogState
from adaptlab.results.integrity import Checksums
from adaptlab.results.layout import new_commit_id
from adaptlab.results.native import (
    is_permanent,
    quiet_native,
    remote_options,
    retried_already,
    short_message,
    store_timeout,
    timed_out,
)
from adaptlab.results.query import Filter, check_columns, parse_filters
from adaptlab.results.schema import COLUMNS, SCHEMA_VERSION, TABLES, arrow_schema, arrow_type

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    import pyarrow as pa

__all__ = ["CommitId", "ResultsStore", "open"]

FORMAT = "adaptlab.results"
LAYOUT_VERSION = 2
KINDS: tuple[str, ...] = ("runs", "scores", "comparisons", "per_query")
METRIC_KINDS = {"score": ("scores",), "comparison": ("comparisons",), "all": ("scores", "comparisons")}
DEFAULT_METRICS_KIND = "score"
"""What ``metrics()`` returns without ``kind=`` or ``compared_to=``: scores only (issue 12's query
model); paired comparisons come from ``comparisons()``, ``compared_to=X`` or ``kind="all"``."""
MAX_COMMIT_RETRIES = 100  # delta-rs' own retries of a conflicting append
COMMIT_ATTEMPTS = 4  # our retries around it (transient storage errors)
_HISTORY_SCAN = 200
_SCHEMES = ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "azure", "file")
_URI_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_COMMIT_KEY = "adaptlab.commit_id"
STUDY_FOLDERS = frozenset({"artifacts", "adaptation", "tune"})
"""Folders a scale study keeps under its store root (``[adapt]`` artifact_root / data_dir defaults)."""

_OPEN: weakref.WeakSet[ResultsStore] = weakref.WeakSet()


def _drop_all_tables() -> None:
    """Drop every cached Delta table object before the interpreter exits: delta-rs
    processes that read from S3 can abort at exit otherwise (delta-rs #2184)."""
    for store in list(_OPEN):
        store.close()


atexit.register(_drop_all_tables)


class CommitId(str):
    """The id of a commit (a ``str``), with the store ``version`` the commit created."""

    version: int | None

    def __new__(cls, value: str, version: int | None = None) -> CommitId:
        obj = super().__new__(cls, value)
        obj.version = version
        return obj


def normalize_uri(root: str | os.PathLike[str]) -> tuple[str, Path | None]:
    """``(uri, local_path)``: an absolute path for local stores, else the URI as given."""
    text = os.fspath(root)
    if not isinstance(text, str) or not text.strip():
        raise StoreError(f"results store location must be a non-empty path or URI, got {root!r}")
    m = _URI_RE.match(text)
    if m is None:
        path = Path(os.path.abspath(os.path.expanduser(text)))
        return str(path), path
    scheme = m.group(1).lower()
    if scheme not in _SCHEMES:
        raise StoreError(
            f"results store URI {text!r}: unsupported scheme {scheme!r}; use a local path or one of "
            "s3://, gs://, az://, abfss://, file://"
        )
    if scheme == "file":
        path = Path(os.path.abspath(text[len("file://"):]))
        return str(path), path
    if len(text) <= len(m.group(0)) or "@" in text.split("/")[2]:
        raise StoreError(
            f"results store URI {m.group(0)}...: expected {scheme}://bucket/path without credentials "
            "in it; pass credentials in the environment or storage_options"
        )
    return text, None


def delta_schema() -> pa.Schema:
    """The Arrow schema of the store's one Delta table (all columns nullable)."""
    import pyarrow as pa

    fields: dict[str, pa.Field] = {"kind": pa.field("kind", pa.string())}
    for name in TABLES:
        for c in COLUMNS[name]:
            t = arrow_type(c.kind)
            if c.name in fields and fields[c.name].type != t:  # pragma: no cover - schema invariant
                raise StoreError(f"column {c.name!r} has two types in the results schema")
            fields.setdefault(c.name, pa.field(c.name, t))
    fields["commit_id"] = pa.field("commit_id", pa.string())
    fields["commit_row"] = pa.field("commit_row", pa.int64())
    return pa.schema(list(fields.values()))


def _description() -> str:
    return json.dumps({"format": FORMAT, "layout": LAYOUT_VERSION, "schema_version": SCHEMA_VERSION})


def _expr(filters: list[Filter]) -> Any:
    import pyarrow.compute as pc

    expr = None
    for f in filters:
        e = pc.field(f.column).isin(f.values)
        expr = e if expr is None else expr & e
    return expr


def _values(filters: list[Filter], column: str) -> Any:
    return next((f.values for f in filters if f.column == column), None)


class ResultsStore:
    """The results store at a local path or object-store URI; see :func:`open`."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        create: bool = False,
        version: int | None = None,
        as_of: datetime | str | None = None,
        storage_options: dict[str, str] | None = None,
    ) -> None:
        self.uri, local = normalize_uri(root)
        self.root: Path | str = local if local is not None else self.uri
        self._options = remote_options(storage_options) if local is None else (
            dict(storage_options) if storage_options else None)
        self._health = Health(self.uri, self._options)
        self._checksums = Checksums(local) if local is not None else Checksums(self.uri, lambda: self._health.fs)
        self._dt: Any = None
        self._app_id = f"adaptlab-writer-{secrets.token_hex(8)}"
        self._seq = 0
        if version is not None and as_of is not None:
            raise StoreError("open(): give version= or as_of=, not both")
        self.read_only = version is not None or as_of is not None
        if create and self.read_only:
            raise StoreError("open(): create=True cannot be combined with version= or as_of= (a past snapshot)")
        if create:
            self._create()
        self._load(version, as_of)
        _OPEN.add(self)

    def __repr__(self) -> str:
        pinned = f", version={self._dt.version()}" if self.read_only and self._dt is not None else ""
        return f"ResultsStore({self.uri!r}{pinned})"

    def __enter__(self) -> ResultsStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Drop the cached Delta table object (call before exit after reading from S3)."""
        self._dt = None

    # -- opening ----------------------------------------------------------------------------
    def _is_table(self) -> bool:
        from deltalake import DeltaTable

        try:
            return bool(DeltaTable.is_deltatable(self.uri, storage_options=self._options))
        except Exception as e:  # noqa: BLE001 - delta-rs raises plain errors for storage problems
            raise StoreError(f"{self.uri}: cannot reach the results store: {_short(e)}") from e

    def _create(self) -> None:
        from deltalake import DeltaTable

        local = self.root if isinstance(self.root, Path) else None
        if local is not None:
            if local.exists() and not local.is_dir():
                raise StoreError(f"cannot create a results store at {local}: it is a file, not a directory")
            from adaptlab.results.legacy import is_legacy_store

            if is_legacy_store(local):
                return  # opens read-only below, with the message that says how to migrate
            _refuse_unrelated_folder(local, self._is_table)
            try:
                local.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise StoreError(f"cannot create a results store at {local}: {e}") from e
        if self._is_table():
            return
        try:
            DeltaTable.create(self.uri, delta_schema(), partition_by=["kind"], mode="error", name=FORMAT,
                              description=_description(), storage_options=self._options)
        except Exception as e:  # noqa: BLE001
            if self._is_table():  # a concurrent creator won; its table is the same
                return
            raise StoreError(f"cannot create a results store at {self.uri}: {_short(e)}") from e

    def _load(self, version: int | None, as_of: datetime | str | None) -> None:
        from deltalake import DeltaTable

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
                dt = DeltaTable(self.uri, storage_options=self._options)
        except Exception as e:  # noqa: BLE001
            raise StoreError(f"{self.uri}: cannot open the results store: {_short(e)}") from e
        self._check_metadata(dt)
        if version is not None or as_of is not None:
            target: Any = version
            if as_of is not None:
                target = _parse_time(as_of)
            elif isinstance(version, bool) or not isinstance(version, int) or version < 0:
                raise StoreError(f"open(): version must be a store version >= 0, got {version!r}")
            try:
                dt.load_as_version(target)
            except Exception as e:  # noqa: BLE001
                what = f"version {version}" if as_of is None else f"as_of={as_of!s}"
                raise StoreError(
                    f"{self.uri}: no snapshot at {what} (current version {self._latest_version(dt)}): {_short(e)}"
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
        self._checksums.check_records(self.uri, live, listing, state)

    def check(self) -> int:
        """Check every commit file of the log and every data file of the latest version (or the
        pinned one); raises :class:`~adaptlab.results.health.StoreDamagedError` naming the first
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
            raise StoreError(f"{self.uri}: cannot list the store's files: {_short(e)}") from e

    def _record_checksums(self, label: str) -> None:
        """Record the SHA-256 of every data file that has none yet."""
        try:
            uris = self._file_uris(self._table())
        except StoreError:
            return  # the commit landed; the next one records these files
        self._checksums.record(uris, label)

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
        from deltalake import DeltaTable

        if self._dt is None:
            if self.read_only:
                raise StoreError(f"{self!r} was closed; open it again")
            with quiet_native("open"):
                self._dt = DeltaTable(self.uri, storage_options=self._options)
        elif not self.read_only:
            try:
                with quiet_native("refresh"):
                    self._dt.update_incremental()
            except Exception as e:  # noqa: BLE001
                self._health.check_log(self._health.listing())  # names the damaged file when that is the cause
                raise StoreError(f"{self.uri}: cannot read the store's log: {_short(e)}") from e
        return self._dt

    # -- versions ---------------------------------------------------------------------------
    def version(self) -> int:
        """The store version read by queries now (the latest, or the pinned snapshot)."""
        return int(self._table().version())

    def history(self, limit: int | None = None) -> pa.Table:
        """One row per store version, newest first: ``version``, ``timestamp``, ``operation``,
        ``commit_id`` (null for maintenance), ``n_rows`` added."""
        import pyarrow as pa

        rows = []
        for h in self._table().history(limit):
            metrics = h.get("operationMetrics") or {}
            rows.append({
                "version": h.get("version"), "operation": h.get("operation"), "commit_id": h.get(_COMMIT_KEY),
                "timestamp": datetime.fromtimestamp(h.get("timestamp", 0) / 1000, timezone.utc),
                "n_rows": metrics.get("num_added_rows"),
            })
        schema = pa.schema([("version", pa.int64()), ("timestamp", pa.timestamp("ms", tz="UTC")),
                            ("operation", pa.string()), ("commit_id", pa.string()), ("n_rows", pa.int64())])
        return pa.Table.from_pylist(rows, schema=schema)

    def commit_ids(self) -> list[str]:
        """Ids of the commits in this snapshot, oldest first."""
        import pyarrow.compute as pc

        t = self._dataset(KINDS).to_table(columns=["commit_id"])
        return sorted(pc.unique(t.column("commit_id")).to_pylist()) if t.num_rows else []

    # -- reading ----------------------------------------------------------------------------
    def _dataset(self, kinds: tuple[str, ...]) -> Any:
        dt = self._table()
        marks = tuple(f"kind={k}/" for k in kinds)  # a corrupted file is an error naming it, before any byte is decoded
        self._checksums.verify(u for u in self._file_uris(dt) if any(m in u for m in marks))
        try:
            with quiet_native("read"):
                return dt.to_pyarrow_dataset(partitions=[("kind", "in", list(kinds))])
        except Exception as e:  # noqa: BLE001
            raise StoreError(f"{self.uri}: cannot read the store: {_short(e)}") from e

    def _read(self, name: str, kinds: tuple[str, ...], expr: Any, cols: list[str] | None) -> pa.Table:
        import pyarrow as pa

        schema = arrow_schema(name).remove_metadata()
        want = [f.name for f in schema] if cols is None else cols
        ds = self._dataset(kinds)
        present = set(ds.schema.names)
        read_cols = [c for c in want if c in present] + ["commit_id", "commit_row"]
        try:
            with quiet_native("read"):
                t = ds.to_table(columns=read_cols, filter=expr)
        except (pa.ArrowInvalid, OSError) as e:
            raise StoreError(f"{self.uri}: cannot read table {name!r}: {_short(e)}") from e
        except Exception as e:  # noqa: BLE001 - delta-rs storage errors
            raise StoreError(f"{self.uri}: cannot read table {name!r}: {_short(e)}") from e
        if t.num_rows > 1:
            t = t.sort_by([("commit_id", "ascending"), ("commit_row", "ascending")])
        arrays = []
        for c in want:
            f = schema.field(c)
            arrays.append(t.column(c).cast(f.type) if c in t.column_names else pa.nulls(t.num_rows, f.type))
        return pa.Table.from_arrays(arrays, schema=pa.schema([schema.field(c) for c in want]))

    @overload
    def table(self, name: str, *, columns: list[str] | None = ..., latest: bool = ...,
              as_frame: Literal[False] = ..., **filters: Any) -> pa.Table: ...
    @overload
    def table(self, name: str, *, columns: list[str] | None = ..., latest: bool = ...,
              as_frame: Literal[True], **filters: Any) -> pd.DataFrame: ...

    def table(self, name: str, *, columns: list[str] | None = None, latest: bool = False, as_frame: bool = False,
              **filters: Any) -> pa.Table | pd.DataFrame:
        """Rows of ``name`` (``runs``, ``metrics``, ``comparisons`` or ``per_query``) that pass
        the filters; see :meth:`metrics` for ``metrics``' own arguments. ``as_frame=True``
        returns a pandas DataFrame without the columns that are null on every row (named
        ``columns`` are always kept) instead of a pyarrow Table."""
        if as_frame:
            return _frame(self.table(name, columns=columns, latest=latest, **filters), columns)
        if name == "metrics":
            return self.metrics(columns=columns, latest=latest, **filters)
        if name == "comparisons":
            return self.comparisons(columns=columns, latest=latest, **filters)
        if name not in TABLES:
            raise StoreError(f"unknown table {name!r}; expected one of runs, metrics, comparisons, per_query")
        flt = parse_filters(name, filters)
        cols = check_columns(name, columns)
        if latest:
            flt = self._latest_filter(name, flt)
            if flt is None:
                return self._read(name, (name,), None, cols).slice(0, 0)
        return self._read(name, (name,), _expr(flt), cols)

    @overload
    def runs(self, *, columns: list[str] | None = ..., latest: bool = ..., as_frame: Literal[False] = ...,
             **filters: Any) -> pa.Table: ...
    @overload
    def runs(self, *, columns: list[str] | None = ..., latest: bool = ..., as_frame: Literal[True],
             **filters: Any) -> pd.DataFrame: ...

    def runs(self, *, columns: list[str] | None = None, latest: bool = False, as_frame: bool = False,
             **filters: Any) -> pa.Table | pd.DataFrame:
        """The ``runs`` table (one row per evaluated system and dataset, with provenance).

        ``latest=True`` keeps, per (system, dataset), the run with the newest timestamp;
        ``as_frame=True``: a DataFrame (see :meth:`table`)."""
        return self.table("runs", columns=columns, latest=latest, as_frame=as_frame, **filters)

    @overload
    def metrics(self, *, columns: list[str] | None = ..., kind: str | None = ..., latest: bool = ...,
                as_frame: Literal[False] = ..., **filters: Any) -> pa.Table: ...
    @overload
    def metrics(self, *, columns: list[str] | None = ..., kind: str | None = ..., latest: bool = ...,
                as_frame: Literal[True], **filters: Any) -> pd.DataFrame: ...

    def metrics(
        self, *, columns: list[str] | None = None, kind: str | None = None, latest: bool = False,
        as_frame: bool = False, **filters: Any
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
        if kind is None:
            kind = "comparison" if filters.get("compared_to") is not None else DEFAULT_METRICS_KIND
        if kind not in METRIC_KINDS:
            raise StoreError(f"metrics(kind={kind!r}): expected one of {', '.join(METRIC_KINDS)}")
        flt = parse_filters("metrics", filters)
        cols = check_columns("metrics", columns)
        if latest:
            flt = self._latest_filter("metrics", flt)
            if flt is None:
                return self._read("metrics", METRIC_KINDS[kind], None, cols).slice(0, 0)
        cmp_values = _values(flt, "compared_to")
        sys_values = _values(flt, "system")
        if cmp_values is None:
            return self._read("metrics", METRIC_KINDS[kind], _expr(flt), cols)
        import pyarrow.compute as pc

        rest = _expr([f for f in flt if f.column not in ("compared_to", "system")])
        if sys_values is None:
            side = pc.field("compared_to").isin(cmp_values) | (
                pc.field("system").isin(cmp_values) & pc.field("compared_to").is_valid())
        else:
            side = (pc.field("system").isin(sys_values) & pc.field("compared_to").isin(cmp_values)) | (
                pc.field("system").isin(cmp_values) & pc.field("compared_to").isin(sys_values))
        return self._read("metrics", METRIC_KINDS[kind], side if rest is None else side & rest, cols)

    @overload
    def comparisons(self, *, columns: list[str] | None = ..., latest: bool = ..., as_frame: Literal[False] = ...,
                    **filters: Any) -> pa.Table: ...
    @overload
    def comparisons(self, *, columns: list[str] | None = ..., latest: bool = ..., as_frame: Literal[True],
                    **filters: Any) -> pd.DataFrame: ...

    def comparisons(self, *, columns: list[str] | None = None, latest: bool = False, as_frame: bool = False,
                    **filters: Any) -> pa.Table | pd.DataFrame:
        """Paired comparisons only: ``metrics(kind="comparison", ...)``."""
        if as_frame:
            return _frame(self.comparisons(columns=columns, latest=latest, **filters), columns)
        return self.metrics(columns=columns, kind="comparison", latest=latest, **filters)

    @overload
    def per_query(self, *, columns: list[str] | None = ..., latest: bool = ..., as_frame: Literal[False] = ...,
                  **filters: Any) -> pa.Table: ...
    @overload
    def per_query(self, *, columns: list[str] | None = ..., latest: bool = ..., as_frame: Literal[True],
                  **filters: Any) -> pd.DataFrame: ...

    def per_query(self, *, columns: list[str] | None = None, latest: bool = False, as_frame: bool = False,
                  **filters: Any) -> pa.Table | pd.DataFrame:
        """The ``per_query`` table (``run_id`` + :meth:`PerQueryRecords.to_arrow` columns);
        ``as_frame=True``: a DataFrame (see :meth:`table`)."""
        return self.table("per_query", columns=columns, latest=latest, as_frame=as_frame, **filters)

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
        from adaptlab.results.frames import wide_frame
        from adaptlab.results.validate import canonical_measure

        wanted = measures if measures is not None else filters.get("measure")
        names = [wanted] if isinstance(wanted, str) else list(wanted or [])
        return wide_frame(self.wide_rows(**filters), [canonical_measure(str(m)) for m in names])

    def latest_run_ids(self, **filters: Any) -> list[str]:
        """Run ids of the latest run (newest ``timestamp``) of each (system, dataset)."""
        runs = self._read("runs", ("runs",), _expr(parse_filters("runs", filters)),
                          ["run_id", "system", "dataset", "timestamp"]).to_pylist()
        best: dict[tuple[str, str], tuple[Any, int, str]] = {}
        for i, r in enumerate(runs):  # commit order breaks timestamp ties
            key = (r["system"], r["dataset"])
            rank = (r["timestamp"], i, r["run_id"])
            if key not in best or rank >= best[key]:
                best[key] = rank
        return sorted(v[2] for v in best.values())

    def _latest_filter(self, name: str, flt: list[Filter]) -> list[Filter] | None:
        import pyarrow as pa

        ids = self.latest_run_ids(**{f.column: f.values.to_pylist() for f in flt if f.column == "dataset"})
        if not ids:
            return None
        return [*flt, Filter("run_id", pa.array(ids, pa.string()))]

    # -- SQL --------------------------------------------------------------------------------
    def sql(self, query: str, params: list[Any] | None = None) -> pa.Table:
        """Run a DuckDB SQL query over the views ``runs``, ``metrics`` (scores),
        ``comparisons``, ``metrics_all`` and ``per_query`` of this snapshot; returns a
        pyarrow Table. DuckDB reads the Delta table's files through pyarrow: no DuckDB
        extension is downloaded or loaded."""
        try:
            import duckdb
        except ImportError as e:
            raise StoreError("store.sql() needs duckdb: pip install 'duckdb>=1.1'") from e
        if not isinstance(query, str) or not query.strip():
            raise StoreError("store.sql(): give a SQL query string, e.g. SELECT * FROM metrics")
        ds = self._dataset(KINDS)
        # no file or network access from a query (COPY ... TO, read_csv('/etc/passwd'), ATTACH):
        # the views over this snapshot are all a query can read
        con = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False,
                                     "enable_external_access": False})
        try:
            con.register("adaptlab_rows", ds)
            present = set(ds.schema.names)
            for view, kinds, table in (("runs", ("runs",), "runs"), ("metrics", ("scores",), "metrics"),
                                       ("comparisons", ("comparisons",), "metrics"),
                                       ("metrics_all", ("scores", "comparisons"), "metrics"),
                                       ("per_query", ("per_query",), "per_query")):
                cols = ", ".join(f'"{c}"' if c in present else f'NULL AS "{c}"'
                                 for c in (col.name for col in COLUMNS[table]))
                ks = ", ".join(f"'{k}'" for k in kinds)
                con.execute(f"CREATE VIEW {view} AS SELECT {cols} FROM adaptlab_rows WHERE kind IN ({ks})")
            try:
                res = con.sql(query, params=params) if params else con.sql(query)
                return res.to_arrow_table() if res is not None else _empty_result()
            except (duckdb.Error, OSError) as e:
                first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                raise StoreError(
                    f"SQL error: {first}; the views are runs, metrics (scores), comparisons, "
                    "metrics_all and per_query"
                ) from e
        finally:
            con.close()

    # -- writing ----------------------------------------------------------------------------
    def commit(self, runs: Any, metrics: Any = None, per_query: Any = None) -> CommitId:
        """Write the rows of one evaluation atomically; returns the commit id (a ``str``
        whose ``.version`` is the store version the commit created).

        ``runs`` and ``metrics`` are lists of row dicts or pyarrow Tables (or DataFrames);
        ``per_query`` a pyarrow Table, a :class:`PerQueryRecords` or a list of them, or None.
        Rows of ``metrics``/``per_query`` without ``run_id`` get the id of this commit's run
        with the same (system, dataset). Every ``run_id`` they use must be defined by this
        commit's ``runs`` or by an earlier commit. Raises :class:`StoreError` naming any
        missing, unknown or mistyped column; on error nothing is written.
        """
        from adaptlab.results.validate import prepare_commit, referenced_run_ids

        if self.read_only:
            raise StoreError(f"{self!r} is a past snapshot (version=/as_of=); open the store without them to commit")
        tables = prepare_commit(runs, metrics, per_query)
        dt, listing = self._check()
        self._check_unique(tables)
        dangling = referenced_run_ids(tables)
        if dangling:
            known = set(self.runs(columns=["run_id"], run_id=sorted(dangling)).column("run_id").to_pylist())
            if dangling - known:
                raise StoreError(
                    f"run_id(s) {', '.join(sorted(dangling - known)[:5])} used in metrics/per_query are "
                    "neither in this commit's runs nor in the store; commit their runs rows too"
                )
        commit_id = new_commit_id()
        data = rows_for_delta(tables, commit_id)
        self._seq += 1
        version = self._write(data, commit_id, self._app_id, self._seq, (int(dt.version()), set(listing.files)))
        self._record_checksums(commit_id)
        return CommitId(commit_id, version)

    def _check_unique(self, tables: dict[str, pa.Table]) -> None:
        """``run_id`` and ``(run_id, query_id)`` are unique across commits: a run committed
        again (the same id) or a query of a run stored twice is refused. Checked against the
        latest snapshot before writing (run ids are random UUIDs, so two writers racing with the
        same id means a caller reused one; that race is not detected)."""
        runs = tables["runs"]
        if runs.num_rows:
            ids = runs.column("run_id").to_pylist()
            again = self.runs(columns=["run_id"], run_id=ids).column("run_id").to_pylist()
            if again:
                raise StoreError(
                    f"runs: run_id {again[0]!r} is already in the store{_more(again)}; run ids are unique "
                    "(a new evaluation gets a new id from results.new_run_id()); nothing was written"
                )
        pq = tables["per_query"]
        if pq.num_rows:
            ids = sorted(set(pq.column("run_id").to_pylist()) - set(runs.column("run_id").to_pylist()))
            if not ids:
                return
            old = self.per_query(columns=["run_id", "query_id"], run_id=ids).to_pylist()
            stored = {(r["run_id"], r["query_id"]) for r in old}
            clash = [k for k in zip(pq.column("run_id").to_pylist(), pq.column("query_id").to_pylist())
                     if k in stored]
            if clash:
                raise StoreError(
                    f"per_query: (run_id {clash[0][0]!r}, query_id {clash[0][1]!r}) is already in the "
                    f"store{_more(clash)}; (run_id, query_id) is unique; nothing was written"
                )

    def _write(self, data: pa.Table, commit_id: str | None, app_id: str, seq: int,
               before: tuple[int, set[str]] | None = None) -> int | None:
        """Append ``data`` in one Delta commit, at most once; returns its version when found.
        Errors that cannot succeed on retry (no space, permission, not found) are not retried;
        a failed commit removes the data files it wrote (``before``: the version and files then)."""
        from deltalake import CommitProperties, Transaction, WriterProperties

        meta = {"adaptlab.schema_version": str(SCHEMA_VERSION)}
        if commit_id is not None:
            meta[_COMMIT_KEY] = commit_id
        props = CommitProperties(custom_metadata=meta, max_commit_retries=MAX_COMMIT_RETRIES,
                                 app_transactions=[Transaction(app_id, seq)])
        kwargs = {"storage_options": self._options, "commit_properties": props,
                  "writer_properties": WriterProperties(compression="ZSTD")}
        last: Exception | None = None
        for attempt in range(COMMIT_ATTEMPTS):
            if attempt:
                time.sleep(min(2.0, 0.1 * 2 ** attempt) * (0.5 + secrets.randbelow(1000) / 1000))
                if self._landed(app_id, seq):
                    last = None
                    break  # the previous attempt committed after all: never write twice
            last = self._attempt(data, kwargs)
            if last is None or is_permanent(last) or retried_already(last):  # delta-rs retried those itself
                break
        if last is not None and not self._landed(app_id, seq):
            raise self._failed(commit_id or str(seq), last, attempt + 1, before) from last
        return self._find_version(commit_id) if commit_id is not None else None

    def _attempt(self, data: pa.Table, kwargs: dict[str, Any]) -> Exception | None:
        """One ``write_deltalake`` append (Rust panics kept off the terminal); the error, if any."""
        from deltalake import write_deltalake
        from deltalake.exceptions import SchemaMismatchError

        try:
            with quiet_native("commit"):
                write_deltalake(self.uri, data, mode="append", schema_mode="merge", **kwargs)  # merge: columns
            return None  # added by a newer adaptlab (all nullable)
        except SchemaMismatchError as e:
            raise StoreError(f"{self.uri}: the store's table schema does not accept this commit: {_short(e)}; "
                             "nothing was written") from e
        except Exception as e:  # noqa: BLE001 - CommitFailedError, storage errors
            return e

    def _failed(self, label: str, error: Exception, attempts: int, before: tuple[int, set[str]] | None) -> StoreError:
        """The one-line error of a failed commit, after removing the data files it wrote."""
        from adaptlab.results.cleanup import remove_unreferenced

        tries = (", not retried (it cannot succeed on retry)" if is_permanent(error) else
                 f" (time-out: ADAPTLAB_STORE_TIMEOUT={store_timeout():g} s)" if timed_out(error) else
                 f" after {attempts} attempts")
        left = remove_unreferenced(self._health, label, before[1]) if before is not None else ""
        at = f" (the store was at version {before[0]} before it)" if before is not None else ""
        return StoreError(f"{self.uri}: commit {label} failed{tries}: {_short(error)}; nothing was committed{at}"
                          f"{left}; commit again")

    def _landed(self, app_id: str, seq: int) -> bool:
        try:
            got = self._table().transaction_version(app_id)
        except Exception:  # noqa: BLE001 - unreadable now: treat as not landed, the write decides
            return False
        return got is not None and int(got) >= seq

    def _find_version(self, commit_id: str) -> int | None:
        try:
            for h in self._table().history(_HISTORY_SCAN):
                if h.get(_COMMIT_KEY) == commit_id:
                    return int(h["version"])
        except Exception:  # noqa: BLE001 - the commit landed; its version is a convenience
            return None
        return None

    # -- maintenance ------------------------------------------------------------------------
    def compact(self, *, retention_hours: float = 168.0, vacuum: bool = True) -> dict[str, Any]:
        """Merge small files (optimize) and delete files no snapshot younger than
        ``retention_hours`` needs (vacuum), then write a checkpoint. Never runs implicitly.

        Safe while writers append (optimize only rewrites; appends do not conflict with it)
        but time travel to versions older than ``retention_hours`` stops working after a
        vacuum, and a writer that runs longer than ``retention_hours`` could lose its
        files: keep the default (7 days) unless no writer is active.
        """
        from deltalake import CommitProperties

        if self.read_only:
            raise StoreError(f"{self!r} is a past snapshot; open the store without version=/as_of= to compact it")
        try:
            hours = float(retention_hours)
        except (TypeError, ValueError) as e:
            raise StoreError(f"compact(): retention_hours must be a number of hours, got {retention_hours!r}") from e
        if hours < 0:
            raise StoreError(f"compact(): retention_hours must be >= 0, got {retention_hours!r}")
        dt = self._table()
        props = CommitProperties(custom_metadata={"adaptlab.operation": "compact"},
                                 max_commit_retries=MAX_COMMIT_RETRIES)
        try:
            opt = dt.optimize.compact(commit_properties=props)
            removed: list[str] = []
            if vacuum:
                dt.update_incremental()
                removed = dt.vacuum(retention_hours=int(hours), dry_run=False,
                                    enforce_retention_duration=hours >= 168)
            dt.update_incremental()
            dt.create_checkpoint()
            self._record_checksums(f"compact-{int(dt.version())}-{secrets.token_hex(4)}")
        except StoreError:
            raise
        except Exception as e:  # noqa: BLE001
            raise StoreError(f"{self.uri}: compaction failed: {_short(e)}; the store is unchanged or "
                             "compacted in part, and readable either way") from e
        return {"files_added": opt.get("numFilesAdded"), "files_removed": opt.get("numFilesRemoved"),
                "files_vacuumed": len(removed), "version": int(dt.version())}


def rows_for_delta(tables: dict[str, pa.Table], commit_id: str) -> pa.Table:
    """The validated tables of one commit as rows of the Delta table (one schema, a
    ``kind`` per row, comparisons apart from scores); ``commit_row`` is the row's index
    in its logical table, so reads restore the committed order."""
    import pyarrow as pa
    import pyarrow.compute as pc

    schema = delta_schema()
    out = []
    for name, t in tables.items():
        if not t.num_rows:
            continue
        index = pa.array(range(t.num_rows), pa.int64())
        if name == "metrics":
            is_cmp = pc.is_valid(t.column("compared_to"))
            split = [("scores", pc.invert(is_cmp)), ("comparisons", is_cmp)]
        else:
            split = [(name, None)]
        for kind, mask in split:
            part, rows = (t, index) if mask is None else (t.filter(mask), index.filter(mask))
            n = part.num_rows
            if not n:
                continue
            cols = []
            for f in schema:
                if f.name == "kind":
                    cols.append(pa.array([kind] * n, pa.string()))
                elif f.name == "commit_id":
                    cols.append(pa.array([commit_id] * n, pa.string()))
                elif f.name == "commit_row":
                    cols.append(rows)
                elif f.name in part.column_names:
                    cols.append(part.column(f.name).cast(f.type))
                else:
                    cols.append(pa.nulls(n, f.type))
            out.append(pa.Table.from_arrays(cols, schema=schema))
    return pa.concat_tables(out) if out else schema.empty_table()


def _more(items: list[Any]) -> str:
    return f" (and {len(items) - 1} more)" if len(items) > 1 else ""


def _refuse_unrelated_folder(local: Path, is_table: Any) -> None:
    """``create=True`` on an existing folder that holds other things (not a store) is refused,
    never silently turned into a store: hidden entries (``.cache`` of a study's embeddings,
    ``.DS_Store``) and the folders a scale study writes under its store before the first
    commit (:data:`STUDY_FOLDERS`) are allowed."""
    if not local.is_dir():
        return
    try:
        visible = sorted(n for n in os.listdir(local)
                         if not n.startswith(".") and not (n in STUDY_FOLDERS and (local / n).is_dir()))
    except OSError as e:
        raise StoreError(f"cannot create a results store at {local}: {e.strerror or e}") from e
    if not visible or "_delta_log" in visible or is_table():
        return
    shown = ", ".join(visible[:3]) + (", ..." if len(visible) > 3 else "")
    raise StoreError(
        f"cannot create a results store at {local}: the folder exists and holds other files ({shown}); "
        "expected a new or empty folder, or an existing results store"
    )


def _frame(table: pa.Table, columns: list[str] | str | None) -> pd.DataFrame:
    from adaptlab.results.frames import to_frame

    return to_frame(table, keep=[columns] if isinstance(columns, str) else columns)


def _empty_result() -> pa.Table:
    import pyarrow as pa

    return pa.table({})


def _short(e: BaseException | None) -> str:
    """One line of an exception's message: no ANSI codes, server XML, backtrace or secret."""
    return short_message(e, 500)


def _parse_time(value: datetime | str) -> datetime:
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


def open(  # noqa: A001 - intended
    root: str | os.PathLike[str],
    *,
    create: bool = False,
    version: int | None = None,
    as_of: datetime | str | None = None,
    storage_options: dict[str, str] | None = None,
) -> ResultsStore:
    """Open the results store at ``root``: a local directory or an ``s3://``, ``gs://``,
    ``az://``/``abfss://`` URI.

    ``create=True`` creates it first (idempotent, safe when several processes do it at
    once). ``version=N`` or ``as_of=`` (a datetime or ISO string) open a read-only
    snapshot. ``storage_options`` (e.g. ``{"AWS_ENDPOINT_URL": ...}``) are passed to
    delta-rs; by default credentials come from the environment. A store of the previous
    layout (before Delta Lake) opens read-only (:class:`~adaptlab.results.legacy.LegacyReader`);
    convert it with ``adaptlab results migrate OLD NEW``; it answers the same queries (typed
    here as :class:`ResultsStore` for completion) but cannot commit.

    Queries return pyarrow Tables, or pandas DataFrames with ``as_frame=True``;
    :meth:`ResultsStore.wide` is the value-and-CI frame per system and measure.
    """
    uri, local = normalize_uri(root)
    if local is not None:
        from adaptlab.results.legacy import LegacyReader, is_legacy_store

        if is_legacy_store(local):
            if version is not None or as_of is not None:
                raise StoreError(
                    f"{local} is a store of the previous layout: it has no versions; migrate it with "
                    f"`adaptlab results migrate {local} NEW`"
                )
            return LegacyReader(local)
    return ResultsStore(uri, create=create, version=version, as_of=as_of, storage_options=storage_options)
