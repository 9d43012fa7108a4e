"""Content-addressed artifacts for adapted models.

Every adapted model (PT, FT, PT-FT, merged) is stored as

``<root>/<base label>/<variant>-<scale>-<key[:16]>/``
    ``manifest.json``  what went in (base model id and hash, variant, data scale and fingerprint,
                       hyperparameters, seed, package versions) and how training went
    ``model/``         a sentence-transformers directory, weights as safetensors (no pickles)

where ``key = SHA-256(canonical JSON of the inputs)``. A second call with the same inputs finds
the directory and returns it without training. Writes are atomic: work happens in the sibling
temp directory ``.<name>.partial`` (which also holds the resumable training checkpoints) and is
renamed into place only once complete; a per-artifact file lock keeps two processes on the same
machine from training the same artifact twice.

``root`` may also be a URI (``s3://bucket/prefix/artifacts`` through boto3, ``gs://``, ``az://``
and any other file system ``pyarrow.fs`` opens; credentials from the environment only; see
:mod:`adaptlab.storage.objects` for multipart parts, time-outs and retries), so the
nodes of a cluster share artifacts without a shared POSIX mount. A job then trains into a local staging folder
under the artifact cache (:func:`artifact_cache_dir`, ``artifacts`` in the machine's cache folder)
exactly as above and publishes ``<root>/<base label>/<name>/``: the files of ``model/`` first,
``manifest.json`` (with the SHA-256 of every file) last, so a reader that sees the manifest sees
a whole artifact, and files without a manifest never count as trained. Every file is streamed
(large ones in parts) and checked against its hash on the way up and on the way down; a publish
that fails (a dead server, a time-out) raises one line and leaves no manifest, and the next
``existing()`` on a node holding the local copy publishes it again. Publishing again is
harmless. A consumer on any node (evaluation, merging, PT -> FT) reads ``Artifact.model_path``,
which materialises the artifact into the local cache (verified against the manifest's hashes)
the first time it is needed on that node.

This module holds the artifact record and its reading on any node (open, find, materialise);
the key is :mod:`.addressing`, writing :mod:`.writer`, publishing on a URI :mod:`.publish`, base
models :mod:`.base_model`. Training checkpoints (layout, resume, and on a URI root their sharing
between nodes, so a stage retried on another node resumes where it stopped) are
:mod:`.checkpoints`; the writer publishes them through it.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adaptlab.adapt.train.addressing import sanitize_name
from adaptlab.adapt.train.checkpoints import CHECKPOINTS, drop_leftover_checkpoints
from adaptlab.errors import StoreError, is_uri, mask_url
from adaptlab.storage.env import cache_home
from adaptlab.storage.files import safe_relpath
from adaptlab.storage.objects import open_remote

__all__ = [
    "ARTIFACT_SCHEMA_VERSION",
    "MANIFEST",
    "MODEL_DIR",
    "Artifact",
    "artifact_cache_dir",
    "artifact_root_text",
    "find_artifact",
    "is_artifact_uri",
    "local_model_path",
    "materialize_artifact",
    "model_relpath",
    "open_artifact",
    "read_local_manifest",
    "read_manifest",
    "remote_manifest",
]

ARTIFACT_SCHEMA_VERSION = 1
"""Version of ``manifest.json``; readers of older versions must migrate."""


MANIFEST = "manifest.json"


MODEL_DIR = "model"


def is_artifact_uri(root: object) -> bool:
    """Whether ``root`` is a URI (``s3://...``) rather than a local path."""
    return is_uri(root)


def artifact_root_text(root: str | os.PathLike[str]) -> str:
    """``root`` as handed to workers: a URI unchanged (without a trailing ``/``), else the
    absolute local path."""
    text = os.fspath(root)
    return text.rstrip("/") if is_artifact_uri(text) else os.path.abspath(text)


def artifact_cache_dir() -> Path:
    """Where artifacts on a URI are staged and materialised on this node: ``artifacts`` in the
    machine's cache folder (:func:`adaptlab.storage.env.cache_home`: ``$ADAPTLAB_CACHE``, else
    ``$XDG_CACHE_HOME/adaptlab``, else ``~/.cache/adaptlab``), the folder of every local cache."""
    return cache_home() / "artifacts"


def read_local_manifest(directory: Path) -> dict[str, Any]:
    """The ``manifest.json`` of the local artifact folder ``directory``; one :class:`StoreError` line
    when it cannot be read or is of a newer schema."""
    file = directory / MANIFEST
    try:
        data = json.loads(file.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise StoreError(f"{file}: cannot read the artifact manifest ({e}); delete the directory to retrain") from e
    if not isinstance(data, dict) or data.get("schema_version", 0) > ARTIFACT_SCHEMA_VERSION:
        raise StoreError(
            f"{file}: manifest schema {data.get('schema_version') if isinstance(data, dict) else '?'} "
            f"is newer than this adaptlab understands ({ARTIFACT_SCHEMA_VERSION}); upgrade adaptlab"
        )
    return data


@dataclass(frozen=True)
class Artifact:
    """A finished adapted model on disk: ``path/model`` is a sentence-transformers directory.

    An artifact published on a URI has ``uri`` set and ``path`` is its folder in this node's
    artifact cache; :attr:`model_path` and :meth:`local_dir` materialise it there when it is
    not (on a node other than the one that trained it)."""

    path: Path
    manifest: Mapping[str, Any] = field(repr=False)
    reused: bool = False
    uri: str | None = None

    @property
    def location(self) -> str:
        """Where the artifact is kept: its URI, else its local directory."""
        return self.uri if self.uri is not None else str(self.path)

    def local_dir(self) -> Path:
        """A local directory holding the whole artifact (materialised from ``uri`` if needed)."""
        if self.uri is None:
            return self.path
        return materialize_artifact(self.uri)

    @property
    def key(self) -> str:
        return str(self.manifest["key"])

    @property
    def variant(self) -> str:
        return str(self.manifest["variant"])

    @property
    def model_path(self) -> Path:
        return self.local_dir() / MODEL_DIR

    def load(self, device: str | None = None) -> Any:
        """Load the model as a ``SentenceTransformer``."""
        from sentence_transformers import SentenceTransformer

        return SentenceTransformer(str(self.model_path), device=device, local_files_only=True)


def open_artifact(path: str | Path) -> Artifact:
    """Open a finished artifact directory, or an artifact URI (materialised lazily; see
    :meth:`Artifact.local_dir`); raises :class:`StoreError` if incomplete."""
    if is_artifact_uri(path):
        uri = str(path).rstrip("/")
        manifest = remote_manifest(uri)
        if manifest is None:
            raise StoreError(f"{mask_url(uri)}: not a finished artifact (no {MANIFEST})")
        return Artifact(_cache_path(uri), manifest, reused=True, uri=uri)
    p = Path(path)
    if not (p / MANIFEST).is_file() or not (p / MODEL_DIR).is_dir():
        raise StoreError(f"{p}: not a finished artifact (expected {MANIFEST} and {MODEL_DIR}/)")
    return Artifact(p, read_local_manifest(p), reused=True)


def read_manifest(path: str | Path) -> dict[str, Any]:
    """The ``manifest.json`` of the artifact at ``path`` (a directory or an artifact URI), read
    without materialising its model: what went in and the ``training`` record. Raises
    :class:`StoreError` when there is none or it cannot be read."""
    if is_artifact_uri(path):
        manifest = remote_manifest(str(path).rstrip("/"))
        if manifest is None:
            raise StoreError(f"{mask_url(str(path))}: not a finished artifact (no {MANIFEST})")
        return manifest
    if not (Path(path) / MANIFEST).is_file():
        raise StoreError(f"{path}: not a finished artifact (no {MANIFEST})")
    return read_local_manifest(Path(path))


def remote_manifest(uri: str) -> dict[str, Any] | None:
    """The manifest of the artifact at ``uri``, or None when it has none (not, or half, published)."""
    try:
        raw = open_remote(uri).read_bytes(MANIFEST)
        data = None if raw is None else json.loads(raw.decode())
    except (OSError, ValueError) as e:
        raise StoreError(
            f"{mask_url(uri)}/{MANIFEST}: cannot read the artifact manifest "
            f"({type(e).__name__}: {mask_url(str(e))[:320]})"
        ) from None
    if data is None:
        return None
    if not isinstance(data, dict) or data.get("schema_version", 0) > ARTIFACT_SCHEMA_VERSION:
        raise StoreError(
            f"{mask_url(uri)}/{MANIFEST}: manifest schema is newer than this adaptlab understands; upgrade adaptlab"
        )
    return data


def model_relpath(rel: str) -> str:
    """``rel`` (a manifest's file entry) checked to be a relative path under ``model/``."""
    return safe_relpath(rel, under=MODEL_DIR, source="artifact manifest")


def _cache_path(uri: str) -> Path:
    """This node's cache folder for the artifact at ``uri``: ``<cache>/<label>/<name>``."""
    label, name = (uri.rstrip("/").rsplit("/", 2) + ["", ""])[1:3]
    return artifact_cache_dir() / sanitize_name(label) / sanitize_name(name, max_len=128)


def materialize_artifact(uri: str, dest: str | Path | None = None) -> Path:
    """A local copy of the artifact at ``uri`` (in ``dest``, default its folder in the artifact
    cache), downloaded once and checked against the manifest's file hashes; returns ``dest``."""
    uri = uri.rstrip("/")
    target = Path(dest) if dest is not None else _cache_path(uri)
    if (target / MANIFEST).is_file() and (target / MODEL_DIR).is_dir():
        return target
    manifest = remote_manifest(uri)
    if manifest is None:
        raise StoreError(f"{mask_url(uri)}: not a finished artifact (no {MANIFEST})")
    files = manifest.get("files") or {rel: None for rel in _list_model_files(uri)}
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.fetch-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        remote = open_remote(uri)
        for rel, digest in files.items():
            out = tmp / model_relpath(rel)
            out.parent.mkdir(parents=True, exist_ok=True)
            got = remote.download(rel, out)
            if digest is not None and got != digest:
                raise StoreError(f"{mask_url(uri)}/{rel}: content does not match the manifest's hash")
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True, default=str))
        if (target / MANIFEST).is_file():  # another process here materialised it meanwhile
            return target
        shutil.rmtree(target, ignore_errors=True)  # a stale half copy
        os.rename(tmp, target)
    except OSError as e:
        raise StoreError(
            f"{mask_url(uri)}: cannot materialise the artifact into {target} "
            f"({type(e).__name__}: {mask_url(str(e))[:320]})"
        ) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _list_model_files(uri: str) -> list[str]:
    try:
        return open_remote(uri).list_files(MODEL_DIR)
    except OSError as e:
        raise StoreError(f"{mask_url(uri)}: cannot list the artifact's files ({type(e).__name__})") from None


def find_artifact(root: str | os.PathLike[str], key: str) -> Artifact | None:
    """The finished artifact with ``key`` under ``root`` (a directory or a URI), or None.
    Files without a manifest (a publish cut short) are not an artifact."""
    suffix = f"-{key[:16]}"
    if not is_artifact_uri(os.fspath(root)):
        for d in sorted(Path(root).glob(f"*/*{suffix}")):
            if (d / MANIFEST).is_file() and read_local_manifest(d).get("key") == key:
                return open_artifact(d)
        return None
    uri = artifact_root_text(root)
    try:
        files = open_remote(uri).list_files()
    except OSError as e:
        raise StoreError(
            f"{mask_url(uri)}: cannot list the artifacts ({type(e).__name__}: {mask_url(str(e))[:320]})"
        ) from None
    for rel in files:  # <label>/<name>/manifest.json
        parts = rel.split("/")
        if len(parts) == 3 and parts[2] == MANIFEST and parts[1].endswith(suffix):
            art_uri = f"{uri}/{parts[0]}/{parts[1]}"
            manifest = remote_manifest(art_uri)
            if manifest is not None and manifest.get("key") == key:
                leftovers = f"{CHECKPOINTS}/{parts[0]}/{parts[1]}/"
                if any(r.startswith(leftovers) for r in files):
                    drop_leftover_checkpoints(uri, parts[0], parts[1])
                return Artifact(_cache_path(art_uri), manifest, reused=True, uri=art_uri)
    return None


def local_model_path(ref: str | os.PathLike[str]) -> str:
    """A model reference usable on this node: an artifact URI (or its ``/model``) becomes the
    ``model/`` directory of its materialised copy; anything else is returned unchanged."""
    text = os.fspath(ref)
    if not is_artifact_uri(text):
        return text
    text = text.rstrip("/")
    if text.endswith("/" + MODEL_DIR):
        text = text[: -len(MODEL_DIR) - 1]
    return str(materialize_artifact(text) / MODEL_DIR)
