"""Content revision of a local model: SHA-256 over its weight files."""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

from adaptlab.errors import ConfigError

__all__ = ["WEIGHT_SUFFIXES", "weights_sha256"]

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".onnx")
"""Files counted as weights by :func:`weights_sha256`."""


def _weight_files(root: Path) -> list[Path]:
    files = []
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if any(part.startswith(".") for part in rel.parts):
            continue  # .git, .cache, hidden checkpoints
        if p.is_file() and p.name.endswith(WEIGHT_SUFFIXES):
            files.append(p)
    return files


@functools.lru_cache(maxsize=64)
def _weights_sha256_cached(root: str, stamp: tuple[tuple[str, int, int], ...]) -> str:
    h = hashlib.sha256()
    base = Path(root)
    for rel, _, _ in stamp:
        h.update(rel.encode("utf-8") + b"\x00")
        fh = hashlib.sha256()
        with open(base / rel, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 22), b""):
                fh.update(chunk)
        h.update(fh.digest())
    return "sha256:" + h.hexdigest()


def weights_sha256(path: str | os.PathLike[str]) -> str:
    """``"sha256:<hex>"`` over a model directory's weight files.

    For each weight file (suffix in :data:`WEIGHT_SUFFIXES`, hidden folders skipped) in
    sorted relative-path order, the digest absorbs ``relpath + NUL + sha256(file bytes)``.
    Independent of the directory's location and of non-weight files (README, tokenizer);
    cached per process (keyed on the files' sizes and modification times).

    Raises:
        ConfigError: the directory does not exist or holds no weight file.
    """
    root = Path(path)
    if not root.is_dir():
        raise ConfigError(f"cannot hash model weights: {str(root)!r} is not a directory")
    files = _weight_files(root)
    if not files:
        raise ConfigError(
            f"cannot hash model weights: no weight file ({', '.join(WEIGHT_SUFFIXES)}) under {str(root)!r}"
        )
    stamp = tuple(
        (p.relative_to(root).as_posix(), (st := p.stat()).st_size, st.st_mtime_ns) for p in files
    )
    return _weights_sha256_cached(str(root.resolve()), stamp)
