"""Where a pool's actors go and how long work waits for room: :class:`PoolPlacement` (actors and
the resources of each), :class:`Member` (one actor and the node it was placed on), the cluster's
node list, the waits on Ray, the placement time-out and :class:`ClusterCapacityError`, raised when
no actor could be placed or load its encoder within that time-out.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from adaptlab.errors import AdaptlabError, ConfigError

__all__ = [
    "FETCH_TIMEOUT",
    "PLACEMENT_TIMEOUT",
    "PLACEMENT_TIMEOUT_ENV",
    "POLL_SECONDS",
    "WAITING_STATE",
    "ClusterCapacityError",
    "Member",
    "PoolPlacement",
    "cluster_nodes",
    "placement_timeout",
]


PLACEMENT_TIMEOUT = 180.0
"""Seconds a call waits while no actor of its pool is ready (every actor lost, waiting for a node
with room, or still loading its encoder) before it fails with :class:`ClusterCapacityError`
(``ADAPTLAB_POOL_PLACEMENT_TIMEOUT``). It covers a fresh actor's start and model load, hence minutes."""


PLACEMENT_TIMEOUT_ENV = "ADAPTLAB_POOL_PLACEMENT_TIMEOUT"


POLL_SECONDS = 2.0
"""Longest single wait on Ray: every wait is a round of at most this long, then the state is checked."""


WAITING_STATE = "waiting for capacity"
"""What progress lines say while no actor of the pool is ready (placed and loaded)."""


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


@dataclass
class Member:
    """One actor of a pool: ``ready`` is its pending :meth:`EmbedBatch.where` reference until
    the actor answered (placed and encoder loaded), then ``None`` with its ``node_id`` and ``ip``."""

    actor: Any
    ready: Any
    node_id: str = ""
    ip: str = ""


def cluster_nodes() -> dict[str, tuple[bool, str]]:
    """``{node id: (alive, ip)}`` of the cluster's nodes as the GCS lists them (empty when it
    cannot be asked for a moment)."""
    import ray  # deferred: ray is heavy and only needed here

    try:
        return {n["NodeID"]: (bool(n.get("Alive", True)), str(n.get("NodeManagerAddress", ""))) for n in ray.nodes()}
    except Exception:  # noqa: BLE001 - the GCS may be unreachable for a moment; "unknown" is safe
        return {}
