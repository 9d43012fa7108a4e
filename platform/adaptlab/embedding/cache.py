"""Embeddings cached on disk by content hash, so a re-run of a study resumes.

The key of a cached matrix is ``sha256(model revision, kind, texts, encoder options)``: the same
texts embedded by the same model revision with the same options are never embedded twice, and
any change to one of them (a retrained model, another instruction, one edited text) misses.
Files are written to a temporary name and published by rename, so a killed run never leaves a
half-written matrix under a valid key.

``cache_dir`` is a local directory or a URI (``s3://bucket/prefix/.cache/embeddings``, any
file system ``pyarrow.fs`` opens, credentials from the environment), so the workers of a
multi-node cluster share the cache without a shared POSIX mount. On object storage a write is
one PUT (atomic per object). A cache that cannot be read or written never fails the study: the
matrix is computed (and the write skipped, with one warning).

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
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from adaptlab.embedding.pipeline import embed_texts
from adaptlab.models import model_revision

__all__ = ["CachedModel", "LOCAL_BELOW", "ArrayCache", "Embedder", "texts_hash"]

_URI_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_log = logging.getLogger(__name__)

LOCAL_BELOW = 512
"""Calls with fewer texts are embedded in-process when no pool is warm. Measured on 2 CPU cores with
minilm: starting one actor (worker process, torch import, model load) costs about as much as
embedding ~500 short texts, and below that a pool cannot win back its start-up."""


def texts_hash(texts: list[str]) -> str:
    """SHA-256 over the texts, each followed by a NUL byte (so ``["ab"]`` != ``["a", "b"]``)."""
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()


class CachedModel:
    """What a model's embedder keeps (the dense :class:`Embedder` and the ColBERT
    :class:`~adaptlab.embedding.tokens.TokenEmbedder`): the resolved model ``ref``, its encoder
    ``options`` (part of the cache key), the batch size, the Ray settings and the rule of
    :meth:`wants_ray`, the cache under ``cache_dir`` and the model's content revision."""

    def __init__(
        self,
        ref: Any,
        *,
        options: Mapping[str, Any],
        batch_size: int,
        use_ray: bool,
        num_actors: int | None = None,
        cache_dir: Path | str | None = None,
        local_below: int = LOCAL_BELOW,
    ) -> None:
        self.ref = ref
        self.options = dict(options)
        self.batch_size = int(batch_size)
        self.use_ray = bool(use_ray)
        self.num_actors = num_actors
        self.cache_dir = cache_dir
        self._cache = ArrayCache.of(cache_dir)  # a local folder or an s3://, gs://, az:// URI
        self.local_below = int(local_below)
        self.used_ray = False
        self._revision: str | None = None

    @property
    def revision(self) -> str:
        """The model's content revision (hash of its weights and config), computed once."""
        if self._revision is None:
            self._revision = model_revision(self.ref)
        return self._revision

    def wants_ray(self, n: int) -> bool:
        """With ``use_ray``: a call of ``n`` texts goes to Ray once this embedder has used Ray, or
        from ``local_below`` texts on (0: always)."""
        return self.use_ray and (self.used_ray or n >= self.local_below)


class Embedder(CachedModel):
    """``embed(texts, kind) -> float32 matrix`` for one model, through Ray or in-process,
    with an optional on-disk cache under ``cache_dir``.

    ``ref`` is a resolved model (:func:`adaptlab.models.resolve_model`); ``options`` are the
    encoder options (backend, instructions, max_seq_length, ...), part of the cache key.
    ``local_below``: with ``use_ray``, calls with fewer texts run in-process until this
    embedder has used its Ray pool once (0: always Ray). Release the pools with
    :func:`adaptlab.embedding.release_pools` when the study is done.
    """

    def cache_key(self, texts: list[str], kind: str) -> str:
        payload = [self.revision, kind, texts_hash(texts), self.options]
        return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:24]

    def __call__(self, texts: list[str], kind: str) -> np.ndarray:
        name = f"{self.cache_key(texts, kind)}.npy" if self._cache is not None else None
        if name is not None:
            hit = self._cache.load(name)
            if hit is not None:
                return hit
        use_ray = self.wants_ray(len(texts))
        self.used_ray = self.used_ray or use_ray
        out = embed_texts(texts, self.ref, kind=kind, batch_size=self.batch_size, num_actors=self.num_actors,
                          options=self.options, use_ray=use_ray, progress=True)
        out = np.ascontiguousarray(out, dtype=np.float32)
        if name is not None:
            self._cache.save(name, out)
        return out


class ArrayCache:
    """Matrices by name under a local directory or a URI (through ``pyarrow.fs``)."""

    def __init__(self, root: Path | str) -> None:
        self.root = root
        self._fs: Any = None
        self._base = ""
        self._warned = False

    @classmethod
    def of(cls, root: Path | str | None) -> ArrayCache | None:
        return None if root is None else cls(root)

    @property
    def is_uri(self) -> bool:
        return isinstance(self.root, str) and _URI_RE.match(self.root) is not None

    def _remote(self) -> tuple[Any, str]:
        if self._fs is None:
            from pyarrow import fs as pafs  # deferred: only a cache on a URI needs it

            uri = str(self.root)
            if uri.split("://", 1)[0].lower() in ("s3", "s3a") and "?" not in uri:
                # a small object in one PUT (no multipart upload), as the store's own writes
                uri += "?allow_delayed_open=true"
            self._fs, self._base = pafs.FileSystem.from_uri(uri)
        return self._fs, self._base.rstrip("/")

    def load(self, name: str) -> np.ndarray | None:
        try:
            if not self.is_uri:
                path = Path(self.root) / name
                return np.load(path) if path.exists() else None
            fs, base = self._remote()
            from pyarrow import fs as pafs

            if fs.get_file_info(f"{base}/{name}").type == pafs.FileType.NotFound:
                return None
            with fs.open_input_stream(f"{base}/{name}") as f:
                return np.load(io.BytesIO(f.read()))
        except Exception as e:  # noqa: BLE001 - a cache miss, never a failure
            self._warn("read", e)
            return None

    def save(self, name: str, array: np.ndarray) -> None:
        try:
            if not self.is_uri:
                _save_atomic(Path(self.root) / name, array)
                return
            fs, base = self._remote()
            buf = io.BytesIO()
            np.save(buf, array)
            if fs.type_name == "local":  # object stores have no folders to create
                fs.create_dir(base, recursive=True)
            with fs.open_output_stream(f"{base}/{name}") as f:  # one PUT on object storage
                f.write(buf.getvalue())
        except Exception as e:  # noqa: BLE001 - the study goes on without the cache
            self._warn("write", e)

    def _warn(self, what: str, e: Exception) -> None:
        if not self._warned:
            self._warned = True
            _log.warning("embedding cache %s: cannot %s (%s); going on without it", _where(self.root), what,
                         type(e).__name__)


def _where(root: Path | str) -> str:
    """The cache location for messages, without any ``user:secret@`` part."""
    return re.sub(r"//[^/@]*@", "//", str(root))


def _save_atomic(path: Path, array: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{np.random.default_rng().integers(1 << 30)}.npy")
    np.save(tmp, array)
    tmp.replace(path)
