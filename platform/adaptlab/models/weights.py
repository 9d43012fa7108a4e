"""Content revision of a local model: SHA-256 over its weight files."""

from __future__ import annotations

import os
from pathlib import Path

from adaptlab.errors import ConfigError
from adaptlab.storage.files import directory_sha256

__all__ = ["WEIGHT_SUFFIXES", "weights_sha256"]

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".onnx")
"""Files counted as weights by :func:`weights_sha256`."""


def weights_sha256(path: str | os.PathLike[str]) -> str:
    """``"sha256:<hex>"`` over a model directory's weight files.

    For each weight file (suffix in :data:`WEIGHT_SUFFIXES`, hidden folders skipped) in
    sorted relative-path order, the digest absorbs ``relpath + NUL + sha256(file bytes)`` (the
    ``"digest"`` framing of :func:`adaptlab.storage.files.directory_sha256`). Independent of the
    directory's location and of non-weight files (README, tokenizer); cached per process (keyed on
    the files' sizes and modification times).

    Raises:
        ConfigError: the directory does not exist or holds no weight file.
    """
    root = Path(path)
    if not root.is_dir():
        raise ConfigError(f"cannot hash model weights: {str(root)!r} is not a directory")
    digest = directory_sha256(root, lambda p: p.name.endswith(WEIGHT_SUFFIXES), framing="digest", skip_hidden=True)
    if digest is None:
        raise ConfigError(
            f"cannot hash model weights: no weight file ({', '.join(WEIGHT_SUFFIXES)}) under {str(root)!r}"
        )
    return "sha256:" + digest
