"""Exact late-interaction (ColBERT MaxSim) top-k search and its per-query records.

For a query with token vectors ``q_1 .. q_m`` and a document with token vectors ``d_1 .. d_n``
(unit rows, :class:`~adaptlab.models.colbert.TokenVectors`), the score is MaxSim (Khattab &
Zaharia, "ColBERT", SIGIR 2020, section 3):

    s(q, d) = sum_{i=1..m} max_{j=1..n} <q_i, d_j>

computed *exactly* against every document: one matrix product of a block of queries' token vectors
with all document token vectors, a segmented max over each document's tokens and a sum over query
tokens, all in float64 (the products of float32 inputs are exact there), rounded once to float32.
As in the dense path's canonical kernel (:func:`~adaptlab.retrieval.search.pair_scores`), a
score therefore does not depend on the block size, the other queries or the BLAS library
(float32 matrix products reorder their sums with the matrix shape). The ranking follows the platform's rule (score
descending, then document id descending, as trec_eval sorts), so the records are the same
:class:`~adaptlab.retrieval.records.PerQueryRecords` as the dense path's
(:func:`adaptlab.retrieval.build.build_records`) and every measure, bootstrap, paired test and
report works unchanged.

What the similarity columns mean for ColBERT
--------------------------------------------
- ``topk_scores``, ``sim_gold``, ``sim_random`` are raw MaxSim scores, **not** normalised by the
  query length: with ``m = query_maxlen`` query vectors (32 for ColBERTv2; every query is padded
  to it with ``[MASK]`` tokens, so ``m`` is the same for every query of a model) a score lies in
  ``[-m, m]``. Divide by ``m`` (recorded as ``meta["query_tokens"]``) for a mean-of-max cosine in
  ``[-1, 1]`` comparable in range to a bi-encoder's cosine. ``sim_gold`` is the MaxSim of the best
  gold document (computed whether or not it was retrieved); ``sim_random`` that of one document
  drawn with ``numpy.random.default_rng(seed)`` exactly as in the dense path (same draw for the
  same seed, number of queries and corpus size, so dense and ColBERT records name the same
  random documents).
- Threshold and COE/ROE analyses read these columns and therefore apply, on the MaxSim scale;
  thresholds are not comparable across a bi-encoder and a ColBERT, nor across ColBERTs with a
  different ``query_maxlen``.
- Isotropy and topic diversity need one vector per document; they do not apply to token vectors
  and the runner skips them for late-interaction systems.

Size limit of the exact search
------------------------------
The document token matrix is held in memory: ``T * dim * 12`` bytes for ``T`` document tokens
(float32 plus the float64 copy scored; 700 documents of 180 tokens at dim 128: 190 MB; BEIR
SciFact, 5,183 abstracts of up to 256 tokens: about 1.7 GB), and each block of queries adds
``T * b * m * 8`` bytes of similarities (capped at 256 MB). On 2 CPU cores the search costs
about ``2 T m dim`` flops per query (0.1-0.3 s per query at SciFact size).
:data:`MAX_EXACT_TOKENS` (default 2M tokens, 3 GB at dim 128) is the documented ceiling. Beyond
it a ColBERT system is searched through a PLAID index (colbert-ai, RAGatouille's backend;
:mod:`adaptlab.models.plaid`, records by :func:`adaptlab.retrieval.plaid.build_plaid_records`):
the document token vectors are compressed (a k-means centroid per token plus its residual in
``nbits`` bits per dimension, 2 by default) and written to disk chunk by chunk, never held in
memory as float32; a query scores only the documents found through its nearest centroids, on
decompressed vectors. That search is **approximate**: a relevant document outside the probed
centroids is not retrieved, and ``topk_scores`` are MaxSim of the decompressed vectors (off by
the compression error). ``sim_gold`` and ``sim_random`` keep their exact meaning above: they are
computed by :func:`maxsim_pairs` from the encoder's token vectors of just the gold and random
documents. The model option ``search`` picks the path: ``"auto"`` (default; exact up to
:data:`MAX_EXACT_TOKENS` document tokens, PLAID beyond, announced on stderr), ``"exact"``,
``"plaid"``; the records' ``meta["search"]`` says which one produced them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from adaptlab.errors import ConfigError
from adaptlab.options import settings_from
from adaptlab.retrieval.build import Ranking, check_query_ids, records_from_ranking
from adaptlab.retrieval.records import PerQueryRecords
from adaptlab.retrieval.search import id_order
from adaptlab.retrieval.settings import SearchOptions, SearchSettings
from adaptlab.stats.resample import check_seed

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from adaptlab.models.colbert import TokenVectors

__all__ = ["MAX_EXACT_TOKENS", "build_late_records", "late_search", "maxsim_pairs", "maxsim_scores"]

MAX_EXACT_TOKENS = 2_000_000
"""Most document tokens the exact MaxSim search accepts (see the module docstring)."""

_SIM_ELEMS = 1 << 25  # float32 similarities per query block (128 MB)


def maxsim_scores(queries: TokenVectors, docs: TokenVectors, *, max_tokens: int | None = None) -> np.ndarray:
    """MaxSim of every query against every document, float32 ``[Q, N]`` (module docstring).

    A document without tokens scores ``-inf``. Queries are processed in blocks of ``b`` with
    ``T * b * m <=`` 2^25 similarities; the result does not depend on the block (float64 products,
    maxima and sums, rounded once to float32)."""
    if queries.dim != docs.dim:
        raise ConfigError(f"query token vectors have dim {queries.dim}, document token vectors {docs.dim}")
    limit = MAX_EXACT_TOKENS if max_tokens is None else int(max_tokens)
    T = int(docs.vectors.shape[0])
    if T > limit:
        raise ConfigError(
            f"the corpus has {T} document tokens, above the exact MaxSim limit of {limit}; use fewer or shorter "
            "documents (doc_maxlen), raise the limit if memory allows, or the ColBERT model option search = "
            "'plaid' or 'auto' (an approximate PLAID index, adaptlab.retrieval.plaid)"
        )
    n_q, n_d = len(queries), len(docs)
    out = np.full((n_q, n_d), -np.inf, dtype=np.float32)
    if n_q == 0 or n_d == 0 or T == 0:
        return out
    nonempty = docs.lengths > 0
    starts = docs.offsets[:-1][nonempty]
    m_max = int(queries.lengths.max(initial=1)) or 1
    block = max(1, _SIM_ELEMS // max(1, T * m_max))
    dv = docs.vectors.astype(np.float64)
    for b0 in range(0, n_q, block):
        sel = range(b0, min(n_q, b0 + block))
        qv = np.concatenate([queries[i] for i in sel]) if len(sel) else np.zeros((0, docs.dim), np.float32)
        if qv.shape[0] == 0:
            continue
        best = np.maximum.reduceat(dv @ qv.astype(np.float64).T, starts, axis=0)  # [N_nonempty, sum m]
        bounds = np.concatenate([[0], np.cumsum([len(queries[i]) for i in sel])])
        for r, i in enumerate(sel):
            part = best[:, bounds[r] : bounds[r + 1]]
            out[i, nonempty] = part.sum(axis=1, dtype=np.float64).astype(np.float32)
    return out


def maxsim_pairs(queries: TokenVectors, docs: TokenVectors, q_idx: np.ndarray, d_idx: np.ndarray) -> np.ndarray:
    """MaxSim of the pairs ``(queries[q_idx[p]], docs[d_idx[p]])``, float32 ``[P]``, without the full
    ``[Q, N]`` matrix: per query one :func:`~adaptlab.models.colbert.maxsim` over its paired
    documents, the same arithmetic as :func:`maxsim_scores` (float64 products, maxima and sums,
    rounded once to float32), so the same numbers as its entries ``[q_idx, d_idx]``."""
    from adaptlab.models.colbert import maxsim

    if queries.dim != docs.dim:
        raise ConfigError(f"query token vectors have dim {queries.dim}, document token vectors {docs.dim}")
    q = np.asarray(q_idx, dtype=np.int64).ravel()
    d = np.asarray(d_idx, dtype=np.int64).ravel()
    if q.shape != d.shape:
        raise ConfigError(f"q_idx and d_idx must pair up, got {q.size} and {d.size} entries")
    out = np.full(q.size, -np.inf, dtype=np.float32)
    order = np.argsort(q, kind="stable")
    starts = np.flatnonzero(np.r_[True, q[order][1:] != q[order][:-1]]) if q.size else np.zeros(0, np.int64)
    for lo, hi in zip(starts, np.r_[starts[1:], q.size]):
        sel = order[lo:hi]
        out[sel] = maxsim(queries[int(q[sel[0]])], docs.select(d[sel]))
    return out


def late_search(scores: np.ndarray, k: int, *, doc_ids: Sequence[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` of a full score matrix ``[Q, N]`` by (score desc, doc id desc): ``(scores, idx)``,
    each ``[Q, min(k, N)]``."""
    s = np.asarray(scores, dtype=np.float32)
    if s.ndim != 2:
        raise ConfigError(f"scores must be [Q, N], got shape {s.shape}")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ConfigError(f"k must be a positive integer, got {k!r}")
    n = s.shape[1]
    kk = min(int(k), n)
    rank = id_order(doc_ids, n)
    order = np.lexsort((np.broadcast_to(-rank, s.shape), -s), axis=-1)[:, :kk]
    return np.take_along_axis(s, order, axis=1), order.astype(np.int64)


def build_late_records(
    query_ids: Sequence[str],
    query_tokens: TokenVectors,
    doc_ids: Sequence[str],
    doc_tokens: TokenVectors,
    qrels: Mapping[str, Mapping[str, int]],
    *,
    system: str,
    dataset: str,
    config: SearchSettings | None = None,
    **options: Unpack[SearchOptions],
) -> PerQueryRecords:
    """Per-query records of a late-interaction system: the same contract as
    :func:`adaptlab.retrieval.build.build_records` with MaxSim scores (module docstring for what
    ``sim_gold`` / ``sim_random`` mean here); ``k``, ``seed`` and ``max_tokens`` from ``config``
    and the keyword options (:class:`~adaptlab.retrieval.settings.SearchSettings`)."""
    search = settings_from(SearchSettings, config, options, "build_late_records")
    query_ids = [str(q) for q in query_ids]
    doc_ids = [str(d) for d in doc_ids]
    if len(query_ids) != len(query_tokens):
        raise ConfigError(f"query_ids has {len(query_ids)} ids but query_tokens has {len(query_tokens)} texts")
    if len(doc_ids) != len(doc_tokens):
        raise ConfigError(f"doc_ids has {len(doc_ids)} ids but doc_tokens has {len(doc_tokens)} texts")
    check_query_ids(query_ids)
    seed = check_seed(search.seed)
    k = search.k
    full = maxsim_scores(query_tokens, doc_tokens, max_tokens=search.max_tokens)
    scores, idx = late_search(full, k, doc_ids=doc_ids)
    m = int(query_tokens.lengths.max(initial=0))
    return records_from_ranking(
        Ranking(query_ids, doc_ids, scores, idx),
        qrels,
        lambda rows, cols: full[rows, cols],
        system=system,
        dataset=dataset,
        seed=seed,
        meta={
            "k": int(k),
            "seed": int(seed),
            "similarity": "maxsim",
            "search": "exact",
            "query_tokens": m,
            "tie_rule": "score desc, doc id desc",
        },
    )
