"""Nested data scales: the first 10 ⊂ first 100 ⊂ first 700 documents of one seeded order.

The EIS study (004_d4e67b48691a8900.txt, sections 3.1 and 3.2.3) fine-tunes on synthetic data
from 10, 100 and 700 documents and samples 30% of the chunks of each document, per document,
so that every document contributes. Here:

- **Document order**: the document ids, sorted, are permuted by
  ``numpy.random.default_rng(seed).permutation``; scale ``n`` is the first ``n`` documents of
  that order, so smaller scales are subsets of larger ones.
- **Per-document sample**: document ``d`` with ``m`` chunks contributes
  ``k = min(m, max(min_per_document, floor(fraction * m + 1/2)))`` chunks, drawn without
  replacement by a Generator seeded with ``(seed, sha256(d))``. The sample of a document does not
  depend on the scale, so the sampled chunks are nested too, and it does not move when other
  documents are added to the corpus.

Both are deterministic given ``seed``.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from adaptlab.adapt.prep.chunking import Chunk, chunks_by_document
from adaptlab.errors import ConfigError
from adaptlab.stats.resample import check_seed

__all__ = [
    "DataScale",
    "build_scales",
    "document_order",
    "sample_chunks",
    "sample_size",
]

ALL = "all"


@dataclass(frozen=True)
class DataScale:
    """One data scale: its documents (in scale order) and the sampled chunk ids.

    ``name`` is ``f"docs{n}"``; ``chunk_ids`` are grouped by document in ``doc_ids`` order and in
    chunk order within a document.
    """

    name: str
    n_documents: int
    doc_ids: tuple[str, ...]
    chunk_ids: tuple[str, ...]
    fraction: float
    seed: int

    def chunks(self, chunks: Iterable[Chunk]) -> list[Chunk]:
        """The sampled chunks of this scale, in ``chunk_ids`` order."""
        by_id = {c.id: c for c in chunks}
        return [by_id[i] for i in self.chunk_ids]

    def all_chunks(self, chunks: Iterable[Chunk]) -> list[Chunk]:
        """Every chunk (sampled or not) of this scale's documents."""
        docs = set(self.doc_ids)
        return [c for c in chunks if c.doc_id in docs]


def _doc_key(doc_id: str) -> int:
    return int.from_bytes(hashlib.sha256(doc_id.encode()).digest()[:8], "big")


def document_order(doc_ids: Iterable[str], seed: int) -> list[str]:
    """A seeded permutation of the (sorted, de-duplicated) document ids."""
    ids = sorted(set(doc_ids))
    rng = np.random.default_rng(check_seed(seed))
    return [ids[i] for i in rng.permutation(len(ids))]


def sample_size(n_chunks: int, fraction: float, min_per_document: int = 1) -> int:
    """``min(m, max(min_per_document, floor(fraction * m + 1/2)))`` for ``m = n_chunks``."""
    return min(n_chunks, max(min_per_document, math.floor(fraction * n_chunks + 0.5)))


def sample_chunks(
    chunks: Sequence[Chunk], fraction: float = 0.3, *, seed: int = 0, min_per_document: int = 1
) -> list[Chunk]:
    """The per-document sample of one document's chunks (all from one document), chunk order."""
    if not chunks:
        return []
    doc_ids = {c.doc_id for c in chunks}
    if len(doc_ids) != 1:
        raise ConfigError(f"sample_chunks: expected chunks of one document, got {len(doc_ids)}")
    ordered = sorted(chunks, key=lambda c: c.index)
    k = sample_size(len(ordered), fraction, min_per_document)
    rng = np.random.default_rng([check_seed(seed), _doc_key(ordered[0].doc_id)])
    picked = np.sort(rng.choice(len(ordered), size=k, replace=False))
    return [ordered[i] for i in picked]


def build_scales(
    chunks: Iterable[Chunk],
    sizes: Sequence[int | str] = (10, 100, 700),
    *,
    fraction: float = 0.3,
    seed: int = 0,
    min_per_document: int = 1,
    exclude_documents: Iterable[str] = (),
) -> list[DataScale]:
    """Nested data scales over the documents that have chunks.

    ``sizes``: strictly increasing document counts; the string ``"all"`` (last) means every
    document. ``exclude_documents``: documents kept out of every scale, e.g. a held-out test set
    (:func:`adaptlab.adapt.prep.splits.split_documents`). Raises ConfigError when a size exceeds the
    number of documents available.
    """
    if not 0.0 < fraction <= 1.0:
        raise ConfigError(f"fraction={fraction}: expected a number in (0, 1]")
    if isinstance(min_per_document, bool) or min_per_document < 1:
        raise ConfigError(f"min_per_document={min_per_document}: expected an integer >= 1")
    seed = check_seed(seed)
    excluded = set(exclude_documents)
    grouped = {d: cs for d, cs in chunks_by_document(chunks).items() if d not in excluded}
    if not grouped:
        raise ConfigError("build_scales: no documents with chunks (after exclusions)")
    order = document_order(grouped, seed)
    resolved: list[int] = []
    for s in sizes:
        if s == ALL:
            n = len(order)
        elif isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 1:
            raise ConfigError(f"sizes: {s!r} is not a positive document count or 'all'")
        else:
            n = int(s)
        if n > len(order):
            raise ConfigError(
                f"sizes: scale of {n} documents requested but only {len(order)} documents have "
                f"chunks; use a smaller size or 'all'"
            )
        if resolved and n <= resolved[-1]:
            raise ConfigError(f"sizes: {list(sizes)} must be strictly increasing")
        resolved.append(n)
    if not resolved:
        raise ConfigError("sizes: expected at least one scale")
    samples = {
        d: tuple(c.id for c in sample_chunks(grouped[d], fraction, seed=seed,
                                              min_per_document=min_per_document))
        for d in order[: resolved[-1]]
    }
    return [
        DataScale(
            name=f"docs{n}",
            n_documents=n,
            doc_ids=tuple(order[:n]),
            chunk_ids=tuple(cid for d in order[:n] for cid in samples[d]),
            fraction=float(fraction),
            seed=seed,
        )
        for n in resolved
    ]
