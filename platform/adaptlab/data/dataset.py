"""The in-memory retrieval dataset: corpus, queries and graded relevance judgements.

A :class:`Dataset` is immutable once built and carries a content fingerprint
(SHA-256 over a canonical serialisation of its three parts) that goes into the
provenance of every result computed from it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from adaptlab.errors import DataError

__all__ = ["Dataset", "Document", "Qrels", "Run"]

Qrels = dict[str, dict[str, int]]
"""query id -> {document id -> graded relevance}; relevance > 0 counts as relevant."""

Run = dict[str, dict[str, float]]
"""query id -> {document id -> score}; higher is better (the pytrec_eval layout)."""


@dataclass(frozen=True)
class Document:
    """One corpus entry. ``title`` may be empty."""

    id: str
    text: str
    title: str = ""

    def full_text(self, sep: str = " ") -> str:
        """Title and text joined as BEIR and MTEB embed them (``title + " " + text``)."""
        return f"{self.title}{sep}{self.text}" if self.title else self.text


@dataclass(frozen=True)
class Dataset:
    """A corpus, its queries and their relevance judgements.

    Built through :meth:`build`, which validates that every judged query and document
    exists; the constructor itself does not copy or check. ``groups`` holds the query grouping
    columns the reader kept (``group_by``): ``{column: {query_id: value}}``, an empty value
    meaning the query is in no group of that column.
    """

    name: str
    corpus: Mapping[str, Document]
    queries: Mapping[str, str]
    qrels: Mapping[str, Mapping[str, int]]
    meta: Mapping[str, object] = field(default_factory=dict)
    groups: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        name: str,
        corpus: Iterable[Document],
        queries: Mapping[str, str],
        qrels: Mapping[str, Mapping[str, int]],
        *,
        source: str = "<memory>",
        meta: Mapping[str, object] | None = None,
        groups: Mapping[str, Mapping[str, str]] | None = None,
    ) -> Dataset:
        """Validate and build a dataset; ``source`` names the origin in error messages."""
        docs: dict[str, Document] = {}
        for doc in corpus:
            if doc.id in docs:
                raise DataError(f"{source}: duplicate document id {doc.id!r}")
            docs[doc.id] = doc
        if not docs:
            raise DataError(f"{source}: the corpus is empty; expected at least one document")
        clean_qrels: dict[str, dict[str, int]] = {}
        for qid, judged in qrels.items():
            if qid not in queries:
                raise DataError(f"{source}: qrels name query {qid!r}, which is not among the queries")
            for did in judged:
                if did not in docs:
                    raise DataError(
                        f"{source}: qrels for query {qid!r} name document {did!r}, which is not in the corpus"
                    )
            clean_qrels[qid] = {did: int(rel) for did, rel in judged.items()}
        return cls(name, docs, dict(queries), clean_qrels, dict(meta or {}), _check_groups(groups, queries, source))

    @property
    def n_documents(self) -> int:
        return len(self.corpus)

    @property
    def n_queries(self) -> int:
        return len(self.queries)

    def judged_queries(self) -> list[str]:
        """Query ids with at least one relevant (relevance > 0) document, in query order."""
        return [q for q in self.queries if any(r > 0 for r in self.qrels.get(q, {}).values())]

    def fingerprint(self) -> str:
        """SHA-256 of the canonical JSON of corpus, queries and qrels, and of the grouping columns
        when there are any (hex, 16 chars)."""
        h = hashlib.sha256()
        for doc in sorted(self.corpus.values(), key=lambda d: d.id):
            h.update(json.dumps([doc.id, doc.title, doc.text], ensure_ascii=False).encode())
        h.update(b"\x00queries")
        for qid in sorted(self.queries):
            h.update(json.dumps([qid, self.queries[qid]], ensure_ascii=False).encode())
        h.update(b"\x00qrels")
        for qid in sorted(self.qrels):
            h.update(json.dumps([qid, sorted(self.qrels[qid].items())]).encode())
        if self.groups:  # a dataset without grouping columns keeps the fingerprint it always had
            h.update(b"\x00groups")
            h.update(
                json.dumps({c: sorted(v.items()) for c, v in sorted(self.groups.items())}, ensure_ascii=False).encode()
            )
        return h.hexdigest()[:16]

    def subset(self, query_ids: Iterable[str], name: str | None = None) -> Dataset:
        """The same corpus with only ``query_ids`` (and their qrels)."""
        keep = [q for q in query_ids]
        queries = {q: self.queries[q] for q in keep}
        qrels = {q: dict(self.qrels[q]) for q in keep if q in self.qrels}
        groups = {c: {q: v[q] for q in keep if q in v} for c, v in self.groups.items()}
        return Dataset(name or self.name, self.corpus, queries, qrels, dict(self.meta), groups)

    def __repr__(self) -> str:
        return (
            f"Dataset({self.name!r}, documents={self.n_documents}, queries={self.n_queries}, judged={len(self.qrels)})"
        )


def _check_groups(
    groups: Mapping[str, Mapping[str, str]] | None, queries: Mapping[str, str], source: str
) -> dict[str, dict[str, str]]:
    """``groups`` as plain dicts of text, after checking that every labelled query exists."""
    out: dict[str, dict[str, str]] = {}
    for column, labels in (groups or {}).items():
        for qid in labels:
            if qid not in queries:
                raise DataError(
                    f"{source}: grouping column {column!r} labels query {qid!r}, which is not among the queries"
                )
        out[str(column)] = {str(q): str(v) for q, v in labels.items()}
    return out
