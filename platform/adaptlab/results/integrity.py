"""File checksums of a local results store: a corrupted Parquet file is an error naming the
file, never silently different results.

Delta Lake records each data file's size and column statistics, not a hash of its bytes, and a
byte flip inside a Parquet page often decodes to other values without complaint (issue 11,
row 10: 6 of 40 random flips moved 740 metric cells to other run ids). So after every commit
(and every ``compact``) the store records the SHA-256 of each data file that has none yet in
``<store>/_adaptlab_checksums/<name>.json`` (``{relative path: {"sha256", "size"}}``, written to a
temporary name and renamed, so a manifest is whole or absent). Every read verifies the files it
scans first, once per store object and file state (size, mtime, ctime), so a file changed
between two reads is checked again.

Limits: the manifest is written just after the Delta commit; a writer killed between the two
leaves that commit's files without a hash until the next commit records them. Object-storage
stores (``s3://`` ...) are not hashed here: their services check transfers themselves (S3 and
GCS verify checksums on upload). Files of stores written before this module have no recorded
hash and are read unverified.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import urllib.parse
from collections.abc import Iterable
from pathlib import Path

from adaptlab.errors import StoreError

__all__ = ["CHECKSUM_DIR", "Checksums"]

CHECKSUM_DIR = "_adaptlab_checksums"
_LOG = logging.getLogger(__name__)
_CHUNK = 1 << 20


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _rel(root: Path, uri: str) -> str:
    """The store-relative path of a data file; delta-rs percent-encodes file URIs (a store
    folder named ``a b`` comes back as ``a%20b``), so an encoded path is decoded first."""
    text = uri[len("file://"):] if uri.startswith("file://") else uri
    p = Path(text)
    if p.is_absolute() and not p.is_relative_to(root):
        p = Path(urllib.parse.unquote(text))
    return p.relative_to(root).as_posix() if p.is_absolute() else p.as_posix()


class Checksums:
    """The recorded hashes of one local store's data files, and their verification."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.folder = root / CHECKSUM_DIR
        self._manifest: dict[str, dict[str, object]] = {}
        self._seen: frozenset[str] = frozenset()
        self._verified: dict[str, tuple[int, int, int]] = {}

    def manifest(self) -> dict[str, dict[str, object]]:
        """Every recorded ``{relative path: {"sha256", "size"}}`` (re-read when files were added)."""
        try:
            names = frozenset(n for n in os.listdir(self.folder) if n.endswith(".json"))
        except FileNotFoundError:
            return {}
        if names != self._seen:
            merged: dict[str, dict[str, object]] = {}
            for name in sorted(names):
                path = self.folder / name
                try:
                    data = json.loads(path.read_text(encoding="utf-8"))
                except (OSError, ValueError) as e:
                    raise StoreError(f"{path}: unreadable checksum manifest ({e}); the store's integrity record "
                                     "is damaged: restore the file from a backup") from e
                if isinstance(data, dict):
                    merged.update({k: v for k, v in data.items() if isinstance(v, dict)})
            self._manifest, self._seen = merged, names
        return self._manifest

    def record(self, file_uris: Iterable[str], label: str) -> None:
        """Hash every data file that has no recorded hash yet; write them as one manifest.
        A failure to write is logged, not raised: the commit has landed already."""
        known = self.manifest()
        new: dict[str, dict[str, object]] = {}
        try:
            for uri in file_uris:
                rel = _rel(self.root, uri)
                if rel not in known:
                    path = self.root / rel
                    new[rel] = {"sha256": sha256_file(path), "size": path.stat().st_size}
            if not new:
                return
            self.folder.mkdir(exist_ok=True)
            target = self.folder / f"{label}.json"
            tmp = self.folder / f".{label}.{secrets.token_hex(4)}.tmp"
            tmp.write_text(json.dumps(new, sort_keys=True), encoding="utf-8")
            os.replace(tmp, target)
        except OSError as e:
            _LOG.warning("%s: could not record checksums of %d new file(s) (%s); they are recorded by the "
                         "next commit", self.root, len(new), e.strerror or e)

    def verify(self, file_uris: Iterable[str]) -> None:
        """Raise :class:`StoreError` naming the first file whose bytes differ from its recorded hash."""
        known = self.manifest()
        for uri in file_uris:
            rel = _rel(self.root, uri)
            entry = known.get(rel)
            if entry is None:
                continue
            path = self.root / rel
            try:
                st = path.stat()
            except OSError as e:
                raise StoreError(f"{path}: a data file of the store cannot be read ({e.strerror or e}); "
                                 "restore it from a backup") from e
            state = (st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            if self._verified.get(rel) == state:
                continue
            digest = sha256_file(path)
            if digest != entry.get("sha256") or st.st_size != entry.get("size"):
                raise StoreError(
                    f"{path}: corrupted data file: its SHA-256 {digest[:16]}... (size {st.st_size}) differs from "
                    f"the {str(entry.get('sha256'))[:16]}... (size {entry.get('size')}) recorded at commit; "
                    "nothing was read: restore the file from a backup"
                )
            self._verified[rel] = state
