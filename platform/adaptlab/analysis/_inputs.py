"""Validated per-query arrays taken from :class:`~adaptlab.retrieval.records.PerQueryRecords`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from adaptlab.errors import ConfigError, DataError

__all__ = ["QueryArrays", "query_arrays"]


@dataclass(frozen=True)
class QueryArrays:
    """Arrays of the judged queries (those with at least one gold document).

    ``topk`` [Q, K] float64 (NaN where fewer than K documents were retrieved), ``gold_rank``
    [Q] int64 (1-based, 0 = not in the top-K), ``sim_gold`` / ``sim_random`` [Q] float64.
    """

    system: str
    dataset: str
    topk: np.ndarray
    gold_rank: np.ndarray
    sim_gold: np.ndarray
    sim_random: np.ndarray
    n_excluded: int

    @property
    def n_queries(self) -> int:
        return int(self.topk.shape[0])


def query_arrays(records: object, k: int) -> QueryArrays:
    """The first ``k`` columns of the records' scores and the gold/random similarities.

    Queries without a gold document are dropped (and counted), as everywhere in adaptlab.
    A gold rank beyond ``k`` counts as not retrieved.
    """
    for name in ("topk_scores", "gold_rank", "sim_gold", "sim_random", "gold_ids"):
        if not hasattr(records, name):
            raise ConfigError(f"expected PerQueryRecords (with .{name}), got {type(records).__name__}")
    k = int(k)
    scores = np.asarray(records.topk_scores, dtype=np.float64)  # type: ignore[attr-defined]
    if scores.ndim != 2:
        raise DataError(f"topk_scores must be [Q, k], got shape {scores.shape}")
    if k < 1:
        raise ConfigError(f"k must be >= 1, got {k}")
    if k > scores.shape[1]:
        raise ConfigError(
            f"k={k} exceeds the retrieval depth of the records ({scores.shape[1]} documents per query); "
            f"re-run retrieval with top_k >= {k} or choose k <= {scores.shape[1]}"
        )
    judged = np.array([len(g) > 0 for g in records.gold_ids], dtype=np.bool_)  # type: ignore[attr-defined]
    rank = np.asarray(records.gold_rank, dtype=np.int64)[judged]  # type: ignore[attr-defined]
    rank = np.where((rank >= 1) & (rank <= k), rank, 0)
    return QueryArrays(
        system=str(getattr(records, "system", "")),
        dataset=str(getattr(records, "dataset", "")),
        topk=scores[judged, :k],
        gold_rank=rank,
        sim_gold=np.asarray(records.sim_gold, dtype=np.float64)[judged],  # type: ignore[attr-defined]
        sim_random=np.asarray(records.sim_random, dtype=np.float64)[judged],  # type: ignore[attr-defined]
        n_excluded=int((~judged).sum()),
    )
