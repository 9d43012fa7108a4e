"""Exact MaxSim search and the per-query records of a late-interaction system (hand-checkable)."""

from __future__ import annotations

import numpy as np
import pytest

from adaptlab.errors import ConfigError
from adaptlab.models.colbert import TokenVectors
from adaptlab.retrieval.build import build_records
from adaptlab.retrieval.late import build_late_records, late_search, maxsim_scores

E = np.eye(3, dtype=np.float32)
DOCS = TokenVectors.from_list([E[[0]], E[[0, 1]], E[[2]], E[[0, 1]]], 3)  # d1 and d3 tie everywhere
QUERIES = TokenVectors.from_list([E[[0, 1]], E[[2, 2]]], 3)
DOC_IDS = ["d0", "d1", "d2", "d3"]


def test_maxsim_scores_by_hand():
    s = maxsim_scores(QUERIES, DOCS)
    # q0 = {e0, e1}: d0 -> 1 + 0, d1 -> 1 + 1, d2 -> 0, d3 -> 2;  q1 = {e2, e2}: only d2 -> 2
    np.testing.assert_array_equal(s, [[1, 2, 0, 2], [0, 0, 2, 0]])


def test_blocks_do_not_change_scores(monkeypatch):
    import adaptlab.retrieval.late as late

    rng = np.random.default_rng(0)
    docs = TokenVectors.from_list([rng.normal(size=(int(n), 8)) for n in rng.integers(1, 9, 30)], 8)
    qs = TokenVectors.from_list([rng.normal(size=(5, 8)) for _ in range(7)], 8)
    whole = maxsim_scores(qs, docs)
    monkeypatch.setattr(late, "_SIM_ELEMS", 1)  # one query per block
    np.testing.assert_array_equal(maxsim_scores(qs, docs), whole)


def test_tie_rule_doc_id_descending():
    s, idx = late_search(maxsim_scores(QUERIES, DOCS), 2, doc_ids=DOC_IDS)
    assert idx[0].tolist() == [3, 1]  # score 2 tie between d1 and d3: larger id first
    assert idx[1].tolist() == [2, 3]  # then the zeros: d3 > d1 > d0
    np.testing.assert_array_equal(s, [[2, 2], [2, 0]])


def test_records_contract():
    qrels = {"q0": {"d1": 1}, "q1": {"d0": 1, "d2": 0}}
    rec = build_late_records(["q0", "q1"], QUERIES, DOC_IDS, DOCS, qrels, system="cb", dataset="toy", k=2, seed=3)
    assert rec.topk_ids == [["d3", "d1"], ["d2", "d3"]]
    assert rec.gold_ids == [["d1"], ["d0"]]
    assert rec.gold_rank.tolist() == [2, 0]
    np.testing.assert_array_equal(rec.sim_gold, [2, 0])
    assert rec.meta["similarity"] == "maxsim" and rec.meta["query_tokens"] == 2
    # the random document is drawn exactly as in the dense path (same seed, queries, corpus size)
    dense = build_records(
        ["q0", "q1"],
        np.eye(2, 3, dtype=np.float32),
        DOC_IDS,
        np.eye(4, 3, dtype=np.float32),
        qrels,
        system="x",
        dataset="toy",
        k=2,
        seed=3,
    )
    assert rec.random_ids == dense.random_ids
    full = maxsim_scores(QUERIES, DOCS)
    pos = [DOC_IDS.index(d) for d in rec.random_ids]
    np.testing.assert_array_equal(rec.sim_random, full[[0, 1], pos])


def test_token_limit_and_input_errors():
    with pytest.raises(ConfigError, match="PLAID"):
        maxsim_scores(QUERIES, DOCS, max_tokens=3)
    with pytest.raises(ConfigError, match="doc_ids"):
        build_late_records(["q0", "q1"], QUERIES, DOC_IDS[:3], DOCS, {}, system="s", dataset="d")
    with pytest.raises(ConfigError, match="dim"):
        maxsim_scores(TokenVectors.from_list([np.ones((1, 2))], 2), DOCS)
