"""Embedding many texts on a warm Ray actor pool, one model per actor.

``embed_texts(texts, "minilm")`` returns float32 ``[n, d]`` L2-normalised embeddings in the
order of ``texts``. With ``use_ray=True`` (the default):

1. each text gets an integer row id (its input position); the texts are ordered by
   decreasing length (characters, a proxy for tokens) so that a batch holds texts of similar
   length (less padding, as ``SentenceTransformer.encode`` does within one call) and the
   longest blocks start first (less idle time at the end);
2. they are cut into blocks of ``block_size`` rows (one block = one actor call, see
   :func:`plan_blocks`);
3. the blocks go to the warm actor pool of this model and placement
   (:mod:`adaptlab.embedding.pool`): created on the first call, then reused by every later call
   with the same model -- documents and queries, one dataset after another -- until
   :func:`~adaptlab.embedding.pool.release_pools`. Each actor asks for one GPU when the cluster
   has GPUs, and for CPU slots otherwise (with ``torch_threads`` intra-op threads each). The
   pool is sized from the cluster's resources at every call (it shrinks after a node loss and
   grows when nodes return); blocks go only to actors that are ready. An actor that dies is
   replaced and its blocks go to the ready actors (crashes at most ``max_restarts`` times per
   call, default 3; losses with a node unbounded); when no actor is ready for
   ``placement_timeout`` seconds (default 180, ``ADAPTLAB_POOL_PLACEMENT_TIMEOUT``) the call
   raises :class:`~adaptlab.embedding.pool.ClusterCapacityError` and returns nothing;
4. the output blocks are written into the result by row id; every row id must appear
   exactly once (a missing or duplicated row raises), so the result is in input order.

``use_ray=False`` loads the encoder in this process (cached for the next call with the same
model) and encodes directly: for tiny inputs and tests. A load that takes longer than the progress
interval prints ``[adaptlab] loading MODEL (N s)`` lines meanwhile
(:class:`~adaptlab.runtime.progress.Heartbeat`), so the progress promise holds from the start.

Steps 1-3 (:func:`pool_placement`, :func:`length_blocks`, the same warm pools) also carry the
token vectors of late-interaction models (:mod:`adaptlab.embedding.tokens`); only the assembly of
step 4 differs there (variable-length rows, checked by the same :func:`check_row_coverage`).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from adaptlab.embedding.actor import EncoderFactory
from adaptlab.embedding.pool import DEFAULT_MAX_RESTARTS, PoolPlacement, get_pool
from adaptlab.embedding.pool import placement_timeout as check_placement_timeout
from adaptlab.embedding.settings import EmbedOptions, EmbedSettings
from adaptlab.errors import ConfigError
from adaptlab.models.base import Encoder, TextKind, check_texts
from adaptlab.models.load import EncoderSpec
from adaptlab.models.resolve import ModelRef, resolve_model
from adaptlab.options import settings_from
from adaptlab.runtime import available_cores, cluster_has_gpus, init_ray, largest_node_cpus, ray_info
from adaptlab.runtime.progress import Heartbeat, Progress

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "EmbeddingRun",
    "check_row_coverage",
    "checked_settings",
    "embed_texts",
    "embed_texts_detailed",
    "length_blocks",
    "plan_blocks",
    "pool_placement",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EmbeddingRun:
    """Embeddings plus where they were computed.

    Attributes:
        embeddings: float32 ``[n, d]``, row ``i`` embeds ``texts[i]``.
        pid: int64 ``[n]``, process id of the worker that embedded each row.
        cuda_visible_devices: object ``[n]``, that worker's ``CUDA_VISIBLE_DEVICES``.
        engine: ``"ray"`` or ``"local"``.
        num_actors: actors in the pool (1 for local).
        block_size: rows per actor call.
        seconds: wall time of the embedding (excluding Ray start-up).
    """

    embeddings: np.ndarray
    pid: np.ndarray
    cuda_visible_devices: np.ndarray
    engine: str
    num_actors: int
    block_size: int
    seconds: float


def _as_factory(model_ref: Any, backend: str, options: Mapping[str, Any] | None) -> EncoderFactory:
    if isinstance(model_ref, (str, ModelRef)):
        return EncoderSpec(model_ref, backend=backend, options=dict(options or {}))
    if isinstance(model_ref, EncoderSpec):
        if options:
            return EncoderSpec(model_ref.ref, model_ref.backend, {**model_ref.options, **options})
        return model_ref
    if callable(model_ref):
        if options:
            raise ConfigError("options cannot be combined with an encoder factory; put them into the factory")
        return model_ref
    raise ConfigError(
        f"model_ref must be an alias, path or hub id (str), a ModelRef, an EncoderSpec or a "
        f"factory(device) -> Encoder; got {type(model_ref).__name__}"
    )


def _check_int(name: str, value: Any, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ConfigError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def plan_blocks(n: int, *, num_actors: int, batch_size: int, block_size: int | None = None) -> int:
    """Rows per actor call: given, or ~n / (8 * actors) rounded to a multiple of
    ``batch_size`` and clipped to ``[batch_size, 8 * batch_size]``.

    At least eight calls per actor keep the pool balanced when text lengths vary (the last
    call of one actor waits for at most one block of the other), while a block of several
    model batches keeps the per-call overhead (a few ms) negligible.
    """
    if block_size is not None:
        return _check_int("block_size", block_size)
    target = n / max(1, 8 * num_actors)
    blocks = max(1, round(target / batch_size))
    return int(min(8, blocks) * batch_size)


# ---------------------------------------------------------------------------------------
# in-process path
_LOCAL_CACHE: dict[str, Encoder] = {}


def _local_encoder(factory: EncoderFactory, device: str | None, progress: bool = True) -> Encoder:
    """The encoder in this process: cached per recipe (one model at a time), loaded under a
    :class:`Heartbeat` (lines while a load runs past the progress interval)."""
    if isinstance(factory, EncoderSpec):
        key = json.dumps(
            [str(factory.ref), repr(factory.ref), factory.backend, dict(factory.options), device],
            sort_keys=True,
            default=str,
        )
        enc = _LOCAL_CACHE.get(key)
        if enc is None:
            enc = _load(factory, device, progress)
            _LOCAL_CACHE.clear()  # one model at a time
            _LOCAL_CACHE[key] = enc
        return enc
    return _load(factory, device, progress)


def _load(factory: EncoderFactory, device: str | None, progress: bool) -> Encoder:
    name = _model_name(factory)
    with Heartbeat(f"loading {name}" if name else "loading the encoder", enabled=None if progress else False):
        return factory(device)


def _model_name(factory: EncoderFactory) -> str:
    """The model's short name (last path component, <= 40 characters), "" for a bare factory; an
    adapted model's folder ``<system>/model`` is named by its system's folder."""
    name = getattr(getattr(factory, "ref", None), "name", None) or str(getattr(factory, "ref", "") or "")
    parts = name.rstrip("/").split("/")
    if len(parts) > 1 and parts[-1] == "model":
        return parts[-2][:40]
    return parts[-1][:40]


def _what(factory: EncoderFactory, kind: TextKind, n: int) -> str:
    name = _model_name(factory)
    return f"embedding {n} {'queries' if kind == 'query' else kind + 's'}" + (f" with {name}" if name else "")


LOCAL_SLICE_SECONDS = 1.0
"""In-process embedding encodes whole batches in slices sized to take about this long (measured
as it goes, starting with one batch), so progress moves well within its interval."""
_MAX_SLICE_BATCHES = 64


def _next_slice(batches_done: int, seconds: float) -> int:
    """Batches in the next in-process slice: about :data:`LOCAL_SLICE_SECONDS` at the pace so far."""
    if batches_done == 0 or seconds <= 0:
        return 1
    return int(min(_MAX_SLICE_BATCHES, max(1, LOCAL_SLICE_SECONDS * batches_done / seconds)))


def _encode_in_slices(enc: Encoder, texts: list[str], kind: TextKind, batch_size: int, bar: Progress) -> np.ndarray:
    """``enc.encode(texts)`` in slices of whole batches, in the order one call would batch them.

    The texts go longest first (sentence-transformers' own order within one call:
    ``argsort(-len(text))``), so every slice holds exactly the batches a single call would form
    and every encode call has the same ``batch_size``; the rows come back in input order."""
    order = np.argsort([-len(t) for t in texts])
    parts: list[np.ndarray] = []
    s, t0 = 0, time.perf_counter()
    while s < len(texts):
        step = _next_slice(s // batch_size, time.perf_counter() - t0) * batch_size
        parts.append(np.asarray(enc.encode([texts[i] for i in order[s : s + step]], kind=kind, batch_size=batch_size)))
        bar.update(len(parts[-1]))
        s += step
    emb = np.concatenate(parts, axis=0)
    out = np.empty_like(emb)
    out[order] = emb
    return out


def _embed_local(
    texts: list[str],
    factory: EncoderFactory,
    kind: TextKind,
    batch_size: int,
    device: str | None,
    progress: bool = True,
) -> EmbeddingRun:
    t0 = time.perf_counter()
    enc = _local_encoder(factory, device, progress)
    n = len(texts)
    if n == 0:
        emb = enc.encode(texts, kind=kind, batch_size=batch_size)
    else:
        with Progress(n, _what(factory, kind, n), enabled=None if progress else False) as bar:
            emb = _encode_in_slices(enc, texts, kind, batch_size, bar)
    return EmbeddingRun(
        embeddings=emb,
        pid=np.full(n, os.getpid(), dtype=np.int64),
        cuda_visible_devices=np.full(n, os.environ.get("CUDA_VISIBLE_DEVICES", ""), dtype=object),
        engine="local",
        num_actors=1,
        block_size=n,
        seconds=time.perf_counter() - t0,
    )


# ---------------------------------------------------------------------------------------
# Ray path
def check_row_coverage(seen: np.ndarray) -> None:
    """Raise unless every row id was returned exactly once (``seen[i]`` = times row ``i`` came back)."""
    if not np.all(seen == 1):
        missing = np.flatnonzero(seen == 0)
        dup = np.flatnonzero(seen > 1)
        raise RuntimeError(
            f"embedding pipeline returned {missing.size} rows never and {dup.size} rows more than once "
            f"(first missing: {missing[:5].tolist()}, first duplicated: {dup[:5].tolist()})"
        )


def length_blocks(
    texts: Sequence[str], block_size: int, *, sort_by_length: bool = True
) -> list[tuple[np.ndarray, list[str]]]:
    """``(row ids, texts)`` blocks of ``block_size`` rows; with ``sort_by_length`` the texts go by
    decreasing length in characters (a proxy for tokens: similar lengths share a batch, so less
    padding, and the longest blocks start first), ties in input order."""
    n = len(texts)
    lengths = np.fromiter((len(t) for t in texts), dtype=np.int64, count=n)
    order = np.argsort(-lengths, kind="stable") if sort_by_length else np.arange(n)
    return [
        (order[s : s + block_size].astype(np.int64), [texts[i] for i in order[s : s + block_size]])
        for s in range(0, n, block_size)
    ]


def _assemble(n: int, batches: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    emb: np.ndarray | None = None
    pid = np.zeros(n, dtype=np.int64)
    cvd = np.full(n, "", dtype=object)
    seen = np.zeros(n, dtype=np.int64)
    for batch in batches:
        ids = np.asarray(batch["row_id"], dtype=np.int64)
        if ids.size == 0:
            continue
        block = np.asarray(batch["embedding"], dtype=np.float32)
        if emb is None:
            emb = np.empty((n, block.shape[1]), dtype=np.float32)
        if ids.min() < 0 or ids.max() >= n:
            raise RuntimeError(f"embedding pipeline returned row ids outside [0, {n})")
        emb[ids] = block
        pid[ids] = batch["pid"]
        cvd[ids] = batch["cuda_visible_devices"]
        np.add.at(seen, ids, 1)
    if n and emb is None:
        raise RuntimeError("embedding pipeline returned no rows")
    check_row_coverage(seen)
    return emb if emb is not None else np.zeros((0, 0), dtype=np.float32), pid, cvd


def pool_placement(
    n: int,
    *,
    batch_size: int,
    num_actors: int | None,
    block_size: int | None,
    torch_threads: int | None,
    device: str | None,
) -> tuple[PoolPlacement, int]:
    """Pool size and per-actor resources (one GPU each on a GPU cluster, else CPU slots with
    ``torch_threads`` threads), and the rows per actor call."""
    info = ray_info()
    gpus = cluster_has_gpus()
    if gpus:
        actors = num_actors or max(1, int(info.num_gpus))
        threads = torch_threads
    else:
        cores = available_cores() if info.started_here else max(1, int(info.num_cpus))
        node = largest_node_cpus(max(1.0, info.num_cpus))
        if num_actors is None:
            threads = torch_threads or 1
            actors = max(1, cores // threads)
        else:
            actors = num_actors
            threads = torch_threads or max(1, min(cores // actors, int(node)))
    bs = plan_blocks(n, num_actors=actors, batch_size=batch_size, block_size=block_size)
    if not gpus:
        cpus = min(float(threads or 1), max(1.0, info.num_cpus) / actors, node)
        return PoolPlacement(actors, cpus, 0.0, threads, device), bs
    return PoolPlacement(actors, 0.0, 1.0, threads, device), bs


def _embed_ray(texts: list[str], factory: EncoderFactory, kind: TextKind, settings: EmbedSettings) -> EmbeddingRun:
    """Embed on the model's warm pool with checked ``settings`` (the module docstring's steps)."""
    progress = settings.progress
    with Heartbeat("starting Ray", enabled=None if progress else False):  # or waiting for its start
        init_ray()
    n = len(texts)
    placement, bs = pool_placement(
        n,
        batch_size=settings.batch_size,
        num_actors=settings.num_actors,
        block_size=settings.block_size,
        torch_threads=settings.torch_threads,
        device=settings.device,
    )
    pool = get_pool(factory, placement)
    log.debug("embedding %d texts on Ray: %s, blocks of %d rows", n, placement, bs)
    blocks = length_blocks(texts, bs, sort_by_length=settings.sort_by_length)
    t0 = time.perf_counter()
    restarts = DEFAULT_MAX_RESTARTS if settings.max_restarts is None else settings.max_restarts
    bar = Progress(n, _what(factory, kind, n), enabled=None if progress else False)
    try:
        emb, pid, cvd = _assemble(
            n,
            pool.run(
                blocks,
                kind=kind,
                batch_size=settings.batch_size,
                max_restarts=restarts,
                progress=bar,
                timeout=settings.placement_timeout,
            ),
        )
    finally:
        bar.close()
    return EmbeddingRun(
        emb, pid, cvd, engine="ray", num_actors=placement.num_actors, block_size=bs, seconds=time.perf_counter() - t0
    )


def checked_settings(settings: EmbedSettings) -> EmbedSettings:
    """``settings`` with every number checked (one ``ConfigError`` line naming the field), a
    ``num_actors`` of 0 as ``None``, and a ``backend`` in the encoder options taken as the backend
    (the study runner passes it among them)."""
    num_actors = settings.num_actors
    num_actors = _check_int("num_actors", num_actors) if num_actors is not None and num_actors != 0 else None
    opts = dict(settings.options or {})
    backend = settings.backend
    if "backend" in opts:
        b = opts.pop("backend")
        if b and b != "auto":
            backend = b
    return replace(
        settings,
        batch_size=_check_int("batch_size", settings.batch_size),
        num_actors=num_actors,
        options=opts,
        backend=backend,
        torch_threads=None if settings.torch_threads is None else _check_int("torch_threads", settings.torch_threads),
        max_restarts=None
        if settings.max_restarts is None
        else _check_int("max_restarts", settings.max_restarts, minimum=0),
        placement_timeout=None
        if settings.placement_timeout is None
        else check_placement_timeout(settings.placement_timeout),
    )


def embed_texts_detailed(
    texts: Sequence[str],
    model_ref: str | ModelRef | EncoderSpec | EncoderFactory,
    *,
    kind: TextKind = "document",
    config: EmbedSettings | None = None,
    **options: Unpack[EmbedOptions],
) -> EmbeddingRun:
    """:func:`embed_texts` returning an :class:`EmbeddingRun` (embeddings + worker of each row)."""
    if kind not in ("query", "document"):
        raise ConfigError(f"kind must be 'query' or 'document', got {kind!r}")
    items = check_texts(texts, "texts")
    settings = checked_settings(settings_from(EmbedSettings, config, options, "embed_texts"))
    factory = _as_factory(model_ref, settings.backend, settings.options)
    if isinstance(factory, EncoderSpec) and not isinstance(factory.ref, ModelRef):
        # resolve here: a missing model fails fast in the driver, and actors skip the lookup
        factory = EncoderSpec(resolve_model(factory.ref), factory.backend, factory.options)
    if not settings.use_ray or not items:
        return _embed_local(items, factory, kind, settings.batch_size, settings.device, settings.progress)
    return _embed_ray(items, factory, kind, settings)


def embed_texts(
    texts: Sequence[str],
    model_ref: str | ModelRef | EncoderSpec | EncoderFactory,
    *,
    kind: TextKind = "document",
    config: EmbedSettings | None = None,
    **options: Unpack[EmbedOptions],
) -> np.ndarray:
    """Embed ``texts`` with ``model_ref``: float32 ``[len(texts), d]``, unit rows, input order.

    Args:
        texts: the texts (queries or documents, see ``kind``).
        model_ref: an alias / path / hub id (loaded with :func:`adaptlab.models.load_encoder`
            and ``options``), a :class:`~adaptlab.models.resolve.ModelRef`, an
            :class:`~adaptlab.models.load.EncoderSpec`, or a picklable ``factory(device)``.
        kind: ``"document"`` or ``"query"`` (instruction prefixes differ).
        config: the settings whole (:class:`~adaptlab.embedding.settings.EmbedSettings`), default
            its defaults; the keyword options replace its fields.
        options: the fields of :class:`~adaptlab.embedding.settings.EmbedSettings`:
            ``batch_size`` (texts per forward pass inside an actor, default 64), ``num_actors``
            (actor pool size; default: one per GPU, else ``cores // torch_threads``), ``options``
            (encoder options: ``query_instruction``, ``max_seq_length``, ``backend``...),
            ``progress`` (a bar on a terminal, else a line every few seconds on stderr:
            :class:`adaptlab.runtime.progress.Progress`; ``adaptlab --quiet`` turns it off),
            ``use_ray`` (``False``: encode in this process), ``backend``, ``device``,
            ``block_size`` (rows per actor call), ``torch_threads`` (per CPU actor, default 1
            with the default pool), ``sort_by_length`` (default True), ``max_restarts`` (actor
            crashes replaced, with their blocks retried, per call; default ``None``: 3),
            ``placement_timeout`` (seconds with no ready actor before the call fails; default
            ``None``: ``ADAPTLAB_POOL_PLACEMENT_TIMEOUT`` or 180).

    Raises:
        ConfigError: invalid option or model (an unknown option: an
        :class:`~adaptlab.options.UnknownOptionError`, a ``TypeError`` too); DataError: a text is
        not a string; ClusterCapacityError: the cluster lost the nodes the pool needs (no actor
        ready for ``placement_timeout`` seconds).
    """
    return embed_texts_detailed(texts, model_ref, kind=kind, config=config, **options).embeddings
