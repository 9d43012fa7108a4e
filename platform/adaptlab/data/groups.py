"""Query grouping columns (``group_by``): which columns a reader keeps and their values as text.

A grouping column labels each query with a group (``question_type``: ``factoid``, ``list``);
every measure is then also reported per group (:mod:`adaptlab.evaluation.groups`). Readers
keep the columns as :attr:`adaptlab.data.Dataset.groups`, ``{column: {query_id: value}}``; an
empty cell (or JSON null) puts a query in no group of that column.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from adaptlab.data._io import read_text, require_file
from adaptlab.errors import ConfigError, DataError

__all__ = ["GroupLabels", "group_columns", "group_value", "read_group_file"]


def group_columns(group_by: str | Sequence[str] | None, where: str = "group_by") -> list[str]:
    """The grouping columns of a ``group_by`` option: a list of names, or one text with names
    separated by commas (``--dataset-option group_by=a,b``); names are distinct, without ``=``."""
    if group_by is None:
        return []
    items = group_by.split(",") if isinstance(group_by, str) else list(group_by)
    names = []
    for item in items:
        if not isinstance(item, str) or not item.strip() or "=" in item or any(ord(c) < 32 for c in item):
            raise ConfigError(
                f"{where}: {item!r} is not a column name; expected names such as "
                "[\"question_type\"] (text without '=' or control characters)"
            )
        if item.strip() in names:
            raise ConfigError(f"{where}: column {item.strip()!r} is named twice")
        names.append(item.strip())
    return names


def group_value(value: Any, column: str, where: str) -> str:
    """One cell of a grouping column as text (numbers and booleans as written; null -> "")."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value).strip()
    raise DataError(f"{where}: grouping column {column!r} holds a {type(value).__name__}; expected text or a number")


class GroupLabels:
    """The labels of the grouping ``columns`` as a reader collects them, one query at a time; a
    query seen again must carry the same labels (else one line naming both lines)."""

    def __init__(self, columns: Sequence[str]) -> None:
        self.columns = list(columns)
        self.labels: dict[str, dict[str, str]] = {c: {} for c in self.columns}
        self._line: dict[str, str] = {}

    def add(self, qid: str, row: Mapping[str, Any], where: str) -> None:
        """Record ``row``'s labels of query ``qid`` (``where`` = file:line, named in errors)."""
        for c in self.columns:
            value = group_value(row.get(c), c, where)
            seen = self.labels[c].get(qid)
            if seen is not None and seen != value:
                raise DataError(
                    f"{where}: query {qid!r} has {c} {value!r}, but {seen!r} at {self._line[qid]}; "
                    "a query belongs to one group per column"
                )
            self.labels[c][qid] = value
        self._line.setdefault(qid, where)


def read_group_file(path: str | Path) -> dict[str, str]:
    """``{query_id: group}`` from a TSV file of ``query_id<TAB>group`` lines (blank lines and lines
    starting with ``#`` skipped); a malformed or repeated line is one error naming file and line."""
    p = require_file(path, "group file (query_id<TAB>group lines)")
    out: dict[str, str] = {}
    first: dict[str, int] = {}
    for n, line in enumerate(read_text(p).splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = line.rstrip("\r").split("\t")
        if len(fields) != 2 or not fields[0].strip():
            raise DataError(f"{p}:{n}: expected 'query_id<TAB>group', got {len(fields)} tab-separated field(s)")
        qid, value = fields[0].strip(), fields[1].strip()
        if qid in out:
            raise DataError(f"{p}:{n}: query {qid!r} is listed again (first on line {first[qid]}); one group per query")
        out[qid], first[qid] = value, n
    if not out:
        raise DataError(f"{p}: no 'query_id<TAB>group' line")
    return out
