"""Publishing a finished artifact on a URI (``s3://``, ``gs://``, ...): the files of ``model/``
first, each streamed and checked against its SHA-256, then ``manifest.json`` (with those hashes)
last, so a reader that sees the manifest sees a whole artifact. Reading it back on another node
is :func:`adaptlab.adapt.train.artifacts.materialize_artifact`.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from adaptlab.adapt.train.artifacts import (
    MANIFEST,
    MODEL_DIR,
    Artifact,
    model_relpath,
    read_local_manifest,
    remote_manifest,
)
from adaptlab.errors import StoreError, mask_url
from adaptlab.storage.files import sha256_file
from adaptlab.storage.objects import open_remote

__all__ = ["file_hashes", "publish_artifact"]

_log = logging.getLogger(__name__)


def file_hashes(directory: Path) -> dict[str, str]:
    """``{relative path: SHA-256}`` of every file under ``directory/model``."""
    model = directory / MODEL_DIR
    return {p.relative_to(directory).as_posix(): sha256_file(p) for p in sorted(model.rglob("*")) if p.is_file()}


def publish_artifact(local_dir: str | Path, uri: str) -> Artifact:
    """Publish the finished local artifact ``local_dir`` at ``uri``: every file of ``model/``
    (streamed, large ones in parts; each checked against its SHA-256), then ``manifest.json`` last
    (with the files' hashes). Nothing is written when ``uri`` already has a manifest; files left by
    a publish cut short are overwritten. A failure raises one :class:`StoreError` line and leaves
    no manifest (an unfinished multipart upload is aborted); publishing again starts over."""
    local, uri = Path(local_dir), uri.rstrip("/")
    manifest = read_local_manifest(local)
    published = remote_manifest(uri)
    if published is not None:
        if published.get("key") != manifest.get("key"):
            raise StoreError(f"{mask_url(uri)}: holds another artifact (key {published.get('key')!r})")
        return Artifact(local, published, reused=True, uri=uri)
    if "files" not in manifest:
        manifest["files"] = file_hashes(local)
    started, remote = time.monotonic(), open_remote(uri)
    try:
        for rel, digest in manifest["files"].items():
            remote.upload(rel, local / model_relpath(rel), digest)
        remote.put_bytes(MANIFEST, json.dumps(manifest, indent=2, sort_keys=True, default=str).encode())
    except OSError as e:
        raise StoreError(
            f"{mask_url(uri)}: cannot publish the artifact after {time.monotonic() - started:.1f} s "
            f"({type(e).__name__}: {mask_url(str(e))[:320]}); no manifest was written, "
            "publishing again starts over"
        ) from None
    size = sum((local / rel).stat().st_size for rel in manifest["files"])
    _log.info(
        "published artifact %s (%d files, %.1f MB in %.1f s)",
        mask_url(uri),
        len(manifest["files"]),
        size / 1e6,
        time.monotonic() - started,
    )
    return Artifact(local, manifest, reused=False, uri=uri)
