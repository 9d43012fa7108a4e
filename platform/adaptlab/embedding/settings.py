"""The settings of an embedding call, declared once: batch size, the encoder options, where it runs
(in-process or the warm Ray pool) and the pool's knobs. :func:`~adaptlab.embedding.embed_texts`
and the token pool take them whole (``config``) or as keyword options
(:func:`adaptlab.options.settings_from`); the cached embedders keep theirs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

__all__ = ["EmbedOptions", "EmbedSettings"]


@dataclass(frozen=True)
class EmbedSettings:
    """How texts are embedded (:func:`~adaptlab.embedding.pipeline.embed_texts`).

    Attributes:
        batch_size: texts per forward pass inside an actor (or in this process).
        num_actors: actor pool size; ``None`` or 0: one per GPU, else ``cores // torch_threads``.
        options: encoder options (``query_instruction``, ``max_seq_length``, ``backend``...).
        progress: show progress (:class:`adaptlab.runtime.progress.Progress`).
        use_ray: ``False``: encode in this process.
        backend: the encoder backend (``"auto"``: from the model; an ``options["backend"]`` wins).
        device: the device of each encoder (``None``: a GPU when the worker sees one).
        block_size: rows per actor call (``None``: :func:`~adaptlab.embedding.pipeline.plan_blocks`).
        torch_threads: intra-op threads per CPU actor (``None``: 1 with the default pool).
        sort_by_length: order the texts by decreasing length before cutting blocks.
        max_restarts: actor crashes replaced, with their blocks retried, per call (``None``: 3).
        placement_timeout: seconds with no ready actor before the call fails (``None``:
            ``ADAPTLAB_POOL_PLACEMENT_TIMEOUT`` or 180).
    """

    batch_size: int = 64
    num_actors: int | None = None
    options: Mapping[str, Any] | None = None
    progress: bool = True
    use_ray: bool = True
    backend: str = "auto"
    device: str | None = None
    block_size: int | None = None
    torch_threads: int | None = None
    sort_by_length: bool = True
    max_restarts: int | None = None
    placement_timeout: float | None = None


class EmbedOptions(TypedDict, total=False):
    """The fields of :class:`EmbedSettings` as keyword options."""

    batch_size: int
    num_actors: int | None
    options: Mapping[str, Any] | None
    progress: bool
    use_ray: bool
    backend: str
    device: str | None
    block_size: int | None
    torch_threads: int | None
    sort_by_length: bool
    max_restarts: int | None
    placement_timeout: float | None
