"""The resolved model reference (:class:`ModelRef`) and the Hugging Face cache lookups it needs.

Kept apart from :mod:`adaptlab.models.resolve` (which turns what the user wrote into a
``ModelRef``) so that the encoder interface and the backends can name the type without
importing the resolver: the resolver imports the backends' constants, not the other way round.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adaptlab.models.variants import BM25_REF

__all__ = ["ModelRef", "hub_cache_snapshot", "snapshot_revision"]

_COMMIT = re.compile(r"^[0-9a-f]{40}$")


@dataclass(frozen=True)
class ModelRef:
    """A resolved model reference (no weights loaded).

    Attributes:
        ref: what the user wrote.
        model_id: canonical name: the hub id (also for aliases and cached hub models) or
            the absolute path of a local directory.
        path: local directory holding the weights, or ``None`` (hub id, not cached yet).
        revision: commit id when known (hub cache snapshot), else ``None`` (use
            :func:`model_revision`, which hashes the weights).
        backend: default backend of the alias, or ``None`` (decided when loading).
        options: default encoder options of the alias.
        cache_dir: the Hugging Face cache searched for hub ids (``None``: the default).
    """

    ref: str
    model_id: str
    path: Path | None = None
    revision: str | None = None
    backend: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    cache_dir: str | None = None

    @property
    def is_local(self) -> bool:
        """Whether the weights are on this machine (no hub access needed)."""
        return self.path is not None or self.backend in ("hash", BM25_REF)

    def __str__(self) -> str:
        return self.ref


def hub_cache_snapshot(hub_id: str, cache_dir: str | None) -> Path | None:
    """The cached snapshot directory of ``hub_id`` (revision ``main``), or ``None``."""
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError
    except ImportError:  # pragma: no cover - huggingface_hub comes with transformers
        return None
    try:
        return Path(snapshot_download(hub_id, cache_dir=cache_dir, local_files_only=True))
    except (LocalEntryNotFoundError, OSError, ValueError):
        return None


def snapshot_revision(path: Path) -> str | None:
    """The commit of a Hugging Face cache snapshot (``.../snapshots/<commit>``)."""
    if path.parent.name == "snapshots" and _COMMIT.match(path.name):
        return path.name
    return None
