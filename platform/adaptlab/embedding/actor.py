"""The embedding stage: a callable class holding one encoder per Ray actor.

Heavy setup (thread count, model load) happens once in ``__init__``; ``__call__`` is a
pure function of its batch: ``{"row_id", "text"}`` -> ``{"row_id", "embedding", "pid",
"cuda_visible_devices"}``. The embeddings leave the actor as one contiguous float32
``[rows, dim]`` array per batch (no per-row Python objects); ``pid`` and
``cuda_visible_devices`` record which worker (and which GPU) produced each row. The same
actor serves documents and queries (``kind`` per call), so one warm actor pool per model
(:mod:`adaptlab.embedding.pool`) serves a whole study.

Token mode (``tokens=True``, late-interaction encoders such as
:class:`adaptlab.models.colbert.ColBERTEncoder`): ``encode_tokens`` instead of ``encode``, and the
batch leaves as ``{"row_id", "vectors", "lengths", "pid", "cuda_visible_devices"}``: ``vectors``
is the batch's packed float32 ``[T, dim]`` token vectors (row ``j`` owns the ``lengths[j]`` rows
after those of rows ``0..j-1``), ``lengths`` int64 ``[rows]`` -- again one contiguous array, no
per-row objects; the driver (:mod:`adaptlab.embedding.tokens`) puts the rows back in input order.

``where()`` names the actor's node, IP and process; the pool calls it right after creating the
actor and gives the actor blocks only once it has answered (placed, encoder loaded).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from adaptlab.errors import ConfigError
from adaptlab.models.base import Encoder, TextKind

__all__ = ["EmbedBatch", "EncoderFactory"]

EncoderFactory = Callable[[str | None], Encoder]
"""``factory(device) -> Encoder``; :class:`adaptlab.models.EncoderSpec` is one. Must pickle."""


class EmbedBatch:
    """Encodes the ``text`` column of each batch (``kind``, ``batch_size`` and ``tokens`` may be
    given per call)."""

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

    def where(self) -> dict[str, Any]:
        """Where this actor runs (``node_id``, ``ip``, ``pid``); answered once ``__init__`` is done, so
        the pool uses it as the actor's readiness call."""
        import ray  # deferred: only a Ray actor calls this

        node_ip = getattr(ray._private.worker.global_worker, "node_ip_address", "")  # the node's --node-ip-address
        return {"node_id": ray.get_runtime_context().get_node_id(), "ip": node_ip or "", "pid": self.pid}

    def __call__(
        self,
        batch: dict[str, Any],
        *,
        kind: TextKind | None = None,
        batch_size: int | None = None,
        tokens: bool = False,
    ) -> dict[str, np.ndarray]:
        texts = [str(t) for t in batch["text"]]
        n = len(texts)
        where = {
            "pid": np.full(n, self.pid, dtype=np.int64),
            "cuda_visible_devices": np.full(n, self.cuda_visible_devices, dtype=object),
        }
        if tokens:
            return {**self._tokens(batch, texts, kind, batch_size), **where}
        emb = self.encoder.encode(texts, kind=kind or self.kind, batch_size=batch_size or self.batch_size)
        return {
            "row_id": np.asarray(batch["row_id"], dtype=np.int64),
            "embedding": emb,
            **where,
        }

    def _tokens(
        self, batch: dict[str, Any], texts: list[str], kind: TextKind | None, batch_size: int | None
    ) -> dict[str, np.ndarray]:
        """Token mode: the batch's packed token vectors ``[T, dim]`` and per-row lengths."""
        encode_tokens = getattr(self.encoder, "encode_tokens", None)
        if encode_tokens is None:
            raise ConfigError(
                f"{type(self.encoder).__name__} has one vector per text, not per token: token vectors need a "
                "late-interaction model (backend = 'colbert')"
            )
        out = encode_tokens(texts, kind=kind or self.kind, batch_size=batch_size or self.batch_size)
        return {
            "row_id": np.asarray(batch["row_id"], dtype=np.int64),
            "vectors": np.ascontiguousarray(out.vectors, dtype=np.float32),
            "lengths": np.diff(np.asarray(out.offsets, dtype=np.int64)),
        }
