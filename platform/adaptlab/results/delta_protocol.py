"""The shape of a Delta Lake commit file's actions, checked before delta-rs reads them.

A commit file ``_delta_log/<version>.json`` holds one JSON object per line, each with exactly one
key naming the action (Delta transaction log protocol, Armbrust et al. 2020, "Delta Lake:
High-Performance ACID Table Storage over Cloud Object Stores", section 3.1; the field names and
types follow the protocol specification's "Actions" section). delta-rs stops on a field of the
wrong type with a kernel error naming no file, and skips an action it does not know, so a
commit whose ``add`` lines were replaced by an unknown action loses its rows without a word.
:func:`action_problem` names what is wrong with one line, for the caller to report with the
file and its version.

Importing this module imports nothing but the standard library.
"""

from __future__ import annotations

import json
from typing import Any, TypeGuard

__all__ = ["ACTIONS", "CHECKSUMS_KEY", "action_problem", "last_checkpoint_problem", "log_checksums"]

CHECKSUMS_KEY = "adaptlab.checksums"
"""The ``commitInfo`` key under which an adaptlab commit records the SHA-256 and size of each data
file it added (``{relative path: {"sha256", "size"}}``): written with the commit, so it cannot be
lost apart from it."""

_STR, _INT, _BOOL, _MAP, _LIST = "a string", "an integer", "true or false", "an object", "a list"
_REQUIRED, _OPTIONAL = True, False

ACTIONS: dict[str, dict[str, tuple[str, bool]]] = {
    "add": {
        "path": (_STR, _REQUIRED),
        "partitionValues": (_MAP, _REQUIRED),
        "size": (_INT, _REQUIRED),
        "modificationTime": (_INT, _REQUIRED),
        "dataChange": (_BOOL, _REQUIRED),
        "stats": (_STR, _OPTIONAL),
        "tags": (_MAP, _OPTIONAL),
    },
    "remove": {
        "path": (_STR, _REQUIRED),
        "deletionTimestamp": (_INT, _OPTIONAL),
        "dataChange": (_BOOL, _REQUIRED),
        "partitionValues": (_MAP, _OPTIONAL),
        "size": (_INT, _OPTIONAL),
    },
    "txn": {"appId": (_STR, _REQUIRED), "version": (_INT, _REQUIRED), "lastUpdated": (_INT, _OPTIONAL)},
    "protocol": {
        "minReaderVersion": (_INT, _REQUIRED),
        "minWriterVersion": (_INT, _REQUIRED),
        "readerFeatures": (_LIST, _OPTIONAL),
        "writerFeatures": (_LIST, _OPTIONAL),
    },
    "metaData": {
        "id": (_STR, _REQUIRED),
        "format": (_MAP, _REQUIRED),
        "schemaString": (_STR, _REQUIRED),
        "partitionColumns": (_LIST, _REQUIRED),
        "configuration": (_MAP, _OPTIONAL),
        "createdTime": (_INT, _OPTIONAL),
    },
    "commitInfo": {"timestamp": (_INT, _OPTIONAL)},
    "cdc": {
        "path": (_STR, _REQUIRED),
        "partitionValues": (_MAP, _REQUIRED),
        "size": (_INT, _REQUIRED),
        "dataChange": (_BOOL, _REQUIRED),
    },
    "domainMetadata": {"domain": (_STR, _REQUIRED), "configuration": (_STR, _REQUIRED), "removed": (_BOOL, _REQUIRED)},
}
"""The actions a commit file may hold, with the fields this store checks: name -> (type, required)."""


def _is_int(value: object) -> TypeGuard[int]:
    """An integer that is not a bool (JSON ``true`` loads as a Python bool, a subclass of int)."""
    return isinstance(value, int) and not isinstance(value, bool)


_CHECK = {
    _STR: lambda v: isinstance(v, str),
    _INT: _is_int,
    _BOOL: lambda v: isinstance(v, bool),
    _MAP: lambda v: isinstance(v, dict),
    _LIST: lambda v: isinstance(v, list),
}


def action_problem(action: Any) -> str | None:
    """What is wrong with one parsed line of a commit file (None: a well-formed action): not
    an object with one key, an unknown action, or a field missing or of the wrong type."""
    if not isinstance(action, dict) or len(action) != 1:
        keys = ", ".join(map(repr, list(action)[:3])) if isinstance(action, dict) else type(action).__name__
        return f"is not a Delta action (expected an object with one action key, got {keys or 'nothing'})"
    ((name, body),) = action.items()
    fields = ACTIONS.get(name)
    if fields is None:
        return f"holds an unknown action {name[:40]!r} (expected one of {', '.join(sorted(ACTIONS))})"
    if not isinstance(body, dict):
        return f"holds a {name!r} action that is {type(body).__name__}, not an object"
    for key, (kind, required) in fields.items():
        if key not in body or (body[key] is None and not required):
            if required:
                return f"holds a {name!r} action without its field {key!r} ({kind})"
            continue
        if not _CHECK[kind](body[key]):
            return f"holds a {name!r} action whose {key!r} is {_shown(body[key])}, expected {kind}"
    return None


def last_checkpoint_problem(raw: bytes) -> str | None:
    """What is wrong with ``_delta_log/_last_checkpoint`` (None: well-formed): the protocol's
    JSON object with ``version`` (the checkpoint's version) and ``size`` (its actions), integers."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return "is not JSON (expected an object with integer 'version' and 'size')"
    if not isinstance(data, dict):
        return f"is {type(data).__name__}, expected an object with integer 'version' and 'size'"
    for key in ("version", "size"):
        value = data.get(key)
        if not _is_int(value) or value < 0:
            return f"has {key!r} = {_shown(value)}, expected an integer >= 0"
    return None


def _shown(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def log_checksums(info: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The ``{relative path: {"sha256", "size"}}`` a commit's ``commitInfo`` recorded ({}: none)."""
    raw = info.get(CHECKSUMS_KEY)
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return {}
    if not isinstance(raw, dict):
        return {}
    return {
        k: v
        for k, v in raw.items()
        if isinstance(k, str)
        and isinstance(v, dict)
        and isinstance(v.get("sha256"), str)
        and isinstance(v.get("size"), int)
    }
