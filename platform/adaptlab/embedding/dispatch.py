"""One embedding call's dispatch over a pool's actors.

Blocks go to the *ready* actors from one queue (an actor is ready once it has answered its
readiness call, :meth:`EmbedBatch.where`: placed on a node, encoder loaded), at most two in flight
per actor (one running, one waiting, so an actor never idles between blocks); whichever actor
finishes takes the next block. Every wait on Ray is a round of at most
:data:`~adaptlab.embedding.placement.POLL_SECONDS` followed by a check of the pool's state.

An actor that dies has its unfinished blocks queued again, for the ready actors only, and a
replacement is requested in its place. Deaths of an actor's own process on a live node count
against ``max_restarts`` per call, after which the call raises; deaths with their node do not
(:mod:`.node_losses` counts them and writes their lines). When no actor has been ready for the
placement time-out, the call raises one :class:`~adaptlab.embedding.placement.ClusterCapacityError`
line naming the lost nodes, what was done and how to resume.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import numpy as np

from adaptlab.embedding.node_losses import NodeLosses, lost_nodes_text, node_of_death, node_text
from adaptlab.embedding.placement import (
    FETCH_TIMEOUT,
    PLACEMENT_TIMEOUT,
    PLACEMENT_TIMEOUT_ENV,
    POLL_SECONDS,
    WAITING_STATE,
    ClusterCapacityError,
    Member,
    PoolPlacement,
    cluster_nodes,
)
from adaptlab.errors import ConfigError
from adaptlab.models.base import TextKind
from adaptlab.runtime import embedded_node_alive, is_embedded
from adaptlab.runtime.progress import Progress

__all__ = ["ActorPool", "Dispatch", "raise_init_error"]

log = logging.getLogger(__name__)


_IN_FLIGHT_PER_ACTOR = 2


class ActorPool(Protocol):
    """What a dispatch needs of its pool (:class:`~adaptlab.embedding.pool.EncoderPool`)."""

    members: list[Member]
    placement: PoolPlacement
    reported_losses: set[str]

    def ready_members(self) -> list[int]: ...

    def mark_ready(self, index: int, where: dict[str, Any]) -> None: ...

    def replace(self, index: int) -> None: ...


class Dispatch:
    """One call's scheduling state: a queue of block indices, the in-flight references, the
    actors lost with their nodes and since when no actor has been ready."""

    def __init__(
        self,
        pool: ActorPool,
        blocks: Sequence[tuple[np.ndarray, list[str]]],
        kind: TextKind,
        batch_size: int,
        max_restarts: int,
        tokens: bool = False,
        timeout: float = PLACEMENT_TIMEOUT,
    ) -> None:
        self.pool, self.blocks, self.kind, self.batch_size = pool, blocks, kind, batch_size
        self.max_restarts, self.timeout = max_restarts, timeout
        self.mode: dict[str, Any] = {"tokens": True} if tokens else {}  # dense calls stay as they were
        self.queue = list(range(len(blocks)))[::-1]  # pop() takes the first (longest) block
        self.in_flight: dict[Any, tuple[int, int]] = {}  # ref -> (block, actor index)
        self.replaced = 0
        self.total, self.done = sum(len(b[0]) for b in blocks), 0
        self.losses = NodeLosses(pool.reported_losses)  # the nodes this call lost, their lines
        self.idle_since: float | None = None  # when the pool last had no ready actor
        self.warned = False  # whether this wait for a ready actor was logged
        self.progress: Progress | None = None  # told when no actor is ready ("waiting for capacity")

    def submit(self, actor_index: int) -> None:
        block = self.queue.pop()
        row_ids, texts = self.blocks[block]
        ref = self.pool.members[actor_index].actor.__call__.remote(
            {"row_id": row_ids, "text": texts}, kind=self.kind, batch_size=self.batch_size, **self.mode
        )
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
                self.losses.report(time.monotonic())
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
            self.losses.report()  # the call ended (or failed): every loss gets its line now

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
        node = node_of_death(self.pool.members[actor_index], error, cluster_nodes())
        if node is None:
            self.replaced += 1
            if self.replaced > self.max_restarts:
                raise RuntimeError(
                    f"embedding actors died {self.replaced} times in one call (max_restarts={self.max_restarts}); "
                    f"last error: {str(error).splitlines()[0] if str(error) else type(error).__name__}"
                ) from error
            log.warning(
                "embedding actor %d died (%s); replacing it and retrying %d block(s)",
                actor_index,
                type(error).__name__,
                len(lost),
            )
        else:
            self.losses.note(actor_index, node, len(lost), sum(len(self.blocks[b][0]) for b in lost))
        self.queue.extend(sorted(lost, reverse=True))
        self.pool.replace(actor_index)

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
        if not self.warned and (self.losses.lost or now - self.idle_since > 0.1 * self.timeout):
            self.warned = True  # once per wait: the log says why progress stopped
            log.warning(
                "no embedding actor is ready (%d waiting for a node with room or loading the encoder); "
                "failing in %.0f s unless one gets ready",
                len(self.pool.members),
                self.timeout - (now - self.idle_since),
            )
        if now - self.idle_since > self.timeout:
            raise ClusterCapacityError(self.capacity_message())

    def check_embedded_node(self) -> None:
        """The embedded Ray has one node and nothing replaces it: when its raylet process has
        exited, the GCS lists no live node, or the node this call lost is the only one, fail now with one line instead of waiting
        out the placement time-out."""
        nodes = cluster_nodes()
        alive = [ip or node[:12] for node, (up, ip) in nodes.items() if up and node not in self.losses.lost]
        if embedded_node_alive() is not False and (alive or not (nodes or self.losses.lost)):
            return
        dead = (
            lost_nodes_text(self.losses.lost)
            if self.losses.lost
            else ", ".join(node_text(node, ip) for node, (_, ip) in nodes.items())
        )
        raise ClusterCapacityError(
            f"embedding stopped: the node of the embedded Ray ({dead}) died and cannot come back (this process "
            f"started that Ray: no other node can take its place); {self.done}/{self.total} texts of this call "
            "were embedded and are not kept; run the study again (finished work is reused from the content cache)"
        )

    def capacity_message(self) -> str:
        """One line: the lost nodes, what was done, how to resume."""
        p = self.pool.placement
        need = f"{p.num_gpus:g} GPU" if p.num_gpus else f"{p.num_cpus:g} CPU"
        if self.losses.lost:
            what = "lost node(s) " + lost_nodes_text(self.losses.lost)
        else:
            what = "no node was lost in this call, but none has room"
        return (
            f"embedding stopped: no embedding actor was ready for {self.timeout:g} s, none could be placed "
            f"or load its encoder ({what}; each actor needs {need}); {self.done}/{self.total} texts of this call were embedded and are not "
            f"kept; to resume, re-run the same study once the cluster has room (finished work is reused "
            f"from the content cache), or wait longer with {PLACEMENT_TIMEOUT_ENV}=SECONDS"
        )


def raise_init_error(e: Exception) -> None:
    """An actor that could not load its encoder: raise our own error (a ConfigError) readably."""
    if not getattr(e, "actor_init_failed", False):
        return
    lines = [ln.strip() for ln in str(getattr(e, "error_msg", "") or e).splitlines() if ln.strip()]
    ours = [ln for ln in lines if ln.startswith("adaptlab.errors.")]
    message = ours[-1].split(":", 1)[1].strip() if ours else (lines[-1] if lines else type(e).__name__)
    raise ConfigError(f"the embedding actors could not load the encoder: {message}") from e
