"""Read a results store of the previous layout (layout 1, before Delta Lake; see
:mod:`adaptlab.results.layout`). Such stores open read-only through
:func:`adaptlab.results.open` and convert with ``adaptlab results migrate OLD NEW``
(:func:`adaptlab.results.legacy.migrate.migrate_store`); nothing in adaptlab writes them any more.

Files of an older schema version are upgraded on read (:mod:`adaptlab.results.legacy.schema_upgrade`);
newer ones, and damaged commits, raise :class:`StoreError` naming the file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from adaptlab.errors import StoreError
from adaptlab.results.layout import COMMIT_RE, COMMITS, LAYOUT_VERSION, MANIFEST, MARKER, Manifest, is_legacy_store
from adaptlab.results.query import Filter, apply_filters, check_columns, parse_filters
from adaptlab.results.schema import SCHEMA_VERSION, TABLES, VERSION_KEY, arrow_schema

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

__all__ = ["LegacyReader", "is_legacy_store"]

FORMAT = "adaptlab.results"


class LegacyReader:
    """A store of the previous layout rooted at a local directory, read-only."""

    read_only = True

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(os.path.abspath(os.fspath(root)))
        _check_marker(self.root)
        self._manifests: dict[str, Manifest] = {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.root)!r})"

    def manifest(self, commit_id: str) -> Manifest:
        """The manifest of commit ``commit_id`` (cached; a newer schema version is an error)."""
        m = self._manifests.get(commit_id)
        if m is None:
            path = self.root / COMMITS / commit_id / MANIFEST
            try:
                m = Manifest.read(path)
            except FileNotFoundError as e:
                raise StoreError(
                    f"{path.parent}: commit directory without {MANIFEST}; it is damaged or was "
                    f"not written by adaptlab: move it out of {path.parent.parent}"
                ) from e
            if m.schema_version > SCHEMA_VERSION:
                raise StoreError(
                    f"{path}: commit has results schema version {m.schema_version}, newer than the "
                    f"version {SCHEMA_VERSION} this adaptlab reads; upgrade adaptlab"
                )
            self._manifests[commit_id] = m
        return m

    def commit_ids(self) -> list[str]:
        """Ids of the visible commits (not replaced by a compaction), oldest first."""
        names = sorted(n for n in os.listdir(self.root / COMMITS) if COMMIT_RE.match(n))
        manifests = [self.manifest(n) for n in names]
        replaced = {cid for m in manifests for cid in m.replaces}
        return [m.commit_id for m in manifests if m.commit_id not in replaced]

    def commit_table(self, commit_id: str, name: str, columns: list[str] | None = None) -> pa.Table:
        """Table ``name`` of one commit at the current schema (``columns`` of it, if given)."""
        m = self.manifest(commit_id)
        schema = arrow_schema(name).remove_metadata()
        if not m.tables.get(name, 0):
            return schema.empty_table() if columns is None else schema.empty_table().select(columns)
        return _read_file(self.root / COMMITS / commit_id / f"{name}.parquet", name, m.tables[name], columns)

    def table(self, name: str, *, columns: list[str] | None = None, **filters: Any) -> pa.Table:
        """Rows of table ``name`` (``runs``, ``metrics`` or ``per_query``) that pass the filters,
        in commit order: ``column=value`` keeps rows equal to ``value``, a list, tuple or set rows
        equal to any item, ``None`` is ignored; ``columns`` selects columns. Unknown tables or
        columns raise :class:`StoreError` listing the valid ones."""
        import pyarrow as pa

        if name not in TABLES:
            raise StoreError(f"unknown table {name!r}; expected one of {', '.join(TABLES)}")
        flt: list[Filter] = parse_filters(name, filters)
        cols = check_columns(name, columns)
        need = None if cols is None else list(dict.fromkeys([*cols, *(f.column for f in flt)]))
        parts = [apply_filters(self.commit_table(cid, name, need), flt) for cid in self.commit_ids()]
        out = pa.concat_tables(parts) if parts else arrow_schema(name).remove_metadata().empty_table()
        return out if cols is None else out.select(cols)

    def runs(self, *, columns: list[str] | None = None, **filters: Any) -> pa.Table:
        """The ``runs`` table (one row per evaluated system and dataset, with provenance)."""
        return self.table("runs", columns=columns, **filters)

    def metrics(self, *, columns: list[str] | None = None, **filters: Any) -> pa.Table:
        """The ``metrics`` table (long format: scores and comparisons together)."""
        return self.table("metrics", columns=columns, **filters)

    def per_query(self, *, columns: list[str] | None = None, **filters: Any) -> pa.Table:
        """The ``per_query`` table (``run_id`` + :meth:`PerQueryRecords.to_arrow` columns)."""
        return self.table("per_query", columns=columns, **filters)

    def close(self) -> None:
        """Nothing to release (each query reads its files and closes them), like
        :meth:`~adaptlab.results.reader.StoreReader.close` for the current layout."""

    def commit(self, *args: Any, **kwargs: Any) -> NoReturn:
        """Refused: a store of the previous layout is read-only."""
        self._refuse("commit to it")

    def compact(self, *args: Any, **kwargs: Any) -> NoReturn:
        """Refused: a store of the previous layout is read-only."""
        self._refuse("compact it")

    def sql(self, *args: Any, **kwargs: Any) -> NoReturn:
        """Refused: SQL needs the Delta Lake store."""
        self._refuse("query it with SQL")

    def _refuse(self, what: str) -> NoReturn:
        raise StoreError(
            f"{self.root} is a results store of the previous layout (before Delta Lake); it opens "
            f"read-only, so adaptlab cannot {what}. Convert it with "
            f"`adaptlab results migrate {self.root} NEW` and use NEW"
        )


def _check_marker(root: Path) -> None:
    """Raise :class:`StoreError` unless ``root`` holds a readable store of the previous layout."""
    marker = root / MARKER
    if not root.is_dir():
        raise StoreError(f"no results store at {root}: the directory does not exist")
    try:
        info = json.loads(marker.read_bytes())
        layout, fmt = int(info["layout"]), info.get("format")
    except FileNotFoundError as e:
        raise StoreError(f"{root} is not an adaptlab results store of the previous layout (no {MARKER})") from e
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise StoreError(
            f"{marker}: not a valid store marker ({e}); expected JSON with format {FORMAT!r} and layout"
        ) from e
    if fmt != FORMAT:
        raise StoreError(f"{marker}: format is {fmt!r}, expected {FORMAT!r}")
    if layout > LAYOUT_VERSION:
        raise StoreError(
            f"{marker}: store layout version {layout} is newer than the version {LAYOUT_VERSION} "
            "this adaptlab reads; upgrade adaptlab"
        )
    if not (root / COMMITS).is_dir():
        raise StoreError(f"{root}: the store has no {COMMITS}/ directory; it is damaged")


def _read_file(path: Path, name: str, rows: int, columns: list[str] | None) -> pa.Table:
    """One commit's Parquet file of table ``name``, checked against the manifest's row count and
    upgraded to the current schema version."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from adaptlab.results.legacy.schema_upgrade import conform, upgrade

    try:
        pf = pq.ParquetFile(path)
        raw = (pf.schema_arrow.metadata or {}).get(VERSION_KEY)
        if raw is None:
            raise StoreError(f"{path}: no {VERSION_KEY.decode()} in the Parquet metadata; not written by adaptlab")
        if pf.metadata.num_rows != rows:
            raise StoreError(
                f"{path}: {pf.metadata.num_rows} rows, but the commit manifest says {rows}; the commit is damaged"
            )
        version = int(raw) if raw.isdigit() else -1
        if version < 0:
            raise StoreError(f"{path}: invalid {VERSION_KEY.decode()} {raw!r}; expected an integer")
        if version == SCHEMA_VERSION:
            return conform(name, pf.read(columns=columns), source=str(path), columns=columns)
        table = upgrade(name, pf.read(), version, source=str(path))
    except (pa.ArrowInvalid, OSError) as e:
        raise StoreError(f"{path}: not a readable Parquet file ({e}); the commit is damaged") from e
    return table if columns is None else table.select(columns)
