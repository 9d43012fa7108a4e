"""BEIR-format folders: ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv``.

Layout (Thakur et al., BEIR, NeurIPS 2021 Datasets and Benchmarks):

- ``corpus.jsonl``: one object per line with ``_id``, ``text`` and (optional) ``title``;
- ``queries.jsonl``: one object per line with ``_id`` and ``text``;
- ``qrels/<split>.tsv``: ``query-id<TAB>corpus-id<TAB>score`` with a header line.

``group_by`` names grouping columns of ``queries.jsonl``: a key of each query object, or of
its ``metadata`` object (kept as :attr:`~adaptlab.data.Dataset.groups`; a query without it is
in no group, a column no query has is an error).

As BEIR's own loader does, only the queries that appear in the split's qrels are kept (a
query judged only with score 0 is kept too). Documents are embedded as
``title + " " + text`` (:meth:`Document.full_text`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from adaptlab.data._io import iter_jsonl, iter_lines, read_text, require_file, str_id
from adaptlab.data.dataset import Dataset, Document, Qrels
from adaptlab.data.groups import GroupLabels, group_columns
from adaptlab.errors import DataError

__all__ = ["load_beir", "read_beir_qrels", "write_beir"]


def _read_corpus(path: Path) -> list[Document]:
    docs: list[Document] = []
    seen: dict[str, int] = {}
    for line, obj in iter_jsonl(path):
        where = f"{path}:{line}"
        for key in ("_id", "text"):
            if key not in obj:
                raise DataError(f"{where}: missing key {key!r}; a corpus line needs _id, text (and optionally title)")
        did = str_id(obj["_id"], where, "_id")
        if did in seen:
            raise DataError(f"{where}: duplicate document id {did!r} (first seen on line {seen[did]})")
        seen[did] = line
        text, title = obj["text"], obj.get("title", "") or ""
        if not isinstance(text, str) or not isinstance(title, str):
            raise DataError(f"{where}: 'text' and 'title' must be strings")
        docs.append(Document(did, text, title))
    if not docs:
        raise DataError(f"{path}: the corpus is empty; expected one JSON object per line")
    return docs


def _read_queries(path: Path, groups: GroupLabels | None = None) -> tuple[dict[str, str], dict[str, int]]:
    queries: dict[str, str] = {}
    lines: dict[str, int] = {}
    for line, obj in iter_jsonl(path):
        where = f"{path}:{line}"
        for key in ("_id", "text"):
            if key not in obj:
                raise DataError(f"{where}: missing key {key!r}; a query line needs _id and text")
        qid = str_id(obj["_id"], where, "_id")
        if qid in queries:
            raise DataError(f"{where}: duplicate query id {qid!r} (first seen on line {lines[qid]})")
        if not isinstance(obj["text"], str):
            raise DataError(f"{where}: 'text' must be a string")
        queries[qid] = obj["text"]
        lines[qid] = line
        if groups is not None:
            found = obj.get("metadata")
            meta: dict[str, Any] = found if isinstance(found, dict) else {}
            groups.add(qid, {**meta, **{k: v for k, v in obj.items() if k in groups.columns}}, where)
    return queries, lines


def _check_group_keys(path: Path, groups: GroupLabels) -> None:
    """A grouping column that no query of ``path`` has is one line naming it."""
    for c in groups.columns:
        if not any(groups.labels[c].values()):
            raise DataError(
                f"{path}: no query has the grouping column {c!r} (as a key or under 'metadata'); check group_by"
            )


def read_beir_qrels(path: str | Path) -> Qrels:
    """Read a BEIR qrels TSV (``query-id<TAB>corpus-id<TAB>score``) into a qrels dict.

    Fields are tab separated (any whitespace is accepted when there are no tabs); the first
    line is a header unless its third field is an integer. An identical repeated judgement is
    ignored, a conflicting one is an error.
    """
    return _read_qrels_tsv(path)[0]


def _read_qrels_tsv(path: str | Path) -> tuple[Qrels, dict[tuple[str, str], int]]:
    """The qrels and the line of each (query, document) judgement."""
    p = require_file(path, "BEIR qrels file (query-id, corpus-id, score)")
    qrels: Qrels = {}
    lines: dict[tuple[str, str], int] = {}
    for number, raw in iter_lines(read_text(p)):
        if not raw.strip():
            continue
        fields = raw.split("\t") if "\t" in raw else raw.split()
        fields = [f.strip() for f in fields]
        if number == 1 and (len(fields) != 3 or not _is_int(fields[2])):
            continue  # header: query-id corpus-id score
        if len(fields) != 3:
            raise DataError(
                f"{p}:{number}: expected 3 tab-separated fields (query-id, corpus-id, score), got {len(fields)}"
            )
        qid, did, score = fields
        if not qid or not did:
            raise DataError(f"{p}:{number}: empty query-id or corpus-id")
        if not _is_int(score):
            raise DataError(f"{p}:{number}: score {score!r} is not an integer")
        rel = int(score)
        judged = qrels.setdefault(qid, {})
        if did in judged and judged[did] != rel:
            raise DataError(
                f"{p}:{number}: query {qid!r} and document {did!r} are judged twice with "
                f"different scores ({judged[did]} and {rel})"
            )
        judged[did] = rel
        lines.setdefault((qid, did), number)
    return qrels, lines


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def load_beir(
    path: str | Path, split: str = "test", *, name: str | None = None, group_by: str | list[str] | None = None
) -> Dataset:
    """Load a BEIR folder's ``split``: its judged queries, the whole corpus and the qrels.

    Raises DataError naming the file and line for a missing file or split (listing the
    available splits), a malformed line, a missing key, a duplicate id, or qrels that name a
    query or document that does not exist.
    """
    root = Path(path)
    if not root.is_dir():
        what = "does not exist" if not root.exists() else "is not a folder"
        raise DataError(
            f"{root}: {what}; expected a BEIR folder with corpus.jsonl, queries.jsonl and qrels/<split>.tsv"
        )
    corpus_path = require_file(root / "corpus.jsonl", "BEIR corpus (corpus.jsonl)")
    queries_path = require_file(root / "queries.jsonl", "BEIR queries (queries.jsonl)")
    qrels_path = root / "qrels" / f"{split}.tsv"
    if not qrels_path.is_file():
        available = sorted(p.stem for p in (root / "qrels").glob("*.tsv"))
        raise DataError(
            f"{qrels_path}: file not found; split {split!r} is not available "
            f"(splits found: {', '.join(available) or 'none'})"
        )
    docs = _read_corpus(corpus_path)
    doc_ids = {d.id for d in docs}
    groups = GroupLabels(group_columns(group_by, f"{root}: group_by"))
    all_queries, _ = _read_queries(queries_path, groups)
    _check_group_keys(queries_path, groups)
    qrels, lines = _read_qrels_tsv(qrels_path)
    if not qrels:
        raise DataError(f"{qrels_path}: no judgements; expected query-id, corpus-id, score lines")
    for (qid, did), line in sorted(lines.items(), key=lambda kv: kv[1]):
        if qid not in all_queries:
            raise DataError(f"{qrels_path}:{line}: query {qid!r} is not in {queries_path}")
        if did not in doc_ids:
            raise DataError(f"{qrels_path}:{line}: document {did!r} (judged for query {qid!r}) is not in {corpus_path}")
    queries = {qid: text for qid, text in all_queries.items() if qid in qrels}
    labels = {c: {q: v for q, v in by_query.items() if q in queries} for c, by_query in groups.labels.items()}
    return Dataset.build(
        name or root.name,
        docs,
        queries,
        qrels,
        source=str(root),
        meta={"format": "beir", "path": str(root), "split": split},
        groups=labels,
    )


def write_beir(dataset: Dataset, folder: str | Path, *, split: str = "test") -> Path:
    """Write ``dataset`` as a BEIR folder (``corpus.jsonl``, ``queries.jsonl`` with the grouping
    columns as keys, ``qrels/<split>.tsv``) readable by :func:`load_beir`."""
    root = Path(folder)
    (root / "qrels").mkdir(parents=True, exist_ok=True)
    with open(root / "corpus.jsonl", "w", encoding="utf-8") as f:
        for doc in dataset.corpus.values():
            f.write(json.dumps({"_id": doc.id, "title": doc.title, "text": doc.text}, ensure_ascii=False) + "\n")
    with open(root / "queries.jsonl", "w", encoding="utf-8") as f:
        for qid, text in dataset.queries.items():
            labels = {c: v[qid] for c, v in dataset.groups.items() if v.get(qid)}
            f.write(json.dumps({"_id": qid, "text": text, **labels}, ensure_ascii=False) + "\n")
    with open(root / "qrels" / f"{split}.tsv", "w", encoding="utf-8") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        for qid, judged in dataset.qrels.items():
            for did, rel in judged.items():
                f.write(f"{qid}\t{did}\t{rel}\n")
    return root
