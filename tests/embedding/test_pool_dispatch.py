"""The pool's dispatch after node loss, on a fake Ray (embedding_fakes.FakeRay, no cluster, seconds).

The real EncoderPool and its dispatch run against fake nodes with one slot per actor: a lost
node's blocks go to the live actors only, a replacement gets blocks once it is placed, and when
no actor can be placed for the time-out the call fails with one line.
"""

from __future__ import annotations

import logging
import sys
import time

import numpy as np
import pytest
from embedding_fakes import FakeRay, HashFactory, make_texts

from adaptlab.embedding import dispatch as dispatch_module
from adaptlab.embedding import node_losses
from adaptlab.embedding import pool as pool_module
from adaptlab.embedding.node_losses import node_of_death
from adaptlab.embedding.pipeline import _assemble, length_blocks
from adaptlab.embedding.placement import (
    PLACEMENT_TIMEOUT,
    PLACEMENT_TIMEOUT_ENV,
    POLL_SECONDS,
    ClusterCapacityError,
    Member,
    PoolPlacement,
    placement_timeout,
)
from adaptlab.embedding.pool import EncoderPool
from adaptlab.errors import AdaptlabError, ConfigError
from adaptlab.models import HashingEncoder

TEXTS = make_texts(120, seed=3)


@pytest.fixture
def fake_ray(monkeypatch):
    """A fake Ray with nodes head (1 slot), w1 and w2 (2 slots each), installed as ``ray``."""
    fake = FakeRay({"head": 1, "w1": 2, "w2": 2})
    monkeypatch.setitem(sys.modules, "ray", fake)
    # a multi-node cluster this process did not start, even when an earlier test started the
    # embedded Ray in this process (its one-node rule would fail a lost node at once)
    monkeypatch.setattr(dispatch_module, "is_embedded", lambda: False)
    return fake


def _pool(n: int) -> EncoderPool:
    return EncoderPool(HashFactory(16), PoolPlacement(n, 1.0, 0.0, None, None))  # no torch_threads: actors run here


def _run(pool: EncoderPool, **kw) -> np.ndarray:
    blocks = length_blocks(TEXTS, 6)
    emb, _, _ = _assemble(len(TEXTS), pool.run(blocks, kind="document", batch_size=3, **kw))
    return emb


def _expected() -> np.ndarray:
    return HashingEncoder(16).encode(TEXTS, kind="document")


def _loss_lines(caplog) -> list[str]:  # noqa: ANN001
    """The pool's lines about lost nodes a user sees (INFO and above)."""
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO and " lost" in r.getMessage()]


def _requeued(actors: list) -> tuple[int, int]:  # noqa: ANN001
    """(blocks, texts) of the calls that failed on ``actors``: what the pool had to queue again."""
    failed = [r for a in actors for r in a.refs if r.name == "__call__" and r.error is not None and not r.got]
    return len(failed), sum(r.rows for r in failed)


def _on(fake: FakeRay, node: str) -> list:
    return [a for a in fake.actors if a.node is not None and a.node.name == node]


def test_a_lost_nodes_blocks_go_to_the_live_actors_while_its_replacements_wait(fake_ray, caplog):
    pool = _pool(5)
    fake_ray.events[9] = lambda r: r.kill_node("w1")
    emb = _run(pool, max_restarts=0)  # node losses do not use the crash budget
    np.testing.assert_array_equal(emb, _expected())
    lost = [a for a in fake_ray.actors if a.node is not None and a.node.name == "w1"]
    assert len(lost) == 2 and all(a.dead and a.calls > 0 for a in lost)  # they had work when the node went
    pending = [m.actor for m in pool.members if m.ready is not None]
    assert len(pending) == 2 and all(a.node is None and a.calls == 0 for a in pending)  # no room: no blocks
    assert len(pool.ready_members()) == 3
    blocks, texts = _requeued(lost)
    assert blocks >= 2 and _loss_lines(caplog) == [  # one line for the node, both actors in it
        f"embedding: node w1 ({lost[0].node.ip}) lost; 2 actor(s) replaced, {blocks} block(s) ({texts} texts) "
        "requeued to the live actors; the replacements join once a node has room"
    ]


@pytest.mark.parametrize(("delay", "counted"), [(10.0, 2), (0.0, 1)])
def test_a_node_gets_one_line_counting_the_actors_lost_within_the_report_delay(
    fake_ray, caplog, monkeypatch, delay, counted
):
    """w1's raylet goes at round 9: one actor's call fails at once, the other's five rounds later (as
    Ray reports them, "temporarily unavailable"). Within the delay both are in the node's one line;
    with no delay the line is written at once and the later death is a DEBUG line only."""
    monkeypatch.setattr(node_losses, "LOSS_REPORT_DELAY", delay)
    caplog.set_level(logging.DEBUG, logger=node_losses.__name__)
    pool = _pool(5)
    w1 = []

    def node_goes(r: FakeRay) -> None:
        w1.extend(_on(r, "w1"))
        next(n for n in r.nodes_ if n.name == "w1").alive = False
        w1[0].die(r.unavailable())

    fake_ray.events[9] = node_goes
    fake_ray.events[14] = lambda r: w1[1].die(r.unavailable())
    np.testing.assert_array_equal(_run(pool, max_restarts=0), _expected())  # node losses use no crash budget
    lines = _loss_lines(caplog)
    assert len(lines) == 1 and lines[0].startswith(f"embedding: node w1 ({w1[0].node.ip}) lost; {counted} actor(s) "), (
        lines
    )
    assert ("reported already" in caplog.text) == (counted == 1)


def test_a_node_lost_in_an_earlier_call_gets_no_second_line(fake_ray, caplog):
    """A replacement Ray had placed on the dying node fails in the next call, naming the node in its
    message (it never reported one): counted as that node's loss, not a crash, and not reported again."""
    caplog.set_level(logging.DEBUG, logger=node_losses.__name__)
    pool = _pool(5)
    fake_ray.events[9] = lambda r: r.kill_node("w1")
    _run(pool, max_restarts=0)
    w1 = next(n for n in fake_ray.nodes_ if n.name == "w1")
    pending = next(m.actor for m in pool.members if m.ready is not None)
    fake_ray.events[fake_ray.round + 2] = lambda r: pending.die(r.died(w1))
    np.testing.assert_array_equal(_run(pool, max_restarts=0), _expected())
    assert pending.dead and len(_loss_lines(caplog)) == 1 and pool.reported_losses == {"w1"}
    assert "embedding actor" in caplog.text and "also on node w1" in caplog.text


def test_the_node_of_an_actor_that_never_got_ready_is_the_one_rays_message_names():
    """Ray 2.60's message for a replacement placed on a node that then died (measured on a local
    cluster, kill -9 of a worker's raylet); the node is no longer listed by the control store."""
    import ray.exceptions
    from ray.core.generated.common_pb2 import ActorDiedErrorContext

    node = "3848a2484a58facc6dd696a81d27a1351ecf917bbbe972e4a7a86a51"
    error = ray.exceptions.ActorDiedError(
        ActorDiedErrorContext(
            class_name="EmbedBatch",
            actor_id=b"\x01" * 16,
            node_ip_address="192.0.2.2",
            never_started=True,
            error_message=f"The actor died because its node has died. Node Id: {node}\n\tthe actor's node was "
            "terminated unexpectedly: health check failed due to missing too many heartbeats",
        )
    )
    pending = Member(actor=None, ready=object())
    assert node_of_death(pending, error, {}) == (node, "192.0.2.2")
    assert node_of_death(pending, error, {node: (False, "10.1.2.3")}) == (node, "10.1.2.3")  # the listed address
    unavailable = ray.exceptions.ActorUnavailableError("RpcError: Socket closed", b"\x01" * 16)
    assert node_of_death(pending, unavailable, {}) == ("unknown", "")  # Ray names no node: said so
    assert node_of_death(Member(None, None, "w1", "10.0.0.1"), ray.exceptions.ActorDiedError(), {}) is None  # a crash


def test_replacements_take_blocks_once_a_node_has_room_again(fake_ray):
    pool = _pool(5)
    fake_ray.events[9] = lambda r: r.kill_node("w1")
    fake_ray.events[15] = lambda r: r.add_node("w3", 2)
    emb = _run(pool)
    np.testing.assert_array_equal(emb, _expected())
    joined = [a for a in fake_ray.actors if a.node is not None and a.node.name == "w3"]
    assert len(joined) == 2 and all(a.calls > 0 for a in joined)
    assert len(pool.ready_members()) == 5


def test_no_room_left_fails_with_one_line_within_the_timeout(fake_ray, caplog):
    fake_ray.nodes_ = fake_ray.nodes_[1:]  # w1 and w2 only
    pool = _pool(4)
    fake_ray.events[9] = lambda r: (r.kill_node("w1"), r.kill_node("w2"))
    t0 = time.monotonic()
    with pytest.raises(ClusterCapacityError) as info:
        _run(pool, timeout=0.3)
    assert time.monotonic() - t0 < 5
    message = str(info.value)
    assert isinstance(info.value, AdaptlabError) and "\n" not in message
    assert "w1 (10.0.0." in message and "w2 (10.0.0." in message
    done = int(message.split(" texts of this call")[0].rsplit(" ", 1)[1].split("/")[0])
    assert 0 < done < len(TEXTS) and f"/{len(TEXTS)} texts" in message
    assert "re-run the same study" in message and PLACEMENT_TIMEOUT_ENV in message
    assert pool.members == []  # the unplaceable actors were released
    assert caplog.text.count("no embedding actor is ready (4 waiting") == 1  # why it stopped, logged once
    assert sorted(line.split()[2] for line in _loss_lines(caplog)) == ["w1", "w2"]  # one line per lost node


def test_a_pool_that_never_gets_room_names_no_lost_node(fake_ray):
    fake_ray.nodes_ = []
    with pytest.raises(ClusterCapacityError, match="no node was lost in this call, but none has room"):
        _run(_pool(2), timeout=0.2)


def test_a_crash_on_a_live_node_uses_the_restart_budget(fake_ray):
    pool = _pool(2)
    fake_ray.events[3] = lambda r: r.actors[0].die()  # the process died, its node is alive
    with pytest.raises(RuntimeError, match=r"died 1 times in one call \(max_restarts=0\)"):
        _run(pool, max_restarts=0)


def test_resize_drops_pending_actors_first_and_grows_with_pending_ones(fake_ray):
    fake_ray.nodes_ = fake_ray.nodes_[:2]  # head 1 + w1 2: three slots
    pool = _pool(5)
    assert [m.actor.node is not None for m in pool.members] == [True, True, True, False, False]
    pool.resize(3)
    assert len(pool.members) == 3 and all(m.actor.node is not None for m in pool.members)
    pool.resize(4)
    assert len(pool.members) == 4 and pool.members[-1].actor.node is None


def test_make_room_releases_the_idle_pools_and_keeps_the_one_in_use(fake_ray, monkeypatch):
    """Training calls ``make_room`` before it asks for CPUs: every pool no call is using is
    released (its actors killed), a pool in the middle of a call keeps its actors."""
    from collections import OrderedDict

    from adaptlab.runtime import make_room

    monkeypatch.setattr(fake_ray, "is_initialized", lambda: True)
    monkeypatch.setattr(pool_module, "_session_id", lambda: "session")
    idle, busy = _pool(2), _pool(1)
    monkeypatch.setattr(pool_module, "_POOLS", OrderedDict(idle=idle, busy=busy))
    idle_actors, busy_actors = list(idle.actors), list(busy.actors)
    call = busy.run(length_blocks(TEXTS, 6), kind="document", batch_size=3)
    first = next(call)  # the call is in progress: it holds its pool
    pool_module.on_make_room(pool_module.release_idle_pools)  # what get_pool registers
    assert make_room() == 2
    assert all(a.dead for a in idle_actors) and not any(a.dead for a in busy_actors)
    assert list(pool_module._POOLS) == ["busy"] and idle.members == []
    emb, _, _ = _assemble(len(TEXTS), [first, *call])  # the busy pool's call ends normally
    np.testing.assert_allclose(emb, _expected(), atol=1e-6)
    assert make_room() == 1 and all(a.dead for a in busy_actors) and not pool_module._POOLS


def test_placement_timeout_setting(monkeypatch):
    monkeypatch.delenv(PLACEMENT_TIMEOUT_ENV, raising=False)
    assert placement_timeout() == PLACEMENT_TIMEOUT
    monkeypatch.setenv(PLACEMENT_TIMEOUT_ENV, "30")
    assert placement_timeout() == 30.0
    assert placement_timeout(2.5) == 2.5  # an explicit value wins over the environment
    monkeypatch.setenv(PLACEMENT_TIMEOUT_ENV, "soon")
    with pytest.raises(ConfigError, match=f"{PLACEMENT_TIMEOUT_ENV} must be a positive number of seconds"):
        placement_timeout()
    with pytest.raises(ConfigError, match="placement_timeout must be"):
        placement_timeout(0)
    assert POLL_SECONDS < PLACEMENT_TIMEOUT


def test_token_vectors_survive_a_lost_node_the_same_way(fake_ray):
    from embedding_fakes import TokenHashEncoder, TokenHashFactory

    from adaptlab.embedding.tokens import assemble_tokens

    pool = EncoderPool(TokenHashFactory(), PoolPlacement(5, 1.0, 0.0, None, None))
    fake_ray.events[9] = lambda r: r.kill_node("w2")
    runs = pool.run(length_blocks(TEXTS, 6), kind="query", batch_size=3, tokens=True, max_restarts=0)
    tokens, _, _ = assemble_tokens(len(TEXTS), runs)
    expected = TokenHashEncoder(8).encode_tokens(TEXTS, kind="query")
    np.testing.assert_array_equal(tokens.offsets, expected.offsets)
    np.testing.assert_array_equal(tokens.vectors, expected.vectors)
    assert [a.node.name for a in fake_ray.actors if a.dead and a.calls] == ["w2", "w2"]  # they had work
