"""Where a results store may go, checked without writing: what :func:`adaptlab.results.open`
with ``create=True`` would refuse, found before a study does its work instead of after it."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from adaptlab.errors import StoreError
from adaptlab.results.legacy.legacy import LegacyReader, is_legacy_store
from adaptlab.results.store import _refuse_unrelated_folder, normalize_uri

__all__ = ["check_store_location"]


def check_store_location(root: str | os.PathLike[str]) -> None:
    """Raise :class:`~adaptlab.errors.StoreError` (one line naming the location) when a store
    could not be created or written at ``root``: an unsupported URI scheme or credentials in
    the URI, a file where the folder should be, a folder that holds other files, a store of
    the previous layout (read-only) or a folder that cannot be created or written. Object
    stores are checked by form only: no network access, nothing is created."""
    _, local = normalize_uri(root)
    if local is None:
        return
    if local.exists() and not local.is_dir():
        raise StoreError(f"cannot create a results store at {local}: it is a file, not a directory")
    if is_legacy_store(local):
        LegacyReader(local).commit()  # raises the one message that says how to migrate
    _refuse_unrelated_folder(local, lambda: False)  # a local table has a _delta_log folder
    _check_writable(local)


def _check_writable(local: Path) -> None:
    """``local``, or the nearest folder above it that exists, accepts a new folder: one empty
    hidden folder is made and removed there (``os.access`` alone says yes to root and on
    read-only file systems)."""
    existing = next(p for p in (local, *local.parents) if p.exists())
    what = "the folder" if existing == local else f"{existing} (the nearest existing folder above it)"
    if not existing.is_dir():
        raise StoreError(f"cannot create a results store at {local}: {existing} is a file, not a directory")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".adaptlab-write-check-", dir=existing))
    except OSError as e:
        raise StoreError(
            f"cannot create a results store at {local}: {what} is not writable "
            f"({e.strerror or type(e).__name__}); expected a folder you can write to, "
            "or an s3://, gs:// or az:// URI"
        ) from e
