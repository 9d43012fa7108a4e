"""The search knobs of the record builders, declared once: ``k`` and the ``seed`` of the random
document every builder takes, and the few knobs of one path (exact dense search, exact MaxSim, a
PLAID index). A builder takes them whole (``config``) or as keyword options
(:func:`adaptlab.options.settings_from`); each uses the fields of its path and ignores the others.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

__all__ = ["SearchOptions", "SearchSettings"]


@dataclass(frozen=True)
class SearchSettings:
    """How one system's ranking is searched.

    Attributes:
        k: depth of the ranking kept per query (``k > N`` keeps all ``N`` documents).
        seed: seed of the one random document drawn per query (``sim_random``).
        block_size: queries per block of the exact dense search (``None``: from the memory budget).
        backend: array backend of the exact dense search (:data:`~adaptlab.retrieval.search.Backend`).
        max_tokens: exact MaxSim's limit of document tokens (``None``:
            :data:`~adaptlab.retrieval.late.MAX_EXACT_TOKENS`).
        nbits: bits per dimension of a PLAID index's residuals.
        batch_size: documents per encoding batch while a PLAID index is built.
    """

    k: int = 100
    seed: int = 0
    block_size: int | None = None
    backend: str = "auto"
    max_tokens: int | None = None
    nbits: int = 2
    batch_size: int = 32


class SearchOptions(TypedDict, total=False):
    """The fields of :class:`SearchSettings` as keyword options."""

    k: int
    seed: int
    block_size: int | None
    backend: str
    max_tokens: int | None
    nbits: int
    batch_size: int
