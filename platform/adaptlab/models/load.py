"""``load_encoder``: reference + backend + options -> :class:`~adaptlab.models.base.Encoder`.

Backend choice with ``backend="auto"``:

1. the alias's backend (``minilm`` -> sentence-transformers, ``bge-*`` / ``llm-embedder`` -> flag);
2. a model name (last path component) containing ``bge`` or ``llm-embedder`` -> flag
   (FlagEmbedding, CLS pooling);
3. a local directory with colbert-ai's ``artifact.metadata`` (a ColBERT checkpoint, or an adaptlab
   ColBERT artifact whose ``model/`` is one), or a name containing ``colbert`` -> colbert
   (late interaction, :mod:`adaptlab.models.colbert`);
4. anything else -> sentence-transformers (a directory without ``modules.json``, i.e. a
   plain transformers checkpoint, then gets mean pooling, the sentence-transformers default).

When the weights are local, ``HF_HUB_OFFLINE=1`` is set for this process (unless the
variable is already set) before transformers is imported, so nothing reaches for the hub.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adaptlab.errors import ConfigError, extra_installed, missing_extra
from adaptlab.models.base import Encoder, backend_loader, canonical_backend
from adaptlab.models.resolve import ModelRef, resolve_model
from adaptlab.models.variants import BM25_REF, COLBERT_BACKEND

__all__ = ["EncoderSpec", "check_backend_packages", "go_offline", "load_encoder", "pick_backend"]

_BACKEND_EXTRAS: dict[str, tuple[str, str, str]] = {
    COLBERT_BACKEND: ("colbert", "colbert", "ColBERT models"),
    "flag": ("FlagEmbedding", "flag", "FlagEmbedding models (bge-*, llm-embedder)"),
}
"""``{encoder backend: (module, extra, feature)}``: the backends whose packages are an extra."""


def go_offline() -> None:
    """Set ``HF_HUB_OFFLINE=1`` (and ``TRANSFORMERS_OFFLINE=1``) unless already set."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def pick_backend(model: ModelRef, backend: str = "auto") -> str:
    """The registry name of the backend that will load ``model`` (see the module doc)."""
    if model.backend == BM25_REF:
        raise ConfigError(
            f"{model.ref!r} is the lexical BM25 system, not an encoder: evaluate it as a "
            "[[models]] entry of a study (adaptlab.retrieval.lexical.bm25_records searches it)"
        )
    if backend and backend != "auto":
        return canonical_backend(backend)
    if model.backend:
        return canonical_backend(model.backend)
    base = Path(model.model_id).name.lower()
    if "bge" in base or "llm-embedder" in base or "llm_embedder" in base:
        return "flag"
    if model.path is not None and any(
        (Path(model.path) / sub / "artifact.metadata").is_file() for sub in (".", "model")
    ):
        return COLBERT_BACKEND
    if "colbert" in base:  # a model named so (colbertv2.0, ...)
        return COLBERT_BACKEND
    return "sentence-transformers"


def check_backend_packages(backend: str, embedding_backend: str = "torch") -> None:
    """Raise :class:`~adaptlab.errors.MissingExtraError` (one line naming the extra to install)
    when the packages of encoder ``backend`` (a :func:`pick_backend` result) or of the
    ``embedding_backend`` (``onnx``, ``openvino``) are not installed. Nothing is imported, so a
    study can call this for every model before any work starts."""
    need = _BACKEND_EXTRAS.get(backend)
    if need is not None and not extra_installed(need[0]):
        module, extra, feature = need
        raise missing_extra(feature, extra, f"{module} is not installed")
    if embedding_backend in ("onnx", "openvino"):
        from adaptlab.models.inference import require_backend  # light: optimum is only looked up

        require_backend(embedding_backend)


def load_encoder(ref: str | ModelRef, *, backend: str = "auto", device: str | None = None, **options: Any) -> Encoder:
    """Load an encoder from an alias, a local directory or a hub id.

    Args:
        ref: ``"minilm"``, ``"/path/to/model"``, ``"BAAI/bge-large-en"``, ``"hash:64"``, or a
            :class:`~adaptlab.models.resolve.ModelRef`.
        backend: ``"auto"``, ``"sentence-transformers"`` (``st``), ``"flag"``, ``"hash"``,
            ``"colbert"`` (``late``; late interaction, see :mod:`adaptlab.models.colbert`).
        device: ``"cpu"``, ``"cuda"``, ``"cuda:1"``; ``None``: CUDA when available.
        options: backend options (``query_instruction``, ``document_instruction``, ``task``,
            ``max_seq_length``, ``trust_remote_code``, ``pooling``, ...). A ``backend`` key
            here is the same as the argument; ``None`` / ``""`` / ``0`` values mean unset.

    Raises:
        ConfigError: unknown backend or option, missing model (naming the path or id and
            whether the hub is reachable), or weights that cannot be loaded.
    """
    opts = dict(options)
    if "backend" in opts:
        b = opts.pop("backend")
        if b and b != "auto":
            if backend not in ("auto", b):
                raise ConfigError(f"backend given twice: backend={backend!r} and options['backend']={b!r}")
            backend = b
    model = resolve_model(ref)
    name = pick_backend(model, backend)
    if model.path is not None:
        go_offline()
    return backend_loader(name)(model, device=device, **opts)


@dataclass(frozen=True)
class EncoderSpec:
    """A picklable recipe for an encoder: ``spec(device)`` loads it (in a Ray actor, say)."""

    ref: str | ModelRef
    backend: str = "auto"
    options: Mapping[str, Any] = field(default_factory=dict)

    def __call__(self, device: str | None = None) -> Encoder:
        return load_encoder(self.ref, backend=self.backend, device=device, **dict(self.options))
