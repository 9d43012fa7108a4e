"""Fake encoders for the Ray pipeline tests (shipped to Ray workers by value, see conftest)."""

from __future__ import annotations

import os
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
