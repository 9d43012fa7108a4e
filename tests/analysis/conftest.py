"""Fixtures of the analysis tests: synthetic per-query records built by exact search."""

from __future__ import annotations

import numpy as np
import pytest

from adaptlab.retrieval.records import PerQueryRecords


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def synthetic_records(
    system: str,
    *,
    n_docs: int = 120,
    n_queries: int = 50,
    dim: int = 16,
    noise: float = 0.8,
    k: int = 10,
    seed: int = 0,
    n_unjudged: int = 0,
) -> PerQueryRecords:
    """Queries = gold document + Gaussian noise; exact top-k search with adaptlab's tie rule."""
    rng = np.random.default_rng(seed)
    docs = _unit(rng.normal(size=(n_docs, dim)))
    gold = rng.integers(0, n_docs, size=n_queries)
    queries = _unit(docs[gold] + noise * rng.normal(size=(n_queries, dim)) / np.sqrt(dim))
    sims = queries @ docs.T
    ids = [f"d{i:04d}" for i in range(n_docs)]
    order = np.lexsort((-np.arange(n_docs)[None, :].repeat(n_queries, 0), -sims), axis=1)[:, :k]
    rand = rng.integers(0, n_docs, size=n_queries)
    topk_ids, gold_ids, rank = [], [], []
    for q in range(n_queries):
        row = [ids[j] for j in order[q]]
        topk_ids.append(row)
        judged = q >= n_unjudged
        gold_ids.append([ids[gold[q]]] if judged else [])
        rank.append(row.index(ids[gold[q]]) + 1 if judged and ids[gold[q]] in row else 0)
    return PerQueryRecords(
        system=system,
        dataset="synth",
        query_ids=[f"q{q}" for q in range(n_queries)],
        topk_ids=topk_ids,
        topk_scores=np.take_along_axis(sims, order, axis=1),
        gold_ids=gold_ids,
        gold_rank=np.array(rank),
        sim_gold=np.where([bool(g) for g in gold_ids], sims[np.arange(n_queries), gold], np.nan),
        sim_random=sims[np.arange(n_queries), rand],
        random_ids=[ids[r] for r in rand],
    )


@pytest.fixture(scope="session")
def records_good() -> PerQueryRecords:
    return synthetic_records("good", noise=0.6, seed=1)


@pytest.fixture(scope="session")
def records_bad() -> PerQueryRecords:
    return synthetic_records("bad", noise=2.0, seed=1)


@pytest.fixture(scope="session")
def make_records():
    return synthetic_records
