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

Units (``unit=``): the same rules apply to pages or chunks instead of documents when the chunks
passed in carry the unit id in ``doc_id`` (what
:func:`adaptlab.adapt.prep.prepare.prepare_adaptation_data` does for ``unit="pages"`` or
``"chunks"``); scales are then named ``pages{n}`` / ``chunks{n}`` and ``n_documents`` counts
units. With ``unit="chunks"`` every unit is one chunk, so every chunk of a scale is sampled.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from adaptlab.adapt.prep.chunking import Chunk, chunks_by_document
from adaptlab.errors import ConfigError
from adaptlab.stats.resample import check_seed

__all__ = [
    "UNITS",
    "DataScale",
    "build_scales",
    "document_order",
    "sample_chunks",
    "sample_size",
]

ALL = "all"

UNITS: tuple[str, ...] = ("documents", "pages", "chunks")
"""What scales and splits count: whole documents, pages (of paged documents), or chunks."""

_PREFIX = {"documents": "docs", "pages": "pages", "chunks": "chunks"}


@dataclass(frozen=True)
class DataScale:
    """One data scale: its documents (in scale order) and the sampled chunk ids.

    ``name`` is ``f"docs{n}"`` (``pages{n}``, ``chunks{n}`` for other units); ``chunk_ids`` are
    grouped by document in ``doc_ids`` order and in chunk order within a document. For a unit
    other than documents, ``n_documents`` and ``doc_ids`` are the scale's size and ids in that
    unit (the names are historical; :attr:`size` says the same), ``units`` maps chunk ids to
    unit ids.
    """

    name: str
    n_documents: int
    doc_ids: tuple[str, ...]
    chunk_ids: tuple[str, ...]
    fraction: float
    seed: int
    unit: str = "documents"
    units: Mapping[str, str] | None = field(default=None, compare=False, repr=False)

    @property
    def size(self) -> int:
        """The scale's size in its unit."""
        return self.n_documents

    def chunks(self, chunks: Iterable[Chunk]) -> list[Chunk]:
        """The sampled chunks of this scale, in ``chunk_ids`` order."""
        by_id = {c.id: c for c in chunks}
        return [by_id[i] for i in self.chunk_ids]

    def all_chunks(self, chunks: Iterable[Chunk]) -> list[Chunk]:
        """Every chunk (sampled or not) of this scale's documents (units)."""
        docs = set(self.doc_ids)
        if self.units is not None:
            return [c for c in chunks if self.units.get(c.id) in docs]
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
    unit: str = "documents",
    units: Mapping[str, str] | None = None,
) -> list[DataScale]:
    """Nested data scales over the documents that have chunks.

    ``sizes``: strictly increasing document counts; the string ``"all"`` (last) means every
    document. ``exclude_documents``: documents kept out of every scale, e.g. a held-out test set
    (:func:`adaptlab.adapt.prep.splits.split_documents`). Raises ConfigError when a size exceeds the
    number of documents available. ``unit`` / ``units``: see the module docstring (the chunks'
    ``doc_id`` must then be their unit id).
    """
    if unit not in UNITS:
        raise ConfigError(f"unit={unit!r}: expected one of {', '.join(UNITS)}")
    noun = {"documents": "documents", "pages": "pages", "chunks": "chunks"}[unit]
    if not 0.0 < fraction <= 1.0:
        raise ConfigError(f"fraction={fraction}: expected a number in (0, 1]")
    if isinstance(min_per_document, bool) or min_per_document < 1:
        raise ConfigError(f"min_per_document={min_per_document}: expected an integer >= 1")
    seed = check_seed(seed)
    excluded = set(exclude_documents)
    grouped = {d: cs for d, cs in chunks_by_document(chunks).items() if d not in excluded}
    if not grouped:
        raise ConfigError(f"build_scales: no {noun} with chunks (after exclusions)")
    order = document_order(grouped, seed)
    resolved: list[int] = []
    for s in sizes:
        if s == ALL:
            n = len(order)
        elif isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 1:
            raise ConfigError(f"sizes: {s!r} is not a positive count of {noun} or 'all'")
        else:
            n = int(s)
        if n > len(order):
            raise ConfigError(
                f"sizes: scale of {n} {noun} requested but only {len(order)} {noun} have "
                f"chunks (after the held-out ones); use a smaller size or 'all'"
                + ("" if unit != "documents" else ', or scale by pages or chunks ([adapt].unit = "pages" | "chunks")')
            )
        if resolved and n <= resolved[-1]:
            raise ConfigError(f"sizes: {list(sizes)} must be strictly increasing")
        resolved.append(n)
    if not resolved:
        raise ConfigError("sizes: expected at least one scale")
    samples = {
        d: tuple(c.id for c in sample_chunks(grouped[d], fraction, seed=seed, min_per_document=min_per_document))
        for d in order[: resolved[-1]]
    }
    return [
        DataScale(
            name=f"{_PREFIX[unit]}{n}",
            n_documents=n,
            doc_ids=tuple(order[:n]),
            chunk_ids=tuple(cid for d in order[:n] for cid in samples[d]),
            fraction=float(fraction),
            seed=seed,
            unit=unit,
            units=units,
        )
        for n in resolved
    ]
