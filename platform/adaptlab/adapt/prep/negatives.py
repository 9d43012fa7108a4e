"""Hard negatives: for each question, the chunks a model ranks highest that are not its answer.

For question ``q`` with positive chunk ``p`` (positive text ``P``) and a pool of candidate
chunks ``c`` with L2-normalised embeddings ``E(.)`` (similarity = inner product):

    s(q, c) = <E_query(q), E_doc(c)>,   s+ = <E_query(q), E_doc(P)>,   d(c) = <E_doc(c), E_doc(P)>

Candidates are ranked by ``s(q, c)`` descending (ties: chunk id descending, trec_eval's rule)
and a candidate is dropped when

1. it is the positive chunk itself (same id),
2. it is a near-duplicate of the positive: ``d(c) > duplicate_threshold`` (default 0.95), e.g.
   boilerplate repeated across documents, or
3. it scores too close to the positive: ``s(q, c) > s+ - margin`` (default ``margin`` 0.05),
   a likely unlabelled positive (a false negative).

The first ``skip_top`` (default 0) surviving candidates are skipped and the next ``n``
(default 10, as in the EIS study 004_d4e67b48691a8900.txt, section 3.2.2) are the hard
negatives. Rule 3 is the positive-aware filter of NV-Retriever (Moreira et al. 2024,
"NV-Retriever: Improving text embedding models with effective hard-negative mining"), whose
best setting keeps negatives below 95% of the positive's score; an absolute margin of 0.05 is
the same cut for positive scores near 1 and stays defined for scores near or below 0.
RAGatouille's miner instead skips the top 10 ranks (``skip_top=10`` approximates it).

The model defaults to the base model being adapted: pass an ``embed(texts, kind)`` callable
(``kind`` is ``"query"`` or ``"document"``), an encoder with ``encode_queries`` /
``encode_documents``, or a model reference string for :func:`adaptlab.models.load_encoder`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from adaptlab.adapt.prep.chunking import Chunk
from adaptlab.adapt.prep.questions import SyntheticQuestion, positive_text
from adaptlab.errors import ConfigError
from adaptlab.models import load_encoder
from adaptlab.retrieval import exact_search

__all__ = ["EmbedFn", "HardNegatives", "as_embed_fn", "memoize_embed", "mine_hard_negatives"]

log = logging.getLogger(__name__)

EmbedFn = Callable[[Sequence[str], str], np.ndarray]
"""``embed(texts, kind) -> float32 [len(texts), dim]``, ``kind`` in {"query", "document"}."""


def as_embed_fn(model: Any) -> EmbedFn:
    """An :data:`EmbedFn` from a callable, an encoder object or a model reference string."""
    if isinstance(model, str):
        return as_embed_fn(load_encoder(model))
    if hasattr(model, "encode_queries") and hasattr(model, "encode_documents"):

        def embed(texts: Sequence[str], kind: str) -> np.ndarray:
            fn = model.encode_queries if kind == "query" else model.encode_documents
            return np.asarray(fn(list(texts)))

        return embed
    if callable(model):
        return model
    raise ConfigError(
        f"model: expected an embed(texts, kind) callable, an encoder with encode_queries/"
        f"encode_documents, or a model reference string; got {type(model).__name__}"
    )


def memoize_embed(embed: EmbedFn) -> EmbedFn:
    """``embed`` with a per-(kind, text) memory, so texts shared across calls embed once."""
    memo: dict[tuple[str, str], np.ndarray] = {}

    def cached(texts: Sequence[str], kind: str) -> np.ndarray:
        todo = list(dict.fromkeys(t for t in texts if (kind, t) not in memo))
        if todo:
            new = _embed(embed, todo, kind)
            for t, v in zip(todo, new, strict=True):
                memo[(kind, t)] = v
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([memo[(kind, t)] for t in texts])

    return cached


def _embed(embed: EmbedFn, texts: Sequence[str], kind: str) -> np.ndarray:
    """Embeddings as float32, re-normalised to unit L2 norm (a guard; cheap)."""
    x = np.asarray(embed(list(texts), kind), dtype=np.float32)
    if x.ndim != 2 or x.shape[0] != len(texts):
        raise ConfigError(f"embed(texts, {kind!r}) returned shape {x.shape}; expected ({len(texts)}, dim)")
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(norms, 1e-12)


@dataclass
class HardNegatives:
    """Mined negatives per question id, best first, with their scores and the filter counts."""

    ids: dict[str, list[str]]
    scores: dict[str, list[float]]
    positive_scores: dict[str, float]
    n: int
    duplicate_threshold: float | None
    margin: float | None
    skip_top: int
    dropped_duplicate: int = 0
    dropped_margin: int = 0
    short: list[str] = field(default_factory=list)

    def settings(self) -> dict[str, object]:
        """The mining settings, for provenance."""
        return {
            "n_negatives": self.n,
            "duplicate_threshold": self.duplicate_threshold,
            "margin": self.margin,
            "skip_top": self.skip_top,
        }


def _top_k(q: np.ndarray, c: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices and scores ``[nq, k]`` of the ``k`` best inner products of each query over the
    pool: :func:`adaptlab.retrieval.exact_search` (exact, its canonical scores; the order within a
    row is re-established by the caller's (score desc, id desc) sort)."""
    scores, idx = exact_search(q, c, k)
    return idx, scores


@dataclass(frozen=True)
class _Rules:
    """The mining rules as the kernel reads them: ``n`` negatives per question, the duplicate
    cosine ``dup`` (``inf``: off), the ``margin`` below the positive's score (None: off) and the
    ``skip_top`` ranks left out."""

    n: int
    dup: float
    margin: float | None
    skip_top: int


@dataclass(frozen=True)
class _Pool:
    """What filtering a query's candidates needs: the pool's embeddings ``c``, the positives'
    embeddings ``pos`` and pool indices ``pos_idx`` (-1: not in the pool), each candidate's rank
    by id ``id_rank``, each query's margin ``limit`` and the duplicate cosine ``dup``."""

    c: np.ndarray
    pos: np.ndarray
    pos_idx: np.ndarray
    id_rank: np.ndarray
    limit: np.ndarray
    dup: float


_Ranked = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _rank_filter(pool: _Pool, row_idx: np.ndarray, cand: np.ndarray, sc: np.ndarray) -> _Ranked:
    """Sort candidates ``cand [b, k]`` (scores ``sc``) of queries ``row_idx``; flag drops.

    Returns (sorted candidates, their scores, same-id-or-duplicate mask, margin mask).
    """
    c, pos, dup = pool.c, pool.pos, pool.dup
    order = np.lexsort((-pool.id_rank[cand], -sc), axis=-1)
    cand = np.take_along_axis(cand, order, axis=1)
    sc = np.take_along_axis(sc, order, axis=1)
    self_hit = cand == pool.pos_idx[row_idx, None]
    if np.isinf(dup):
        near = np.zeros(cand.shape, dtype=bool)
    elif cand.shape[0] == 1 and cand.shape[1] > c.shape[0] // 8:
        near = ((c @ pos[row_idx[0]])[cand[0]] > dup)[None, :]  # no [k, d] gather copy
    else:
        near = np.einsum("bkd,bd->bk", c[cand], pos[row_idx]) > dup
    close = sc > pool.limit[row_idx, None]
    return cand, sc, self_hit | near, close & ~(self_hit | near)


def _mine_kernel(
    q: np.ndarray,
    c: np.ndarray,
    pos: np.ndarray,
    pos_idx: np.ndarray,
    id_rank: np.ndarray,
    rules: _Rules,
    block_bytes: int = 1 << 27,
) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray, int, int]:
    """Per query: pool indices and scores of the negatives.

    The ``k = 4 (n + skip_top) + 16`` best candidates of every query come from one exact
    top-k search (:func:`_top_k`), then are sorted and filtered in blocks of queries. A query
    left short, or whose last negative ties with the cut, is redone from its full score row
    (:func:`_complete`). ``pos_idx`` is -1 when the positive is not in the pool. Returns
    indices, scores, positive scores and the duplicate / margin drop counts over the ranks
    inspected up to the last negative taken.
    """
    nq, nc = q.shape[0], c.shape[0]
    pos_score = np.einsum("ij,ij->i", q, pos)
    limit = pos_score - rules.margin if rules.margin is not None else np.full(nq, np.inf, dtype=np.float32)
    pool = _Pool(c, pos, pos_idx, id_rank, limit, rules.dup)
    want = rules.n + rules.skip_top
    k = min(nc, 4 * want + 16)
    top_idx, top_sc = _top_k(q, c, k)
    block = max(1, min(nq, block_bytes // max(1, 4 * k * c.shape[1])))
    out_idx: list[np.ndarray] = []
    out_sc: list[np.ndarray] = []
    n_dup = n_margin = 0
    for b0 in range(0, nq, block):
        rows = np.arange(b0, min(nq, b0 + block))
        ranked = _rank_filter(pool, rows, top_idx[rows], top_sc[rows])
        for r, qi in enumerate(rows):
            (cr, sr, dd, dm), taken = _complete(
                pool, q[qi], qi, (ranked[0][r], ranked[1][r], ranked[2][r], ranked[3][r]), want, k
            )
            upto = int(taken[-1]) + 1 if len(taken) else len(cr)
            n_dup += int(dd[:upto].sum() - (cr[:upto] == pos_idx[qi]).sum())
            n_margin += int(dm[:upto].sum())
            sel = taken[rules.skip_top :]
            out_idx.append(cr[sel])
            out_sc.append(sr[sel])
    return out_idx, out_sc, pos_score, n_dup, n_margin


def _complete(
    pool: _Pool, q_row: np.ndarray, qi: int, ranked: _Ranked, want: int, k: int
) -> tuple[_Ranked, np.ndarray]:
    """Query ``qi``'s ranked candidates (from the top ``k``) and the positions of the ``want``
    taken, widened when it is left short or its last negative ties with the cut (a tie left
    outside could rank first by id): redone from its full score row with every candidate scoring
    at least the ``4k``-th best score, then the ``16k``-th, ... up to the whole pool."""
    cr, sr, dd, dm = ranked
    nc = pool.c.shape[0]
    taken = np.flatnonzero(~(dd | dm))[:want]
    kk = k
    # a top-k cut may split a group of tied scores; a threshold cut keeps the group
    tie_cut = k < nc and len(taken) > 0 and sr[taken[-1]] <= sr[-1]
    row: np.ndarray | None = None
    while len(cr) < nc and (len(taken) < want or tie_cut):
        tie_cut = False
        kk = min(nc, kk * 4)
        if row is None:
            row = pool.c @ q_row
        cut = np.partition(row, nc - kk)[nc - kk]  # the kk-th best score
        wider = np.flatnonzero(row >= cut)
        cr2, sr2, dd2, dm2 = _rank_filter(pool, np.array([qi]), wider[None, :], row[wider][None, :])
        cr, sr, dd, dm = cr2[0], sr2[0], dd2[0], dm2[0]
        taken = np.flatnonzero(~(dd | dm))[:want]
    return (cr, sr, dd, dm), taken


def _check_rules(n: int, skip_top: int, duplicate_threshold: float | None, margin: float | None) -> None:
    """One :class:`ConfigError` for the first mining rule out of its range."""
    if isinstance(n, bool) or n < 1:
        raise ConfigError(f"n={n}: expected an integer >= 1 negatives per question")
    if skip_top < 0:
        raise ConfigError(f"skip_top={skip_top}: expected an integer >= 0")
    if duplicate_threshold is not None and not -1.0 <= duplicate_threshold <= 1.0:
        raise ConfigError(f"duplicate_threshold={duplicate_threshold}: expected a cosine in [-1, 1]")
    if margin is not None and margin < 0:
        raise ConfigError(f"margin={margin}: expected a number >= 0")


def mine_hard_negatives(
    questions: Sequence[SyntheticQuestion],
    chunks: Sequence[Chunk],
    model: Any,
    *,
    pool: Sequence[Chunk] | None = None,
    n: int = 10,
    duplicate_threshold: float | None = 0.95,
    margin: float | None = 0.05,
    skip_top: int = 0,
) -> HardNegatives:
    """Hard negatives for each question (rules in the module docstring).

    ``chunks``: every chunk a question may point to (to find positives). ``pool``: the
    candidate negatives, default ``chunks``; restrict it to the training documents so that no
    held-out text enters training. ``model``: see :func:`as_embed_fn`. ``None`` for
    ``duplicate_threshold`` or ``margin`` turns that rule off. Questions that get fewer than
    ``n`` negatives (a small pool) are listed in ``short`` and logged.
    """
    _check_rules(n, skip_top, duplicate_threshold, margin)
    embed = as_embed_fn(model)
    by_id: Mapping[str, Chunk] = {ch.id: ch for ch in chunks}
    cands = list(pool) if pool is not None else list(chunks)
    if not cands:
        raise ConfigError("mine_hard_negatives: the candidate pool is empty")
    missing = [qq.id for qq in questions if qq.chunk_id not in by_id]
    if missing:
        raise ConfigError(
            f"question {missing[0]!r} points to chunk {questions[0].chunk_id!r}, which is not "
            f"among the chunks given ({len(missing)} question(s) affected)"
        )
    result = HardNegatives({}, {}, {}, n, duplicate_threshold, margin, skip_top)
    if not questions:
        return result
    pool_index = {ch.id: i for i, ch in enumerate(cands)}
    id_rank = np.empty(len(cands), dtype=np.int64)
    order = np.argsort(np.array([ch.id for ch in cands], dtype=object), kind="stable")
    id_rank[order] = np.arange(len(cands))
    pos_texts = [positive_text(qq, by_id[qq.chunk_id]) for qq in questions]
    q_emb = _embed(embed, [qq.text for qq in questions], "query")
    c_emb = _embed(embed, [ch.text for ch in cands], "document")
    p_emb = _embed(embed, pos_texts, "document")
    if q_emb.shape[1] != c_emb.shape[1] or p_emb.shape[1] != c_emb.shape[1]:
        raise ConfigError("embed: query and document embeddings differ in dimension")
    pos_idx = np.array([pool_index.get(qq.chunk_id, -1) for qq in questions], dtype=np.int64)
    idx, sc, pos_score, n_dup, n_margin = _mine_kernel(
        q_emb,
        c_emb,
        p_emb,
        pos_idx,
        id_rank,
        _Rules(
            n,
            np.inf if duplicate_threshold is None else float(duplicate_threshold),
            None if margin is None else float(margin),
            int(skip_top),
        ),
    )
    for qq, ii, ss, ps in zip(questions, idx, sc, pos_score, strict=True):
        result.ids[qq.id] = [cands[i].id for i in ii]
        result.scores[qq.id] = [float(s) for s in ss]
        result.positive_scores[qq.id] = float(ps)
        if len(ii) < n:
            result.short.append(qq.id)
    result.dropped_duplicate, result.dropped_margin = n_dup, n_margin
    if result.short:
        log.warning(
            "%d of %d question(s) got fewer than %d hard negatives (pool of %d chunks)",
            len(result.short),
            len(questions),
            n,
            len(cands),
        )
    return result
