"""The results store on Delta Lake: :class:`ResultsStore` (opened by
:func:`adaptlab.results.opening.open`).

The store is split by concept: :mod:`~adaptlab.results.delta_table` (where the store is, what
its one Delta table holds, commit ids), :mod:`~adaptlab.results.reader` (opening, versions,
damage checks, queries), :mod:`~adaptlab.results.sql` (DuckDB over a snapshot) and
:mod:`~adaptlab.results.writer` (commits, checksums, compaction; ``ResultsStore``).

This module stays light: importing it does not import pyarrow or deltalake. ``ResultsStore``,
``rows_for_delta`` and ``delta_schema`` are loaded from their modules on first use.

Credentials come from the environment (``AWS_*``, ``GOOGLE_*``, ``AZURE_*``) or the
``storage_options`` argument; they are never written into the store, its provenance,
error messages or ``repr``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from adaptlab.results.delta_table import (
    DEFAULT_METRICS_KIND,
    STUDY_FOLDERS,
    CommitId,
    normalize_uri,
    refuse_unrelated_folder,
)

if TYPE_CHECKING:  # pragma: no cover
    from adaptlab.results.reader import StoreReader, delta_schema
    from adaptlab.results.writer import ResultsStore, rows_for_delta

__all__ = [
    "CommitId",
    "DEFAULT_METRICS_KIND",
    "ResultsStore",
    "STUDY_FOLDERS",
    "StoreReader",
    "delta_schema",
    "normalize_uri",
    "rows_for_delta",
]

_refuse_unrelated_folder = refuse_unrelated_folder  # the name location.py imports
_LAZY = {
    "ResultsStore": "adaptlab.results.writer",
    "rows_for_delta": "adaptlab.results.writer",
    "StoreReader": "adaptlab.results.reader",
    "delta_schema": "adaptlab.results.reader",
}


def __getattr__(name: str) -> Any:
    """``ResultsStore``, ``rows_for_delta``, ``StoreReader`` and ``delta_schema``, loaded (with
    pyarrow and deltalake) on first use and kept here."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
