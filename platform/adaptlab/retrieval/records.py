"""The central record of an evaluation: what one system retrieved for each query.

For each query of one (system, dataset): the ids and scores of its top-k documents
(ranked by score descending, ties by document id descending, as trec_eval does), its gold
(relevant) document ids, the 1-based rank of the first gold document in the top-k
(0 = not retrieved), the similarity to its best gold document, and the similarity to one
random corpus document. Every metric and analysis is computed from these arrays, so no
analysis needs to re-embed (docs/architecture.md, "Principles": the per-query record is the
contract).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from adaptlab.data.dataset import Run

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

__all__ = ["PerQueryRecords"]


@dataclass
class PerQueryRecords:
    """Columnar per-query retrieval results of one system on one dataset.

    Shapes: ``Q`` queries, ``k`` retrieved documents per query.

    - ``query_ids``: [Q] str
    - ``topk_ids``: [Q][k] str (ranked); a row may be shorter (a TREC run's query that returned
      fewer documents), its ``topk_scores`` row then padded with NaN
    - ``topk_scores``: float32 [Q, k]
    - ``gold_ids``: [Q] lists of relevant document ids (relevance > 0)
    - ``gold_rank``: int32 [Q], 1-based rank of the first gold document, 0 if not in top-k
    - ``sim_gold``: float32 [Q], similarity to the most similar gold document (NaN: none)
    - ``sim_random``: float32 [Q], similarity to ``random_ids[i]``
    - ``random_ids``: [Q] str, one corpus document drawn uniformly per query (seeded)
    """

    system: str
    dataset: str
    query_ids: list[str]
    topk_ids: list[list[str]]
    topk_scores: np.ndarray
    gold_ids: list[list[str]]
    gold_rank: np.ndarray
    sim_gold: np.ndarray
    sim_random: np.ndarray
    random_ids: list[str]
    meta: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.query_ids)
        scores = np.asarray(self.topk_scores, dtype=np.float32)
        self.topk_scores = (
            scores.reshape(n, -1) if n else scores.reshape(0, scores.shape[-1] if scores.ndim == 2 else 0)
        )
        self.gold_rank = np.asarray(self.gold_rank, dtype=np.int32)
        self.sim_gold = np.asarray(self.sim_gold, dtype=np.float32)
        self.sim_random = np.asarray(self.sim_random, dtype=np.float32)
        for name in ("topk_ids", "gold_ids", "gold_rank", "sim_gold", "sim_random", "random_ids"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"PerQueryRecords.{name} has {len(getattr(self, name))} rows, expected {n}")

    def __len__(self) -> int:
        return len(self.query_ids)

    @property
    def k(self) -> int:
        return int(self.topk_scores.shape[1]) if len(self) else 0

    def to_run(self) -> Run:
        """The top-k lists as a pytrec_eval-style run ``{qid: {docid: score}}``."""
        return {
            q: {d: float(s) for d, s in zip(ids, scores)}
            for q, ids, scores in zip(self.query_ids, self.topk_ids, self.topk_scores)
        }

    def to_arrow(self) -> pa.Table:
        """One row per query; list columns for the top-k and gold ids."""
        import pyarrow as pa

        return pa.table(
            {
                "system": pa.array([self.system] * len(self), pa.string()),
                "dataset": pa.array([self.dataset] * len(self), pa.string()),
                "query_id": pa.array(self.query_ids, pa.string()),
                "topk_ids": pa.array(self.topk_ids, pa.list_(pa.string())),
                "topk_scores": pa.array(
                    [row[: len(ids)] for row, ids in zip(self.topk_scores, self.topk_ids)], pa.list_(pa.float32())
                ),
                "gold_ids": pa.array(self.gold_ids, pa.list_(pa.string())),
                "gold_rank": pa.array(self.gold_rank, pa.int32()),
                "sim_gold": pa.array(self.sim_gold, pa.float32()),
                "sim_random": pa.array(self.sim_random, pa.float32()),
                "random_id": pa.array(self.random_ids, pa.string()),
            }
        )

    @classmethod
    def from_arrow(cls, table: pa.Table, system: str | None = None, dataset: str | None = None) -> PerQueryRecords:
        """Inverse of :meth:`to_arrow` (rows of one system and dataset)."""
        cols = table.to_pydict()
        n = table.num_rows
        k = max((len(x) for x in cols["topk_scores"]), default=0)
        scores = np.full((n, k), np.nan, dtype=np.float32)
        for i, row in enumerate(cols["topk_scores"]):
            scores[i, : len(row)] = row
        return cls(
            system=system or (cols["system"][0] if n else ""),
            dataset=dataset or (cols["dataset"][0] if n else ""),
            query_ids=list(cols["query_id"]),
            topk_ids=[list(x) for x in cols["topk_ids"]],
            topk_scores=scores,
            gold_ids=[list(x) for x in cols["gold_ids"]],
            gold_rank=np.asarray(cols["gold_rank"], dtype=np.int32),
            sim_gold=np.asarray(cols["sim_gold"], dtype=np.float32),
            sim_random=np.asarray(cols["sim_random"], dtype=np.float32),
            random_ids=list(cols["random_id"]),
        )

    def select(self, query_ids: Sequence[str]) -> PerQueryRecords:
        """The records of ``query_ids`` in that order."""
        pos = {q: i for i, q in enumerate(self.query_ids)}
        idx = [pos[q] for q in query_ids]
        return PerQueryRecords(
            self.system,
            self.dataset,
            [self.query_ids[i] for i in idx],
            [self.topk_ids[i] for i in idx],
            self.topk_scores[idx],
            [self.gold_ids[i] for i in idx],
            self.gold_rank[idx],
            self.sim_gold[idx],
            self.sim_random[idx],
            [self.random_ids[i] for i in idx],
            dict(self.meta),
        )
