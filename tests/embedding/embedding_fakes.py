"""Fake encoders for the Ray pipeline tests (shipped to Ray workers by value, see conftest)."""

from __future__ import annotations

import os
import re
import threading
import time

import numpy as np

from adaptlab.models.hashing import HashingEncoder


class CrashOnceEncoder(HashingEncoder):
    """Hashing encoder whose process dies (os._exit) on the first batch seen by any actor.

    ``marker`` is created atomically (O_EXCL) by the one actor that crashes, so exactly one
    crash happens per marker path, whichever actor gets there first.
    """

    def __init__(self, marker: str, dim: int = 16) -> None:
        super().__init__(dim)
        self.marker = marker

    def _encode(self, texts, kind, batch_size):  # noqa: ANN001
        try:
            fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return super()._encode(texts, kind, batch_size)
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        os._exit(3)


class SlowHashingEncoder(HashingEncoder):
    """Hashing encoder that sleeps ``delay`` seconds per batch (so both actors get work)."""

    def __init__(self, dim: int = 16, delay: float = 0.0) -> None:
        super().__init__(dim)
        self.delay = delay

    def _encode(self, texts, kind, batch_size):  # noqa: ANN001
        time.sleep(self.delay)
        return super()._encode(texts, kind, batch_size)


class HashFactory:
    """Picklable factory(device) -> hashing encoder (optionally slowed down)."""

    def __init__(self, dim: int = 16, delay: float = 0.0) -> None:
        self.dim, self.delay = dim, delay

    def __call__(self, device=None):  # noqa: ANN001
        return SlowHashingEncoder(self.dim, self.delay)


class CrashOnceFactory:
    def __init__(self, marker: str, dim: int = 16) -> None:
        self.marker, self.dim = marker, dim

    def __call__(self, device=None):  # noqa: ANN001
        return CrashOnceEncoder(self.marker, self.dim)


def make_texts(n: int, seed: int = 0) -> list[str]:
    """``n`` distinct texts of varying length (the row index is the first token)."""
    rng = np.random.default_rng(seed)
    words = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta"]
    return [f"t{i} " + " ".join(rng.choice(words, int(rng.integers(0, 40)))) for i in range(n)]


class FailingFactory:
    """A factory whose model cannot be loaded on the worker."""

    def __call__(self, device=None):  # noqa: ANN001
        from adaptlab.errors import ConfigError

        raise ConfigError("model directory '/gone' does not exist on this node")


class CrashAlwaysEncoder(HashingEncoder):
    """Hashing encoder whose process dies on every batch (a model that always crashes its worker)."""

    def _encode(self, texts, kind, batch_size):  # noqa: ANN001
        os._exit(4)


class CrashAlwaysFactory:
    def __call__(self, device=None):  # noqa: ANN001
        return CrashAlwaysEncoder(16)


class BulkyFactory(HashFactory):
    """A factory that pickles to ~400 kB (so Ray would put it into the object store)."""

    def __init__(self, dim: int = 16) -> None:
        super().__init__(dim)
        self.payload = np.arange(100_000, dtype=np.float32)


# ---------------------------------------------------------------------------------------
# A fake Ray for the pool's dispatch logic (no cluster): stands in for the ``ray`` module
# (``sys.modules["ray"]``) while the real EncoderPool and its dispatch run in this process.
class FakeRef:
    """A result that resolves at wait round ``due`` (or fails with ``error`` once set); ``name`` is
    the method called, ``rows`` the texts of a block."""

    def __init__(self, actor: FakeActor, due: int, fn=None, name: str = "", rows: int = 0) -> None:  # noqa: ANN001
        self.actor, self.due, self.fn, self.name, self.rows = actor, due, fn, name, rows
        self.error: Exception | None = None
        self.got = False  # its result was fetched (a later death of its actor does not undo that)

    def resolved(self, round_: int) -> bool:
        return self.error is not None or (self.actor.node is not None and not self.actor.dead and round_ >= self.due)


class _Method:
    def __init__(self, actor: FakeActor, name: str) -> None:
        self.actor, self.name = actor, name

    def remote(self, *args, **kwargs) -> FakeRef:  # noqa: ANN002, ANN003
        return self.actor.call(self.name, args, kwargs)


class FakeActor:
    """An actor of the fake cluster: placed on a node with a free slot (or pending), running a
    real :class:`~adaptlab.embedding.actor.EmbedBatch` in this process once placed."""

    def __init__(self, cluster: FakeRay, factory, kwargs: dict) -> None:  # noqa: ANN001
        self.cluster, self.factory, self.kwargs = cluster, factory, kwargs
        self.node: FakeNode | None = None
        self.dead = False
        self.calls = 0
        self.refs: list[FakeRef] = []
        self.impl = None
        self.where = _Method(self, "where")
        self.__call__ = _Method(self, "__call__")

    def call(self, name: str, args: tuple, kwargs: dict) -> FakeRef:
        if name == "__call__":
            self.calls += 1
        rows = len(args[0]["row_id"]) if name == "__call__" else 0
        ref = FakeRef(self, self.cluster.round + 1, lambda: self.run(name, args, kwargs), name, rows)
        if self.dead:
            ref.error = self.cluster.died()
        self.refs.append(ref)
        return ref

    def run(self, name: str, args: tuple, kwargs: dict):  # noqa: ANN201
        if name == "where":
            return {"node_id": self.node.name, "ip": self.node.ip, "pid": os.getpid()}
        return self.impl(*args, **kwargs)

    def place(self, node: FakeNode) -> None:
        from adaptlab.embedding.actor import EmbedBatch

        self.node = node
        self.impl = EmbedBatch(self.factory, **self.kwargs)
        for ref in self.refs:  # calls made while pending are due from now on
            ref.due = max(ref.due, self.cluster.round + 1)

    def die(self, error: Exception | None = None) -> None:
        """The actor is gone: its calls fail with ``error`` (default: a death of its own process)."""
        self.dead = True
        for ref in self.refs:
            if ref.error is None:
                ref.error = error or self.cluster.died()


class FakeNode:
    def __init__(self, name: str, slots: int) -> None:
        self.name, self.slots, self.alive = name, slots, True
        self.ip = f"10.0.0.{sum(map(ord, name)) % 250}"


class _ActorClass:
    def __init__(self, cluster: FakeRay) -> None:
        self.cluster = cluster

    def options(self, **opts):  # noqa: ANN003, ANN201
        return self

    def remote(self, factory, **kwargs) -> FakeActor:  # noqa: ANN001, ANN003
        actor = FakeActor(self.cluster, factory, kwargs)
        self.cluster.actors.append(actor)
        self.cluster.place_pending()
        return actor


class FakeRay:
    """The parts of the ``ray`` module the pool uses, over fake nodes with one slot per actor.

    ``wait`` is one round: first the ``events[round]`` run (kill a node, add one), pending actors
    are placed where a slot is free, then the oldest resolved reference is returned (or none
    after a short sleep). ``exceptions`` are Ray's real exception classes."""

    def __init__(self, nodes: dict[str, int]) -> None:
        import ray.exceptions

        self.exceptions = ray.exceptions
        self.nodes_ = [FakeNode(n, s) for n, s in nodes.items()]
        self.actors: list[FakeActor] = []
        self.round = 0
        self.events: dict[int, object] = {}
        self.max_rounds = 5000

    def died(self, node: FakeNode | None = None) -> Exception:
        """Ray's error for an actor whose process died, or (``node``) that died with its node, worded
        as Ray 2.60 words it ("The actor died because its node has died. Node Id: ...", its ip)."""
        if node is None:
            return self.exceptions.ActorDiedError()
        from ray.core.generated.common_pb2 import ActorDiedErrorContext

        return self.exceptions.ActorDiedError(
            ActorDiedErrorContext(
                class_name="EmbedBatch",
                actor_id=b"\x01" * 16,
                node_ip_address=node.ip,
                error_message=f"The actor died because its node has died. Node Id: {node.name}",
            )
        )

    def unavailable(self) -> Exception:
        """Ray's error for a call to an actor whose node just went (before Ray marks the node dead)."""
        return self.exceptions.ActorUnavailableError(
            "The actor is temporarily unavailable: RpcError: RPC error: Socket closed rpc_code: 14", b"\x01" * 16
        )

    def is_initialized(self) -> bool:
        return False

    def remote(self, cls) -> _ActorClass:  # noqa: ANN001
        return _ActorClass(self)

    def place_pending(self) -> None:
        for actor in self.actors:
            if actor.node is None and not actor.dead:
                free = [n for n in self.nodes_ if n.alive and n.slots > self.used(n)]
                if free:
                    actor.place(free[0])

    def used(self, node: FakeNode) -> int:
        return sum(1 for a in self.actors if a.node is node and not a.dead)

    def kill_node(self, name: str) -> None:
        node = next(n for n in self.nodes_ if n.name == name)
        node.alive = False
        for actor in self.actors:
            if actor.node is node:
                actor.die(self.died(node))

    def add_node(self, name: str, slots: int) -> None:
        self.nodes_.append(FakeNode(name, slots))

    def kill(self, actor: FakeActor) -> None:
        actor.die()

    def nodes(self) -> list[dict]:
        return [{"NodeID": n.name, "NodeManagerAddress": n.ip, "Alive": n.alive} for n in self.nodes_]

    def wait(self, refs, num_returns=1, timeout=None):  # noqa: ANN001, ANN201
        self.round += 1
        if self.round > self.max_rounds:  # a dispatch bug must fail the test, not hang it
            raise RuntimeError(f"fake Ray: no end after {self.max_rounds} wait rounds")
        event = self.events.pop(self.round, None)
        if event is not None:
            event(self)
        self.place_pending()
        done = [r for r in refs if r.resolved(self.round)][:num_returns]
        if not done:
            time.sleep(0.002)
        return done, [r for r in refs if r not in done]

    def get(self, ref: FakeRef, timeout=None):  # noqa: ANN001, ANN201
        if ref.error is not None:
            raise ref.error
        ref.got = True
        return ref.fn()


class TokenHashEncoder(HashingEncoder):
    """A late-interaction stand-in: one hashing vector per word (token) of each text."""

    def encode_tokens(self, texts, kind="document", batch_size=32):  # noqa: ANN001, ANN201
        from adaptlab.models.colbert import TokenVectors

        words = [t.split() or [""] for t in texts]
        flat = [w for ws in words for w in ws]
        offsets = np.concatenate([[0], np.cumsum([len(ws) for ws in words])])
        return TokenVectors(self.encode(flat, kind=kind, batch_size=batch_size), offsets)


class TokenHashFactory:
    def __call__(self, device=None):  # noqa: ANN001
        return TokenHashEncoder(8)


class ClockedStream:
    """A non-terminal stream that records when each of adaptlab's lines was written (Ray may
    forward an earlier test's actor output onto ``sys.stderr`` late: those lines are not ours),
    and sets ``event`` once ``beats`` lines matching ``pattern`` came (so a test can wait for
    them instead of sleeping)."""

    def __init__(self, beats: int = 0, pattern: re.Pattern[str] | None = None) -> None:
        self.lines: list[tuple[float, str]] = []
        self.t0 = time.perf_counter()
        self.beats, self.pattern, self.event = beats, pattern, threading.Event()

    def write(self, text: str) -> int:
        if text.strip().startswith("[adaptlab]"):
            self.lines.append((time.perf_counter(), text.strip()))
            if self.pattern is not None and sum(bool(self.pattern.match(ln)) for _, ln in self.lines) >= self.beats:
                self.event.set()
        return len(text)

    def flush(self) -> None:
        pass

    def gaps(self, end: float) -> list[float]:
        """Seconds between the stream's start, each line and ``end``."""
        times = [self.t0] + [t for t, _ in self.lines] + [end]
        return [b - a for a, b in zip(times, times[1:])]
