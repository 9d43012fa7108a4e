"""The store's one Delta table: where it is, what it holds, and how its commits are named.

Layout (store layout 2). The store is **one** Delta table at the store's URI (a local
directory, or ``s3://``, ``gs://``, ``az://``/``abfss://``), partitioned by a ``kind``
column:

- ``kind=runs``, ``kind=scores``, ``kind=comparisons``, ``kind=per_query``: the rows of the
  logical tables; the columns are the union of theirs (a row leaves the other tables'
  columns null, which costs nothing in Parquet) plus ``commit_id`` and ``commit_row``
  (order of the row in its commit).
- Paired comparisons (``metrics`` rows with ``compared_to``) have their own partition, so
  a default view never mixes a difference with a score.

Why one table: Delta Lake commits are atomic per table. Writing every logical table of a
commit in ONE Delta commit makes the commit all-or-nothing across tables with no extra
protocol (no marker to write last and read first, no orphan rows to filter): a writer
killed mid-commit leaves at most unreferenced Parquet files, which readers never see and
``compact`` removes after the retention period. One table also gives one version number
per commit, which is what :func:`~adaptlab.results.open` ``(version=N)`` and citations use.

Importing this module does not import pyarrow or deltalake.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from adaptlab.errors import URI_PATTERN, StoreError, mask_url
from adaptlab.results.native import short_message
from adaptlab.results.schema import SCHEMA_VERSION

__all__ = [
    "COMMIT_KEY",
    "CommitId",
    "DEFAULT_METRICS_KIND",
    "FORMAT",
    "KINDS",
    "LAYOUT_VERSION",
    "METRIC_KINDS",
    "STUDY_FOLDERS",
    "description",
    "normalize_uri",
    "native_line",
    "refuse_unrelated_folder",
]

FORMAT = "adaptlab.results"
LAYOUT_VERSION = 2
KINDS: tuple[str, ...] = ("runs", "scores", "comparisons", "per_query")
METRIC_KINDS = {"score": ("scores",), "comparison": ("comparisons",), "all": ("scores", "comparisons")}
"""The kinds of rows each ``metrics(kind=...)`` reads."""
DEFAULT_METRICS_KIND = "score"
"""What ``metrics()`` returns without ``kind=`` or ``compared_to=``: scores only (issue 12's query
model); paired comparisons come from ``comparisons()``, ``compared_to=X`` or ``kind="all"``."""
COMMIT_KEY = "adaptlab.commit_id"
"""The key of a commit's id in the Delta commit's custom metadata."""
STUDY_FOLDERS = frozenset({"artifacts", "adaptation", "tune"})
"""Folders a scale study keeps under its store root (``[adapt]`` artifact_root / data_dir defaults)."""
_SCHEMES = ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "azure", "file")


class CommitId(str):
    """The id of a commit (a ``str``), with the store ``version`` the commit created and whether
    this call ``added`` it (False: an identical commit was in the store already, nothing added)."""

    version: int | None
    added: bool

    def __new__(cls, value: str, version: int | None = None, added: bool = True) -> CommitId:
        obj = super().__new__(cls, value)
        obj.version = version
        obj.added = added
        return obj


def normalize_uri(root: str | os.PathLike[str]) -> tuple[str, Path | None]:
    """``(uri, local_path)``: an absolute path for local stores, else the URI as given."""
    text = os.fspath(root)
    if not isinstance(text, str) or not text.strip():
        raise StoreError(f"results store location must be a non-empty path or URI, got {root!r}")
    m = URI_PATTERN.match(text)
    if m is None:
        path = Path(os.path.abspath(os.path.expanduser(text)))
        return str(path), path
    scheme = m.group(1).lower()
    if scheme not in _SCHEMES:
        raise StoreError(
            f"results store URI {text!r}: unsupported scheme {scheme!r}; use a local path or one of "
            "s3://, gs://, az://, abfss://, file://"
        )
    if scheme == "file":
        host = text[len("file://") :].split("/", 1)[0]
        if host and host.lower() != "localhost":  # a user:password@ or another machine: no local path
            raise StoreError(
                f"results store URI {mask_url(text)}: expected file:///ABSOLUTE/PATH (or "
                "file://localhost/ABSOLUTE/PATH), without a user, password or other host"
            )
        path = Path(os.path.abspath("/" + text[len("file://") + len(host) :].lstrip("/")))
        return str(path), path
    if len(text) <= len(m.group(0)) or mask_url(text) != text:  # user:password@, tokens, signed queries
        raise StoreError(
            f"results store URI {m.group(0)}...: expected {scheme}://bucket/path without credentials "
            "in it; pass credentials in the environment or storage_options"
        )
    return text, None


def description() -> str:
    """The Delta table description that marks a table as an adaptlab results store."""
    return json.dumps({"format": FORMAT, "layout": LAYOUT_VERSION, "schema_version": SCHEMA_VERSION})


def native_line(e: BaseException | None) -> str:
    """One line of a native (delta-rs, object store) failure for a store error: no ANSI codes,
    server XML, backtrace or secret, at most 500 characters. Not :func:`adaptlab.errors.one_line`,
    the CLI's line of any error: this one cleans the text native code produces."""
    return short_message(e, 500)


def refuse_unrelated_folder(local: Path, is_table: Callable[[], bool]) -> None:
    """``create=True`` on an existing folder that holds other things (not a store) is refused,
    never silently turned into a store: hidden entries (``.cache`` of a study's embeddings,
    ``.DS_Store``) and the folders a scale study writes under its store before the first
    commit (:data:`STUDY_FOLDERS`) are allowed."""
    if not local.is_dir():
        return
    try:
        visible = sorted(
            n for n in os.listdir(local) if not n.startswith(".") and not (n in STUDY_FOLDERS and (local / n).is_dir())
        )
    except OSError as e:
        raise StoreError(f"cannot create a results store at {local}: {e.strerror or e}") from e
    if not visible or "_delta_log" in visible or is_table():
        return
    shown = ", ".join(visible[:3]) + (", ..." if len(visible) > 3 else "")
    raise StoreError(
        f"cannot create a results store at {local}: the folder exists and holds other files ({shown}); "
        "expected a new or empty folder, or an existing results store"
    )
