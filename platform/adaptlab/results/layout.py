"""On-disk layout of a results store and the durable file operations behind atomic commits.

::

    <root>/
      adaptlab-store.json          marker: {"format": "adaptlab.results", "layout": 1}
      commits/<commit id>/         published commits, never modified once there
        _commit.json               manifest: row counts, run ids, systems, datasets, replaces
        runs.parquet  metrics.parquet  per_query.parquet   (a table with no rows has no file)
      tmp/<commit id>.<host>.<pid>.tmp/   commits being written (invisible to readers)
      tmp/<name>.trash/            directories being deleted
      .compact.lock                held (flock) while a compaction runs

A commit id is ``YYYYmmddTHHMMSSffffffZ-<12 hex>``: it sorts by creation time (UTC) and
the random part makes concurrent writers' ids distinct. No user-given name (system,
dataset, study) ever becomes part of a path; the host name in temporary directory names
goes through :func:`safe_name`.
"""

from __future__ import annotations

import errno
import json
import os
import re
import secrets
import shutil
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adaptlab.errors import StoreError
from adaptlab.storage.files import NO_DOTS
from adaptlab.storage.files import safe_name as _safe_name

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

__all__ = [
    "COMMITS",
    "COMMIT_RE",
    "LAYOUT_VERSION",
    "LOCK",
    "MANIFEST",
    "MARKER",
    "Manifest",
    "TMP",
    "fsync_dir",
    "new_commit_id",
    "parse_tmp_name",
    "pid_alive",
    "remove_tree",
    "safe_name",
    "tmp_name",
    "tree_mtime",
    "write_bytes",
    "write_parquet",
]

LAYOUT_VERSION = 1
MARKER = "adaptlab-store.json"
COMMITS = "commits"
TMP = "tmp"
MANIFEST = "_commit.json"
LOCK = ".compact.lock"
MANIFEST_VERSION = 1
COMMIT_RE = re.compile(r"^\d{8}T\d{12}Z-[0-9a-f]{12}$")


def safe_name(text: str, max_len: int = 64) -> str:
    """``text`` reduced to ``[A-Za-z0-9_-]`` (other runs of characters become ``_``),
    at most ``max_len`` characters, never empty: safe as one path component (the rule
    :data:`adaptlab.storage.files.NO_DOTS`)."""
    return _safe_name(text, NO_DOTS, max_len=max_len)


def new_commit_id(when: datetime | None = None) -> str:
    """A fresh commit id; ids sort by ``when`` (default now, UTC)."""
    when = (when or datetime.now(timezone.utc)).astimezone(timezone.utc)
    return f"{when.strftime('%Y%m%dT%H%M%S%f')}Z-{secrets.token_hex(6)}"


def tmp_name(commit_id: str, host: str, pid: int) -> str:
    """Name of the temporary directory in which ``commit_id`` is written."""
    return f"{commit_id}.{safe_name(host)}.{pid}.tmp"


def parse_tmp_name(name: str) -> tuple[str, int] | None:
    """``(host, pid)`` of a temporary commit directory name, or None if not one."""
    parts = name.split(".")
    if len(parts) != 4 or parts[3] != "tmp" or not COMMIT_RE.match(parts[0]) or not parts[2].isdigit():
        return None
    return parts[1], int(parts[2])


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this machine (a zombie counts as alive)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError as e:  # pragma: no cover - other platforms
        return e.errno != errno.ESRCH
    return True


def tree_mtime(path: Path) -> float:
    """Latest modification time of ``path`` and its direct entries (0 if it vanished)."""
    try:
        latest = path.stat().st_mtime
        if not path.is_dir():
            return latest
        with os.scandir(path) as it:
            for entry in it:
                try:
                    latest = max(latest, entry.stat(follow_symlinks=False).st_mtime)
                except FileNotFoundError:
                    pass
        return latest
    except FileNotFoundError:
        return 0.0


def fsync_dir(path: Path) -> None:
    """Flush a directory's entries to disk (no-op where directories cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - e.g. Windows
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - some file systems refuse
        pass
    finally:
        os.close(fd)


def write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to a new file ``path`` and fsync it."""
    with open(path, "xb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def write_parquet(path: Path, table: pa.Table) -> None:
    """Write ``table`` (with its schema metadata) to a new Parquet file and fsync it."""
    import pyarrow.parquet as pq

    with open(path, "xb") as f:
        pq.write_table(table, f, compression="zstd")
        f.flush()
        os.fsync(f.fileno())


def remove_tree(path: Path, trash_dir: Path) -> None:
    """Delete a directory: first move it (atomically) into ``trash_dir`` as
    ``<name>.trash``, then remove it there, so that a half-deleted directory is never
    left where readers look. A path that is already gone is fine."""
    target = trash_dir / f"{path.name}.{secrets.token_hex(4)}.trash"
    try:
        os.rename(path, target)
    except FileNotFoundError:
        return
    shutil.rmtree(target, ignore_errors=True)


@dataclass
class Manifest:
    """What a published commit holds; written last, inside the commit directory."""

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
        return json.dumps(asdict(self), sort_keys=True, indent=1).encode()

    @classmethod
    def read(cls, path: Path) -> Manifest:
        """Parse a manifest file; FileNotFoundError propagates (the commit may be moving)."""
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
