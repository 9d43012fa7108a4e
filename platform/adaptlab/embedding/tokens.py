"""Token-level embeddings of a late-interaction model (ColBERT), cached on disk by content hash.

The twin of :class:`adaptlab.embedding.cache.Embedder` for ``interaction = "late"`` encoders:
``TokenEmbedder(texts, kind)`` returns :class:`~adaptlab.models.colbert.TokenVectors` (one unit
vector per token, packed with offsets) instead of one vector per text. The cache key is
``sha256("tokens", model revision, kind, texts, encoder options)``, so a re-run of a study does not
re-encode, and a retrained checkpoint, another ``doc_maxlen`` or one edited text misses. The cache
(:class:`~adaptlab.embedding.cache.ArrayCache`: a local folder, published by rename, or an
``s3://``/``gs://``/``az://`` URI) holds ``<key>.tokens.vectors.npy`` and, written last,
``<key>.tokens.offsets.npy``; a reader takes the vectors only when the offsets are there.

Limit (documented, deliberate): encoding runs **in this process**, not on the Ray actor pool of
:mod:`adaptlab.embedding.pool`, whose actors return one vector per text. The encoder is loaded once
per ``TokenEmbedder`` (one per system of a study) and reused for documents and queries of every
dataset. On 2 CPU cores a MiniLM-sized ColBERT encodes about 200 short documents in ~10 s, so the
corpora of the scale study (hundreds of chunks) take seconds to a minute; a GPU in the driver
process is used when torch sees one. Large corpora on a cluster should encode through a Ray task
per shard (future work: a token-vector actor in ``embedding/actor.py``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any


from adaptlab.embedding.cache import ArrayCache, texts_hash
from adaptlab.models import model_revision

__all__ = ["TokenEmbedder"]


class TokenEmbedder:
    """``embed(texts, kind) -> TokenVectors`` for one late-interaction model, with an optional
    on-disk cache under ``cache_dir`` (see the module docstring for the in-process limit).

    ``ref`` is a resolved model (:func:`adaptlab.models.resolve_model`); ``options`` are the
    encoder options (``backend``, ``doc_maxlen``, ``query_maxlen``, ``from_bert``, ...), part of
    the cache key. ``use_ray`` and ``num_actors`` are accepted for symmetry with
    :class:`~adaptlab.embedding.cache.Embedder` and recorded, but encoding is in-process.
    """

    interaction = "late"

    def __init__(
        self,
        ref: Any,
        *,
        options: Mapping[str, Any],
        batch_size: int,
        use_ray: bool = False,
        num_actors: int | None = None,
        cache_dir: Path | str | None = None,
        device: str | None = None,
    ) -> None:
        self.ref = ref
        self.options = dict(options)
        self.batch_size = int(batch_size)
        self.use_ray = bool(use_ray)
        self.num_actors = num_actors
        self.cache_dir = cache_dir
        self._cache = ArrayCache.of(cache_dir)  # a local folder or an s3://, gs://, az:// URI
        self.device = device
        self._encoder: Any = None
        self._revision: str | None = None

    @property
    def encoder(self) -> Any:
        """The loaded :class:`~adaptlab.models.colbert.ColBERTEncoder` (loaded on first use)."""
        if self._encoder is None:
            from adaptlab.models.load import load_encoder

            opts = {k: v for k, v in self.options.items() if k != "backend"}
            self._encoder = load_encoder(self.ref, backend=self.options.get("backend") or "colbert",
                                         device=self.device, **opts)
        return self._encoder

    @property
    def revision(self) -> str:
        """The model's content revision (hash of its weights), computed once."""
        if self._revision is None:
            self._revision = model_revision(self.ref)
        return self._revision

    def cache_key(self, texts: list[str], kind: str) -> str:
        payload = ["tokens", self.revision, kind, texts_hash(texts), self.options]
        return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:24]

    def __call__(self, texts: list[str], kind: str) -> Any:
        from adaptlab.models.colbert import TokenVectors

        key = self.cache_key(texts, kind)
        if self._cache is not None:
            # offsets are written last and read first: offsets present means vectors complete
            offsets = self._cache.load(f"{key}.tokens.offsets.npy")
            vectors = self._cache.load(f"{key}.tokens.vectors.npy") if offsets is not None else None
            if vectors is not None:
                return TokenVectors(vectors, offsets)
        out = self.encoder.encode_tokens(texts, kind=kind, batch_size=self.batch_size)
        if self._cache is not None:
            self._cache.save(f"{key}.tokens.vectors.npy", out.vectors)
            self._cache.save(f"{key}.tokens.offsets.npy", out.offsets)
        return out
