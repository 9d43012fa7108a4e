"""Warm embedding actor pools: the encoder is loaded once per actor and kept for the study.

A pool is a few Ray actors, each an :class:`~adaptlab.embedding.actor.EmbedBatch` holding one
loaded encoder (heavy setup in ``__init__``). Pools are kept in a registry keyed by the encoder
recipe and the placement (actors, threads, GPU or CPU), so every ``embed_texts(..., use_ray=True)``
call with the same model -- documents and queries, dataset after dataset -- reuses the same warm
actors instead of starting a pipeline and loading the model again. The token vectors of a
late-interaction model (:class:`~adaptlab.embedding.tokens.TokenEmbedder`) go through the same
pools, scheduling, actor replacement and progress (``run(..., tokens=True)``).

Scheduling: blocks go to the *ready* actors from one queue (an actor is ready once it has
answered its readiness call, :meth:`EmbedBatch.where`: placed on a node, encoder loaded), at most
two in flight per actor (one running, one waiting, so an actor never idles between blocks);
whichever actor finishes takes the next block. Every wait on Ray is a round of at most
:data:`POLL_SECONDS` followed by a check of the pool's state.

Fault tolerance is ours and bounded (actors are created with Ray's ``max_restarts=0``, so Ray
never has to keep their constructor arguments alive for a restart). An actor that dies has its
unfinished blocks queued again, for the ready actors only, and a replacement is requested in its
place; the replacement gets blocks once it is ready, i.e. once some node has room for it. After a
node loss the pool therefore works on with the actors that remain and grows back when capacity
returns; at every call its size follows the cluster's resources (:meth:`EncoderPool.resize`).
Deaths of an actor's own process on a live node count against ``max_restarts`` per call (default
:data:`DEFAULT_MAX_RESTARTS`), after which the call raises; deaths with their node do not. A lost
node gets one warning line, once per pool: its id and address and what the pool did (actors
replaced, blocks requeued), written :data:`LOSS_REPORT_DELAY` s after the first of its actors was
found dead (or when the call ends), so the deaths of its other actors are counted in it. When no
actor has been ready for the placement time-out (:func:`placement_timeout`, default
:data:`PLACEMENT_TIMEOUT` s, ``ADAPTLAB_POOL_PLACEMENT_TIMEOUT``), the call raises one
:class:`ClusterCapacityError` line naming the lost nodes, what was done and how to resume, and the
pool is released.

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
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from adaptlab.embedding.actor import EmbedBatch, EncoderFactory
from adaptlab.errors import AdaptlabError, ConfigError
from adaptlab.models.base import TextKind
from adaptlab.models.load import EncoderSpec
from adaptlab.runtime import embedded_node_alive, is_embedded, on_make_room, on_shutdown
from adaptlab.runtime.progress import Progress

__all__ = [
    "DEFAULT_MAX_RESTARTS",
    "LOSS_REPORT_DELAY",
    "PLACEMENT_TIMEOUT",
    "PLACEMENT_TIMEOUT_ENV",
    "ClusterCapacityError",
    "EncoderPool",
    "NodeLoss",
    "PoolPlacement",
    "active_pools",
    "embedding_pools",
    "get_pool",
    "has_pool",
    "placement_timeout",
    "release_idle_pools",
    "release_pools",
]

log = logging.getLogger(__name__)

DEFAULT_MAX_RESTARTS = 3
"""Actor replacements allowed per call before the call fails (a model that crashes its worker
on every batch fails after this many tries instead of retrying forever)."""

_IN_FLIGHT_PER_ACTOR = 2

PLACEMENT_TIMEOUT = 180.0
"""Seconds a call waits while no actor of its pool is ready (every actor lost, waiting for a node
with room, or still loading its encoder) before it fails with :class:`ClusterCapacityError`
(``ADAPTLAB_POOL_PLACEMENT_TIMEOUT``). It covers a fresh actor's start and model load, hence minutes."""

PLACEMENT_TIMEOUT_ENV = "ADAPTLAB_POOL_PLACEMENT_TIMEOUT"

POLL_SECONDS = 2.0
"""Longest single wait on Ray: every wait is a round of at most this long, then the state is checked."""

WAITING_STATE = "waiting for capacity"
"""What progress lines say while no actor of the pool is ready (placed and loaded)."""

LOSS_REPORT_DELAY = 10.0
"""Seconds between finding the first actor lost with a node and the pool's one line about that node:
the node's other actors are found dead seconds apart (their calls fail one by one), and the line
counts them all (:class:`NodeLoss`)."""

FETCH_TIMEOUT = 120.0
"""Longest fetch of one finished block (a result on a node that died on the way is requeued)."""


class ClusterCapacityError(AdaptlabError):
    """The Ray cluster lost the nodes (or never had the room) the work needs; the message names
    the lost nodes, what was done and how to resume."""


def placement_timeout(value: float | None = None) -> float:
    """The placement time-out in seconds: ``value`` when given, else ``ADAPTLAB_POOL_PLACEMENT_TIMEOUT``,
    else :data:`PLACEMENT_TIMEOUT`. A value that is not a positive number raises ``ConfigError``."""
    where = "placement_timeout"
    given: Any = value  # a config value or the variable's text, checked below
    if given is None:
        raw = os.environ.get(PLACEMENT_TIMEOUT_ENV, "").strip()
        if not raw:
            return PLACEMENT_TIMEOUT
        where, given = PLACEMENT_TIMEOUT_ENV, raw
    try:
        seconds = float(given)
    except (TypeError, ValueError):
        seconds = float("nan")
    if isinstance(given, bool) or not seconds > 0 or seconds == float("inf"):
        raise ConfigError(f"{where} must be a positive number of seconds, got {given!r}")
    return seconds


@dataclass(frozen=True)
class PoolPlacement:
    """How many actors, with which resources each (``num_gpus`` 1 on a GPU cluster, else CPU
    slots), ``torch_threads`` intra-op threads and the ``device`` string passed to the factory."""

    num_actors: int
    num_cpus: float
    num_gpus: float
    torch_threads: int | None
    device: str | None


def factory_key(factory: EncoderFactory) -> str:
    """A stable key of an encoder recipe: the spec's fields, or the pickled callable's digest."""
    if isinstance(factory, EncoderSpec):
        return json.dumps(["spec", str(factory.ref), repr(factory.ref), factory.backend, dict(factory.options)],
                          sort_keys=True, default=str)
    from ray import cloudpickle  # deferred: ray is imported only when a pool is needed

    return "callable:" + hashlib.sha256(cloudpickle.dumps(factory)).hexdigest()


@dataclass
class Member:
    """One actor of a pool: ``ready`` is its pending :meth:`EmbedBatch.where` reference until
    the actor answered (placed and encoder loaded), then ``None`` with its ``node_id`` and ``ip``."""

    actor: Any
    ready: Any
    node_id: str = ""
    ip: str = ""


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

    def run(self, blocks: Sequence[tuple[np.ndarray, list[str]]], *, kind: TextKind, batch_size: int,
            max_restarts: int = DEFAULT_MAX_RESTARTS, progress: Progress | None = None,
            tokens: bool = False, timeout: float | None = None) -> Iterator[dict[str, np.ndarray]]:
        """Embed ``blocks`` of ``(row_ids, texts)``; yields one output batch per block (in the
        order they finish). One call at a time per pool. ``progress`` is advanced by the rows
        of each finished block. ``tokens``: token vectors of a late-interaction encoder (the
        actors' token mode, :class:`~adaptlab.embedding.actor.EmbedBatch`) instead of one
        vector per text. ``timeout``: the placement time-out (:func:`placement_timeout`)."""
        with self._lock:
            dispatch = _Dispatch(self, blocks, kind, batch_size, max_restarts, tokens, placement_timeout(timeout))
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


def cluster_nodes() -> dict[str, tuple[bool, str]]:
    """``{node id: (alive, ip)}`` of the cluster's nodes as the GCS lists them (empty when it
    cannot be asked for a moment)."""
    import ray  # deferred: ray is heavy and only needed here

    try:
        return {n["NodeID"]: (bool(n.get("Alive", True)), str(n.get("NodeManagerAddress", ""))) for n in ray.nodes()}
    except Exception:  # noqa: BLE001 - the GCS may be unreachable for a moment; "unknown" is safe
        return {}


_NODE_DEATH_WORDS = ("node has died", "node is dead", "node died", "node was terminated")
_NODE_ID_IN_TEXT = re.compile(r"\bnode id:\s*(\w+)", re.IGNORECASE)
UNKNOWN_NODE = "unknown"
"""The node of an actor lost with a node that neither answered its readiness call nor is named by Ray."""


def _node_of_death(member: Member, error: Exception, nodes: dict[str, tuple[bool, str]]) -> tuple[str, str] | None:
    """``(node id, ip)`` when ``member`` died with its node (the cluster lists the node as dead, or
    Ray's message says so), else None (the actor's own process failed). The node is the one the
    actor reported when it got ready, else the one Ray's message names (an actor that never got ready,
    e.g. a replacement Ray had placed on the dying node: "The actor died because its node has died.
    Node Id: ..."), else :data:`UNKNOWN_NODE`."""
    text = str(error)
    node = member.node_id or _node_id_in(text)
    alive, ip = nodes.get(node, (True, ""))
    lower = text.lower()
    if not (node and not alive) and not (
            any(w in lower for w in _NODE_DEATH_WORDS) or isinstance(error, _unavailable_error())):
        return None
    return node or UNKNOWN_NODE, ip or _ip_in(text) or member.ip


def _node_id_in(text: str) -> str:
    """The node id a Ray error message names ("Node Id: 3f2a..."), else ``""``."""
    match = _NODE_ID_IN_TEXT.search(text)
    return match.group(1) if match else ""


@dataclass
class NodeLoss:
    """What one call lost with one node, for its one line (:meth:`line`): the node's address, the
    actors replaced, the blocks and texts requeued, and when the first actor was found dead."""

    ip: str
    since: float
    actors: int = 0
    blocks: int = 0
    texts: int = 0

    def line(self, node: str) -> str:
        """``embedding: node 3f2a8c1d9e0b (10.0.0.2) lost; 2 actor(s) replaced, 4 block(s) (512 texts) requeued ...``."""
        return (f"embedding: node {_node_text(node, self.ip)} lost; {self.actors} actor(s) replaced, "
                f"{self.blocks} block(s) ({self.texts} texts) requeued to the live actors; "
                "the replacements join once a node has room")


def _node_text(node: str, ip: str) -> str:
    """``3f2a8c1d9e0b (10.0.0.2)``: a node id's first 12 hex digits and its address."""
    return f"{node[:12]} ({ip or 'ip unknown'})"


def _unavailable_error() -> type:
    import ray  # deferred: ray is heavy and only needed here

    return getattr(ray.exceptions, "ActorUnavailableError", ray.exceptions.RayActorError)


def _ip_in(text: str) -> str:
    for line in text.splitlines():
        if line.strip().startswith("ip:"):
            return line.split(":", 1)[1].strip()
    return ""


class _Dispatch:
    """One call's scheduling state: a queue of block indices, the in-flight references, the
    actors lost with their nodes and since when no actor has been ready."""

    def __init__(self, pool: EncoderPool, blocks: Sequence[tuple[np.ndarray, list[str]]], kind: TextKind,
                 batch_size: int, max_restarts: int, tokens: bool = False,
                 timeout: float = PLACEMENT_TIMEOUT) -> None:
        self.pool, self.blocks, self.kind, self.batch_size = pool, blocks, kind, batch_size
        self.max_restarts, self.timeout = max_restarts, timeout
        self.mode: dict[str, Any] = {"tokens": True} if tokens else {}  # dense calls stay as they were
        self.queue = list(range(len(blocks)))[::-1]  # pop() takes the first (longest) block
        self.in_flight: dict[Any, tuple[int, int]] = {}  # ref -> (block, actor index)
        self.replaced = 0
        self.total, self.done = sum(len(b[0]) for b in blocks), 0
        self.lost_nodes: dict[str, str] = {}  # node id -> ip
        self.losses: dict[str, NodeLoss] = {}  # lost nodes not reported yet (report_losses)
        self.idle_since: float | None = None  # when the pool last had no ready actor
        self.warned = False  # whether this wait for a ready actor was logged
        self.progress: Progress | None = None  # told when no actor is ready ("waiting for capacity")

    def submit(self, actor_index: int) -> None:
        block = self.queue.pop()
        row_ids, texts = self.blocks[block]
        ref = self.pool.members[actor_index].actor.__call__.remote(
            {"row_id": row_ids, "text": texts}, kind=self.kind, batch_size=self.batch_size, **self.mode)
        self.in_flight[ref] = (block, actor_index)

    def fill(self) -> None:
        """Give queued blocks to the ready actors, at most two in flight each, least loaded first."""
        load = dict.fromkeys(self.pool.ready_members(), 0)
        for _, a in self.in_flight.values():
            if a in load:
                load[a] += 1
        while self.queue and load:
            a = min(load, key=lambda i: (load[i], i))
            if load[a] >= _IN_FLIGHT_PER_ACTOR:
                return
            self.submit(a)
            load[a] += 1

    def waiting(self) -> dict[Any, int | None]:
        """What to wait on: the readiness calls of pending actors (their index) first, so a
        stream of finished blocks never delays an actor joining, then in-flight blocks (None)."""
        refs: dict[Any, int | None] = {m.ready: i for i, m in enumerate(self.pool.members) if m.ready is not None}
        refs.update(dict.fromkeys(self.in_flight))
        return refs

    def results(self) -> Iterator[dict[str, np.ndarray]]:
        import ray  # deferred: ray is heavy and only needed here

        try:
            while self.queue or self.in_flight:
                self.fill()
                self.report_losses(time.monotonic())
                self.check_capacity(time.monotonic())
                refs = self.waiting()
                if not refs:  # pragma: no cover - a pool always has actors; bounded by check_capacity
                    time.sleep(POLL_SECONDS)
                    continue
                done, _ = ray.wait(list(refs), num_returns=1, timeout=POLL_SECONDS)
                for ref in done:
                    out = self.collect(ref, refs[ref])
                    if out is not None:
                        self.done += len(out.get("row_id", ()))
                        yield out
        finally:
            self.report_losses()  # the call ended (or failed): every loss gets its line now

    def collect(self, ref: Any, pending_index: int | None) -> dict[str, np.ndarray] | None:
        """The finished block of ``ref`` (None when it failed and was requeued), or, for a
        readiness call (``pending_index``), mark that actor ready (or handle its death)."""
        import ray  # deferred: ray is heavy and only needed here

        block, index = self.in_flight.pop(ref) if pending_index is None else (None, pending_index)
        try:
            out = ray.get(ref, timeout=FETCH_TIMEOUT)
        except ray.exceptions.RayActorError as e:
            raise_init_error(e)
            self.actor_died(index, [] if block is None else [block], e)
            return None
        except (ray.exceptions.ObjectLostError, ray.exceptions.GetTimeoutError) as e:
            log.warning("an embedding result was lost on the way (%s); the block is queued again", type(e).__name__)
            if block is not None:
                self.queue.append(block)
            return None
        if block is None:
            self.pool.mark_ready(index, out)
            return None
        return out

    def actor_died(self, actor_index: int, blocks: list[int], error: Exception) -> None:
        """Requeue every block of the dead actor (the ready actors take them) and request a
        replacement; a death without its node counts against the restart budget."""
        lost = blocks + [b for b, a in self.in_flight.values() if a == actor_index]
        self.in_flight = {r: (b, a) for r, (b, a) in self.in_flight.items() if a != actor_index}
        node = _node_of_death(self.pool.members[actor_index], error, cluster_nodes())
        if node is None:
            self.replaced += 1
            if self.replaced > self.max_restarts:
                raise RuntimeError(
                    f"embedding actors died {self.replaced} times in one call (max_restarts={self.max_restarts}); "
                    f"last error: {str(error).splitlines()[0] if str(error) else type(error).__name__}"
                ) from error
            log.warning("embedding actor %d died (%s); replacing it and retrying %d block(s)",
                        actor_index, type(error).__name__, len(lost))
        else:
            self.lost_nodes[node[0]] = node[1]
            self.note_loss(actor_index, node, lost)
        self.queue.extend(sorted(lost, reverse=True))
        self.pool.replace(actor_index)

    def note_loss(self, actor_index: int, node: tuple[str, str], blocks: list[int]) -> None:
        """Count actor ``actor_index`` and its requeued ``blocks`` in the line of ``node`` (id, ip);
        a node this pool has reported already gets a DEBUG line only."""
        texts = sum(len(self.blocks[b][0]) for b in blocks)
        if node[0] in self.pool.reported_losses:
            log.debug("embedding actor %d: also on node %s, reported already; %d block(s) requeued",
                      actor_index, _node_text(*node), len(blocks))
            return
        loss = self.losses.setdefault(node[0], NodeLoss(node[1], time.monotonic()))
        loss.ip = loss.ip or node[1]
        loss.actors, loss.blocks, loss.texts = loss.actors + 1, loss.blocks + len(blocks), loss.texts + texts

    def report_losses(self, now: float | None = None) -> None:
        """One warning line per lost node whose :data:`LOSS_REPORT_DELAY` has passed since its first
        actor was found dead (every pending node when ``now`` is None: the call ends)."""
        for node, loss in list(self.losses.items()):
            if now is None or now - loss.since >= LOSS_REPORT_DELAY:
                del self.losses[node]
                self.pool.reported_losses.add(node)
                log.warning("%s", loss.line(node))

    def check_capacity(self, now: float) -> None:
        """Raise :class:`ClusterCapacityError` when no actor has been ready for the time-out, or at
        once when the embedded Ray's only node is gone (it cannot come back)."""
        if self.pool.ready_members():
            self.idle_since = None
            if self.progress is not None:
                self.progress.set_state(None)
            return
        if self.progress is not None:
            self.progress.set_state(WAITING_STATE)
        if is_embedded():
            self.check_embedded_node()
        if self.idle_since is None:
            self.idle_since, self.warned = now, False
        if not self.warned and (self.lost_nodes or now - self.idle_since > 0.1 * self.timeout):
            self.warned = True  # once per wait: the log says why progress stopped
            log.warning("no embedding actor is ready (%d waiting for a node with room or loading the encoder); "
                        "failing in %.0f s unless one gets ready", len(self.pool.members),
                        self.timeout - (now - self.idle_since))
        if now - self.idle_since > self.timeout:
            raise ClusterCapacityError(self.capacity_message())

    def check_embedded_node(self) -> None:
        """The embedded Ray has one node and nothing replaces it: when its raylet process has
        exited, the GCS lists no live node, or the node this call lost is the only one, fail now with one line instead of waiting
        out the placement time-out."""
        nodes = cluster_nodes()
        alive = [ip or node[:12] for node, (up, ip) in nodes.items() if up and node not in self.lost_nodes]
        if embedded_node_alive() is not False and (alive or not (nodes or self.lost_nodes)):
            return
        dead = _lost_nodes_text(self.lost_nodes) if self.lost_nodes else ", ".join(
            _node_text(node, ip) for node, (_, ip) in nodes.items())
        raise ClusterCapacityError(
            f"embedding stopped: the node of the embedded Ray ({dead}) died and cannot come back (this process "
            f"started that Ray: no other node can take its place); {self.done}/{self.total} texts of this call "
            "were embedded and are not kept; run the study again (finished work is reused from the content cache)")

    def capacity_message(self) -> str:
        """One line: the lost nodes, what was done, how to resume."""
        p = self.pool.placement
        need = f"{p.num_gpus:g} GPU" if p.num_gpus else f"{p.num_cpus:g} CPU"
        if self.lost_nodes:
            what = "lost node(s) " + _lost_nodes_text(self.lost_nodes)
        else:
            what = "no node was lost in this call, but none has room"
        return (f"embedding stopped: no embedding actor was ready for {self.timeout:g} s, none could be placed "
                f"or load its encoder ({what}; each actor needs {need}); {self.done}/{self.total} texts of this call were embedded and are not "
                f"kept; to resume, re-run the same study once the cluster has room (finished work is reused "
                f"from the content cache), or wait longer with {PLACEMENT_TIMEOUT_ENV}=SECONDS")


def _lost_nodes_text(lost: dict[str, str]) -> str:
    """``id (ip), ...`` of the lost nodes of a capacity error. An actor that died before it reported
    its node (a replacement Ray had sent to the dying node) is lost with node "unknown"; that
    entry is named only when no node is known."""
    known = {node: ip for node, ip in lost.items() if node != UNKNOWN_NODE} or lost
    return ", ".join(_node_text(node, ip) for node, ip in known.items())


def raise_init_error(e: Exception) -> None:
    """An actor that could not load its encoder: raise our own error (a ConfigError) readably."""
    if not getattr(e, "actor_init_failed", False):
        return
    lines = [ln.strip() for ln in str(getattr(e, "error_msg", "") or e).splitlines() if ln.strip()]
    ours = [ln for ln in lines if ln.startswith("adaptlab.errors.")]
    message = ours[-1].split(":", 1)[1].strip() if ours else (lines[-1] if lines else type(e).__name__)
    raise ConfigError(f"the embedding actors could not load the encoder: {message}") from e


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
        used = sum(len(p.members) * (p.placement.num_cpus if res == "CPU" else p.placement.num_gpus)
                   for p in others)
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
