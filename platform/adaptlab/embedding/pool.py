"""Warm embedding actor pools: the encoder is loaded once per actor and kept for the study.

A pool is a few Ray actors, each an :class:`~adaptlab.embedding.actor.EmbedBatch` holding one
loaded encoder (heavy setup in ``__init__``). Pools are kept in a registry keyed by the encoder
recipe and the placement (actors, threads, GPU or CPU), so every ``embed_texts(..., use_ray=True)``
call with the same model -- documents and queries, dataset after dataset -- reuses the same warm
actors instead of starting a pipeline and loading the model again. The token vectors of a
late-interaction model (:class:`~adaptlab.embedding.tokens.TokenEmbedder`) go through the same
pools, scheduling, actor replacement and progress (``run(..., tokens=True)``).

A call's scheduling, actor replacement and node-loss handling are :mod:`.dispatch` (the lost
nodes' lines :mod:`.node_losses`); the placement, its time-out and
:class:`~adaptlab.embedding.placement.ClusterCapacityError` are :mod:`.placement`.

Fault tolerance is ours and bounded (actors are created with Ray's ``max_restarts=0``, so Ray
never has to keep their constructor arguments alive for a restart): a dead actor's place gets a
replacement that takes blocks once it is ready, i.e. once some node has room for it. After a node
loss the pool therefore works on with the actors that remain and grows back when capacity
returns; at every call its size follows the cluster's resources (:meth:`EncoderPool.resize`).
Deaths of an actor's own process on a live node count against ``max_restarts`` per call (default
:data:`DEFAULT_MAX_RESTARTS`). A call that raises ``ClusterCapacityError`` releases its pool.

Progress: :class:`~adaptlab.runtime.progress.Progress` (a bar or lines at least every
``ADAPTLAB_PROGRESS_INTERVAL`` seconds, heartbeat lines while a block runs longer).

Lifetime: pools live until :func:`release_pools` (or the :func:`embedding_pools` context
manager exits, or :func:`adaptlab.runtime.shutdown_ray`). A pool whose Ray session has ended
(``ray.shutdown()`` called directly) is dropped on next use. When a new pool would not fit into
the cluster's CPUs/GPUs next to the existing ones, the least recently used pools are released
first (a pool waiting for resources held by an idle pool would wait forever). For the same
reason every pool that no call is using is released when other work needs the cluster
(:func:`release_idle_pools`, run by :func:`adaptlab.runtime.make_room`, which training calls
before it submits its stages): idle warm actors holding every CPU once kept a three-node study's
training stage from ever being scheduled.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from adaptlab.embedding.actor import EmbedBatch, EncoderFactory
from adaptlab.embedding.dispatch import Dispatch
from adaptlab.embedding.placement import ClusterCapacityError, Member, PoolPlacement, placement_timeout
from adaptlab.errors import ConfigError
from adaptlab.models.base import TextKind
from adaptlab.models.load import EncoderSpec
from adaptlab.runtime import on_make_room, on_shutdown
from adaptlab.runtime.progress import Progress

__all__ = [
    "DEFAULT_MAX_RESTARTS",
    "EncoderPool",
    "active_pools",
    "embedding_pools",
    "factory_key",
    "get_pool",
    "has_pool",
    "release_idle_pools",
    "release_pools",
]

log = logging.getLogger(__name__)


DEFAULT_MAX_RESTARTS = 3
"""Actor replacements allowed per call before the call fails (a model that crashes its worker
on every batch fails after this many tries instead of retrying forever)."""


def factory_key(factory: EncoderFactory) -> str:
    """A stable key of an encoder recipe: the spec's fields, or the pickled callable's digest."""
    if isinstance(factory, EncoderSpec):
        return json.dumps(
            ["spec", str(factory.ref), repr(factory.ref), factory.backend, dict(factory.options)],
            sort_keys=True,
            default=str,
        )
    from ray import cloudpickle  # deferred: ray is imported only when a pool is needed

    return "callable:" + hashlib.sha256(cloudpickle.dumps(factory)).hexdigest()


class EncoderPool:
    """A set of warm :class:`EmbedBatch` actors for one encoder recipe and placement; only the
    actors that answered their readiness call get blocks (:meth:`ready_members`)."""

    def __init__(self, factory: EncoderFactory, placement: PoolPlacement) -> None:
        import ray  # deferred: importing adaptlab.embedding must not import ray

        self.factory = factory
        self.placement = placement
        self.session = _session_id()
        self.restarts = 0
        self.reported_losses: set[str] = set()  # nodes whose loss this pool has reported (one line each)
        self._lock = threading.Lock()
        self._remote: Any = ray.remote(EmbedBatch)
        self.members: list[Member] = [self._new_member() for _ in range(placement.num_actors)]

    def _new_member(self) -> Member:
        p = self.placement
        opts: dict[str, Any] = {"max_restarts": 0, "max_task_retries": 0, "num_cpus": p.num_cpus}
        if p.num_gpus:
            opts["num_gpus"] = p.num_gpus
        actor = self._remote.options(**opts).remote(self.factory, torch_threads=p.torch_threads, device=p.device)
        return Member(actor, actor.where.remote())

    @property
    def actors(self) -> list[Any]:
        """The actor handles (ready or not)."""
        return [m.actor for m in self.members]

    def ready_members(self) -> list[int]:
        """Indices of the actors that answered their readiness call (they get blocks)."""
        return [i for i, m in enumerate(self.members) if m.ready is None]

    def mark_ready(self, index: int, where: dict[str, Any]) -> None:
        """Actor ``index`` answered: it is placed on ``where["node_id"]`` (``where["ip"]``)."""
        member = self.members[index]
        member.ready, member.node_id, member.ip = None, str(where.get("node_id", "")), str(where.get("ip", ""))

    @property
    def alive(self) -> bool:
        """Whether the pool belongs to the running Ray session."""
        return bool(self.members) and self.session == _session_id()

    def resize(self, num_actors: int) -> None:
        """Grow with new (pending) actors or shrink, dropping not-yet-ready actors first."""
        import ray  # deferred: ray is heavy and only needed here

        while len(self.members) < num_actors:
            self.members.append(self._new_member())
        while len(self.members) > max(1, num_actors):
            pending = [i for i, m in enumerate(self.members) if m.ready is not None]
            victim = self.members.pop(pending[-1] if pending else len(self.members) - 1)
            with contextlib.suppress(Exception):
                ray.kill(victim.actor)

    def run(
        self,
        blocks: Sequence[tuple[np.ndarray, list[str]]],
        *,
        kind: TextKind,
        batch_size: int,
        max_restarts: int = DEFAULT_MAX_RESTARTS,
        progress: Progress | None = None,
        tokens: bool = False,
        timeout: float | None = None,
    ) -> Iterator[dict[str, np.ndarray]]:
        """Embed ``blocks`` of ``(row_ids, texts)``; yields one output batch per block (in the
        order they finish). One call at a time per pool. ``progress`` is advanced by the rows
        of each finished block. ``tokens``: token vectors of a late-interaction encoder (the
        actors' token mode, :class:`~adaptlab.embedding.actor.EmbedBatch`) instead of one
        vector per text. ``timeout``: the placement time-out (:func:`placement_timeout`)."""
        with self._lock:
            dispatch = Dispatch(self, blocks, kind, batch_size, max_restarts, tokens, placement_timeout(timeout))
            dispatch.progress = progress
            try:
                for out in dispatch.results():
                    if progress is not None:
                        progress.update(len(out.get("row_id", ())))
                    yield out
            except (ConfigError, ClusterCapacityError):
                self.close()  # drop the pool (and its unplaceable actors); the next call starts afresh
                raise

    def replace(self, index: int) -> None:
        """Kill actor ``index`` (if still there) and request a fresh one in its place; the new
        actor gets blocks once it is ready."""
        import ray  # deferred: ray is heavy and only needed here

        with contextlib.suppress(Exception):
            ray.kill(self.members[index].actor)
        self.members[index] = self._new_member()
        self.restarts += 1

    def close(self) -> None:
        """Kill the actors (no-op for a pool of an ended Ray session)."""
        import ray  # deferred: ray is heavy and only needed here

        if ray.is_initialized() and self.session == _session_id():
            for member in self.members:
                with contextlib.suppress(Exception):
                    ray.kill(member.actor)
        self.members = []


# ---------------------------------------------------------------------------------------
# the registry
_POOLS: OrderedDict[tuple[str, PoolPlacement], EncoderPool] = OrderedDict()


_REGISTRY_LOCK = threading.Lock()


def _session_id() -> str:
    import ray  # deferred: ray is heavy and only needed here

    if not ray.is_initialized():
        return ""
    ctx = ray.get_runtime_context()
    return f"{getattr(ctx, 'gcs_address', '')}/{ctx.get_job_id()}"


def _fits(placement: PoolPlacement, others: list[EncoderPool]) -> bool:
    import ray  # deferred: ray is heavy and only needed here

    total = ray.cluster_resources()
    for res, need in (("CPU", placement.num_cpus), ("GPU", placement.num_gpus)):
        used = sum(len(p.members) * (p.placement.num_cpus if res == "CPU" else p.placement.num_gpus) for p in others)
        if need and used + placement.num_actors * need > float(total.get(res, 0.0)) + 1e-9:
            return False
    return True


def _pool_key(factory: EncoderFactory, placement: PoolPlacement) -> tuple[str, PoolPlacement]:
    """A pool's registry key: the recipe and the per-actor placement, not the actor count (a
    pool grows and shrinks with the cluster, :meth:`EncoderPool.resize`)."""
    return factory_key(factory), replace(placement, num_actors=0)


def get_pool(factory: EncoderFactory, placement: PoolPlacement) -> EncoderPool:
    """The warm pool for ``factory`` and ``placement``, created on first use."""
    key = _pool_key(factory, placement)
    with _REGISTRY_LOCK:
        for k, stale in list(_POOLS.items()):
            if not stale.alive:  # Ray was shut down (or restarted) since the pool was made
                stale.close()
                del _POOLS[k]
        pool = _POOLS.get(key)
        if pool is not None:
            _POOLS.move_to_end(key)
            pool.resize(placement.num_actors)  # the cluster may have lost or gained nodes since
            return pool
        while _POOLS and not _fits(placement, list(_POOLS.values())):
            old_key, old = _POOLS.popitem(last=False)  # least recently used first
            log.info("releasing the embedding pool of %s to make room", old_key[0][:60])
            old.close()
        t0 = time.perf_counter()
        pool = _POOLS[key] = EncoderPool(factory, placement)
        log.debug("embedding pool started: %s in %.2f s", placement, time.perf_counter() - t0)
        on_shutdown(release_pools)
        on_make_room(release_idle_pools)
        return pool


def has_pool(factory: EncoderFactory) -> bool:
    """Whether a warm pool of this encoder recipe (any placement) exists in the running Ray
    session. Does not import ray when no pool was ever made."""
    key = factory_key(factory) if _POOLS else None
    with _REGISTRY_LOCK:
        return any(k[0] == key and pool.alive for k, pool in _POOLS.items())


def active_pools() -> int:
    """How many pools are warm (of the running Ray session)."""
    with _REGISTRY_LOCK:
        return sum(1 for p in _POOLS.values() if p.alive)


def release_pools() -> None:
    """Kill every pool's actors (their CPUs/GPUs and loaded models are freed); safe to repeat."""
    with _REGISTRY_LOCK:
        pools = list(_POOLS.values())
        _POOLS.clear()
    for pool in pools:
        pool.close()


def release_idle_pools() -> int:
    """Kill the actors of every pool that no call is using (a call holds its pool's lock while it
    runs), so their CPUs, GPUs and memory go to other work; returns how many actors were stopped.
    A later embedding call starts its pool again (the encoder is loaded anew)."""
    with _REGISTRY_LOCK:
        idle = [(k, p) for k, p in _POOLS.items() if p._lock.acquire(blocking=False)]
        for k, _ in idle:
            del _POOLS[k]
    stopped = 0
    for _, pool in idle:
        try:
            stopped += len(pool.members) if pool.alive else 0
            pool.close()
        finally:
            pool._lock.release()
    return stopped


@contextlib.contextmanager
def embedding_pools() -> Iterator[None]:
    """``with embedding_pools(): ...`` -- pools made inside are released on exit (also on errors)."""
    try:
        yield
    finally:
        release_pools()
