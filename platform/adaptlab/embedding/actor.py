"""The embedding stage: a callable class holding one encoder per Ray actor.

Heavy setup (thread count, model load) happens once in ``__init__``; ``__call__`` is a
pure function of its batch: ``{"row_id", "text"}`` -> ``{"row_id", "embedding", "pid",
"cuda_visible_devices"}``. The embeddings leave the actor as one contiguous float32
``[rows, dim]`` array per batch (no per-row Python objects); ``pid`` and
``cuda_visible_devices`` record which worker (and which GPU) produced each row. The same
actor serves documents and queries (``kind`` per call), so one warm actor pool per model
(:mod:`adaptlab.embedding.pool`) serves a whole study.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from adaptlab.models.base import Encoder, TextKind

__all__ = ["EmbedBatch", "EncoderFactory"]

EncoderFactory = Callable[[str | None], Encoder]
"""``factory(device) -> Encoder``; :class:`adaptlab.models.EncoderSpec` is one. Must pickle."""


class EmbedBatch:
    """Encodes the ``text`` column of each batch (``kind`` and ``batch_size`` may be given per call)."""

    def __init__(
        self,
        factory: EncoderFactory,
        *,
        kind: TextKind = "document",
        batch_size: int = 64,
        torch_threads: int | None = None,
        device: str | None = None,
    ) -> None:
        if torch_threads:
            os.environ["OMP_NUM_THREADS"] = str(torch_threads)
            import torch  # deferred: heavy, and only the actor process needs it

            torch.set_num_threads(int(torch_threads))
        self.encoder = factory(device)
        self.kind: TextKind = kind
        self.batch_size = int(batch_size)
        self.pid = os.getpid()
        self.cuda_visible_devices = os.environ.get("CUDA_VISIBLE_DEVICES", "")

    def __call__(self, batch: dict[str, Any], *, kind: TextKind | None = None,
                 batch_size: int | None = None) -> dict[str, np.ndarray]:
        texts = [str(t) for t in batch["text"]]
        emb = self.encoder.encode(texts, kind=kind or self.kind, batch_size=batch_size or self.batch_size)
        n = len(texts)
        return {
            "row_id": np.asarray(batch["row_id"], dtype=np.int64),
            "embedding": emb,
            "pid": np.full(n, self.pid, dtype=np.int64),
            "cuda_visible_devices": np.full(n, self.cuda_visible_devices, dtype=object),
        }
