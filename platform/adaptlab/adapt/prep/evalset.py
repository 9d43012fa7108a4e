"""Held-out synthetic questions as an evaluation :class:`~adaptlab.data.dataset.Dataset`.

Queries are the questions, each judged relevant (grade 1) to exactly its positive chunk, as in
the EIS study's benchmarks (004_d4e67b48691a8900.txt, section 3.4.3: one gold context per
question). The corpus, ``corpus=``:

- ``"documents"`` (default): every chunk, sampled or not, of the documents the questions come
  from, or of the ``documents`` given (:func:`~adaptlab.adapt.prep.prepare.prepare_adaptation_data`
  passes every held-out test document). With questions from held-out test documents this is
  text no adapted model trained on
  (not even as a negative), the corpus is the same for the base and every adapted variant of
  every data scale, and its size grows with the test set, not the whole collection. It mirrors
  the study, which ranks all contexts of the benchmark's documents.
- ``"all"``: every chunk passed in (e.g. all chunks of a scale's documents, or the whole
  corpus): harder, and closer to searching the full collection, but the distractors then
  include training documents the adapted models saw, which can favour or penalise them.

Inverse-cloze questions: the document of a positive chunk is the chunk with every query
sentence of the given questions cut out, so that no query is retrieved by an exact copy of
itself. Chunk documents have no title.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from adaptlab.adapt.prep.chunking import Chunk
from adaptlab.adapt.prep.questions import SyntheticQuestion, cut_spans
from adaptlab.data.dataset import Dataset, Document
from adaptlab.errors import ConfigError

__all__ = ["heldout_dataset"]


def heldout_dataset(
    questions: Sequence[SyntheticQuestion],
    chunks: Sequence[Chunk],
    *,
    name: str = "heldout",
    corpus: Literal["documents", "all"] = "documents",
    documents: Iterable[str] | None = None,
    meta: Mapping[str, Any] | None = None,
) -> Dataset:
    """An evaluation Dataset: queries = ``questions``, qrels = question -> its chunk (grade 1).

    ``chunks`` must include every positive chunk; see the module docstring for ``corpus``.
    ``documents`` (with ``corpus="documents"``): the document ids whose chunks form the corpus,
    default the questions' documents; pass the whole held-out document set so that the corpus
    does not depend on which documents happened to yield questions.
    ``meta`` records the choice (``corpus``), the generator(s) and the question count plus
    anything passed in.
    """
    if corpus not in ("documents", "all"):
        raise ConfigError(f"corpus={corpus!r}: expected 'documents' or 'all'")
    if not questions:
        raise ConfigError("heldout_dataset: no questions given")
    by_id = {c.id: c for c in chunks}
    missing = [q for q in questions if q.chunk_id not in by_id]
    if missing:
        raise ConfigError(
            f"question {missing[0].id!r}: its chunk {missing[0].chunk_id!r} is not among the "
            f"chunks given ({len(missing)} question(s) affected)"
        )
    if corpus == "documents":
        docs = {q.doc_id for q in questions} | set(documents or ())
        selected = [c for c in chunks if c.doc_id in docs]
    else:
        selected = list(chunks)
    cuts: dict[str, list[tuple[int, int]]] = {}
    for q in questions:
        if q.removed is not None:
            cuts.setdefault(q.chunk_id, []).append(q.removed)
    corpus_docs: list[Document] = []
    for c in selected:
        text = cut_spans(c.text, cuts[c.id]) if c.id in cuts else c.text
        if not text.strip():
            text = c.text  # every sentence was a query: keep the chunk rather than lose it
        corpus_docs.append(Document(c.id, text))
    queries = {q.id: q.text for q in questions}
    if len(queries) != len(questions):
        raise ConfigError("heldout_dataset: duplicate question ids")
    qrels = {q.id: {q.chunk_id: 1} for q in questions}
    info: dict[str, Any] = {
        "kind": "adaptation-heldout",
        "corpus": corpus,
        "n_questions": len(questions),
        "generators": sorted({q.generator for q in questions}),
        "documents": len({c.doc_id for c in selected}),
    }
    info.update(meta or {})
    return Dataset.build(name, corpus_docs, queries, qrels, source=f"held-out questions {name!r}", meta=info)
