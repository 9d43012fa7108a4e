"""File utilities shared by every layer: safe names, a relative-path check and SHA-256 hashing.

Safe names. :func:`safe_name` turns any text (a model id, a host name, a system name) into one
file-name part by a :class:`NameRule`; the rules in use, each kept because names built with it are
already on disk or in stores:

=================  ====================================================================  =========
rule               what it does                                                          used by
=================  ====================================================================  =========
:data:`PORTABLE`   runs outside ``[A-Za-z0-9._-]`` -> ``_``; leading and trailing ``.``  artifacts
                   ``-`` ``_`` dropped (no hidden files, no options); at most 64
                   characters; empty -> ``unnamed``
:data:`NO_DOTS`    runs outside ``[A-Za-z0-9_-]`` -> ``_``; ``_`` dropped at both ends    results
                   before the cut (not after); at most 64 characters; empty -> ``_``      temp names
                   (so ``.`` can separate fields of the name)
:data:`READABLE`   each ``/`` ``\\`` ``:`` or control character -> ``_``, then each ``..``  exported
                   -> ``_``; spaces and ``.`` dropped at both ends; any length and         run files
                   letter kept (names a user reads); empty -> ``_``
=================  ====================================================================  =========

:func:`safe_relpath` checks a ``/``-separated relative path read from a file (a manifest) before
it is joined to a local folder: no absolute path, no empty, ``.`` or ``..`` part, and inside the
expected sub-folder.

Hashing. :func:`sha256_file` streams one file; :func:`directory_sha256` hashes a directory's
selected files in sorted relative-path order, with one of two framings (both are in stored
hashes, so both stay): ``"content"`` absorbs ``relpath NUL bytes NUL`` per file,
``"digest"`` absorbs ``relpath NUL sha256(bytes)``. Directory hashes are cached per process by
the files' paths, sizes and modification times.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from adaptlab.errors import StoreError

__all__ = [
    "NO_DOTS",
    "PORTABLE",
    "READABLE",
    "NameRule",
    "directory_sha256",
    "safe_name",
    "safe_relpath",
    "sha256_file",
]

_BLOCK = 1 << 20


@dataclass(frozen=True)
class NameRule:
    """How :func:`safe_name` makes a file-name part (see the module docstring).

    ``unsafe``: each match becomes ``_``; ``trim``: characters dropped at both ends; ``max_len``:
    the cut (None: none); ``trim_after_cut``: drop ``trim`` characters the cut leaves at the end;
    ``fallback``: the result for an empty name."""

    unsafe: re.Pattern[str]
    trim: str
    max_len: int | None
    fallback: str
    trim_after_cut: bool = True


PORTABLE = NameRule(re.compile(r"[^A-Za-z0-9._-]+"), "._-", 64, "unnamed")
NO_DOTS = NameRule(re.compile(r"[^A-Za-z0-9_-]+"), "_", 64, "_", trim_after_cut=False)
READABLE = NameRule(re.compile(r"[/\\:\x00-\x1f]|\.\."), " .", None, "_")


def safe_name(text: object, rule: NameRule = PORTABLE, *, max_len: int | None = None) -> str:
    """``text`` as one safe file-name part by ``rule`` (``max_len`` overrides the rule's cut).

    ``safe_name("BAAI/bge-large-en v1.5")`` -> ``"BAAI_bge-large-en_v1.5"``;
    ``safe_name("host.example.org", NO_DOTS)`` -> ``"host_example_org"``."""
    out = rule.unsafe.sub("_", str(text)).strip(rule.trim)
    cut = rule.max_len if max_len is None else max_len
    if cut is not None and len(out) > cut:
        out = out[:cut].rstrip(rule.trim) if rule.trim_after_cut else out[:cut]
    return out or rule.fallback


def safe_relpath(rel: str, *, under: str, source: str) -> str:
    """``rel`` unchanged when it is a relative ``/``-separated path inside ``under/`` with no
    empty, ``.`` or ``..`` part; else :class:`StoreError` naming ``source`` (what listed it)."""
    parts = rel.split("/")
    if rel.startswith("/") or not rel.startswith(under + "/") or any(x in ("", ".", "..") for x in parts):
        raise StoreError(f"{source} names the file {rel!r} outside {under}/; refusing it")
    return rel


def sha256_file(path: str | os.PathLike[str]) -> str:
    """SHA-256 (hex) of the file at ``path``, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(_BLOCK):
            h.update(block)
    return h.hexdigest()


Framing = Literal["content", "digest"]


def directory_sha256(
    root: str | os.PathLike[str],
    keep: Callable[[Path], bool] = lambda p: True,
    *,
    framing: Framing = "content",
    skip_hidden: bool = False,
) -> str | None:
    """SHA-256 (hex) over the files under the directory ``root`` that ``keep`` accepts (given the
    file's path; with ``skip_hidden`` no file inside a hidden folder or named with a leading
    ``.``), in sorted path order, framed as the module docstring says; None when no file is kept.
    The caller checks that ``root`` is a directory (and words its own error)."""
    base = Path(root)
    files = []
    for p in sorted(base.rglob("*")):
        rel = p.relative_to(base)
        if skip_hidden and any(part.startswith(".") for part in rel.parts):
            continue
        if p.is_file() and keep(p):
            files.append((rel.as_posix(), p.stat()))
    if not files:
        return None
    stamp = tuple((rel, st.st_size, st.st_mtime_ns) for rel, st in files)
    return _directory_sha256(str(base.resolve()), framing, stamp)


@functools.lru_cache(maxsize=128)
def _directory_sha256(root: str, framing: Framing, stamp: tuple[tuple[str, int, int], ...]) -> str:
    h = hashlib.sha256()
    for rel, _, _ in stamp:
        h.update(rel.encode("utf-8") + b"\x00")
        if framing == "digest":
            h.update(bytes.fromhex(sha256_file(os.path.join(root, rel))))
            continue
        with open(os.path.join(root, rel), "rb") as f:
            while block := f.read(_BLOCK):
                h.update(block)
        h.update(b"\x00")
    return h.hexdigest()
