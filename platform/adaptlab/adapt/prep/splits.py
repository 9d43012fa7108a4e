"""Train / validation / test splits by document, so test questions come from unseen documents.

Questions of one document share vocabulary, entities and often near-identical sentences;
splitting questions at random would leak test documents into training. Documents are split
instead: the sorted document ids are permuted by ``numpy.random.default_rng(seed)``, the first
``n_test`` go to test, the next ``n_validation`` to validation, the rest to train, with

    n_test = floor(f_test * N + 1/2),  n_validation = floor(f_validation * N + 1/2)

raised to 1 for a non-zero fraction (when ``N`` allows) and never leaving train empty.

Units: the same rule splits pages or chunks instead of documents
(:func:`adaptlab.adapt.prep.prepare.prepare_adaptation_data`, ``unit=``). The ids are then unit
ids (``doc@p3`` for a page, the chunk id for a chunk) and :attr:`DocumentSplits.units` maps each
chunk id to its unit, so that :meth:`DocumentSplits.select` places chunks and questions by the
unit of their chunk. Each chunk belongs to exactly one unit, so no unit is in two splits.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

import numpy as np

from adaptlab.errors import ConfigError
from adaptlab.stats.resample import check_seed

__all__ = ["SPLITS", "DocumentSplits", "split_by_document", "split_documents"]

SPLITS: tuple[str, ...] = ("train", "validation", "test")

T = TypeVar("T")


@dataclass(frozen=True)
class DocumentSplits:
    """Disjoint id sets of the three splits (each sorted), and the seed.

    ``unit``: what the ids are (``documents``, ``pages`` or ``chunks``); ``units``: chunk id ->
    unit id when the unit is not the document (None otherwise).
    """

    train: tuple[str, ...]
    validation: tuple[str, ...]
    test: tuple[str, ...]
    seed: int
    unit: str = "documents"
    units: Mapping[str, str] | None = field(default=None, compare=False, repr=False)

    def with_units(self, unit: str, units: Mapping[str, str] | None) -> DocumentSplits:
        """The same split, its ids read as ``unit`` ids with the chunk -> unit map ``units``."""
        return replace(self, unit=unit, units=units)

    def unit_of(self, item: object, key: str = "doc_id") -> str:
        """The id an item is placed by: its ``key`` for documents, else the unit of its chunk
        (``item.chunk_id`` for a question, ``item.id`` for a chunk)."""
        if self.units is None:
            return getattr(item, key)
        chunk = getattr(item, "chunk_id", None) or getattr(item, "id")  # noqa: B009 - item is any object
        try:
            return self.units[chunk]
        except KeyError:
            raise ConfigError(f"split by {self.unit}: chunk {chunk!r} has no unit") from None

    def of(self, split: str) -> tuple[str, ...]:
        if split not in SPLITS:
            raise ConfigError(f"split {split!r}: expected one of {', '.join(SPLITS)}")
        return getattr(self, split)

    def split_of(self, doc_id: str) -> str | None:
        """The split holding ``doc_id`` (None when it is in none)."""
        for name in SPLITS:
            if doc_id in self.of(name):
                return name
        return None

    def select(self, items: Iterable[T], split: str, *, key: str = "doc_id") -> list[T]:
        """The items (questions, chunks: anything with a ``doc_id``) of one split, in order."""
        docs = set(self.of(split))
        return [it for it in items if self.unit_of(it, key) in docs]

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {name: list(self.of(name)) for name in SPLITS}
        out["seed"] = self.seed
        out["unit"] = self.unit
        return out


def _fractions(fractions: Sequence[float] | Mapping[str, float]) -> tuple[float, float, float]:
    if isinstance(fractions, Mapping):
        unknown = set(fractions) - set(SPLITS)
        if unknown:
            raise ConfigError(f"fractions: unknown split(s) {sorted(unknown)}; expected {list(SPLITS)}")
        vals = tuple(float(fractions.get(k, 0.0)) for k in SPLITS)
    else:
        if len(fractions) != 3:
            raise ConfigError(f"fractions={list(fractions)}: expected (train, validation, test)")
        vals = tuple(float(f) for f in fractions)
    if any(v < 0 for v in vals) or not math.isclose(sum(vals), 1.0, abs_tol=1e-6) or vals[0] <= 0:
        raise ConfigError(
            f"fractions={list(vals)}: expected non-negative (train, validation, test) fractions "
            "summing to 1 with train > 0"
        )
    return vals  # type: ignore[return-value]


def split_documents(
    doc_ids: Iterable[str],
    fractions: Sequence[float] | Mapping[str, float] = (0.8, 0.1, 0.1),
    *,
    seed: int = 0,
) -> DocumentSplits:
    """Seeded split of documents into train / validation / test (rule in the module doc)."""
    seed = check_seed(seed)
    _, f_val, f_test = _fractions(fractions)
    ids = sorted(set(doc_ids))
    n = len(ids)
    if n == 0:
        raise ConfigError("split_documents: no documents to split")
    n_test = math.floor(f_test * n + 0.5)
    n_val = math.floor(f_val * n + 0.5)
    if f_test > 0 and n_test == 0 and n >= 2:
        n_test = 1
    if f_val > 0 and n_val == 0 and n - n_test >= 2:
        n_val = 1
    while n_test + n_val >= n:  # keep at least one training document
        if n_val > 0:
            n_val -= 1
        elif n_test > 0:
            n_test -= 1
        else:  # pragma: no cover - unreachable: n >= 1
            break
    order = [ids[i] for i in np.random.default_rng(int(seed)).permutation(n)]
    test = order[:n_test]
    val = order[n_test : n_test + n_val]
    train = order[n_test + n_val :]
    return DocumentSplits(tuple(sorted(train)), tuple(sorted(val)), tuple(sorted(test)), int(seed))


def split_by_document(
    items: Sequence[T],
    fractions: Sequence[float] | Mapping[str, float] = (0.8, 0.1, 0.1),
    *,
    seed: int = 0,
    key: str = "doc_id",
) -> tuple[dict[str, list[T]], DocumentSplits]:
    """Split questions (or any items with ``doc_id``) by document; returns the items per split
    and the document split itself."""
    splits = split_documents((getattr(it, key) for it in items), fractions, seed=seed)
    return {name: splits.select(items, name, key=key) for name in SPLITS}, splits
