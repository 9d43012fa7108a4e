"""File checksums of a results store (local or object storage): a corrupted Parquet file is an
error naming the file, never silently different results.

Delta Lake records each data file's size and column statistics, not a hash of its bytes, and a
byte flip inside a Parquet page often decodes to other values without complaint (issue 11,
row 10: 6 of 40 random flips moved 740 metric cells to other run ids). So every commit records
the SHA-256 of each data file it adds **in its own log entry** (``commitInfo`` key
``adaptlab.checksums``, written by :mod:`~adaptlab.results.staging` before the entry is created):
deleting a folder cannot erase them. After the commit the store also records them in
``<store>/_adaptlab_checksums/<name>.json`` (``{relative path: {"sha256", "size"}}``, written to a
temporary name and renamed on local disk, one PUT on object storage), which still covers commits
of older adaptlab versions and commits whose log entries a checkpoint and log clean-up removed;
the log's hash wins where both exist. Every read verifies the files it scans first, once per
store object and file state (size, mtime, and ctime on local disk), so a file changed between two
reads is checked again. Object-storage stores are verified the same way (issue 19): each file is
downloaded once more to hash it.

Gaps are never silent (issue 19): on open and before every commit, a data file of the current
version with no recorded hash is a WARNING naming it and its version; a manifest of a commit the
log no longer has is :class:`~adaptlab.results.damage.StoreDamagedError` (a commit file was
deleted). A store is created with its checksum folder (an empty ``created.json``), so a missing
folder is a WARNING naming it at once, whatever the age of the commits (issue 28). Under
``strict`` (``adaptlab results --strict``) each of these warnings is an error instead.

Limits: the manifest is written just after the Delta commit; a writer killed between the two
leaves that commit's files without a hash until the next commit (or ``adaptlab results repair``)
records them; commits younger than :data:`GRACE_SECONDS` are not warned about (their writer may
be recording them now).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import time
import urllib.parse
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from adaptlab.errors import StoreError
from adaptlab.results.damage import CHECKSUM_DIR, Listing, LogState, StoreDamagedError
from adaptlab.results.layout import COMMIT_RE
from adaptlab.results.native import short_message
from adaptlab.storage.files import sha256_file

__all__ = ["CHECKSUM_DIR", "GRACE_SECONDS", "Checksums"]

GRACE_SECONDS = 120.0
"""A commit younger than this may still be recording its checksums: no warning for its files."""
CREATED = "created"
"""The name (``created.json``) of the empty manifest a store is created with."""
_LOG = logging.getLogger(__name__)
_CHUNK = 1 << 20


def _rel(root: Path | str, uri: str) -> str:
    """The store-relative path of a data file; delta-rs percent-encodes file URIs (a store
    folder named ``a b`` comes back as ``a%20b``), so an encoded path is decoded first."""
    if isinstance(root, str):  # object storage: strip the store's URI
        text = urllib.parse.unquote(uri)
        prefix = root.rstrip("/") + "/"
        return text[len(prefix) :] if text.startswith(prefix) else text
    text = uri[len("file://") :] if uri.startswith("file://") else uri
    p = Path(text)
    if p.is_absolute() and not p.is_relative_to(root):
        p = Path(urllib.parse.unquote(text))
    return p.relative_to(root).as_posix() if p.is_absolute() else p.as_posix()


class Checksums:
    """The recorded hashes of one store's data files, their verification and their gaps."""

    def __init__(self, root: Path | str, fs: Callable[[], Any] | None = None) -> None:
        """``root``: the local store folder, or the URI of an object-storage store with ``fs``
        (a callable returning its pyarrow file system, built on first use)."""
        self.root = root
        self._make_fs = fs
        self.folder = root / CHECKSUM_DIR if isinstance(root, Path) else f"{CHECKSUM_DIR}"
        self._manifest: dict[str, dict[str, object]] = {}
        self._logged: dict[str, dict[str, object]] = {}
        self._seen: frozenset[str] = frozenset()
        self._verified: dict[str, tuple[int, ...]] = {}
        self._warned: set[str] = set()
        self._present = False
        self.strict = False
        """Unverified data files (no recorded hash, or no checksum folder) are an error, not a warning."""

    @classmethod
    def for_store(cls, uri: str, fs: Any) -> Checksums:
        """The checksums of the store at ``uri`` (a normalised URI: an absolute local path, or
        an object-storage URI)."""
        return cls(Path(uri)) if "://" not in uri else cls(uri, lambda: fs)

    # -- file access (local disk or object storage) ------------------------------------------
    def _fs(self) -> Any:
        """The pyarrow file system of an object-storage store."""
        if self._make_fs is None:
            raise StoreError(f"{self.root}: object-storage checksums need the store's file system; none was given")
        return self._make_fs()

    def _names(self) -> frozenset[str] | None:
        """Manifest file names, or None when the checksum folder does not exist."""
        if isinstance(self.root, Path):
            try:
                return frozenset(n for n in os.listdir(self.folder) if n.endswith(".json"))
            except FileNotFoundError:
                return None
        import pyarrow.fs as pafs

        infos = self._fs().get_file_info(pafs.FileSelector(CHECKSUM_DIR, allow_not_found=True))
        names = frozenset(
            i.path.rsplit("/", 1)[-1] for i in infos if i.type == pafs.FileType.File and i.path.endswith(".json")
        )
        return names or None

    def _read(self, rel: str) -> bytes:
        if isinstance(self.root, Path):
            return (self.root / rel).read_bytes()
        with self._fs().open_input_stream(rel) as f:
            return f.read()

    def _state(self, rel: str) -> tuple[int, ...]:
        if isinstance(self.root, Path):
            st = (self.root / rel).stat()
            return st.st_size, st.st_mtime_ns, st.st_ctime_ns
        import pyarrow.fs as pafs

        info = self._fs().get_file_info([rel])[0]
        if info.type != pafs.FileType.File:
            raise FileNotFoundError(rel)
        return int(info.size or 0), int(info.mtime_ns or 0)

    def digest(self, rel: str) -> str:
        """The SHA-256 of the data file ``rel`` (store-relative) as it is now."""
        if isinstance(self.root, Path):
            return sha256_file(self.root / rel)
        h = hashlib.sha256()
        with self._fs().open_input_stream(rel) as f:
            while chunk := f.read(_CHUNK):
                h.update(chunk)
        return h.hexdigest()

    def _write(self, label: str, data: bytes) -> None:
        if isinstance(self.root, Path):
            folder = self.root / CHECKSUM_DIR
            folder.mkdir(exist_ok=True)
            local_tmp = folder / f".{label}.{secrets.token_hex(4)}.tmp"
            local_tmp.write_bytes(data)
            os.replace(local_tmp, folder / f"{label}.json")
            return
        fs = self._fs()  # an output stream may be visible (empty) before it closes: write aside, then move
        tmp = f"{CHECKSUM_DIR}/.{label}.{secrets.token_hex(4)}.tmp"
        raw = fs.handler._handler.open_output_stream(tmp, None)  # delta-rs' stream takes bytes, not Buffers
        try:
            raw.write(data)
        finally:
            raw.close()
        fs.move(tmp, f"{CHECKSUM_DIR}/{label}.json")

    def _where(self, rel: str) -> str:
        return str(self.root / rel) if isinstance(self.root, Path) else f"{self.root.rstrip('/')}/{rel}"

    # -- manifests ----------------------------------------------------------------------------
    def use_log(self, logged: dict[str, dict[str, Any]]) -> None:
        """Take the checksums the commits' own log entries recorded (they win over the folder's:
        written with the commit, they cannot be lost or replaced apart from it)."""
        self._logged.update(logged)

    def logged(self) -> dict[str, dict[str, object]]:
        """The checksums taken from the log (:meth:`use_log`)."""
        return dict(self._logged)

    def manifest(self) -> dict[str, dict[str, object]]:
        """Every recorded ``{relative path: {"sha256", "size"}}``: the log's, and the checksum
        folder's for files the log has none for (re-read when files were added)."""
        return {**self._folder(), **self._logged}

    def _folder(self) -> dict[str, dict[str, object]]:
        found = self._names()
        self._present = found is not None
        names = found or frozenset()
        if names != self._seen:
            merged: dict[str, dict[str, object]] = {}
            for name in sorted(names):
                rel = f"{CHECKSUM_DIR}/{name}"
                try:
                    data = json.loads(self._read(rel).decode("utf-8"))
                except (OSError, ValueError) as e:
                    raise StoreError(
                        f"{self._where(rel)}: unreadable checksum manifest ({short_message(e)}); the "
                        "store's integrity record is damaged: restore the file from a backup"
                    ) from e
                if isinstance(data, dict):
                    merged.update({k: v for k, v in data.items() if isinstance(v, dict)})
            self._manifest, self._seen = merged, names
        return self._manifest

    def create_folder(self) -> None:
        """Create the checksum folder with an empty manifest, as a new store's table is created:
        from then on a missing folder means it was deleted, whatever the age of the commits."""
        if self._names() is None:
            self._write(CREATED, b"{}")

    def record(self, file_uris: Iterable[str], label: str) -> None:
        """Hash every data file that has no recorded hash yet; write them as one manifest.
        A failure to write is logged, not raised: the commit has landed already."""
        self.record_relative((_rel(self.root, u) for u in file_uris), label)

    def record_relative(self, rels: Iterable[str], label: str) -> int:
        """:meth:`record` for store-relative paths; returns how many files were recorded."""
        known = self.manifest()
        new: dict[str, dict[str, object]] = {}
        try:
            for rel in rels:
                if rel not in known:
                    new[rel] = {"sha256": self.digest(rel), "size": self._state(rel)[0]}
            if new:
                self._write(label, json.dumps(new, sort_keys=True).encode("utf-8"))
        except Exception as e:  # noqa: BLE001 - OSError locally, storage errors on object stores
            _LOG.warning(
                "%s: could not record checksums of %d new file(s) (%s); they are recorded by the next commit",
                self.root,
                len(new),
                short_message(e),
            )
            return 0
        return len(new)

    def verify(self, file_uris: Iterable[str]) -> None:
        """Raise :class:`StoreError` naming the first file whose bytes differ from its recorded hash."""
        known = self.manifest()
        for uri in file_uris:
            rel = _rel(self.root, uri)
            entry = known.get(rel)
            if entry is None:
                continue
            try:
                state = self._state(rel)
            except OSError as e:
                raise StoreError(
                    f"{self._where(rel)}: a data file of the store cannot be read "
                    f"({e.strerror or e}); restore it from a backup"
                ) from e
            if self._verified.get(rel) == state:
                continue
            digest = self.digest(rel)
            if digest != entry.get("sha256") or state[0] != entry.get("size"):
                raise StoreError(
                    f"{self._where(rel)}: corrupted data file: its SHA-256 {digest[:16]}... (size {state[0]}) differs "
                    f"from the {str(entry.get('sha256'))[:16]}... (size {entry.get('size')}) recorded at commit; "
                    "nothing was read: restore the file from a backup or run `adaptlab results repair`"
                )
            self._verified[rel] = state

    def listed(self, rel: str) -> list[str]:
        """The data files the manifest ``rel`` (store-relative) records; [] when it cannot be read."""
        try:
            data = json.loads(self._read(rel).decode("utf-8"))
        except (OSError, ValueError):
            return []
        return sorted(k for k, v in data.items() if isinstance(v, dict)) if isinstance(data, dict) else []

    def parquet_problem(self, rel: str, rows: int | None, nulls: dict[str, int]) -> str | None:
        """What is wrong with a data file that has no recorded hash (None: nothing found): it must
        decode as Parquet, with the number of rows and, per column, of nulls the Delta log
        recorded for it. A byte flip can decode to other values (issue 11); one that breaks the
        encoding, the footer or a count is caught here, so repair never records its hash."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(pa.BufferReader(self._read(rel)))
        except Exception as e:  # noqa: BLE001 - any decoding error: the file is damaged
            return f"does not read as Parquet ({short_message(e, 160)})"
        if rows is not None and table.num_rows != rows:
            return f"decodes to {table.num_rows} rows, the log recorded {rows}"
        for name, want in sorted(nulls.items()):
            if name in table.column_names and table.column(name).null_count != want:
                return f"has {table.column(name).null_count} nulls in column {name!r}, the log recorded {want}"
        return None

    # -- gaps ---------------------------------------------------------------------------------
    def orphans(self, listing: Listing, state: LogState) -> list[str]:
        """Manifests (store-relative paths) of adaptlab commits that are not in the log. Only
        knowable while the whole log was read, from version 0 (no checkpoint cleaned it)."""
        if state.first != 0 or not state.complete:
            return []
        prefix = CHECKSUM_DIR + "/"
        return sorted(
            p
            for p in listing.files
            if p.startswith(prefix)
            and p.endswith(".json")
            and COMMIT_RE.match(p[len(prefix) : -len(".json")])
            and p[len(prefix) : -len(".json")] not in state.commit_ids
        )

    def check_records(self, uri: str, live: dict[str, int], listing: Listing, state: LogState) -> None:
        """Flag a manifest of a vanished commit (error); warn about data files of the current
        version that have no recorded hash, or a missing checksum folder (once per file)."""
        lost = self.orphans(listing, state)
        if lost:
            commit = lost[0][len(CHECKSUM_DIR) + 1 : -len(".json")]
            raise StoreDamagedError(
                uri,
                lost[0],
                None,
                f"records the checksums of commit {commit}, which is not in "
                f"the log (versions {state.first}..{state.last}): a commit "
                "file was deleted",
            )
        known = self.manifest()
        gaps = sorted(
            p for p in live if p not in known and p not in self._warned and state.added.get(p) not in self._young(state)
        )
        if not gaps:
            return
        versions = sorted({state.added[p] for p in gaps if p in state.added})
        shown = ", ".join(str(v) for v in versions[:8]) + (", ..." if len(versions) > 8 else "")
        why = (
            f"the checksum folder {CHECKSUM_DIR}/ is missing"
            if not self._present
            else f"{len(gaps)} data file(s) have no checksum record"
        )
        if self.strict:
            problem = (
                f"is missing, so {len(gaps)} data file(s) (e.g. {gaps[0]}) would be read unverified"
                if not self._present
                else f"has no checksum record ({len(gaps)} data file(s) in all), so it would be read unverified"
            )
            raise StoreDamagedError(
                uri,
                f"{CHECKSUM_DIR}/" if not self._present else gaps[0],
                versions[0] if versions else None,
                f"{problem}; strict reading refuses that",
            )
        self._warned.update(gaps)
        _LOG.warning(
            "%s: %s (e.g. %s, version(s) %s): those files are read unverified; `adaptlab results repair "
            "--store %s` records their current bytes",
            uri,
            why,
            gaps[0],
            shown or "unknown",
            uri,
        )

    def _young(self, state: LogState) -> set[int]:
        """Versions whose writer may be recording their checksums now (younger than
        :data:`GRACE_SECONDS`). With the checksum folder missing, none: a store creates it with its
        table (:meth:`create_folder`), so it was deleted."""
        if not self._present:
            return set()
        now_ms = time.time() * 1000
        return {v for v, t in state.times.items() if now_ms - t < GRACE_SECONDS * 1000}
