"""Node-loss classification (runtime/node_loss.py), the one the embedding pool and the training
scheduler share, on Ray's real exception classes and the messages the pool sees."""

from __future__ import annotations

import pytest

ray_exceptions = pytest.importorskip("ray.exceptions")

from adaptlab.runtime.node_loss import ip_in, lost_with_node, lost_work_errors, node_id_in  # noqa: E402

NODE = "3f2a8c1d9e0b" + "7" * 44


def _actor_died(message: str) -> BaseException:
    """An ``ActorDiedError`` worded as Ray words it, with the address line it carries."""
    from ray.core.generated.common_pb2 import ActorDiedErrorContext

    return ray_exceptions.ActorDiedError(
        ActorDiedErrorContext(
            class_name="EmbedBatch", actor_id=b"\x01" * 16, node_ip_address="10.0.0.2", error_message=message
        )
    )


def test_the_node_loss_classes_are_lost_with_their_node():
    assert lost_with_node(ray_exceptions.NodeDiedError("node 1 died"))
    assert lost_with_node(ray_exceptions.LocalRayletDiedError())
    assert lost_with_node(
        ray_exceptions.ActorUnavailableError(
            "The actor is temporarily unavailable: RpcError: RPC error: Socket closed rpc_code: 14", b"\x01" * 16
        )
    )


def test_memory_kills_and_crashes_are_not():
    assert not lost_with_node(
        ray_exceptions.OutOfMemoryError(
            "Task was killed due to the node running low on memory. Memory on the node (IP: 10.0.0.2) was 15 GB"
        )
    )
    assert not lost_with_node(ray_exceptions.WorkerCrashedError())
    assert not lost_with_node(ray_exceptions.ActorDiedError())  # the actor's own process died


@pytest.mark.parametrize("words", ["node has died", "node is dead", "node died", "node was terminated"])
def test_an_actor_death_message_that_says_the_node_died_is(words):
    error = _actor_died(f"The actor died because its {words}. Node Id: {NODE}")
    assert lost_with_node(error)
    assert node_id_in(str(error)) == NODE and ip_in(str(error)) == "10.0.0.2"
    assert not lost_with_node(_actor_died("The actor died because its worker process exited (exit code 3)."))


def test_what_a_scheduler_retries():
    retried = lost_work_errors()
    assert ray_exceptions.NodeDiedError in retried and ray_exceptions.OutOfMemoryError in retried
    assert ray_exceptions.WorkerCrashedError in retried and ray_exceptions.LocalRayletDiedError in retried
    assert not issubclass(ray_exceptions.RayTaskError, retried)  # a task's own failure is not retried
    assert node_id_in("no node named") == "" and ip_in("no address") == ""
