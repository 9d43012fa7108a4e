"""Token-level embeddings of a late-interaction model (ColBERT), cached on disk by content hash.

The twin of :class:`adaptlab.embedding.cache.Embedder` for ``interaction = "late"`` encoders:
``TokenEmbedder(texts, kind)`` returns :class:`~adaptlab.models.colbert.TokenVectors` (one unit
vector per token, packed with offsets) instead of one vector per text. The cache key is
``sha256("tokens", model revision, kind, texts, encoder options)``, so a re-run of a study does not
re-encode, and a retrained checkpoint, another ``doc_maxlen`` or one edited text misses. The cache
(:class:`~adaptlab.embedding.cache.ArrayCache`: a local folder, published by rename, or an
``s3://``/``gs://``/``az://`` URI) holds ``<key>.tokens.vectors.npy`` and, written last,
``<key>.tokens.offsets.npy``; a reader takes the vectors only when the offsets are there.

Where it encodes: the rule of the dense ``Embedder``. With ``use_ray=True``, a call of at least
``local_below`` texts (default :data:`~adaptlab.embedding.cache.LOCAL_BELOW`, 512), and every call
once this embedder has used Ray or while a warm pool of this model exists, runs on the model's warm
actor pool (:mod:`adaptlab.embedding.pool`: one GPU per actor when the cluster has GPUs, CPU
actors otherwise; blocks only to ready actors, a lost node's blocks requeued to the live ones,
every wait bounded and a one-line ``ClusterCapacityError`` when no actor is ready for the placement
time-out; a progress bar or lines). The texts
go in blocks by decreasing length (:func:`~adaptlab.embedding.pipeline.length_blocks`); each actor
returns its block's packed ``[T, dim]`` vectors and per-row lengths (token mode of
:class:`~adaptlab.embedding.actor.EmbedBatch`), and the driver writes the rows back in input order
into one ``TokenVectors`` (every row exactly once, else an error). Smaller calls, and
``use_ray=False``, encode in this process with the encoder loaded once per ``TokenEmbedder`` (a GPU
there is used when torch sees one; ``loading NAME (N s)`` lines while the load outlasts the progress
interval). :attr:`TokenEmbedder.last_run` says where the last encoding ran.

Pool versus in-process: the same rows and token counts (tokenisation is per text), vectors equal
within a tolerance, not bit for bit. colbert-ai pads a call's documents to the longest of the call
and batches them by token length, so a document's batch neighbours and padded length differ between
one in-process call and an actor's block; padded positions are masked out (they add exactly nothing
in exact arithmetic) but the float32 products run with other shapes and summation orders. Measured
on 2 CPU cores, 512 short documents, 2 actors: at most 1.8e-7 (tiny 2-layer BERT) and 3.5e-7
(the 6-layer MiniLM as an untrained ColBERT, dim 128) per component of the unit vectors, 95% and 67%
of components bit-equal; queries (always padded to ``query_maxlen``) came out bit-identical.
``tests/embedding/test_token_pool.py`` allows ``atol = 1e-5`` (~30x the measured worst case; with
unit vectors each ``<q_i, d_j>`` then moves by at most ``2 sqrt(dim) 1e-5``, a MaxSim over ``m``
query tokens by ``m`` times that). On a GPU colbert-ai encodes under fp16 autocast, where the same
effect is of fp16 size (~1e-3; not measured here).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from adaptlab.embedding.actor import EncoderFactory
from adaptlab.embedding.cache import CachedModel, CachedModelArgs, texts_hash
from adaptlab.embedding.pipeline import check_row_coverage, length_blocks, pool_placement
from adaptlab.embedding.pool import DEFAULT_MAX_RESTARTS, get_pool, has_pool
from adaptlab.embedding.settings import EmbedOptions, EmbedSettings
from adaptlab.errors import ConfigError
from adaptlab.models import EncoderSpec, resolve_model
from adaptlab.models.base import TextKind
from adaptlab.models.variants import COLBERT_BACKEND
from adaptlab.options import settings_from
from adaptlab.runtime import init_ray
from adaptlab.runtime.progress import Heartbeat, Progress

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["TokenEmbedder", "TokenRun", "assemble_tokens", "embed_tokens_ray"]


@dataclass(frozen=True)
class TokenRun:
    """Token vectors plus where they were computed (the twin of
    :class:`~adaptlab.embedding.pipeline.EmbeddingRun`).

    Attributes:
        tokens: :class:`~adaptlab.models.colbert.TokenVectors`, text ``i`` owns ``tokens[i]``.
        pid: int64 ``[n]``, process id of the worker that encoded each text.
        cuda_visible_devices: object ``[n]``, that worker's ``CUDA_VISIBLE_DEVICES``.
        engine: ``"ray"`` or ``"local"``.
        num_actors: actors in the pool (1 for local).
        block_size: texts per actor call (``n`` for local).
        seconds: wall time of the encoding (excluding Ray start-up).
    """

    tokens: Any
    pid: np.ndarray
    cuda_visible_devices: np.ndarray
    engine: str
    num_actors: int
    block_size: int
    seconds: float


def _check_batch(n: int, ids: np.ndarray, lengths: np.ndarray, vectors: np.ndarray, dim: int | None) -> None:
    if ids.min() < 0 or ids.max() >= n:
        raise RuntimeError(f"token embedding returned row ids outside [0, {n})")
    if (
        lengths.shape != ids.shape
        or vectors.ndim != 2
        or np.any(lengths < 0)
        or int(lengths.sum()) != vectors.shape[0]
        or (dim is not None and vectors.shape[1] != dim)
    ):
        raise RuntimeError(
            f"token embedding returned a batch that does not pack: {ids.size} rows, lengths "
            f"summing to {int(lengths.sum())}, vectors {vectors.shape}"
        )


def assemble_tokens(n: int, batches: Iterable[dict[str, np.ndarray]]) -> tuple[Any, np.ndarray, np.ndarray]:
    """``(TokenVectors, pid, cuda_visible_devices)`` of ``n`` texts from actor batches
    ``{"row_id", "vectors", "lengths", "pid", "cuda_visible_devices"}`` in any order.

    Row ``i`` gets ``offsets[i] = sum(lengths[:i])`` in input order; a batch's vector ``k``, inside
    its row ``j`` (batch-local start ``s_j``), goes to ``offsets[row_id[j]] + k - s_j``: one scatter
    per batch. Every row id must come back exactly once, else ``RuntimeError``."""
    from adaptlab.models.colbert import TokenVectors  # deferred: keeps this package import light

    lengths, seen = np.zeros(n, np.int64), np.zeros(n, np.int64)
    pid, cvd = np.zeros(n, np.int64), np.full(n, "", dtype=object)
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    dim: int | None = None
    for batch in batches:
        ids = np.asarray(batch["row_id"], dtype=np.int64)
        if ids.size == 0:
            continue
        lens = np.asarray(batch["lengths"], dtype=np.int64)
        vecs = np.asarray(batch["vectors"], dtype=np.float32)
        _check_batch(n, ids, lens, vecs, dim)
        dim = int(vecs.shape[1])
        lengths[ids], pid[ids], cvd[ids] = lens, batch["pid"], batch["cuda_visible_devices"]
        np.add.at(seen, ids, 1)
        parts.append((ids, lens, vecs))
    if n and dim is None:
        raise RuntimeError("token embedding returned no rows")
    check_row_coverage(seen)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    out = np.empty((int(offsets[-1]), dim or 0), np.float32)
    for ids, lens, vecs in parts:
        starts = np.cumsum(lens) - lens
        out[np.arange(vecs.shape[0]) + np.repeat(offsets[ids] - starts, lens)] = vecs
    return TokenVectors(out, offsets), pid, cvd


def _short_name(ref: Any) -> str:
    """The model's short name in progress lines: the last path component of its name, at most 40
    characters ("" without a reference)."""
    return (getattr(ref, "name", None) or str(ref or "")).rsplit("/", 1)[-1][:40]


def _label(factory: EncoderFactory, kind: str, n: int) -> str:
    name = _short_name(getattr(factory, "ref", None))
    return f"token-embedding {n} {'queries' if kind == 'query' else kind + 's'}" + (f" with {name}" if name else "")


def embed_tokens_ray(
    texts: list[str],
    factory: EncoderFactory,
    *,
    kind: TextKind,
    config: EmbedSettings | None = None,
    **options: Unpack[EmbedOptions],
) -> TokenRun:
    """Token vectors of ``texts`` on the warm pool of ``factory`` (placement, blocks, node-loss
    handling and ``placement_timeout`` as :func:`~adaptlab.embedding.pipeline.embed_texts`), rows in
    input order. Of the :class:`~adaptlab.embedding.settings.EmbedSettings` (``config`` and the
    keyword options), the pool's use ``batch_size``, ``num_actors``, ``device``, ``progress``,
    ``max_restarts`` (``None``: 3) and ``placement_timeout``; blocks are always cut by length."""
    settings = settings_from(EmbedSettings, config, options, "embed_tokens_ray")
    batch_size, progress = settings.batch_size, settings.progress
    max_restarts = DEFAULT_MAX_RESTARTS if settings.max_restarts is None else settings.max_restarts
    init_ray()
    n = len(texts)
    placement, bs = pool_placement(
        n,
        batch_size=batch_size,
        num_actors=settings.num_actors or None,
        block_size=None,
        torch_threads=None,
        device=settings.device,
    )
    pool = get_pool(factory, placement)
    blocks = length_blocks(texts, bs)
    t0 = time.perf_counter()
    bar = Progress(n, _label(factory, kind, n), enabled=None if progress else False)
    try:
        tokens, pid, cvd = assemble_tokens(
            n,
            pool.run(
                blocks,
                kind=kind,
                batch_size=batch_size,
                max_restarts=max_restarts,
                progress=bar,
                tokens=True,
                timeout=settings.placement_timeout,
            ),
        )
    finally:
        bar.close()
    return TokenRun(
        tokens, pid, cvd, engine="ray", num_actors=placement.num_actors, block_size=bs, seconds=time.perf_counter() - t0
    )


class TokenEmbedder(CachedModel):
    """``embed(texts, kind) -> TokenVectors`` for one late-interaction model, in-process or on the
    model's warm Ray actor pool (module docstring), with an optional on-disk cache under ``cache_dir``.

    ``ref`` is a resolved model (:func:`adaptlab.models.resolve_model`); ``options`` are the
    encoder options (``backend``, ``doc_maxlen``, ``query_maxlen``, ``from_bert``, ...), part of
    the cache key. ``use_ray``, ``num_actors`` and ``local_below`` as for
    :class:`~adaptlab.embedding.cache.Embedder`: with ``use_ray``, calls with fewer than
    ``local_below`` texts stay in-process until this embedder has used Ray, or while no pool of
    this model is warm (0: always Ray). Release the pools with
    :func:`adaptlab.embedding.release_pools` when the study is done.
    """

    interaction = "late"
    cache_folder = "tokens"  # in a shared EmbeddingCache, beside the dense "embeddings"

    def __init__(self, ref: Any, *, device: str | None = None, **model: Unpack[CachedModelArgs]) -> None:
        """``device``: of the in-process encoder and of the pool's actors; ``model``: the
        keyword arguments of :class:`~adaptlab.embedding.cache.CachedModel` (``options`` and
        ``batch_size`` required)."""
        model.setdefault("use_ray", False)
        super().__init__(ref, **model)
        self.device = device
        self.last_run: TokenRun | None = None  # where the last encoding ran (None after a cache hit)
        self._encoder: Any = None
        self._factory: EncoderSpec | None = None

    def _encoder_options(self) -> tuple[str, dict[str, Any]]:
        """The backend (default ``colbert``) and the other options, as the encoder loads them."""
        return self.options.get("backend") or COLBERT_BACKEND, {k: v for k, v in self.options.items() if k != "backend"}

    @property
    def encoder(self) -> Any:
        """The loaded :class:`~adaptlab.models.colbert.ColBERTEncoder` (loaded on first use, under a
        :class:`~adaptlab.runtime.progress.Heartbeat`: ``loading NAME (N s)`` lines while the load
        runs past the progress interval, as for the dense encoders)."""
        if self._encoder is None:
            from adaptlab.models.load import load_encoder

            backend, opts = self._encoder_options()
            name = _short_name(self.ref)
            with Heartbeat(f"loading {name}" if name else "loading the encoder"):
                self._encoder = load_encoder(self.ref, backend=backend, device=self.device, **opts)
        return self._encoder

    @property
    def factory(self) -> EncoderSpec:
        """The picklable recipe the pool's actors load (the same encoder as :attr:`encoder`)."""
        if self._factory is None:
            backend, opts = self._encoder_options()
            self._factory = EncoderSpec(resolve_model(self.ref), backend=backend, options=opts)
        return self._factory

    def cache_key(self, texts: list[str], kind: str) -> str:
        """``sha256("tokens", revision, kind, texts, encoder options, adaptlab version)``; the search options
        (``search``, ``nbits``: :data:`~adaptlab.models.colbert.RETRIEVAL_OPTIONS`) do not change
        a token vector and are left out, so switching exact/PLAID search re-encodes nothing."""
        from adaptlab.models.colbert import RETRIEVAL_OPTIONS  # light: no torch or colbert import

        options = {k: v for k, v in self.options.items() if k not in RETRIEVAL_OPTIONS}
        return self._key("tokens", self.model_key, kind, texts_hash(texts), options)  # + the adaptlab version

    def on_ray(self, n: int) -> bool:
        """Whether a call of ``n`` texts goes to the actor pool (the module docstring's rule)."""
        if not self.use_ray or n == 0:
            return False
        return self.wants_ray(n) or has_pool(self.factory)

    def encode(self, texts: list[str], kind: str) -> TokenRun:
        """Encode (no cache) where :meth:`on_ray` says; the result in input order."""
        if kind not in ("query", "document"):
            raise ConfigError(f"kind must be 'query' or 'document', got {kind!r}")
        if self.on_ray(len(texts)):
            self.used_ray = True
            return embed_tokens_ray(
                texts,
                self.factory,
                kind=cast(TextKind, kind),
                batch_size=self.batch_size,
                num_actors=self.num_actors,
                device=self.device,
                placement_timeout=self.placement_timeout,
            )
        t0 = time.perf_counter()
        out = self.encoder.encode_tokens(texts, kind=kind, batch_size=self.batch_size)
        n = len(texts)
        return TokenRun(
            out,
            np.full(n, os.getpid(), dtype=np.int64),
            np.full(n, os.environ.get("CUDA_VISIBLE_DEVICES", ""), dtype=object),
            engine="local",
            num_actors=1,
            block_size=n,
            seconds=time.perf_counter() - t0,
        )

    def __call__(self, texts: list[str], kind: str) -> Any:
        from adaptlab.models.colbert import TokenVectors  # deferred: keeps this package import light

        key = self.cache_key(texts, kind)
        self.last_run = None
        if self._cache is not None:
            # offsets are written last and read first: offsets present means vectors complete
            offsets = self._cache.load(f"{key}.tokens.offsets.npy")
            vectors = self._cache.load(f"{key}.tokens.vectors.npy") if offsets is not None else None
            if vectors is not None and offsets is not None:
                self._note_cache(len(texts), len(texts))
                return TokenVectors(vectors, offsets)
        self.last_run = self.encode(texts, kind)
        out = self.last_run.tokens
        self._note_cache(0, len(texts))
        if self._cache is not None:
            self._cache.save(f"{key}.tokens.vectors.npy", out.vectors)
            self._cache.save(f"{key}.tokens.offsets.npy", out.offsets)
        return out
