"""Whether Ray lost a piece of work with its node: the one classification the embedding pool and the
training scheduler share.

Ray says it two ways. By exception class: ``NodeDiedError`` and ``LocalRayletDiedError`` (a task
whose node or raylet went), ``ActorUnavailableError`` (a call to an actor whose node just went,
before Ray marks the node dead; ``RayActorError`` on a Ray without that class). And by the words of
an actor's death message, where the class (``ActorDiedError``) is the same for a crash of the
actor's own process: "The actor died because its node has died. Node Id: 3f2a...", followed by
lines such as ``ip: 10.0.0.2``. Work killed for memory (``OutOfMemoryError``) or crashed
(``WorkerCrashedError``) is lost too, but not with its node.
"""

from __future__ import annotations

import re

__all__ = ["NODE_DEATH_WORDS", "ip_in", "lost_with_node", "lost_work_errors", "node_id_in"]

NODE_DEATH_WORDS = ("node has died", "node is dead", "node died", "node was terminated")
"""Phrases of Ray's messages (lower case) that say the work's node died."""

_NODE_ID_IN_TEXT = re.compile(r"\bnode id:\s*(\w+)", re.IGNORECASE)


def _node_errors() -> tuple[type[BaseException], ...]:
    import ray.exceptions as rex  # deferred: ray is heavy and only needed here

    unavailable = getattr(rex, "ActorUnavailableError", rex.RayActorError)
    return (rex.NodeDiedError, rex.LocalRayletDiedError, unavailable)


def lost_work_errors() -> tuple[type[BaseException], ...]:
    """The errors of a Ray task lost through no fault of its own: killed for memory, crashed, or
    lost with its node (:func:`lost_with_node` tells the last apart); what a scheduler retries."""
    import ray.exceptions as rex  # deferred: ray is heavy and only needed here

    return (rex.OutOfMemoryError, rex.WorkerCrashedError, rex.NodeDiedError, rex.LocalRayletDiedError)


def lost_with_node(error: BaseException) -> bool:
    """Whether ``error`` says the work was lost with its node (module docstring): one of Ray's
    node-loss classes, or a message that says the node died."""
    if isinstance(error, _node_errors()):
        return True
    text = str(error).lower()
    return any(words in text for words in NODE_DEATH_WORDS)


def node_id_in(text: str) -> str:
    """The node id a Ray error message names ("Node Id: 3f2a..."), else ``""``."""
    match = _NODE_ID_IN_TEXT.search(text)
    return match.group(1) if match else ""


def ip_in(text: str) -> str:
    """The address a Ray error message names on a line of its own (``ip: 10.0.0.2``), else ``""``."""
    for line in text.splitlines():
        if line.strip().startswith("ip:"):
            return line.split(":", 1)[1].strip()
    return ""
