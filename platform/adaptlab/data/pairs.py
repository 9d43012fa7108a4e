"""Generic (question, context) pair files: CSV, TSV or JSON lines.

Each row holds a question and the context that answers it; the columns are configurable.

- Without ``doc_id_col``, identical contexts (after whitespace normalisation) become one
  document ``d{n}`` (order of first appearance). With it, the column names the document: the
  same id must always carry the same context; different ids stay different documents.
- Without ``query_id_col``, every row is a new query ``q{n}`` (``n`` = 0-based row index).
  With it, a repeated query id must repeat the same question; its contexts are all relevant
  (several gold documents). A repeated id with another question is an error.
- An empty question or context is an error naming the line.
- ``group_by`` names grouping columns (``question_type``) kept per query as
  :attr:`~adaptlab.data.Dataset.groups`; a repeated query must repeat its groups.

The format comes from the suffix (``.csv``, ``.tsv``, ``.jsonl``/``.ndjson``) unless
``file_format`` says otherwise. CSV/TSV files need a header row.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from adaptlab.data._io import iter_jsonl, read_text, require_file, str_id
from adaptlab.data.dataset import Dataset, Document
from adaptlab.data.groups import GroupLabels, group_columns
from adaptlab.data.text import normalise_whitespace
from adaptlab.errors import ConfigError, DataError
from adaptlab.options import settings_from

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["PAIR_FORMATS", "PairOptions", "PairSettings", "check_pair_columns", "load_pairs"]

PAIR_FORMATS = ("csv", "jsonl", "tsv")
_SUFFIXES = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl"}


@dataclass(frozen=True)
class PairSettings:
    """How to read a pairs file (the module doc's rules).

    Attributes:
        question_col: the column of the questions.
        context_col: the column of the contexts (the documents).
        query_id_col: the column of query ids; ``None``: every row is a new query ``q{n}``.
        doc_id_col: the column of document ids; ``None``: identical contexts are one ``d{n}``.
        title_col: the column of document titles; ``None``: no titles.
        file_format: ``csv``, ``tsv`` or ``jsonl``; ``None``: from the suffix.
        name: the dataset's name; ``None``: the file's stem.
        group_by: grouping column(s) kept per query; ``None``: none.
    """

    question_col: str = "question"
    context_col: str = "context"
    query_id_col: str | None = None
    doc_id_col: str | None = None
    title_col: str | None = None
    file_format: str | None = None
    name: str | None = None
    group_by: str | list[str] | None = None

    def columns(self) -> list[str]:
        """The text and id columns read from every row (grouping columns aside)."""
        named = (self.question_col, self.context_col, self.query_id_col, self.doc_id_col, self.title_col)
        return [c for c in named if c]


class PairOptions(TypedDict, total=False):
    """The fields of :class:`PairSettings` as keyword options."""

    question_col: str
    context_col: str
    query_id_col: str | None
    doc_id_col: str | None
    title_col: str | None
    file_format: str | None
    name: str | None
    group_by: str | list[str] | None


def load_pairs(path: str | Path, config: PairSettings | None = None, **options: Unpack[PairOptions]) -> Dataset:
    """Load a CSV/TSV/JSONL file of (question, context) rows (rules in the module doc); the
    columns and format from ``config`` and the keyword options (:class:`PairSettings`)."""
    s = settings_from(PairSettings, config, options, "load_pairs")
    p, fmt = _pairs_file(path, s.file_format)
    groups = GroupLabels(group_columns(s.group_by, f"{p}: group_by"))
    wanted = s.columns() + groups.columns
    question_col, context_col, query_id_col, doc_id_col, title_col = (
        s.question_col,
        s.context_col,
        s.query_id_col,
        s.doc_id_col,
        s.title_col,
    )
    rows = _read_rows(p, fmt, wanted)

    docs: dict[str, Document] = {}
    by_text: dict[str, str] = {}
    doc_line: dict[str, int] = {}
    queries: dict[str, str] = {}
    query_line: dict[str, int] = {}
    qrels: dict[str, dict[str, int]] = {}
    for index, (line, row) in enumerate(rows):
        where = f"{p}:{line}"
        question = _text(row, question_col, where)
        context = _text(row, context_col, where)
        title = _text(row, title_col, where, allow_empty=True) if title_col else ""
        if doc_id_col:
            did = str_id(row[doc_id_col], where, doc_id_col)
            if did in docs and (docs[did].text, docs[did].title) != (context, title):
                raise DataError(
                    f"{where}: document id {did!r} was given another context on line "
                    f"{doc_line[did]}; one id must always name the same text"
                )
        else:
            key = normalise_whitespace(title + "\x00" + context)
            did = by_text.setdefault(key, f"d{len(by_text)}")
        if did not in docs:
            docs[did] = Document(did, context, title)
            doc_line[did] = line
        qid = str_id(row[query_id_col], where, query_id_col) if query_id_col else f"q{index}"
        if qid in queries and queries[qid] != question:
            raise DataError(
                f"{where}: duplicate query id {qid!r} with a different question than on line "
                f"{query_line[qid]}; a repeated id must repeat the same question"
            )
        groups.add(qid, row, where)
        queries.setdefault(qid, question)
        query_line.setdefault(qid, line)
        qrels.setdefault(qid, {})[did] = 1
    if not docs:
        raise DataError(f"{p}: no rows; expected a {question_col!r}, {context_col!r} pair per row")
    meta: dict[str, Any] = {"format": "pairs", "path": str(p), "rows": len(rows)}
    return Dataset.build(
        s.name or p.stem, docs.values(), queries, qrels, source=str(p), meta=meta, groups=groups.labels
    )


def _text(row: dict[str, Any], col: str, where: str, *, allow_empty: bool = False) -> str:
    value = row[col]
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise DataError(f"{where}: column {col!r} must hold text, got {type(value).__name__}")
    if not allow_empty and not value.strip():
        raise DataError(f"{where}: column {col!r} is empty; expected text")
    return value


def check_pair_columns(path: str | Path, config: PairSettings | None = None, **options: Unpack[PairOptions]) -> None:
    """Check, from its header alone (the first line; a JSONL file's first record), that a pairs
    file holds the columns :func:`load_pairs` would read with the same options; else one line
    naming the file, the missing column and the columns present. Reads at most 1 MiB."""
    s = settings_from(PairSettings, config, options, "check_pair_columns")
    p, fmt = _pairs_file(path, s.file_format)
    groups = group_columns(s.group_by, f"{p}: group_by")
    wanted = s.columns() + groups
    columns = _header(p, fmt)
    missing = [c for c in wanted if c not in columns]
    if missing:
        what = "first record has no key" if fmt == "jsonl" else "header has no column"
        fix = (
            "check group_by"
            if missing[0] in groups
            else "set question_col/context_col to the names used (dataset options)"
        )
        raise DataError(f"{p}: the {what} {missing[0]!r} (columns: {', '.join(columns) or 'none'}); {fix}")


def _pairs_file(path: str | Path, file_format: str | None) -> tuple[Path, str]:
    """The existing pairs file and its format (``file_format``, else from the suffix), or one line
    naming the file and the formats."""
    p = require_file(path, "question/context pairs file (CSV, TSV or JSONL)")
    fmt = file_format or _SUFFIXES.get(p.suffix.lower())
    if fmt not in PAIR_FORMATS:
        raise ConfigError(
            f"{p}: cannot tell the file format from the suffix {p.suffix!r}; pass "
            f"file_format, one of {', '.join(PAIR_FORMATS)}"
        )
    return p, fmt


def _header(p: Path, fmt: str) -> list[str]:
    """The column names of a pairs file: its header row, or its first JSONL record's keys."""
    with p.open("rb") as f:
        head = f.read(1 << 20).decode("utf-8", errors="replace")
    lines = [ln for ln in head.splitlines() if ln.strip()]
    if not lines:
        return []
    if fmt == "jsonl":
        try:
            record = json.loads(lines[0])
        except ValueError as e:
            raise DataError(f"{p}:1: not a JSON object ({e})") from e
        return [str(k) for k in record] if isinstance(record, dict) else []
    return next(csv.reader([lines[0]], delimiter="\t" if fmt == "tsv" else ","), [])


def _read_rows(p: Path, fmt: str, wanted: list[str]) -> list[tuple[int, dict[str, Any]]]:
    """``(line, row)`` pairs, every row holding the ``wanted`` columns."""
    text = read_text(p)
    rows: list[tuple[int, dict[str, Any]]] = []
    if fmt == "jsonl":
        for line, obj in iter_jsonl(p, text):
            missing = [c for c in wanted if c not in obj]
            if missing:
                raise DataError(
                    f"{p}:{line}: missing key {missing[0]!r}; expected the keys "
                    f"{', '.join(wanted)} (set question_col/context_col to the names used)"
                )
            rows.append((line, obj))
        return rows
    reader = csv.reader(io.StringIO(text, newline=""), delimiter="\t" if fmt == "tsv" else ",")
    try:
        header = next(reader, None)
        if header is None:
            raise DataError(f"{p}: empty file; expected a header row with {', '.join(wanted)}")
        missing = [c for c in wanted if c not in header]
        if missing:
            raise DataError(
                f"{p}:1: the header has no column {missing[0]!r} (columns: "
                f"{', '.join(header)}); set question_col/context_col to the names used"
            )
        start = reader.line_num + 1
        for record in reader:
            if not any(cell.strip() for cell in record):
                start = reader.line_num + 1
                continue
            if len(record) != len(header):
                raise DataError(f"{p}:{start}: expected {len(header)} fields as in the header, got {len(record)}")
            rows.append((start, dict(zip(header, record))))
            start = reader.line_num + 1
    except csv.Error as e:
        raise DataError(f"{p}:{reader.line_num}: malformed {fmt.upper()} ({e})") from e
    return rows
