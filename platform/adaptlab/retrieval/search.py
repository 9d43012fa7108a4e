"""Exact top-k search by inner product, with trec_eval's deterministic tie rule.

For a query embedding ``x`` and corpus embeddings ``y_1 .. y_N`` (L2-normalised float32,
docs/architecture.md, "Conventions that decide numbers"), the score of document ``j`` is the
inner product

    s(x, y_j) = sum_i x_i * y_ji

and the ranking is: score descending, then document id descending, as trec_eval sorts
a run (trec_eval, C. Buckley / NIST, ``form_res_rels.c``; pytrec_eval, Van Gysel & de Rijke,
SIGIR 2018, inherits it). The top-k is the first ``k`` documents of that ranking over the
*whole* corpus, so a tie that straddles the k-th place is resolved by id too.

How it is computed
------------------
1. *Candidates*: a fast kernel (FAISS, torch on CPU or CUDA, or NumPy) returns the top
   ``C = k + margin`` documents of each query by its own float32 scores ``f``.
2. *Canonical scores*: the candidates that can reach the top-k (step 4) are re-scored with
   one fixed kernel: the float32 products accumulated in float64 and rounded once to float32
   (:func:`pair_scores`).
   Every score this package reports is this one, so results do not depend on the backend,
   the block size or the BLAS library (faster kernels reorder their float32 sums).
3. *Tie rule*: each row is sorted by (canonical score desc, id desc) and cut at ``k``.
4. *Certificate*: a float32 dot product of length ``d`` is off by at most
   ``tol = (d + 2) 2^-24 |x| max_j |y_j|`` from the canonical one (Higham, *Accuracy and
   Stability of Numerical Algorithms*, 2nd ed., eq. 3.5, with Cauchy-Schwarz). The ``k``
   best candidates by ``f`` all have canonical scores ``>= f_k - tol``; a document with
   ``f < f_k - 2 tol`` has a canonical score below that, so it cannot be in the top-k, not
   even by a tie. Step 2 therefore re-scores only the candidates with ``f >= f_k - 2 tol``
   (usually ``k`` and a few), and the candidates cover the top-k when ``f_C < f_k - 2 tol``
   (every document not fetched has ``f <= f_C``). Otherwise (more than ``margin`` documents
   tied or nearly tied at the k-th place) that query is recomputed against the whole corpus,
   re-scoring every document with ``f >= f_k - 2 tol``.

``k > N`` returns all ``N`` documents (arrays of width ``min(k, N)``; no padding).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from adaptlab.errors import ConfigError, missing_extra

__all__ = ["BACKENDS", "as_matrix", "exact_search", "id_order", "pair_scores", "resolve_backend"]

Backend = Literal["auto", "cuda", "faiss", "numpy", "torch"]
BACKENDS: tuple[str, ...] = ("auto", "cuda", "faiss", "numpy", "torch")
"""Valid ``backend`` values. ``auto``: ``cuda`` when torch sees a GPU, else ``faiss``."""

_U32 = 2.0**-24  # unit roundoff of float32
_PAIR_BLOCK = 1 << 13  # pairs per canonical-scoring chunk (~13 MB at d=384: stays in cache, no page faults)
_SCORE_ELEMS = 1 << 25  # float32 scores per block in the torch/numpy kernels (128 MB)
_FAISS_BLOCK = 1 << 14  # queries per FAISS call (FAISS tiles its own memory inside)


def _margin(k: int) -> int:
    """Extra candidates fetched beyond ``k`` to hold ties at the k-th place."""
    return 8 + k // 8


# --------------------------------------------------------------------------- canonical kernel


def pair_scores(query_emb: np.ndarray, doc_emb: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Canonical similarities ``s[b, c] = x_b . y_idx[b, c]``, float32 [B, C].

    ``query_emb`` [B, d] and ``doc_emb`` [N, d] float32, ``idx`` int [B, C] (a 1-D ``idx``
    pairs row ``b`` with one document each and returns [B]). The products of the float32
    inputs are exact in float64; their float64 sum is rounded once to float32, so the result
    is (to within float64 rounding) the correctly rounded inner product, the same for a pair
    whatever else is scored with it. Every score that :func:`exact_search` and the per-query
    records report comes from this function.
    """
    idx = np.asarray(idx, dtype=np.intp)
    flat = idx.ndim == 1
    idx = idx[:, None] if flat else idx
    b, c = idx.shape
    out = np.empty((b, c), dtype=np.float32)
    step = max(1, _PAIR_BLOCK // max(1, c))
    for s in range(0, b, step):
        e = s + step
        out[s:e] = np.einsum("bd,bcd->bc", query_emb[s:e], doc_emb[idx[s:e]], dtype=np.float64)
    return out[:, 0] if flat else out


# --------------------------------------------------------------------------- candidate kernels
# Each returns (f, idx): float32 [B, C] fast scores and int64 [B, C] document indices of the
# top-C documents of each query of the block by those scores (FAISS sorts each row by f;
# exact_search sorts the rows of the other kernels).


def _candidates_faiss(x: np.ndarray, y: np.ndarray, c: int, ctx: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    import faiss

    f, idx = faiss.knn(x, y, c, metric=faiss.METRIC_INNER_PRODUCT)
    return f, idx.astype(np.int64, copy=False)


def _candidates_numpy(x: np.ndarray, y: np.ndarray, c: int, ctx: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    n = y.shape[0]
    step = max(c, _SCORE_ELEMS // max(1, x.shape[0]))
    best_f = best_i = None
    for s in range(0, n, step):
        f = x @ y[s : s + step].T
        cc = min(c, f.shape[1])
        if cc < f.shape[1]:
            i = np.argpartition(-f, cc - 1, axis=1)[:, :cc]
        else:
            i = np.broadcast_to(np.arange(f.shape[1]), f.shape)
        f = np.take_along_axis(f, i, axis=1)
        i = i + s
        if best_f is not None:
            f, i = np.concatenate([best_f, f], axis=1), np.concatenate([best_i, i], axis=1)
            if f.shape[1] > c:
                j = np.argpartition(-f, c - 1, axis=1)[:, :c]
                f, i = np.take_along_axis(f, j, axis=1), np.take_along_axis(i, j, axis=1)
        best_f, best_i = f, i
    assert best_f is not None and best_i is not None  # n >= 1 is validated
    return best_f, best_i.astype(np.int64)


def _candidates_torch(x: np.ndarray, y: np.ndarray, c: int, ctx: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """torch matmul + topk, on ``ctx["device"]``; the corpus is moved there once per search."""
    import torch

    device = ctx["device"]
    if "y_blocks" not in ctx:
        step = max(c, _SCORE_ELEMS // max(1, ctx["block"]))
        ctx["y_blocks"] = [(s, torch.from_numpy(y[s : s + step]).to(device)) for s in range(0, y.shape[0], step)]
    xt = torch.from_numpy(x).to(device)
    best: tuple[torch.Tensor, torch.Tensor] | None = None  # (scores, indices) kept so far
    with torch.inference_mode():
        for s, yb in ctx["y_blocks"]:
            f, i = torch.topk(xt @ yb.T, min(c, yb.shape[0]), dim=1, sorted=False)
            i = i + s
            if best is not None:
                f, i = torch.cat([best[0], f], 1), torch.cat([best[1], i], 1)
                if f.shape[1] > c:
                    f, j = torch.topk(f, c, dim=1, sorted=False)
                    i = torch.gather(i, 1, j)
            best = (f, i)
    assert best is not None
    return best[0].cpu().numpy(), best[1].cpu().numpy().astype(np.int64)


def _torch_unit_roundoff() -> float:
    """Unit roundoff of torch float32 matmul: TF32/bf16 when the user allowed them."""
    import torch

    prec = torch.get_float32_matmul_precision()
    return _U32 if prec == "highest" else 2.0**-8


def resolve_backend(backend: str = "auto") -> str:
    """The concrete backend ``backend`` stands for; raises :class:`ConfigError` if unusable."""
    if backend not in BACKENDS:
        raise ConfigError(f"backend={backend!r} is not one of {', '.join(BACKENDS)}")
    if backend == "auto":
        if importlib.util.find_spec("torch") is not None:
            import torch

            if torch.cuda.is_available():
                return "cuda"
        return "faiss" if importlib.util.find_spec("faiss") is not None else "numpy"
    if backend == "faiss" and importlib.util.find_spec("faiss") is None:
        raise missing_extra("FAISS searches (backend='faiss')", "fast", "faiss is not installed")
    if backend not in ("numpy", "faiss") and importlib.util.find_spec("torch") is None:
        raise ConfigError(f"backend={backend!r} needs the package torch: pip install torch")
    if backend == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise ConfigError("backend='cuda' but torch sees no CUDA GPU; use backend='auto' or 'faiss'")
    return backend


# --------------------------------------------------------------------------- validation


def as_matrix(a: Any, name: str) -> np.ndarray:
    """``a`` as a C-contiguous float32 [n, dim] matrix; :class:`ConfigError` naming ``name`` otherwise."""
    try:
        m = np.asarray(a)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{name} must be a 2-D float array: {e}") from e
    if m.ndim != 2 or not (np.issubdtype(m.dtype, np.floating) or np.issubdtype(m.dtype, np.integer)):
        raise ConfigError(f"{name} must be a 2-D float array [n, dim], got shape {m.shape} dtype {m.dtype}")
    return np.ascontiguousarray(m, dtype=np.float32)


def _is_positive_int(v: object) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool) and bool(v >= 1)


def _norms(m: np.ndarray, name: str) -> np.ndarray:
    """Upper bounds on the row norms; also the finiteness check (NaN/inf make a norm NaN/inf)."""
    n2 = np.einsum("nd,nd->n", m, m)
    if not np.isfinite(n2).all():
        bad = int(np.flatnonzero(~np.isfinite(n2))[0])
        raise ConfigError(f"{name} row {bad} holds NaN or infinite values; embeddings must be finite")
    return np.sqrt(n2.astype(np.float64)) * (1.0 + (m.shape[1] + 2) * _U32)


def id_order(doc_ids: Sequence[str] | None, n: int) -> np.ndarray:
    """Rank of each document in ascending id order (int64 [n]); ties then go to the larger rank.

    ``None`` stands for ids in corpus order (rank = position). Ids are compared as strings,
    code point by code point (= UTF-8 byte order, as trec_eval's ``strcmp``); they must be
    unique.
    """
    if doc_ids is None:
        return np.arange(n, dtype=np.int64)
    if isinstance(doc_ids, (str, bytes)) or len(doc_ids) != n:
        raise ConfigError(f"doc_ids must be a sequence of {n} strings (one per row of doc_emb), got {len(doc_ids)}")
    ids = np.asarray([str(d) for d in doc_ids])
    order = np.argsort(ids, kind="stable")
    s = ids[order]
    dup = np.flatnonzero(s[1:] == s[:-1])
    if dup.size:
        raise ConfigError(f"doc_ids must be unique; {str(s[dup[0]])!r} occurs more than once")
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n, dtype=np.int64)
    return rank


# --------------------------------------------------------------------------- search


def _rank_rows(s: np.ndarray, idx: np.ndarray, rank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sort each row by (score desc, id rank desc)."""
    o = np.lexsort((-rank[idx], -s), axis=-1)
    return np.take_along_axis(s, o, axis=1), np.take_along_axis(idx, o, axis=1)


def _exact_row(
    x: np.ndarray, y: np.ndarray, rank: np.ndarray, k: int, floor: float, tol: float
) -> tuple[np.ndarray, np.ndarray]:
    """Top-k of one query over the whole corpus, given a lower bound ``floor`` on its k-th score."""
    f = (y @ x).astype(np.float64)
    j = np.flatnonzero(f >= floor - tol)
    s = pair_scores(x[None, :], y, j[None, :])[0]
    o = np.lexsort((-rank[j], -s))[:k]
    return s[o], j[o].astype(np.int64)


def _check_search(query_emb: Any, doc_emb: Any, k: object, block_size: object) -> tuple[np.ndarray, np.ndarray]:
    """The validated float32 query and corpus matrices of :func:`exact_search`."""
    x = as_matrix(query_emb, "query_emb")
    y = as_matrix(doc_emb, "doc_emb")
    if y.shape[0] == 0:
        raise ConfigError("doc_emb is empty; expected at least one document")
    if x.shape[1] != y.shape[1]:
        raise ConfigError(f"query_emb has dimension {x.shape[1]} but doc_emb has {y.shape[1]}; they must match")
    if not _is_positive_int(k):
        raise ConfigError(f"k must be a positive integer, got {k!r}")
    if block_size is not None and not _is_positive_int(block_size):
        raise ConfigError(f"block_size must be a positive integer or None, got {block_size!r}")
    return x, y


def exact_search(
    query_emb: np.ndarray,
    doc_emb: np.ndarray,
    k: int,
    *,
    doc_ids: Sequence[str] | None = None,
    block_size: int | None = None,
    backend: Backend | str = "auto",
) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` documents of each query by inner product over the whole corpus.

    Parameters
    ----------
    query_emb: [Q, d] float32 (L2-normalised; other floats are cast to float32).
    doc_emb: [N, d] float32.
    k: documents per query; ``k > N`` returns all ``N`` (width ``min(k, N)``).
    doc_ids: the ``N`` document ids, used only to break ties (id descending, string order);
        ``None`` breaks ties by corpus position descending.
    block_size: queries per block (bounds memory); default: 16384 for FAISS, else so that a
        block's score matrix stays within 128 MB.
    backend: one of :data:`BACKENDS`; all give identical results (see the module docstring).

    Returns
    -------
    ``(scores, indices)``: float32 [Q, min(k, N)] canonical scores (:func:`pair_scores`) and
    int64 [Q, min(k, N)] row indices into ``doc_emb``, ranked by score descending, then id
    descending.
    """
    x, y = _check_search(query_emb, doc_emb, k, block_size)
    kind = resolve_backend(backend)
    rank = id_order(doc_ids, y.shape[0])

    n, d = y.shape
    q = x.shape[0]
    kk = min(int(k), n)
    c = min(n, kk + _margin(kk))
    scores = np.empty((q, kk), dtype=np.float32)
    indices = np.empty((q, kk), dtype=np.int64)
    if q == 0:
        return scores, indices
    # Error bound of the fast kernels against the canonical score (module docstring, step 4).
    u = _torch_unit_roundoff() if kind in ("cuda", "torch") else _U32
    tol = 1.01 * (d + 2) * u * _norms(x, "query_emb") * float(_norms(y, "doc_emb").max()) + 1e-30

    if block_size is None:
        block_size = _FAISS_BLOCK if kind == "faiss" else max(1, _SCORE_ELEMS // n)
    fast = {"faiss": _candidates_faiss, "numpy": _candidates_numpy}.get(kind, _candidates_torch)
    ctx: dict[str, Any] = {"block": int(block_size), "device": "cuda" if kind == "cuda" else "cpu"}

    step = max(1, _PAIR_BLOCK // c)
    for b0 in range(0, q, int(block_size)):
        xb = x[b0 : b0 + int(block_size)]
        f, cand = fast(xb, y, c, ctx)
        if kind != "faiss":  # FAISS returns rows sorted by score; the others need sorting
            o = np.argsort(-f, axis=1, kind="stable")
            f, cand = np.take_along_axis(f, o, axis=1), np.take_along_axis(cand, o, axis=1)
        for r0 in range(0, xb.shape[0], step):  # canonical re-scoring in chunks
            r1 = min(xb.shape[0], r0 + step)
            fr, tr = f[r0:r1], tol[b0 + r0 : b0 + r1]
            # Only candidates with f >= f_k - 2 tol can be in the top-k: the k best by f all have
            # canonical score >= f_k - tol, any other candidate < f_k - tol.
            thr = fr[:, kk - 1] - 2 * tr
            keep = (fr >= thr[:, None]).sum(axis=1)
            # Certified: the documents not fetched (f <= f_C < thr) cannot reach the top-k either.
            sure = fr[:, -1] < thr if c < n else np.ones(r1 - r0, dtype=bool)
            m = int(keep[sure].max()) if sure.any() else kk
            ci = cand[r0:r1, :m]
            sc = pair_scores(xb[r0:r1], y, ci)
            sc[np.arange(m)[None, :] >= keep[:, None]] = -np.inf
            sc, ci = _rank_rows(sc, ci, rank)
            scores[b0 + r0 : b0 + r1] = sc[:, :kk]
            indices[b0 + r0 : b0 + r1] = ci[:, :kk]
            for i in np.flatnonzero(~sure):
                g = b0 + r0 + int(i)
                floor = float(fr[i, kk - 1]) - float(tr[i])  # <= the k-th canonical score
                scores[g], indices[g] = _exact_row(x[g], y, rank, kk, floor, float(tol[g]))
    return scores, indices
