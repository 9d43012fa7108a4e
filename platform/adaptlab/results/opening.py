"""Opening a results store: :func:`open`, the entry point above the core and the previous layout.

A local folder that holds a store of the previous layout (:func:`~adaptlab.results.layout.is_legacy_store`)
opens as the read-only :class:`~adaptlab.results.legacy.legacy.LegacyReader`; every other root opens
as the Delta Lake :class:`~adaptlab.results.writer.ResultsStore`. The core never imports the legacy
reader: this module composes the two, and ``adaptlab.results`` exports its :func:`open`. Importing it
does not import pyarrow or deltalake.
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import TYPE_CHECKING, Any

from adaptlab.errors import StoreError
from adaptlab.results import store as _store
from adaptlab.results.layout import is_legacy_store
from adaptlab.results.legacy.legacy import LegacyReader
from adaptlab.results.store import normalize_uri

if TYPE_CHECKING:  # pragma: no cover
    from adaptlab.results.writer import ResultsStore

__all__ = ["open"]


def __getattr__(name: str) -> Any:
    """``ResultsStore`` (and the store module's other lazy classes), loaded on first use and kept
    here too, so the annotations of :func:`open` resolve (``typing.get_type_hints``) once the
    store classes are loaded."""
    if name not in _store._LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_store, name)
    globals()[name] = value
    return value


def open(  # noqa: A001 - intended
    root: str | os.PathLike[str],
    *,
    create: bool = False,
    version: int | None = None,
    as_of: datetime | str | None = None,
    storage_options: dict[str, str] | None = None,
    strict: bool = False,
) -> ResultsStore:
    """Open the results store at ``root``.

    Queries return pyarrow Tables, or pandas DataFrames with ``as_frame=True``;
    :meth:`ResultsStore.wide` is the value-and-CI frame per system and measure. A store of the
    previous layout (before Delta Lake) opens read-only
    (:class:`~adaptlab.results.legacy.legacy.LegacyReader`; convert it with ``adaptlab results migrate
    OLD NEW``): it answers the same queries (typed here as :class:`ResultsStore` for completion)
    but cannot commit.

    Parameters
    ----------
    root : str or path
        A local directory or an ``s3://``, ``gs://``, ``az://``/``abfss://`` URI.
    create : bool
        Create the store first (idempotent, safe when several processes do it at once).
    version : int, optional
        Open the read-only snapshot of this version.
    as_of : datetime or str, optional
        Open the read-only snapshot at this time (a datetime or an ISO string).
    storage_options : dict, optional
        Passed to delta-rs (e.g. ``{"AWS_ENDPOINT_URL": ...}``); by default credentials come
        from the environment.
    strict : bool
        Data files that would be read without a recorded SHA-256 (no checksum record, or no
        ``_adaptlab_checksums`` folder) are an error instead of a warning.

    Returns
    -------
    ResultsStore

    Examples
    --------
    >>> from adaptlab import results
    >>> store = results.open("results/example", create=True)
    >>> run = results.run_record(
    ...     "bm25", "scifact", model_id="bm25", model_revision=None, dataset_fingerprint="f0", seed=0, config={}
    ... )
    >>> commit = store.commit(
    ...     [run],
    ...     [
    ...         {
    ...             "run_id": run["run_id"],
    ...             "system": "bm25",
    ...             "dataset": "scifact",
    ...             "measure": "ndcg@10",
    ...             "value": 0.66,
    ...             "ci_low": 0.62,
    ...             "ci_high": 0.70,
    ...         }
    ...     ],
    ... )
    >>> store.metrics(measure="ndcg@10", as_frame=True)[["system", "value", "ci_low"]].values.tolist()
    [['bm25', 0.66, 0.62]]
    """
    uri, local = normalize_uri(root)
    if local is not None:
        if is_legacy_store(local):
            if version is not None or as_of is not None:
                raise StoreError(
                    f"{local} is a store of the previous layout: it has no versions; migrate it with "
                    f"`adaptlab results migrate {local} NEW`"
                )
            # A previous-layout store opens as the read-only LegacyReader (the same queries; writes are
            # refused with the way to migrate). open() stays typed ResultsStore for notebooks and IDEs
            # (tests/results/test_notebook_api.py pins it); a union would make every caller narrow.
            return LegacyReader(local)  # type: ignore[return-value]
    store_class = __getattr__("ResultsStore")
    return store_class(uri, create=create, version=version, as_of=as_of, storage_options=storage_options, strict=strict)
