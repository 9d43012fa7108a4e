"""The nodes one embedding call lost, and the one warning line each gets.

A lost node gets one line, once per pool: its id and address and what the pool did (actors
replaced, blocks requeued), written :data:`LOSS_REPORT_DELAY` s after the first of its actors was
found dead (or when the call ends), so the deaths of its other actors are counted in it. Whether an
actor died with its node is :func:`adaptlab.runtime.node_loss.lost_with_node`'s call, or the
cluster's node list's (:func:`node_of_death`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from adaptlab.embedding.placement import Member
from adaptlab.runtime.node_loss import ip_in, lost_with_node, node_id_in

__all__ = [
    "LOSS_REPORT_DELAY",
    "UNKNOWN_NODE",
    "NodeLoss",
    "NodeLosses",
    "lost_nodes_text",
    "node_of_death",
    "node_text",
]

log = logging.getLogger(__name__)


LOSS_REPORT_DELAY = 10.0
"""Seconds between finding the first actor lost with a node and the pool's one line about that node:
the node's other actors are found dead seconds apart (their calls fail one by one), and the line
counts them all (:class:`NodeLoss`)."""


UNKNOWN_NODE = "unknown"
"""The node of an actor lost with a node that neither answered its readiness call nor is named by Ray."""


def node_of_death(member: Member, error: Exception, nodes: dict[str, tuple[bool, str]]) -> tuple[str, str] | None:
    """``(node id, ip)`` when ``member`` died with its node (the cluster lists the node as dead, or
    Ray's message says so), else None (the actor's own process failed). The node is the one the
    actor reported when it got ready, else the one Ray's message names (an actor that never got ready,
    e.g. a replacement Ray had placed on the dying node: "The actor died because its node has died.
    Node Id: ..."), else :data:`UNKNOWN_NODE`."""
    text = str(error)
    node = member.node_id or node_id_in(text)
    alive, ip = nodes.get(node, (True, ""))
    if not (node and not alive) and not lost_with_node(error):
        return None
    return node or UNKNOWN_NODE, ip or ip_in(text) or member.ip


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
        return (
            f"embedding: node {node_text(node, self.ip)} lost; {self.actors} actor(s) replaced, "
            f"{self.blocks} block(s) ({self.texts} texts) requeued to the live actors; "
            "the replacements join once a node has room"
        )


def node_text(node: str, ip: str) -> str:
    """``3f2a8c1d9e0b (10.0.0.2)``: a node id's first 12 hex digits and its address."""
    return f"{node[:12]} ({ip or 'ip unknown'})"


def lost_nodes_text(lost: dict[str, str]) -> str:
    """``id (ip), ...`` of the lost nodes of a capacity error. An actor that died before it reported
    its node (a replacement Ray had sent to the dying node) is lost with node "unknown"; that
    entry is named only when no node is known."""
    known = {node: ip for node, ip in lost.items() if node != UNKNOWN_NODE} or lost
    return ", ".join(node_text(node, ip) for node, ip in known.items())


class NodeLosses:
    """The nodes one call lost (``lost``: node id -> ip) and the lines not written yet; ``reported``
    is the pool's set of nodes it has reported (one line per node and pool)."""

    def __init__(self, reported: set[str]) -> None:
        self.lost: dict[str, str] = {}
        self.pending: dict[str, NodeLoss] = {}
        self.reported = reported

    def note(self, actor_index: int, node: tuple[str, str], blocks: int, texts: int) -> None:
        """Count actor ``actor_index`` and its requeued ``blocks`` (``texts`` texts) in the line of
        ``node`` (id, ip); a node reported already gets a DEBUG line only."""
        self.lost[node[0]] = node[1]
        if node[0] in self.reported:
            log.debug(
                "embedding actor %d: also on node %s, reported already; %d block(s) requeued",
                actor_index,
                node_text(*node),
                blocks,
            )
            return
        loss = self.pending.setdefault(node[0], NodeLoss(node[1], time.monotonic()))
        loss.ip = loss.ip or node[1]
        loss.actors, loss.blocks, loss.texts = loss.actors + 1, loss.blocks + blocks, loss.texts + texts

    def report(self, now: float | None = None) -> None:
        """One warning line per lost node whose :data:`LOSS_REPORT_DELAY` has passed since its first
        actor was found dead (every pending node when ``now`` is None: the call ends)."""
        for node, loss in list(self.pending.items()):
            if now is None or now - loss.since >= LOSS_REPORT_DELAY:
                del self.pending[node]
                self.reported.add(node)
                log.warning("%s", loss.line(node))
