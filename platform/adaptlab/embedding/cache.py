"""Embeddings cached by content hash in one cache per machine or cluster, outside any results store.

The key of a cached matrix is ``sha256(model revision, kind, texts, encoder options, adaptlab
version)``: the same texts embedded by the same model revision with the same options (backend,
pooling and normalisation as the model's config and revision fix them, ``max_seq_length``,
instructions, the embedding backend and precision of :mod:`adaptlab.models.inference`, ...) by the same adaptlab version are never embedded twice, and any change to one of
them (a retrained model, another instruction, one edited text, a new adaptlab release whose
encoding code may differ) misses. Files are written to a hidden temporary name and published by
rename, so a killed run never leaves a half-written matrix under a valid key.

Where (:class:`EmbeddingCache`, :meth:`EmbeddingCache.resolve`): ``[embedding].cache`` of the
study (a folder, a URI, or ``"off"``), else ``$ADAPTLAB_EMBEDDING_CACHE`` (the same forms), else
the folder of adaptlab's local caches: ``$ADAPTLAB_CACHE``, else ``$XDG_CACHE_HOME/adaptlab``, else
``~/.cache/adaptlab`` (a local folder only: artifacts and other caches live there too). Dense vectors go to ``<root>/embeddings``,
ColBERT token vectors to ``<root>/tokens``; every study and every store on the machine shares them.
A URI (``s3://bucket/prefix``, any file system ``pyarrow.fs`` opens, credentials from the
environment) is shared by the nodes of a cluster without a shared POSIX mount. Arrays on ``s3://``
are read and written through :mod:`adaptlab.storage.objects` (boto3: bounded time-outs, an array over
one part goes up in parts and an upload that fails is aborted, so a reader never sees half an
array; pyarrow's S3 writer fails above 10 MiB on some servers); other schemes go through
``pyarrow.fs``; on object storage a write is atomic per object. Old stores' ``<store>/.cache/embeddings`` folders are no
longer read (they can be deleted).

Size bound and eviction: ``[embedding].cache_max_gib``, else ``$ADAPTLAB_CACHE_MAX_GIB``, else
:data:`DEFAULT_MAX_GIB` GiB over ``embeddings/`` and ``tokens/`` together. After every write the
least recently used files are deleted until the total is within the bound (a single array larger than the bound is
therefore not kept). "Used" is the file's
modification time, set when it is written and, on a local folder, touched on every read; on object
storage (no cheap way to touch an object) it is the time of the write. Concurrent writers are
safe: each publishes by rename (or one PUT), and a file that vanishes under a reader or an evictor
is a miss, never an error. Hidden temporary files older than an hour (a killed writer's) are
deleted too. A cache that cannot be read or written never fails the study: the matrix is computed
(and the write skipped, with one warning). ``adaptlab cache`` shows and clears it.

Tiny inputs do not pay for Ray: with ``use_ray=True`` a call with fewer than ``local_below``
texts (default :data:`LOCAL_BELOW`) is embedded in this process unless the model's warm actor
pool already exists (then the pool serves it, and the model is not loaded a second time). A
study whose every call is tiny never starts an embedding actor; the vectors are the same (the
same encoder runs in both places).
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import tempfile
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np

from adaptlab import _version
from adaptlab.embedding.pipeline import embed_texts
from adaptlab.errors import ConfigError, is_uri, mask_url
from adaptlab.models import model_revision
from adaptlab.models.base import TextKind
from adaptlab.models.inference import resolved_options
from adaptlab.storage.env import CACHE_ENV, cache_home, env_number
from adaptlab.storage.objects import RemoteDir, open_remote

if TYPE_CHECKING:
    from typing_extensions import Required

__all__ = [
    "CACHE_ENV",
    "DEFAULT_MAX_GIB",
    "EMBEDDING_CACHE_ENV",
    "LOCAL_BELOW",
    "MAX_GIB_ENV",
    "ArrayCache",
    "CacheFile",
    "CachedModel",
    "CachedModelArgs",
    "EmbeddingCache",
    "Embedder",
    "default_cache_root",
    "texts_hash",
]

_S3_SCHEMES = ("s3", "s3a")
_log = logging.getLogger(__name__)

LOCAL_BELOW = 512
"""Calls with fewer texts are embedded in-process when no pool is warm. Measured on 2 CPU cores with
minilm: starting one actor (worker process, torch import, model load) costs about as much as
embedding ~500 short texts, and below that a pool cannot win back its start-up."""

"""The local folder of adaptlab's caches (embeddings, tokens, artifacts, ...)."""
EMBEDDING_CACHE_ENV = "ADAPTLAB_EMBEDDING_CACHE"
"""The embedding cache alone: a folder, a URI shared by a cluster's nodes, or ``off``."""
MAX_GIB_ENV = "ADAPTLAB_CACHE_MAX_GIB"
"""The embedding cache's size bound in GiB when the study sets none."""
DEFAULT_MAX_GIB = 10.0
FOLDERS = ("embeddings", "tokens")
"""The cache's sub-folders: dense vectors and ColBERT token vectors; the bound covers both."""
_STALE_TMP_S = 3600.0
_GIB = 1024**3


def texts_hash(texts: list[str]) -> str:
    """SHA-256 over the texts, each followed by a NUL byte (so ``["ab"]`` != ``["a", "b"]``)."""
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()


def default_cache_root() -> Path:
    """The machine's cache folder (:func:`adaptlab.storage.env.cache_home`: ``$ADAPTLAB_CACHE``,
    else ``$XDG_CACHE_HOME/adaptlab``, else ``~/.cache/adaptlab``)."""
    return cache_home()


def _is_s3(root: Path | str) -> bool:
    return is_uri(root) and str(root).split("://", 1)[0].lower() in _S3_SCHEMES


def _join(root: Path | str, name: str) -> Path | str:
    return str(root).rstrip("/") + "/" + name if is_uri(root) else Path(root) / name


@dataclass(frozen=True)
class CacheFile:
    """One file of the cache: its path (or URI path), size in bytes and modification time."""

    path: str
    size: int
    mtime: float

    @property
    def is_temporary(self) -> bool:
        return os.path.basename(self.path).startswith(".")


@dataclass(frozen=True)
class EmbeddingCache:
    """The shared embedding cache: ``root`` (a local folder or a URI) holding ``embeddings/`` and
    ``tokens/``, bounded to ``max_bytes`` by least-recently-used eviction (module docstring)."""

    root: Path | str
    max_bytes: int = int(DEFAULT_MAX_GIB * _GIB)

    @classmethod
    def resolve(
        cls, root: str | Path = "", max_gib: float = 0.0, *, where: str = "[embedding]"
    ) -> EmbeddingCache | None:
        """The cache of the settings ``root`` (``""``: ``$ADAPTLAB_EMBEDDING_CACHE``, else
        :func:`default_cache_root`; ``"off"``: no cache, None) and ``max_gib`` (0:
        ``$ADAPTLAB_CACHE_MAX_GIB``, else :data:`DEFAULT_MAX_GIB`); ``where`` names the settings in
        errors."""
        text = str(root).strip() or os.environ.get(EMBEDDING_CACHE_ENV, "").strip()
        if text.lower() == "off":
            return None
        location: Path | str = text if is_uri(text) else (Path(text).expanduser() if text else default_cache_root())
        return cls(location, int(_max_gib(max_gib, where) * _GIB))

    def folder(self, name: str) -> ArrayCache:
        """The :class:`ArrayCache` of one sub-folder (``embeddings`` or ``tokens``), bounded with
        the others."""
        if name not in FOLDERS:
            raise ValueError(f"embedding cache folder {name!r}: expected one of {', '.join(FOLDERS)}")
        return ArrayCache(_join(self.root, name), owner=self)

    @property
    def where(self) -> str:
        """The root for messages, without any ``user:secret@`` part."""
        return mask_url(self.root)

    def files(self) -> list[CacheFile]:
        """Every file of ``embeddings/`` and ``tokens/`` (none when the folders do not exist)."""
        fs, base = _filesystem(self.root)
        return [f for name in FOLDERS for f in _list_files(fs, f"{base}/{name}")]

    def evict(self) -> tuple[int, int]:
        """Delete the least recently used files until the cache holds at most ``max_bytes`` (and
        stale temporary files); returns ``(files, bytes)`` deleted."""
        files = self.files()
        now = time.time()
        doomed = [f for f in files if f.is_temporary and now - f.mtime > _STALE_TMP_S]
        kept = sorted((f for f in files if not f.is_temporary), key=lambda f: (f.mtime, f.path))
        total = sum(f.size for f in kept)
        for f in kept:
            if total <= self.max_bytes:
                break
            doomed.append(f)
            total -= f.size
        return self._delete(doomed)

    def clear(self, older_than_s: float | None = None) -> tuple[int, int]:
        """Delete every file (or those not used for ``older_than_s`` seconds); ``(files, bytes)``."""
        cutoff = time.time() - older_than_s if older_than_s is not None else None
        return self._delete([f for f in self.files() if cutoff is None or f.mtime < cutoff])

    def _delete(self, doomed: list[CacheFile]) -> tuple[int, int]:
        fs, _ = _filesystem(self.root)
        n = size = 0
        for f in doomed:
            try:
                fs.delete_file(f.path)
            except FileNotFoundError:  # another process evicted it first
                continue
            n, size = n + 1, size + f.size
        if n:
            _log.debug("embedding cache %s: deleted %d files (%d bytes)", self.where, n, size)
        return n, size

    def summary(self) -> dict[str, Any]:
        """``root``, ``entries`` (cached arrays), ``bytes``, ``max_bytes`` and per-folder counts."""
        files = [f for f in self.files() if not f.is_temporary]
        per = {name: sum(1 for f in files if f"/{name}/" in f.path) for name in FOLDERS}
        return {
            "root": self.where,
            "entries": len(files),
            "bytes": sum(f.size for f in files),
            "max_bytes": self.max_bytes,
            "folders": per,
            "oldest": min((f.mtime for f in files), default=None),
            "newest": max((f.mtime for f in files), default=None),
        }


def _max_gib(value: float, where: str) -> float:
    """The size bound in GiB: ``value`` when > 0, else ``$ADAPTLAB_CACHE_MAX_GIB``, else the default."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or value != value:
        raise ConfigError(f"{where}.cache_max_gib: expected a number of GiB >= 0 (0: the default), got {value!r}")
    if value > 0:
        return float(value)
    return env_number(MAX_GIB_ENV, DEFAULT_MAX_GIB, unit="GiB")


def _filesystem(root: Path | str) -> tuple[Any, str]:
    """``(pyarrow file system, base path)`` of a local folder or a URI."""
    from pyarrow import fs as pafs  # deferred: only listing and eviction need it

    if not is_uri(root):
        return pafs.LocalFileSystem(), str(Path(root).absolute())
    uri = str(root)
    if uri.split("://", 1)[0].lower() in ("s3", "s3a") and "?" not in uri:
        uri += "?allow_delayed_open=true"  # a small object in one PUT (no multipart upload)
    fs, base = pafs.FileSystem.from_uri(uri)
    return fs, base.rstrip("/")


def _list_files(fs: Any, folder: str) -> list[CacheFile]:
    from pyarrow import fs as pafs

    infos = fs.get_file_info(pafs.FileSelector(folder, allow_not_found=True))
    return [
        CacheFile(i.path, int(i.size or 0), i.mtime.timestamp() if i.mtime is not None else 0.0)
        for i in infos
        if i.type == pafs.FileType.File
    ]


class CachedModelArgs(TypedDict, total=False):
    """The keyword arguments of :class:`CachedModel` (``options`` and ``batch_size`` required)."""

    options: Required[Mapping[str, Any]]
    batch_size: Required[int]
    use_ray: bool
    num_actors: int | None
    cache_dir: EmbeddingCache | Path | str | None
    local_below: int
    placement_timeout: float | None


class CachedModel:
    """What a model's embedder keeps (the dense :class:`Embedder` and the ColBERT
    :class:`~adaptlab.embedding.tokens.TokenEmbedder`): the resolved model ``ref``, its encoder
    ``options`` (part of the cache key), the batch size, the Ray settings and the rule of
    :meth:`wants_ray`, the cache and the model's content revision.

    ``cache_dir``: an :class:`EmbeddingCache` (its :attr:`cache_folder` sub-folder is used, bounded
    with the others), or a plain folder or URI (used as it is, unbounded), or None (no cache).
    ``placement_timeout``: the Ray pool's (:func:`~adaptlab.embedding.pool.placement_timeout`;
    None: ``$ADAPTLAB_POOL_PLACEMENT_TIMEOUT`` or 180 s)."""

    cache_folder = "embeddings"

    def __init__(
        self,
        ref: Any,
        *,
        options: Mapping[str, Any],
        batch_size: int,
        use_ray: bool,
        num_actors: int | None = None,
        cache_dir: EmbeddingCache | Path | str | None = None,
        local_below: int = LOCAL_BELOW,
        placement_timeout: float | None = None,
    ) -> None:
        self.ref = ref
        self.placement_timeout = placement_timeout  # of the Ray pool (embed_texts); not in the cache key
        self.options = resolved_options(options)  # "auto" as the backend it is here: keys name what computes
        self.batch_size = int(batch_size)
        self.use_ray = bool(use_ray)
        self.num_actors = num_actors
        self.cache_dir = cache_dir
        self._cache = (
            cache_dir.folder(self.cache_folder) if isinstance(cache_dir, EmbeddingCache) else ArrayCache.of(cache_dir)
        )  # a local folder or an s3://, gs://, az:// URI
        self.local_below = int(local_below)
        self.used_ray = False
        self.version = _version.__version__  # the adaptlab that computes the vectors: part of the key
        self.from_cache = 0  # texts the last call took from the cache
        self._revision: str | None = None

    @property
    def revision(self) -> str:
        """The model's content revision (hash of its weights and config), computed once."""
        if self._revision is None:
            self._revision = model_revision(self.ref)
        return self._revision

    @property
    def model_key(self) -> Any:
        """What identifies the model in a cache key: its revision, plus the options the reference
        itself carries (``hash:32`` is ``dim=32`` at the one revision ``hash-v1`` of every size)
        when it has any, so two sizes of one encoder never share vectors."""
        ref_options = dict(getattr(self.ref, "options", None) or {})
        return [self.revision, ref_options] if ref_options else self.revision

    def wants_ray(self, n: int) -> bool:
        """With ``use_ray``: a call of ``n`` texts goes to Ray once this embedder has used Ray, or
        from ``local_below`` texts on (0: always)."""
        return self.use_ray and (self.used_ray or n >= self.local_below)

    def _key(self, *parts: Any) -> str:
        """The content key of ``parts`` plus the adaptlab version (24 hex digits)."""
        payload = [*parts, {"adaptlab": self.version}]
        return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:24]

    def _note_cache(self, hits: int, n: int) -> None:
        """Remember and log (INFO) how many of ``n`` texts came from the cache."""
        self.from_cache = hits
        if self._cache is not None and n:
            _log.info("%s: %d of %d texts from cache %s", self.cache_folder, hits, n, mask_url(self._cache.root))


class Embedder(CachedModel):
    """``embed(texts, kind) -> float32 matrix`` for one model, through Ray or in-process,
    with an optional cache (``cache_dir``, see :class:`CachedModel`).

    ``ref`` is a resolved model (:func:`adaptlab.models.resolve_model`); ``options`` are the
    encoder options (backend, instructions, max_seq_length, ...), part of the cache key.
    ``local_below``: with ``use_ray``, calls with fewer texts run in-process until this
    embedder has used its Ray pool once (0: always Ray). Release the pools with
    :func:`adaptlab.embedding.release_pools` when the study is done.
    """

    def cache_key(self, texts: list[str], kind: str) -> str:
        """``sha256(model key, kind, texts, options, adaptlab version)``."""
        return self._key(self.model_key, kind, texts_hash(texts), self.options)

    def __call__(self, texts: list[str], kind: TextKind) -> np.ndarray:
        cache = self._cache
        name = f"{self.cache_key(texts, kind)}.npy" if cache is not None else None
        if cache is not None and name is not None:
            hit = cache.load(name)
            if hit is not None:
                self._note_cache(len(texts), len(texts))
                return hit
        use_ray = self.wants_ray(len(texts))
        self.used_ray = self.used_ray or use_ray
        out = embed_texts(
            texts,
            self.ref,
            kind=kind,
            batch_size=self.batch_size,
            num_actors=self.num_actors,
            options=self.options,
            use_ray=use_ray,
            progress=True,
            placement_timeout=self.placement_timeout,
        )
        out = np.ascontiguousarray(out, dtype=np.float32)
        self._note_cache(0, len(texts))
        if cache is not None and name is not None:
            cache.save(name, out)
        return out


class ArrayCache:
    """Matrices by name under a local directory or a URI (through ``pyarrow.fs``). With an
    ``owner`` (:class:`EmbeddingCache`), a local read touches the file and every write is followed
    by the owner's eviction."""

    def __init__(self, root: Path | str, *, owner: EmbeddingCache | None = None) -> None:
        self.root = root
        self.owner = owner
        self._fs: Any = None
        self._base = ""
        self._objects: RemoteDir | None = None
        self._warned = False

    @classmethod
    def of(cls, root: Path | str | None) -> ArrayCache | None:
        return None if root is None else cls(root)

    @property
    def is_uri(self) -> bool:
        return is_uri(self.root)

    def _remote(self) -> tuple[Any, str]:
        if self._fs is None:
            self._fs, self._base = _filesystem(self.root)
        return self._fs, self._base

    def _s3(self) -> RemoteDir:
        """The ``s3://`` folder through :mod:`adaptlab.storage.objects` (opened once)."""
        if self._objects is None:
            self._objects = open_remote(str(self.root))
        return self._objects

    def load(self, name: str) -> np.ndarray | None:
        try:
            return self._load_local(Path(self.root) / name) if not self.is_uri else self._load_remote(name)
        except FileNotFoundError:  # evicted (or never written) between the look and the read
            return None
        except Exception as e:  # noqa: BLE001 - a cache miss, never a failure
            self._warn("read", e)
            return None

    def _load_local(self, path: Path) -> np.ndarray | None:
        if not path.exists():
            return None
        with open(path, "rb") as f:  # an open file survives a concurrent eviction
            out = np.load(f)
        if self.owner is not None:
            os.utime(path)  # used now: least recently used goes first
        return out

    def _load_remote(self, name: str) -> np.ndarray | None:
        if _is_s3(self.root):
            raw = self._s3().read_bytes(name)
            return None if raw is None else np.load(io.BytesIO(raw))
        fs, base = self._remote()
        from pyarrow import fs as pafs

        if fs.get_file_info(f"{base}/{name}").type == pafs.FileType.NotFound:
            return None
        with fs.open_input_stream(f"{base}/{name}") as f:
            return np.load(io.BytesIO(f.read()))

    def save(self, name: str, array: np.ndarray) -> None:
        try:
            if not self.is_uri:
                _save_atomic(Path(self.root) / name, array)
            else:
                self._save_remote(name, array)
            if self.owner is not None:
                self.owner.evict()
        except Exception as e:  # noqa: BLE001 - the study goes on without the cache
            self._warn("write", e)

    def _save_remote(self, name: str, array: np.ndarray) -> None:
        if _is_s3(self.root):  # through a local file: in parts above one part, never all in memory twice
            with tempfile.TemporaryDirectory(prefix="adaptlab-cache-") as tmp:
                local = Path(tmp) / name
                with open(local, "wb") as f:
                    np.save(f, array)
                self._s3().upload(name, local)
            return
        fs, base = self._remote()
        buf = io.BytesIO()
        np.save(buf, array)
        if fs.type_name == "local":  # object stores have no folders to create
            fs.create_dir(base, recursive=True)
        with fs.open_output_stream(f"{base}/{name}") as f:  # one PUT on object storage
            f.write(buf.getvalue())

    def _warn(self, what: str, e: Exception) -> None:
        if not self._warned:
            self._warned = True
            _log.warning(
                "embedding cache %s: cannot %s (%s); going on without it", mask_url(self.root), what, type(e).__name__
            )


def _save_atomic(path: Path, array: np.ndarray) -> None:
    """Write to a hidden temporary file in the same folder, then rename over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "wb") as f:
            np.save(f, array)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
