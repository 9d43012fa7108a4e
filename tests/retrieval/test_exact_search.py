"""exact_search: hand-checkable ties, blocking, backends, brute force, validation."""

from __future__ import annotations

import numpy as np
import pytest

from adaptlab.errors import ConfigError
from adaptlab.retrieval import search
from adaptlab.retrieval.search import BACKENDS, exact_search, pair_scores, resolve_backend

CPU_BACKENDS = ["faiss", "numpy", "torch"]


def _unit(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    m = rng.standard_normal((n, d)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def _brute(x: np.ndarray, y: np.ndarray, k: int, rank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Reference: float64 scores rounded to float32, full lexsort (score desc, id rank desc)."""
    s = (x.astype(np.float64) @ y.astype(np.float64).T).astype(np.float32)
    o = np.lexsort((np.broadcast_to(-rank, s.shape), -s), axis=-1)[:, :k]
    return np.take_along_axis(s, o, axis=1), o


@pytest.fixture(scope="module")
def tied_corpus() -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Random queries and a corpus with exact duplicates (ties) and string ids out of numeric order."""
    rng = np.random.default_rng(7)
    base = _unit(rng, 300, 8)
    y = np.concatenate([base, base[:40], base[:40], base[5:6].repeat(30, axis=0)])
    perm = rng.permutation(len(y))
    y = y[perm]
    ids = [str(i) for i in rng.permutation(len(y)) * 7]  # "0", "7", "14", ... shuffled
    x = np.concatenate([_unit(rng, 25, 8), y[np.flatnonzero(perm == 5)[:2]]])  # a query on a 33-way tie
    return x, y, ids


# ----------------------------------------------------------------------- hand-checkable ties


def test_ties_broken_by_doc_id_descending_across_k_boundary() -> None:
    # scores for q = (1, 0): a=1, b=0, c=1, d=0.6, e=1 -> ranking e, c, a, d, b
    y = np.array([[1, 0], [0, 1], [1, 0], [0.6, 0.8], [1, 0]], dtype=np.float32)
    ids = ["a", "b", "c", "d", "e"]
    q = np.array([[1, 0]], dtype=np.float32)
    s, i = exact_search(q, y, 5, doc_ids=ids)
    assert i.tolist() == [[4, 2, 0, 3, 1]]
    np.testing.assert_array_equal(s, np.array([[1, 1, 1, 0.6, 0]], dtype=np.float32))
    s2, i2 = exact_search(q, y, 2, doc_ids=ids)  # the three-way tie straddles k = 2: "a" is cut
    assert i2.tolist() == [[4, 2]]
    assert s2.dtype == np.float32 and i2.dtype == np.int64


def test_ties_use_string_order_not_numeric() -> None:
    # trec_eval compares ids as strings: "9" > "100" > "10"
    y = np.ones((3, 2), dtype=np.float32) / np.sqrt(np.float32(2))
    _, i = exact_search(y[:1], y, 2, doc_ids=["10", "9", "100"])
    assert i.tolist() == [[1, 2]]


def test_ties_without_ids_go_to_the_later_row() -> None:
    y = np.array([[1, 0], [1, 0], [0, 1], [1, 0]], dtype=np.float32)
    _, i = exact_search(np.array([[1, 0], [0, 1]], dtype=np.float32), y, 2)
    assert i.tolist() == [[3, 1], [2, 3]]  # second query: the 1.0, then the zeros by position desc


def test_tie_larger_than_margin_falls_back_to_whole_corpus(monkeypatch: pytest.MonkeyPatch) -> None:
    # 60 identical documents tie at the top; the margin fetched is 8 + k // 8 = 8 < 60
    y = np.concatenate([np.tile([[0.6, 0.8]], (60, 1)), np.tile([[0.0, 1.0]], (5, 1))]).astype(np.float32)
    ids = [f"d{j:03d}" for j in range(65)]
    calls = []
    real = search._exact_row
    monkeypatch.setattr(search, "_exact_row", lambda *a: calls.append(1) or real(*a))
    s, i = exact_search(np.array([[0.6, 0.8]], dtype=np.float32), y, 3, doc_ids=ids)
    assert calls == [1]
    assert i.tolist() == [[59, 58, 57]]
    assert s[0, 0] == s[0, 2]


def test_k_larger_than_corpus_returns_all_documents() -> None:
    y = np.eye(3, dtype=np.float32)
    s, i = exact_search(np.array([[0.0, 0.6, 0.8]], dtype=np.float32), y, 10)
    assert s.shape == i.shape == (1, 3)
    assert i.tolist() == [[2, 1, 0]]


def test_no_queries_gives_empty_arrays() -> None:
    s, i = exact_search(np.zeros((0, 3), dtype=np.float32), np.eye(3, dtype=np.float32), 2)
    assert s.shape == i.shape == (0, 2)


# ----------------------------------------------------------------------- random data


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_agrees_with_brute_force(tied_corpus, backend: str) -> None:
    x, y, ids = tied_corpus
    rank = search.id_order(ids, len(ids))
    ref_s, ref_i = _brute(x, y, 12, rank)
    s, i = exact_search(x, y, 12, doc_ids=ids, backend=backend)
    np.testing.assert_array_equal(i, ref_i)
    np.testing.assert_array_equal(s, ref_s)


@pytest.mark.parametrize("backend", CPU_BACKENDS)
@pytest.mark.parametrize("block_size", [1, 3, 10])
def test_blocking_gives_identical_results(tied_corpus, backend: str, block_size: int) -> None:
    x, y, ids = tied_corpus
    s0, i0 = exact_search(x, y, 40, doc_ids=ids, backend="faiss")
    s, i = exact_search(x, y, 40, doc_ids=ids, backend=backend, block_size=block_size)
    np.testing.assert_array_equal(i, i0)
    np.testing.assert_array_equal(s, s0)


def test_corpus_blocks_in_numpy_and_torch_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    x, y = _unit(rng, 9, 6), _unit(rng, 500, 6)
    ref = exact_search(x, y, 20, backend="faiss")
    monkeypatch.setattr(search, "_SCORE_ELEMS", 64)  # forces corpus blocks of max(C, 64 // B) rows
    for backend in ("numpy", "torch"):
        s, i = exact_search(x, y, 20, backend=backend, block_size=2)
        np.testing.assert_array_equal(i, ref[1])
        np.testing.assert_array_equal(s, ref[0])


def test_float64_input_is_cast_and_matches() -> None:
    rng = np.random.default_rng(4)
    x, y = _unit(rng, 5, 4), _unit(rng, 50, 4)
    a = exact_search(x, y, 5)
    b = exact_search(x.astype(np.float64), y.astype(np.float64), 5)
    np.testing.assert_array_equal(a[1], b[1])


def test_pair_scores_is_rounded_float64_dot() -> None:
    rng = np.random.default_rng(5)
    x, y = _unit(rng, 4, 33), _unit(rng, 20, 33)
    idx = rng.integers(0, 20, (4, 6))
    ref = np.einsum("bd,bcd->bc", x.astype(np.float64), y[idx].astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(pair_scores(x, y, idx), ref)
    np.testing.assert_array_equal(pair_scores(x, y, idx[:, 0]), ref[:, 0])


# ----------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"k": 0}, "k must be a positive integer"),
        ({"k": 2.5}, "k must be a positive integer"),
        ({"block_size": 0}, "block_size"),
        ({"backend": "gpu"}, "backend='gpu' is not one of"),
        ({"doc_ids": ["a", "b"]}, "doc_ids must be a sequence of 3"),
        ({"doc_ids": ["a", "b", "a"]}, "'a' occurs more than once"),
    ],
)
def test_invalid_arguments(kwargs: dict, match: str) -> None:
    args = {"k": 2, **kwargs}
    with pytest.raises(ConfigError, match=match):
        exact_search(np.eye(3, dtype=np.float32), np.eye(3, dtype=np.float32), **args)


def test_invalid_embeddings() -> None:
    with pytest.raises(ConfigError, match="dimension 2 but doc_emb has 3"):
        exact_search(np.ones((1, 2)), np.ones((4, 3)), 1)
    with pytest.raises(ConfigError, match="doc_emb is empty"):
        exact_search(np.ones((1, 2)), np.ones((0, 2)), 1)
    with pytest.raises(ConfigError, match="2-D float array"):
        exact_search(np.ones(3), np.ones((4, 3)), 1)
    bad = np.eye(3, dtype=np.float32)
    bad[1, 2] = np.nan
    with pytest.raises(ConfigError, match="doc_emb row 1 holds NaN"):
        exact_search(np.eye(3, dtype=np.float32), bad, 1)


def test_backend_names() -> None:
    assert BACKENDS == tuple(sorted(BACKENDS))
    assert resolve_backend("auto") in ("cuda", "faiss", "numpy")
    assert resolve_backend("numpy") == "numpy"


# ----------------------------------------------------------------------- GPU


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


@pytest.mark.gpu
@pytest.mark.skipif(not _has_cuda(), reason="needs a CUDA GPU")
def test_cuda_backend_matches_cpu(tied_corpus) -> None:
    x, y, ids = tied_corpus
    ref = exact_search(x, y, 40, doc_ids=ids, backend="faiss")
    for bs in (None, 4):
        s, i = exact_search(x, y, 40, doc_ids=ids, backend="cuda", block_size=bs)
        np.testing.assert_array_equal(i, ref[1])
        np.testing.assert_array_equal(s, ref[0])
