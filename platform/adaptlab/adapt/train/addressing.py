"""Content addressing of artifacts: the key of a training run's inputs (SHA-256 of their canonical
JSON), and the fingerprints and hashes that enter it (chunks, the base model's files, the versions
of the packages that decide what training produces), and the file-name-safe form of names.

Two runs with the same inputs get the same key, so a second call finds the artifact and returns
it without training (:mod:`.artifacts`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from adaptlab.errors import ConfigError
from adaptlab.storage.files import PORTABLE, directory_sha256, safe_name

__all__ = ["artifact_key", "chunks_fingerprint", "model_dir_hash", "package_versions", "sanitize_name"]

_PACKAGES = ("adaptlab", "safetensors", "sentence-transformers", "torch", "transformers")


_HASH_SKIP = frozenset({"README.md"})  # model cards carry dates, not weights


def sanitize_name(name: object, *, max_len: int = 64) -> str:
    """A file-name-safe form of ``name`` by :data:`adaptlab.storage.files.PORTABLE`: runs of
    characters outside ``[A-Za-z0-9._-]`` become ``_``, leading and trailing dots, dashes and
    underscores are dropped (no hidden files, no options), length is capped.

    ``sanitize_name("BAAI/bge-large-en v1.5")`` -> ``"BAAI_bge-large-en_v1.5"``.
    """
    return safe_name(name, PORTABLE, max_len=max_len)


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def artifact_key(inputs: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON (sorted keys, no whitespace) of ``inputs``."""
    return hashlib.sha256(_canonical(dict(inputs)).encode()).hexdigest()


def chunks_fingerprint(chunks: Iterable[str]) -> tuple[str, int]:
    """SHA-256 over the JSON of each chunk in order, and the number of chunks."""
    h = hashlib.sha256()
    n = 0
    for text in chunks:
        h.update(json.dumps(str(text), ensure_ascii=False).encode())
        h.update(b"\n")
        n += 1
    return h.hexdigest(), n


def package_versions(*extra: str) -> dict[str, str]:
    """Versions of the packages that decide what training produces (part of the key), and of the
    ``extra`` ones a trainer adds (ColBERT: ragatouille, colbert-ai); ``"absent"`` when not installed."""
    out = {}
    for name in (*_PACKAGES, *extra):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "absent"
    return out


def model_dir_hash(path: str | Path) -> str:
    """SHA-256 over the sorted relative paths and contents of every file under ``path``
    (``README.md`` model cards excluded; the ``"content"`` framing of
    :func:`adaptlab.storage.files.directory_sha256`). Cached per process by path, size and mtime."""
    root = Path(path)
    if not root.is_dir():
        raise ConfigError(f"model directory {str(root)!r} does not exist or is not a directory")
    digest = directory_sha256(root, lambda p: p.name not in _HASH_SKIP)
    return digest if digest is not None else hashlib.sha256().hexdigest()  # an empty directory
