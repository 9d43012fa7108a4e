"""The encoder interface every retrieval model implements, and the backend registry.

An :class:`Encoder` turns texts into L2-normalised float32 vectors, with separate entry
points for queries and documents because many retrieval models treat them differently
(an instruction prefix on queries only, as BGE does; a task-specific pair of prefixes, as
llm-embedder does). Similarity is the inner product of the normalised vectors, i.e. the
cosine similarity (docs/architecture.md, "Conventions that decide numbers"):

    s(q, d) = <e_q, e_d> / (||e_q|| ||e_d||)

Two kinds of encoders share the interface (``Encoder.interaction``):

- ``"dense"`` (bi-encoders): one vector per text; a retrieval stage calls
  :meth:`Encoder.encode_queries` / :meth:`Encoder.encode_documents` and searches the
  vectors (exact inner-product top-k); :meth:`Encoder.score` is ``Q @ D.T``.
- ``"late"`` (late interaction, ColBERT; Khattab & Zaharia, SIGIR 2020): one vector per
  token; relevance is MaxSim, ``s(q, d) = sum_i max_j <q_i, d_j>``, which no single vector
  reproduces. Such an encoder overrides :meth:`Encoder.score` and may raise
  :class:`NotImplementedError` from the ``encode_*`` methods; a retrieval stage checks
  ``encoder.interaction`` and calls ``score(queries, documents)`` (or the encoder's own
  index) instead of searching vectors.

Backends register a loader under a name (``"sentence-transformers"``, ``"flag"``,
``"hash"``, ``"colbert"``); :func:`adaptlab.models.load_encoder` picks one.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np

from adaptlab.errors import ConfigError, DataError
from adaptlab.models.variants import COLBERT_BACKEND
from adaptlab.models.weights import weights_sha256

if TYPE_CHECKING:
    from adaptlab.models.ref import ModelRef

__all__ = [
    "BACKENDS",
    "Encoder",
    "EncoderLoader",
    "TextKind",
    "backend_loader",
    "l2_normalize",
    "register_backend",
]

TextKind = Literal["query", "document"]
"""Which side of the retrieval pair a text is on."""

EncoderLoader = Callable[..., "Encoder"]
"""``loader(model: ModelRef, *, device: str | None, **options) -> Encoder``."""

BACKENDS: dict[str, str] = {
    "sentence-transformers": "adaptlab.models.sbert:SentenceTransformerEncoder.load",
    "flag": "adaptlab.models.flag:FlagEncoder.load",
    "hash": "adaptlab.models.hashing:HashingEncoder.load",
    COLBERT_BACKEND: "adaptlab.models.colbert:ColBERTEncoder.load",
}
"""Backend name -> ``"module:attr"`` of its loader (imported on first use, so that
``import adaptlab.models`` does not import torch)."""

_BACKEND_ALIASES = {
    "st": "sentence-transformers",
    "sbert": "sentence-transformers",
    "sentence_transformers": "sentence-transformers",
    "sentence-transformers": "sentence-transformers",
    "flag": "flag",
    "flagembedding": "flag",
    "bge": "flag",
    "hash": "hash",
    "hashing": "hash",
    "colbert": COLBERT_BACKEND,
    "late": COLBERT_BACKEND,
    "late-interaction": COLBERT_BACKEND,
    "ragatouille": COLBERT_BACKEND,
}
_LOADERS: dict[str, EncoderLoader] = {}


def register_backend(name: str, loader: EncoderLoader | str) -> None:
    """Register ``loader`` (a callable or a ``"module:attr"`` string) under ``name``."""
    if not name or not isinstance(name, str):
        raise ConfigError(f"backend name must be a non-empty string, got {name!r}")
    key = name.lower()
    _BACKEND_ALIASES[key] = key
    if isinstance(loader, str):
        BACKENDS[key] = loader
        _LOADERS.pop(key, None)
    else:
        BACKENDS[key] = f"<callable {getattr(loader, '__qualname__', loader)!r}>"
        _LOADERS[key] = loader


def canonical_backend(name: str) -> str:
    """Map a backend name or alias (``st``, ``sbert``, ``bge``, ...) to its registry key."""
    key = _BACKEND_ALIASES.get(str(name).lower())
    if key is None or key not in BACKENDS:
        raise ConfigError(f"unknown encoder backend {name!r}; expected 'auto' or one of {', '.join(sorted(BACKENDS))}")
    return key


def backend_loader(name: str) -> EncoderLoader:
    """The loader registered under ``name`` (imported lazily)."""
    key = canonical_backend(name)
    if key not in _LOADERS:
        module, _, attr = BACKENDS[key].partition(":")
        obj: Any = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
        _LOADERS[key] = obj
    return _LOADERS[key]


def l2_normalize(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit Euclidean norm, as float32: ``x_i / ||x_i||_2``.

    All-zero rows stay zero (no division by zero, no NaN).
    """
    x = np.asarray(x, dtype=np.float32)
    if x.ndim != 2:
        raise DataError(f"embeddings must be a 2-D array [n, d], got shape {x.shape}")
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    np.maximum(norms, np.finfo(np.float32).tiny, out=norms)
    return np.ascontiguousarray(x / norms, dtype=np.float32)


def check_texts(texts: Sequence[str], what: str) -> list[str]:
    if isinstance(texts, (str, bytes)):
        raise DataError(f"{what}: expected a list of strings, got a single {type(texts).__name__}")
    out = list(texts)
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise DataError(f"{what}[{i}]: expected a string, got {type(t).__name__}")
    return out


def check_batch_size(batch_size: int) -> int:
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}")
    return int(batch_size)


class Encoder(ABC):
    """A text encoder: ``encode_queries`` / ``encode_documents`` -> float32 ``[n, dim]``, unit rows.

    Attributes:
        model_id: the model's canonical name (hub id, or the absolute local path).
        dim: the embedding dimension.
        revision: the model's commit when known (Hugging Face cache snapshot), else
            ``"sha256:<hex>"`` of its weight files, computed once on first access
            (see :func:`adaptlab.models.weights.weights_sha256`). Goes into the runs table.
        backend: the registry name of the backend that loaded it.
        interaction: ``"dense"`` or ``"late"`` (see the module docstring).

    Subclasses implement :meth:`_encode`; the public methods validate the input and
    guarantee the output contract (float32, C-contiguous, L2-normalised rows).
    """

    interaction: ClassVar[Literal["dense", "late"]] = "dense"
    backend: ClassVar[str] = ""

    def __init__(
        self,
        model_id: str,
        dim: int,
        *,
        path: Path | None = None,
        revision: str | None = None,
        options: dict[str, Any] | None = None,
    ) -> None:
        self.model_id = model_id
        self.dim = int(dim)
        self.path = path
        self._revision = revision
        self.options: dict[str, Any] = dict(options or {})

    # -- provenance -------------------------------------------------------------------
    @property
    def revision(self) -> str:
        """Commit id if known, else the SHA-256 of the weight files (computed once)."""
        if self._revision is None:
            if self.path is None:
                raise ConfigError(f"model {self.model_id!r}: no revision and no local path to hash")
            self._revision = weights_sha256(self.path)
        return self._revision

    def provenance(self) -> dict[str, Any]:
        """``model_id``, ``revision``, ``dim``, ``backend``, ``interaction``, ``options``: for the runs table."""
        return {
            "model_id": self.model_id,
            "revision": self.revision,
            "dim": self.dim,
            "backend": self.backend,
            "interaction": self.interaction,
            "options": {k: v for k, v in sorted(self.options.items())},
        }

    # -- encoding ---------------------------------------------------------------------
    def encode(self, texts: Sequence[str], *, kind: TextKind = "document", batch_size: int = 64) -> np.ndarray:
        """Encode ``texts`` as queries or documents; float32 ``[len(texts), dim]``, unit rows."""
        if kind not in ("query", "document"):
            raise ConfigError(f"kind must be 'query' or 'document', got {kind!r}")
        items = check_texts(texts, "queries" if kind == "query" else "documents")
        bs = check_batch_size(batch_size)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = np.asarray(self._encode(items, kind, bs))
        if out.shape != (len(items), self.dim):
            raise RuntimeError(
                f"{type(self).__name__}._encode returned shape {out.shape}, expected {(len(items), self.dim)}"
            )
        return l2_normalize(out)

    def encode_queries(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        """Query embeddings (query instruction applied if the model uses one)."""
        return self.encode(texts, kind="query", batch_size=batch_size)

    def encode_documents(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        """Document embeddings (document instruction applied if the model uses one)."""
        return self.encode(texts, kind="document", batch_size=batch_size)

    def score(self, queries: Sequence[str], documents: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        """Relevance scores float32 ``[len(queries), len(documents)]``.

        Dense encoders: cosine similarity ``E_q @ E_d.T`` of the normalised embeddings.
        Late-interaction encoders override this with MaxSim.
        """
        q = self.encode_queries(queries, batch_size=batch_size)
        d = self.encode_documents(documents, batch_size=batch_size)
        return np.ascontiguousarray(q @ d.T, dtype=np.float32)

    @abstractmethod
    def _encode(self, texts: list[str], kind: TextKind, batch_size: int) -> np.ndarray:
        """Raw embeddings ``[len(texts), dim]`` (normalisation is done by the caller)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model_id={self.model_id!r}, dim={self.dim})"


def _unset(value: Any) -> bool:
    """Study files write "" / 0 for 'not set'; treat those and None alike."""
    return (
        value is None
        or (isinstance(value, str) and value == "")
        or (isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0)
    )


def clean_options(options: dict[str, Any], allowed: Sequence[str], backend: str) -> dict[str, Any]:
    """Drop unset values; reject keys the backend does not know (naming the valid ones)."""
    out: dict[str, Any] = {}
    for key, value in options.items():
        if key not in allowed:
            raise ConfigError(
                f"option {key!r} is not understood by the {backend!r} encoder backend; "
                f"expected one of {', '.join(sorted(allowed))}"
            )
        if not _unset(value):
            out[key] = value
    return out


def resolve_device(device: str | None) -> str:
    """``None`` -> ``"cuda"`` when torch sees a GPU, else ``"cpu"``."""
    if device:
        return str(device)
    import torch  # deferred: torch is heavy; only device selection needs it

    return "cuda" if torch.cuda.is_available() else "cpu"


def describe_ref(model: ModelRef) -> str:
    """A short "tried ..." phrase for error messages."""
    if model.path is not None:
        return f"local directory {str(model.path)!r}"
    return f"hub id {model.model_id!r}"


def short_error(e: BaseException, limit: int = 400) -> str:
    """``"Type: message"`` cut to ``limit`` characters (transformers errors can be pages long)."""
    text = f"{type(e).__name__}: {e}"
    return text if len(text) <= limit else text[: limit - 3] + "..."
