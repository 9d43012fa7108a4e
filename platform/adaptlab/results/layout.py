"""Commit ids, and the on-disk names of the previous store layout (layout 1, before Delta Lake).

A commit id is ``YYYYmmddTHHMMSSffffffZ-<12 hex>``: it sorts by creation time (UTC) and the
random part makes concurrent writers' ids distinct. The Delta Lake store keeps using them.

The previous layout, read by :mod:`adaptlab.results.legacy.legacy` (nothing writes it any more)::

    <root>/
      adaptlab-store.json          marker: {"format": "adaptlab.results", "layout": 1}
      commits/<commit id>/         published commits, never modified once there
        _commit.json               manifest: row counts, run ids, systems, datasets, replaces
        runs.parquet  metrics.parquet  per_query.parquet   (a table with no rows has no file)
      tmp/                         commits being written, directories being deleted

A compaction published one merged commit whose manifest lists the ids it ``replaces``;
replaced commits that are still on disk (a compaction cut short) are not read.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from adaptlab.errors import StoreError

__all__ = [
    "COMMITS",
    "COMMIT_RE",
    "LAYOUT_VERSION",
    "MANIFEST",
    "MARKER",
    "Manifest",
    "TMP",
    "is_legacy_store",
    "new_commit_id",
]

LAYOUT_VERSION = 1
MARKER = "adaptlab-store.json"
COMMITS = "commits"
TMP = "tmp"
MANIFEST = "_commit.json"
MANIFEST_VERSION = 1
COMMIT_RE = re.compile(r"^\d{8}T\d{12}Z-[0-9a-f]{12}$")


def is_legacy_store(root: str | os.PathLike[str]) -> bool:
    """Whether the local directory ``root`` holds a store of the previous layout (its marker file)."""
    return (Path(os.fspath(root)) / MARKER).is_file()


def new_commit_id(when: datetime | None = None) -> str:
    """A fresh commit id; ids sort by ``when`` (default now, UTC)."""
    when = (when or datetime.now(timezone.utc)).astimezone(timezone.utc)
    return f"{when.strftime('%Y%m%dT%H%M%S%f')}Z-{secrets.token_hex(6)}"


@dataclass
class Manifest:
    """What a published commit of the previous layout holds; written last, inside its directory."""

    commit_id: str
    schema_version: int
    tables: dict[str, int]
    run_ids: list[str]
    systems: list[str]
    datasets: list[str]
    created: str
    host: str
    pid: int
    replaces: list[str] = field(default_factory=list)
    manifest_version: int = MANIFEST_VERSION

    def to_bytes(self) -> bytes:
        """The manifest file's content (JSON)."""
        return json.dumps(asdict(self), sort_keys=True, indent=1).encode()

    @classmethod
    def read(cls, path: Path) -> Manifest:
        """Parse a manifest file; FileNotFoundError propagates (the caller names the commit)."""
        raw = path.read_bytes()
        try:
            data: dict[str, Any] = json.loads(raw)
            version = int(data.get("manifest_version", 0))
        except (ValueError, TypeError, AttributeError) as e:
            raise StoreError(f"{path}: commit manifest is not valid JSON ({e}); the commit is damaged") from e
        if version > MANIFEST_VERSION:
            raise StoreError(
                f"{path}: commit manifest version {version} is newer than the version "
                f"{MANIFEST_VERSION} this adaptlab reads; upgrade adaptlab"
            )
        try:
            m = cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})
        except TypeError as e:
            raise StoreError(f"{path}: commit manifest lacks fields ({e}); the commit is damaged") from e
        if m.commit_id != path.parent.name:
            raise StoreError(f"{path}: manifest names commit {m.commit_id!r}, not its directory {path.parent.name!r}")
        return m
