"""Provenance of a run: ids, the ``runs`` row helper and JSON for configs.

A ``runs`` row records what was evaluated (system, dataset and its fingerprint, model id
and revision or weights hash, seed, the full config as JSON) and by whom (adaptlab
version, UTC timestamp, host), so any number in the store can be traced and reproduced.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import PurePath
from typing import TYPE_CHECKING, Any, TypedDict

from adaptlab.errors import StoreError
from adaptlab.options import settings_from

if TYPE_CHECKING:
    from typing_extensions import Required, Unpack

__all__ = ["RunFields", "RunProvenance", "host_name", "new_run_id", "run_record", "to_json", "utc_now"]


def new_run_id() -> str:
    """A fresh run id: 32 lowercase hex digits (a random UUID4)."""
    return uuid.uuid4().hex


def utc_now() -> datetime:
    """The current time as a timezone-aware UTC datetime."""
    return datetime.now(timezone.utc)


def host_name() -> str:
    """This machine's host name (``ADAPTLAB_HOST`` overrides it)."""
    return os.environ.get("ADAPTLAB_HOST") or socket.gethostname() or "unknown"


def _json_default(obj: Any) -> Any:
    if isinstance(obj, PurePath):
        return str(obj)
    if isinstance(obj, (set, frozenset)):
        return sorted(obj, key=repr)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if isinstance(obj, datetime):
        return obj.isoformat()
    tolist = getattr(obj, "tolist", None)  # numpy scalars and arrays
    if callable(tolist):
        return tolist()
    raise TypeError(f"value of type {type(obj).__name__} is not JSON-serialisable")


def to_json(value: Any, *, what: str = "value") -> str:
    """``value`` as compact JSON with sorted keys (paths, sets, numpy values and
    dataclasses are converted); raises :class:`StoreError` naming ``what`` otherwise."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), default=_json_default)
    except (TypeError, ValueError) as e:
        raise StoreError(f"{what} cannot be stored as JSON: {e}; use str, numbers, lists and dicts") from e


@dataclass(frozen=True)
class RunProvenance:
    """What a ``runs`` row records beside its system and dataset.

    Attributes:
        model_id: the model evaluated (its reference or path).
        model_revision: its content revision or weights hash (``None``: unknown).
        dataset_fingerprint: the fingerprint of the dataset's content.
        seed: the run's root seed (``None``: none).
        config: the full configuration, stored as JSON with sorted keys.
        study: the study's name (``None``: not from a study).
        run_id: the run's id (``None``: a fresh one).
    """

    model_id: str
    model_revision: str | None
    dataset_fingerprint: str
    seed: int | None
    config: Mapping[str, Any]
    study: str | None = None
    run_id: str | None = None


class RunFields(TypedDict, total=False):
    """The fields of :class:`RunProvenance` as keyword arguments of :func:`run_record`."""

    model_id: Required[str]
    model_revision: Required[str | None]
    dataset_fingerprint: Required[str]
    seed: Required[int | None]
    config: Required[Mapping[str, Any]]
    study: str | None
    run_id: str | None


def run_record(
    system: str, dataset: str, provenance: RunProvenance | None = None, **fields: Unpack[RunFields]
) -> dict[str, Any]:
    """One ``runs`` row with its provenance filled in.

    The provenance comes whole (``provenance``) or as keyword arguments (the fields of
    :class:`RunProvenance`: ``model_id``, ``model_revision``, ``dataset_fingerprint``, ``seed``,
    ``config``, and optionally ``study`` and ``run_id``), which replace the object's fields.
    Adds a fresh ``run_id`` (unless given), ``package_version`` (``adaptlab.__version__``),
    ``timestamp`` (now, UTC), ``host`` and ``schema_version``; ``config`` is stored as JSON
    with sorted keys.
    """
    prov = settings_from(RunProvenance, provenance, fields, "run_record")
    model_id, model_revision, seed, config = prov.model_id, prov.model_revision, prov.seed, prov.config
    from adaptlab import __version__
    from adaptlab.results.schema import SCHEMA_VERSION

    for name, value in (("system", system), ("dataset", dataset)):
        if not isinstance(value, str) or not value:
            raise StoreError(f"run_record: {name} must be a non-empty string, got {value!r}")
    if not isinstance(config, Mapping):
        raise StoreError(f"run_record: config must be a dict, got {type(config).__name__}")
    if seed is not None:
        try:
            seed_ok = int(seed) == seed
        except (TypeError, ValueError, OverflowError):
            seed_ok = False
        if not seed_ok or isinstance(seed, bool):
            raise StoreError(f"run_record: seed must be an integer or None, got {seed!r}")
        seed = int(seed)
    return {
        "run_id": prov.run_id or new_run_id(),
        "system": system,
        "dataset": dataset,
        "package_version": __version__,
        "model_id": str(model_id),
        "model_revision": None if model_revision is None else str(model_revision),
        "dataset_fingerprint": str(prov.dataset_fingerprint),
        "seed": seed,
        "config": to_json(dict(config), what=f"config of run {system!r} on {dataset!r}"),
        "timestamp": utc_now(),
        "host": host_name(),
        "study": prov.study,
        "schema_version": SCHEMA_VERSION,
    }
