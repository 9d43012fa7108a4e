"""Writing an export's files: all or none, and never two things into one file.

An export (MTEB result files, ranx JSON) names each file after a system or dataset, made safe for
a file system (:func:`adaptlab.storage.files.safe_name`), so two names can meet in one file
(``a:b`` and ``a_b``, or ``A`` and ``a`` on a case-insensitive disk): :func:`refuse_shared_files`
refuses that naming both. :func:`write_all` writes every file under a temporary name beside its
target and renames them into place only when all are written; on a failure (a full disk, no
permission) the temporary files are removed, the targets are as they were, and the error is one
line naming the file.
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from adaptlab.errors import StoreError

__all__ = ["refuse_shared_files", "write_all"]


def refuse_shared_files(targets: Iterable[tuple[str, Path]], what: str) -> None:
    """``targets`` pairs each exported thing (a label such as ``system 'a:b'``) with its file; two
    labels with one file (compared case-insensitively, as macOS and Windows disks do) are a
    StoreError naming both and the file."""
    seen: dict[str, str] = {}
    for label, path in targets:
        key = os.path.normcase(str(path)).casefold()
        if seen.get(key, label) != label:
            raise StoreError(
                f"{what}: {seen[key]} and {label} both become {path}; nothing was written: rename "
                "one of them or export them one at a time (--system / --dataset) to other folders"
            )
        seen[key] = label


def write_all(files: Sequence[tuple[Path, str]]) -> list[Path]:
    """Write ``(path, text)`` pairs as UTF-8: every file first under a temporary name in its
    folder, then all renamed into place. On an OSError nothing is left behind but the folders
    (a StoreError names the file and the reason). Returns the paths."""
    staged: list[tuple[Path, Path]] = []
    current = Path()
    try:
        for path, text in files:
            current = path
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            staged.append((Path(tmp_name), path))
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
        for tmp, path in staged:
            current = path
            os.replace(tmp, path)
    except OSError as e:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
        where = current if e.filename is None or str(e.filename).endswith(".tmp") else e.filename
        hint = "; free some space and export again" if e.errno == errno.ENOSPC else ""
        raise StoreError(f"{where}: {e.strerror or e}{hint} (no exported file was written)") from None
    return [path for _, path in staged]
