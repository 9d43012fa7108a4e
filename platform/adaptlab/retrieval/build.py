"""Build the per-query records of one system on one dataset from its embeddings.

For query ``q`` with embedding ``x_q`` (docs/architecture.md, "Principles": the per-query record
is the contract):

- ``topk_ids`` / ``topk_scores``: :func:`~adaptlab.retrieval.search.exact_search` over the
  whole corpus (score descending, then document id descending, as trec_eval ranks);
- ``gold_ids``: the documents judged relevant, ``rel(q, d) > 0``, sorted by id;
- ``gold_rank``: ``min{r : topk_ids[r-1] in gold_ids}``, 1-based; 0 when no gold document is in
  the top-k (or the query has none);
- ``sim_gold``: ``max_{g in gold} <x_q, y_g>``, computed directly, so it is defined even when no
  gold document was retrieved; NaN for a query without gold documents;
- ``sim_random``: ``<x_q, y_r>`` for one corpus document ``r`` drawn uniformly (with
  replacement across queries) by ``numpy.random.default_rng(seed)``, recorded in
  ``random_ids``; the draw depends only on ``seed``, the number of queries and the corpus size.

All similarities are the canonical scores of :func:`~adaptlab.retrieval.search.pair_scores`,
so ``sim_gold`` equals the gold document's entry of ``topk_scores`` when it was retrieved.
Queries without judged relevant documents are kept (NaN / 0); the metrics layer excludes and
counts them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from adaptlab.errors import ConfigError, DataError
from adaptlab.options import settings_from
from adaptlab.retrieval.records import PerQueryRecords
from adaptlab.retrieval.search import as_matrix, exact_search, pair_scores
from adaptlab.retrieval.settings import SearchOptions, SearchSettings
from adaptlab.stats.resample import check_seed

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["Ranking", "build_records", "gold_pairs", "gold_ranks", "records_from_ranking", "records_from_run"]


def gold_ranks(topk_idx: np.ndarray, gold_q: np.ndarray, gold_d: np.ndarray, n_docs: int) -> np.ndarray:
    """1-based rank of the first gold document in each row of ``topk_idx`` (0: none)."""
    q, k = topk_idx.shape
    if k == 0 or gold_q.size == 0:
        return np.zeros(q, dtype=np.int32)
    codes = np.arange(q, dtype=np.int64)[:, None] * n_docs + topk_idx
    hit = np.isin(codes, gold_q.astype(np.int64) * n_docs + gold_d)
    return np.where(hit.any(axis=1), hit.argmax(axis=1) + 1, 0).astype(np.int32)


def gold_pairs(
    query_ids: Sequence[str], qrels: Mapping[str, Mapping[str, int]], doc_ids: Sequence[str]
) -> tuple[list[list[str]], np.ndarray, np.ndarray]:
    """Each query's sorted relevant ids, and the (query row, document column) of every
    relevant pair; a relevant document missing from ``doc_ids`` is a DataError."""
    pos = {d: i for i, d in enumerate(doc_ids)}
    gold_ids: list[list[str]] = []
    gq: list[int] = []
    gd: list[int] = []
    for row, qid in enumerate(query_ids):
        gold = sorted(d for d, rel in qrels.get(qid, {}).items() if rel > 0)
        for d in gold:
            if d not in pos:
                raise DataError(
                    f"qrels for query {qid!r} name relevant document {d!r}, which is not among the "
                    f"{len(doc_ids)} doc_ids; embed the whole corpus or drop that judgement"
                )
            gq.append(row)
            gd.append(pos[d])
        gold_ids.append(gold)
    gold_q = np.asarray(gq, dtype=np.int64)
    gold_d = np.asarray(gd, dtype=np.int64)
    return gold_ids, gold_q, gold_d


def check_query_ids(query_ids: Sequence[str]) -> None:
    """At least one query, and no query id twice (every records builder's rule)."""
    if not query_ids:
        raise ConfigError("query_ids is empty; expected at least one query")
    if len(set(query_ids)) != len(query_ids):
        raise ConfigError("query_ids must be unique")


@dataclass(frozen=True)
class Ranking:
    """One system's top-``k`` of every query: ``idx`` / ``scores`` ``[Q, k]``, column positions into
    ``doc_ids`` and their scores, rows in the order of ``query_ids``."""

    query_ids: list[str]
    doc_ids: list[str]
    scores: np.ndarray
    idx: np.ndarray


def records_from_ranking(
    ranking: Ranking,
    qrels: Mapping[str, Mapping[str, int]],
    pair_score: Callable[[np.ndarray, np.ndarray], np.ndarray],
    *,
    system: str,
    dataset: str,
    seed: int,
    meta: dict[str, Any],
) -> PerQueryRecords:
    """The per-query records of one ``ranking``, shared by the dense, exact late-interaction,
    PLAID and BM25 paths: gold ids and ranks, ``sim_gold`` (the best-scoring relevant document of
    each query, NaN without one) and ``sim_random`` (one document per query drawn by
    ``numpy.random.default_rng(seed)``, the same draw on every path). ``pair_score(rows, cols)``
    scores query row ``rows[i]`` with document ``cols[i]``; it is called once, for the gold pairs
    followed by the random ones."""
    query_ids, doc_ids, idx = ranking.query_ids, ranking.doc_ids, ranking.idx
    n, n_q = len(doc_ids), len(query_ids)
    gold_ids, gold_q, gold_d = gold_pairs(query_ids, qrels, doc_ids)
    gold_rank = gold_ranks(idx, gold_q, gold_d, n)
    rand = np.random.default_rng(seed).integers(0, n, size=n_q)
    sims = np.asarray(pair_score(np.r_[gold_q, np.arange(n_q)], np.r_[gold_d, rand]), dtype=np.float32)
    sim_gold = np.full(n_q, np.nan, dtype=np.float32)
    if gold_q.size:
        np.fmax.at(sim_gold, gold_q, sims[: gold_q.size])
    ids = np.asarray(doc_ids, dtype=object)
    return PerQueryRecords(
        system=system,
        dataset=dataset,
        query_ids=query_ids,
        topk_ids=ids[idx].tolist(),
        topk_scores=ranking.scores,
        gold_ids=gold_ids,
        gold_rank=gold_rank,
        sim_gold=sim_gold,
        sim_random=sims[gold_q.size :],
        random_ids=ids[rand].tolist(),
        meta=meta,
    )


def build_records(
    query_ids: Sequence[str],
    query_emb: np.ndarray,
    doc_ids: Sequence[str],
    doc_emb: np.ndarray,
    qrels: Mapping[str, Mapping[str, int]],
    *,
    system: str,
    dataset: str,
    config: SearchSettings | None = None,
    **options: Unpack[SearchOptions],
) -> PerQueryRecords:
    """Retrieve the top-``k`` for every query and fill the per-query records.

    ``query_emb`` [Q, d] and ``doc_emb`` [N, d] are L2-normalised float32 rows in the order of
    ``query_ids`` and ``doc_ids``. ``qrels`` maps query id -> {document id: relevance}; queries
    of ``qrels`` not in ``query_ids`` are ignored, a relevant document not in ``doc_ids`` is a
    :class:`~adaptlab.errors.DataError`. The search knobs (:class:`SearchSettings`: ``k``,
    ``seed``, ``block_size``, ``backend``) come from ``config`` and the keyword options; ``block_size``
    and ``backend`` go to :func:`~adaptlab.retrieval.search.exact_search`; ``k > N`` keeps all
    ``N`` documents.
    """
    search = settings_from(SearchSettings, config, options, "build_records")
    query_ids = [str(q) for q in query_ids]
    doc_ids = [str(d) for d in doc_ids]
    x = as_matrix(query_emb, "query_emb")
    y = as_matrix(doc_emb, "doc_emb")
    if len(query_ids) != x.shape[0]:
        raise ConfigError(f"query_ids has {len(query_ids)} ids but query_emb has {x.shape[0]} rows; they must match")
    if len(doc_ids) != y.shape[0]:
        raise ConfigError(f"doc_ids has {len(doc_ids)} ids but doc_emb has {y.shape[0]} rows; they must match")
    check_query_ids(query_ids)
    seed = check_seed(search.seed)
    k = search.k
    scores, idx = exact_search(x, y, k, doc_ids=doc_ids, block_size=search.block_size, backend=search.backend)
    return records_from_ranking(
        Ranking(query_ids, doc_ids, scores, idx),
        qrels,
        lambda rows, cols: pair_scores(x[rows], y, cols),
        system=system,
        dataset=dataset,
        seed=seed,
        meta={"k": int(k), "seed": int(seed), "similarity": "inner product", "tie_rule": "score desc, doc id desc"},
    )


def records_from_run(
    run: Mapping[str, Mapping[str, float]],
    qrels: Mapping[str, Mapping[str, int]],
    *,
    system: str,
    dataset: str,
) -> PerQueryRecords:
    """The per-query records of a TREC run (``adaptlab evaluate --store``): one row per query with
    a relevant document in ``qrels``, its retrieved documents in trec_eval's order (score
    descending, then document id descending) with their run scores, the gold ids and the rank of
    the first gold document (0: none retrieved, or the query is missing from the run), in the
    qrels' query order (the order :func:`adaptlab.metrics.evaluate` gives, so paired tests match).
    ``sim_gold`` is the run's score of its best-scoring retrieved gold document (NaN when none was
    retrieved: a run has no score for documents it did not return); ``sim_random`` is NaN and
    ``random_ids`` empty (a run scores no random document). Rows are as long as each query's
    ranking; ``topk_scores`` is padded with NaN to the longest."""
    query_ids = [str(q) for q, docs in qrels.items() if any(rel > 0 for rel in docs.values())]
    if not query_ids:
        raise ConfigError("the qrels have no relevant document (relevance > 0); no per-query record to build")
    ranked = [_trec_order(run.get(q, {})) for q in query_ids]
    width = max((len(r) for r in ranked), default=0)
    scores = np.full((len(query_ids), width), np.nan, dtype=np.float32)
    gold_ids: list[list[str]] = []
    gold_rank = np.zeros(len(query_ids), dtype=np.int32)
    sim_gold = np.full(len(query_ids), np.nan, dtype=np.float32)
    for i, (q, row) in enumerate(zip(query_ids, ranked)):
        scores[i, : len(row)] = [float(v) for _, v in row]
        gold = sorted(str(d) for d, rel in qrels[q].items() if rel > 0)
        gold_ids.append(gold)
        hits = [r for r, (d, _) in enumerate(row) if d in set(gold)]
        if hits:
            gold_rank[i] = hits[0] + 1
            sim_gold[i] = max(row[r][1] for r in hits)
    return PerQueryRecords(
        system=system,
        dataset=dataset,
        query_ids=query_ids,
        topk_ids=[[str(d) for d, _ in r] for r in ranked],
        topk_scores=scores,
        gold_ids=gold_ids,
        gold_rank=gold_rank,
        sim_gold=sim_gold,
        sim_random=np.full(len(query_ids), np.nan, dtype=np.float32),
        random_ids=[""] * len(query_ids),
        meta={"source": "TREC run", "tie_rule": "score desc, doc id desc"},
    )


def _trec_order(scored: Mapping[str, float]) -> list[tuple[str, float]]:
    """trec_eval's order of one query's (document, score) pairs: score descending, then id
    descending (ids compared code point by code point); two stable sorts."""
    by_id = sorted(((str(d), float(v)) for d, v in scored.items()), reverse=True)
    return sorted(by_id, key=lambda item: -item[1])
